"""The format-independent view of a transcript that every stage works on.

A format loads a file into :class:`Record`s (the original bytes of each line, kept
verbatim) and exposes the model-visible ones as :class:`Message`s made of
:class:`Block`s. Stages only ever see a :class:`Conversation`: an immutable tuple of
messages plus the links between tool calls and their results. The format then writes
back only the records whose message a stage replaced; every other record is copied
byte-for-byte.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cached_property
from typing import Any, Protocol

__all__ = [
    "Block",
    "LazyBlock",
    "LazyText",
    "TextSpan",
    "Conversation",
    "IMAGE_TOKENS",
    "Kind",
    "Message",
    "RecordEdits",
    "Round",
    "SourceRecord",
    "hydrate",
    "read_text",
    "visible_sources",
    "visible_texts",
]


class Kind(StrEnum):
    """What a block is, as far as the model is concerned."""

    TEXT = "text"
    TOOL_CALL = "tool_call"
    TOOL_RESULT = "tool_result"
    THINKING = "thinking"
    IMAGE = "image"
    OTHER = "other"


@dataclass(frozen=True, slots=True, eq=False)
class Block:
    """One piece of a message.

    ``text`` is what the model reads: the text of a text block, the output of a tool
    result, the arguments of a tool call (as JSON text), the reasoning of a thinking
    block. ``slot`` is private to the format that made the block and tells it where
    to write a new text back; stages must carry it along unchanged. A format may load
    a long text as a :class:`LazyBlock`, whose text is read from the input when asked
    for: to a stage the two are the same.
    """

    kind: Kind
    text: str = ""
    call_id: str | None = None
    name: str | None = None
    is_error: bool = False
    slot: Any = None

    def with_text(self, text: str) -> Block:
        """Return a copy of this block holding ``text``."""
        # The constructor, not dataclasses.replace: replace looks the fields up on
        # every call, a tenth of an approx reduce (tests/core/test_model_copies.py keeps the two equal).
        return Block(self.kind, text, self.call_id, self.name, self.is_error, self.slot)

    def _chars(self) -> int:
        """The length of ``text`` (a lazy block knows it without reading the text)."""
        return len(self.text)

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, Block):
            return NotImplemented
        return (
            (self.kind, self.call_id, self.name, self.is_error, self.slot)
            == (other.kind, other.call_id, other.name, other.is_error, other.slot)
            and self._chars() == other._chars()
            and self.text == other.text
        )

    def __hash__(self) -> int:
        return hash((self.kind, self.text, self.call_id, self.name, self.is_error, self.slot))


class TextSpan(Protocol):
    """Where a text sits in a loaded file, to read it again (``formats.lazy.Span``)."""

    chars: int
    """The text's length in characters."""

    def text(self) -> str:
        """The text, decoded anew on every call."""
        ...


class LazyText:
    """A long text a format left in the input, in its place in a record's parsed data.

    Formats with ``lazy_texts`` put one (``formats.lazy.Span``) where a long string
    was, so a large transcript's texts are not all held as Python strings. A reader
    of a record's data who needs such a text calls :func:`read_text` (one value) or
    :func:`hydrate` (a whole value, before serialising or comparing it).
    """

    __slots__ = ()
    chars: int

    def text(self) -> str:
        """The text, decoded anew on every call."""
        raise NotImplementedError


def read_text(value: Any) -> Any:
    """``value``, or its text when it is a :class:`LazyText`."""
    return value.text() if isinstance(value, LazyText) else value


def hydrate(value: Any) -> Any:
    """``value`` with every :class:`LazyText` in it read back; only what holds one is copied."""
    if isinstance(value, LazyText):
        return value.text()
    if not isinstance(value, (dict, list)):
        return value
    copy: Any = None
    for k, v in value.items() if isinstance(value, dict) else enumerate(value):
        if isinstance(v, (dict, list, LazyText)):
            new = hydrate(v)
            if new is not v:
                copy = (
                    (dict(value) if isinstance(value, dict) else list(value))
                    if copy is None
                    else copy
                )
                copy[k] = new
    return value if copy is None else copy


_TEXT_SLOT: Any = Block.__dict__["text"]


class LazyBlock(Block):
    """A block whose text stays in the input until a stage reads it.

    Formats load long texts this way (``Format.lazy_texts``), so a large transcript
    is not held as Python strings: each read of ``text`` decodes it again from the
    input. Equal to the :class:`Block` holding the same text; copied or pickled, it is
    one.
    """

    __slots__ = ("span",)
    span: TextSpan

    def __init__(
        self,
        kind: Kind,
        span: TextSpan,
        call_id: str | None = None,
        name: str | None = None,
        is_error: bool = False,
        slot: Any = None,
    ) -> None:
        object.__setattr__(self, "span", span)
        Block.__init__(self, kind, "", call_id, name, is_error, slot)

    @property
    def text(self) -> str:
        """The text, read from the input."""
        return self.span.text()

    @text.setter
    def text(self, value: str) -> None:  # the base __init__ sets the unused slot
        _TEXT_SLOT.__set__(self, value)

    def _chars(self) -> int:
        return self.span.chars

    def __reduce__(self) -> tuple[Any, ...]:
        return (Block, (self.kind, self.text, self.call_id, self.name, self.is_error, self.slot))


@dataclass(frozen=True, slots=True)
class Message:
    """A model-visible message: a role and its blocks.

    ``key`` identifies the record the message was loaded from (``None`` for a
    message a stage created). ``group`` ties together records that hold parts of one
    API response (Claude Code writes one record per content block).
    """

    role: str
    blocks: tuple[Block, ...]
    key: int | None = None
    group: str | None = None

    @property
    def text(self) -> str:
        """All text blocks joined by newlines."""
        return "\n".join(b.text for b in self.blocks if b.kind is Kind.TEXT)

    @property
    def tool_calls(self) -> tuple[Block, ...]:
        """The tool-call blocks of this message."""
        return tuple(b for b in self.blocks if b.kind is Kind.TOOL_CALL)

    @property
    def tool_results(self) -> tuple[Block, ...]:
        """The tool-result blocks of this message."""
        return tuple(b for b in self.blocks if b.kind is Kind.TOOL_RESULT)

    def with_blocks(self, blocks: Sequence[Block]) -> Message:
        """Return a copy of this message with other blocks."""
        return Message(self.role, tuple(blocks), self.key, self.group)


BlockRef = tuple[int, int]
"""(message index, block index) inside one :class:`Conversation`."""


@dataclass(frozen=True)
class Round:
    """One assistant turn: its assistant messages and the messages answering its calls."""

    assistant: tuple[int, ...]
    results: tuple[int, ...]

    @property
    def first(self) -> int:
        """Index of the first message of the round."""
        return min(self.assistant + self.results)


class HasData(Protocol):
    """What holds a record's parsed JSON (a file's record, which may parse it again)."""

    @property
    def data(self) -> Any:
        """The parsed JSON."""


class SourceRecord:
    """One record of the loaded file, for stages that act on what the model never sees.

    ``data`` is the parsed JSON (read it, never change it), ``size`` its bytes in the
    file. ``message`` is True when a :class:`Message` was loaded from the record
    (that message's ``key`` is this ``key``). Made with ``source``, ``data`` is read
    from it on each use: a large file's records the model never sees are parsed again
    when asked rather than held (read it once per use).
    """

    __slots__ = ("key", "_data", "size", "message", "_source")

    def __init__(
        self,
        key: int,
        data: Any,
        size: int,
        message: bool = False,
        *,
        source: HasData | None = None,
    ) -> None:
        self.key, self._data, self.size, self.message = key, data, size, message
        self._source = source

    @property
    def data(self) -> Any:
        """The record's parsed JSON."""
        return self._data if self._source is None else self._source.data

    def __repr__(self) -> str:
        return f"SourceRecord(key={self.key}, size={self.size}, message={self.message})"


@dataclass(frozen=True)
class RecordEdits:
    """Edits to records, applied by the format when it writes the output.

    Stages change messages by returning new ones; what the model never sees (a
    record of UI progress, a field holding a second copy of a tool's output) they
    change by returning a conversation carrying these edits. The format's ``plan``
    honours them, relinks whatever pointed at a dropped record, and the restore pack
    keeps the originals.

    Attributes:
        drop: keys of records without a message to leave out.
        keep: keys of records without a message not to drop with the message
            before them (a format otherwise does). ``drop`` wins over ``keep``.
        strip: key -> top-level fields to remove from that record.
        set_values: key -> {path inside the record: new value}, for a kept record
            (a usage figure brought up to date); applied after the message's own
            changes. ``drop`` wins.
    """

    drop: frozenset[int] = frozenset()
    keep: frozenset[int] = frozenset()
    strip: Mapping[int, frozenset[str]] = field(default_factory=dict)
    set_values: Mapping[int, Mapping[tuple[str | int, ...], Any]] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.drop or self.keep or self.strip or self.set_values)

    def merged(self, other: RecordEdits) -> RecordEdits:
        """These edits together with ``other``."""
        strip = {k: frozenset(v) for k, v in self.strip.items()}
        for key, fields in other.strip.items():
            strip[key] = strip.get(key, frozenset()) | fields
        values = {k: dict(v) for k, v in self.set_values.items()}
        for key, paths in other.set_values.items():
            values[key] = {**values.get(key, {}), **paths}
        return RecordEdits(self.drop | other.drop, self.keep | other.keep, strip, values)


@dataclass(frozen=True)
class Conversation:
    """An immutable list of messages with tool-call links, the input and output of stages."""

    messages: tuple[Message, ...]
    format: str = "openai_chat"
    meta: dict[str, Any] = field(default_factory=dict, compare=False)

    def with_messages(self, messages: Sequence[Message]) -> Conversation:
        """Return a new conversation holding ``messages`` (links are recomputed lazily).

        A stage that only changed texts leaves the shape alone (roles, groups, block
        kinds and call ids): the tool links and rounds worked out so far are then
        carried over instead of worked out again (a second of a 1 GB run each time).
        """
        new = Conversation(tuple(messages), self.format, self.meta)
        known = self.__dict__
        if ("_links" in known or "_rounds" in known) and _same_shape(self.messages, new.messages):
            for name in ("_links", "_rounds"):
                if name in known:
                    new.__dict__[name] = known[name]
        return new

    @property
    def frozen(self) -> int:
        """How many leading messages are a kept prefix a stage must not read or change.

        Zero, except in an incremental re-run (``ctxcli.pipeline.rerun``): there the
        first ``frozen`` messages stand for a previous run's output, with their roles,
        tool ids and names but no texts, and only stages that declare a ``frontier``
        (see ``ctxcli.stages.register``) run over such a conversation.
        """
        frozen: int = self.meta.get("frozen", 0)
        return frozen

    @property
    def records(self) -> tuple[SourceRecord, ...]:
        """Every record of the loaded file (empty when the format exposes none)."""
        records: tuple[SourceRecord, ...] = self.meta.get("records", ())
        return records

    @property
    def resume_start(self) -> int | None:
        """Key of the record after which a resumed session's context starts.

        For Claude Code that is the compaction restart on the chain the client walks
        back from the leaf: the ``compact_boundary`` record, or (1.0.x) the
        ``isCompactSummary`` message that starts the chain anew; everything before it
        was replaced by the compaction summary. ``-1`` when the whole file is resumed,
        ``None`` for formats that are never resumed from their file.
        """
        start: int | None = self.meta.get("resume_start")
        return start

    @property
    def record_edits(self) -> RecordEdits:
        """The record edits stages asked for so far."""
        edits: RecordEdits | None = self.meta.get("record_edits")
        return edits if edits is not None else RecordEdits()

    def with_record_edits(self, edits: RecordEdits) -> Conversation:
        """Return a copy that also carries ``edits`` (the meta dict is copied, not changed)."""
        meta = {**self.meta, "record_edits": self.record_edits.merged(edits)}
        return Conversation(self.messages, self.format, meta)

    def resumed_messages(self) -> tuple[Message, ...]:
        """The messages a resumed session sends again: those after :attr:`resume_start`.

        A message a stage created counts when the message before it does.
        """
        start = self.resume_start
        if start is None or start < 0:
            return self.messages
        anchor = -1
        out: list[Message] = []
        for msg in self.messages:
            if msg.key is not None:
                anchor = msg.key
            # ">=": a 1.0.x restart is itself a message (the compaction summary).
            if anchor >= start:
                out.append(msg)
        return tuple(out)

    def __len__(self) -> int:
        return len(self.messages)

    def __iter__(self) -> Iterator[Message]:
        return iter(self.messages)

    @cached_property
    def _links(self) -> tuple[dict[BlockRef, BlockRef], dict[BlockRef, list[BlockRef]]]:
        # Ids are not unique in real files (tau-bench reuses call ids within one
        # trajectory), so a result is linked to the oldest still-unanswered call with
        # its id that precedes it: linking by position, not by id alone.
        pending: dict[str, deque[BlockRef]] = {}
        last_call: dict[str, BlockRef] = {}
        result_to_call: dict[BlockRef, BlockRef] = {}
        call_to_results: dict[BlockRef, list[BlockRef]] = {}
        for mi, msg in enumerate(self.messages):
            for bi, block in enumerate(msg.blocks):
                if block.call_id is None:
                    continue
                if block.kind is Kind.TOOL_CALL:
                    pending.setdefault(block.call_id, deque()).append((mi, bi))
                    last_call[block.call_id] = (mi, bi)
                elif block.kind is Kind.TOOL_RESULT:
                    queue = pending.get(block.call_id)
                    if queue:
                        call = queue.popleft()
                    elif block.call_id in last_call:
                        # A second result for an already answered call: keep it with
                        # the latest call of that id so neither is ever orphaned.
                        call = last_call[block.call_id]
                    else:
                        continue
                    result_to_call[(mi, bi)] = call
                    call_to_results.setdefault(call, []).append((mi, bi))
        return result_to_call, call_to_results

    def call_of(self, ref: BlockRef) -> BlockRef | None:
        """The tool call a result answers, if it is in this conversation."""
        return self._links[0].get(ref)

    def results_of(self, ref: BlockRef) -> list[BlockRef]:
        """The results answering a tool call (usually one, none if unanswered)."""
        return self._links[1].get(ref, [])

    def block(self, ref: BlockRef) -> Block:
        """The block at ``ref``."""
        return self.messages[ref[0]].blocks[ref[1]]

    def tool_name(self, ref: BlockRef) -> str | None:
        """The tool name of a call or result (a result takes it from its call)."""
        block = self.block(ref)
        if block.name or block.kind is Kind.TOOL_CALL:
            return block.name
        call = self.call_of(ref)
        return self.block(call).name if call else None

    def iter_blocks(self, kind: Kind) -> Iterator[tuple[BlockRef, Block]]:
        """Yield every block of ``kind`` with its reference, oldest first."""
        for mi, msg in enumerate(self.messages):
            for bi, block in enumerate(msg.blocks):
                if block.kind is kind:
                    yield (mi, bi), block

    def rounds(self) -> list[Round]:
        """Split the conversation into rounds.

        A round is one assistant response (consecutive assistant messages sharing a
        ``group`` count as one response) together with the messages that hold the
        results of its tool calls.
        """
        return list(self._rounds)

    @cached_property
    def _rounds(self) -> tuple[Round, ...]:
        # Computed once per conversation: a stage and its frontier both ask.
        rounds: list[Round] = []
        i = 0
        msgs = self.messages
        while i < len(msgs):
            msg = msgs[i]
            if msg.role != "assistant":
                i += 1
                continue
            members = [i]
            j = i + 1
            while (
                msg.group is not None
                and j < len(msgs)
                and (msgs[j].group == msg.group or msgs[j].role != "assistant")
            ):
                if msgs[j].group == msg.group:
                    members.append(j)
                elif msgs[j].role != "assistant" and not self._answers(j, members):
                    break
                j += 1
            results = sorted(
                {
                    r[0]
                    for mi in members
                    for bi, b in enumerate(msgs[mi].blocks)
                    if b.kind is Kind.TOOL_CALL
                    for r in self.results_of((mi, bi))
                }
                - set(members)
            )
            rounds.append(Round(tuple(members), tuple(results)))
            i = members[-1] + 1
        return tuple(rounds)

    def tool_rounds(self) -> list[Round]:
        """The rounds whose response makes at least one tool call.

        This is the unit Eino's "rounds" and Anthropic's and LangChain's "tool uses"
        count: a closing answer in plain text is not a round of tool use, so keeping
        "the last round" keeps the last tool results, not just that answer.
        """
        return [r for r in self.rounds() if any(self.messages[i].tool_calls for i in r.assistant)]

    def _answers(self, mi: int, members: list[int]) -> bool:
        msg = self.messages[mi]
        for bi, b in enumerate(msg.blocks):
            if b.kind is Kind.TOOL_RESULT:
                call = self.call_of((mi, bi))
                if call is not None and call[0] in members:
                    return True
        return False


def _same_shape(old: Sequence[Message], new: Sequence[Message]) -> bool:
    """True if ``new`` links tools and forms rounds exactly as ``old`` does."""
    if len(old) != len(new):
        return False
    for a, b in zip(old, new, strict=True):
        if a is b:
            continue
        if a.role != b.role or a.group != b.group or len(a.blocks) != len(b.blocks):
            return False
        for x, y in zip(a.blocks, b.blocks, strict=True):
            if x is not y and (x.kind is not y.kind or x.call_id != y.call_id):
                return False
    return True


IMAGE_TOKENS = 1600
"""Fixed token cost of an image block (Anthropic's estimate for a ~1.2 MP image)."""


def visible_texts(message: Message) -> Iterator[str]:
    """Yield the texts of a message that the model reads, for token counting."""
    for block in message.blocks:
        if block.kind is Kind.TOOL_CALL:
            if block.name:
                yield block.name
            yield block.text
        elif block.kind in (Kind.TEXT, Kind.TOOL_RESULT, Kind.THINKING):
            yield block.text


def visible_sources(message: Message) -> Iterator[str | TextSpan]:
    """Like :func:`visible_texts`, but a lazy block's text comes as its span, unread.

    For counting a whole conversation at once without holding all its texts: the
    counter reads each span when it gets to it.
    """
    for block in message.blocks:
        if block.kind is Kind.TOOL_CALL:
            if block.name:
                yield block.name
        elif block.kind not in (Kind.TEXT, Kind.TOOL_RESULT, Kind.THINKING):
            continue
        yield block.span if isinstance(block, LazyBlock) else block.text
