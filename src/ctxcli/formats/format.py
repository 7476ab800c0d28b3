"""The format interface: a base class with a small required core, and plan/dump.

A format turns parsed records into :class:`~ctxcli.core.model.Message`s (``to_message``)
and writes an edited message back into a copy of its record (``apply``). Loading,
line numbers, raw-byte pass-through, re-serialisation in the file's own JSON style
and the restore script are done here once, for all formats.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, ClassVar

from ctxcli.core.errors import DEFAULT_ON_INVALID, OnInvalid, PrefixChanged, TranscriptError
from ctxcli.core.io import RELEASE_BYTES, Input, Pages
from ctxcli.core.model import Conversation, Kind, Message, RecordEdits, SourceRecord, hydrate
from ctxcli.core.protocols import OriginalsSink, RestoreScript
from ctxcli.formats.jsontext import dumps_like
from ctxcli.formats.lazy import LAZY_MIN_CHARS, LazyTexts, leave_in_input, same_text, share_strings
from ctxcli.formats.lines import (
    BOM,
    Record,
    Writable,
    iter_records,
    join_parts,
    parse_lines,
    raise_first_invalid,
)
from ctxcli.formats.slots import encode_slot, get_in, set_in

__all__ = [
    "Document",
    "Format",
    "OutRecord",
    "Resumable",
    "State",
]


@dataclass
class Document:
    """A loaded transcript: the records and the conversation the stages see."""

    path: str
    format: Format
    raw: Input
    records: list[Record]
    conversation: Conversation
    warnings: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    def line_of(self, message: Message) -> int | None:
        """The line number a message was loaded from."""
        if message.key is None:
            return None
        return self.records[message.key].line


class _Original(Enum):
    """A planned record's data that is its original record's, read when asked."""

    DATA = 0


_ORIGINAL = _Original.DATA


class State(Enum):
    """What happens to one unit of the output."""

    COPY = "copy"
    CHANGED = "changed"
    NEW = "new"
    DROPPED = "dropped"


class OutRecord:
    """One record in the output plan; ``fixup`` hooks may edit ``data``.

    Planned from a thin record (:meth:`Record.thin`) and not edited, its ``data`` is
    the record's, parsed again on each read: a plan of a million records never holds
    them all parsed. Set ``data`` to edit it, never change it in place.
    """

    __slots__ = ("state", "orig", "_data", "message")

    def __init__(
        self, state: State, orig: Record | None, data: Any, message: Message | None = None
    ) -> None:
        self.state, self.orig, self._data, self.message = state, orig, data, message

    @classmethod
    def of(cls, state: State, orig: Record, message: Message | None = None) -> OutRecord:
        """A planned record holding ``orig``'s data, unedited (read again if it is thin)."""
        return cls(state, orig, _ORIGINAL if orig.is_thin else orig.data, message)

    @property
    def data(self) -> Any:
        """The record's data as planned."""
        data = self._data
        if data is _ORIGINAL:
            assert self.orig is not None
            return self.orig.data
        return data

    @data.setter
    def data(self, value: Any) -> None:
        self._data = value

    def __repr__(self) -> str:
        return f"OutRecord({self.state.name}, {self.orig!r}, message={self.message!r:.40})"

    def touch(self) -> Any:
        """Mark a copied record as changed and return its data for editing."""
        if self.state is State.COPY:
            self.state = State.CHANGED
        return self.data


class Resumable:
    """Opt-in for files that grow and sessions that are resumed from them.

    A mixin of :class:`Format`. :attr:`incremental` and :meth:`skeleton` let a re-run of
    a grown file keep a previous run's prefix (:mod:`ctxcli.pipeline.rerun`);
    :meth:`resume_start` says which records a client resuming the session sends again
    (``ctx stats`` reports what a resume costs).
    """

    incremental: ClassVar[bool] = False
    """True when a record's output depends only on its own message and the records
    before it (no fix-up reaches back, ``build`` keeps the messages it is handed):
    then a re-run of a grown file may keep a previous run's prefix (pipeline/rerun.py)."""

    def resume_start(self, records: Sequence[Record]) -> int | None:
        """Key of the record after which a resumed session's context starts.

        ``-1``: the whole file; ``None`` (the default): the format is never resumed
        from its file. See :attr:`ctxcli.core.model.Conversation.resume_start`.
        """
        return None

    def skeleton(self, data: Any) -> Any:
        """Return what a re-run needs of a kept record besides its message.

        What an incremental re-run needs of a kept record besides its message: the
        fields :meth:`resume_start` reads, say (None: nothing). JSON-able and small,
        it is stored in the manifest for every kept record.
        """
        return None

    def thin(self, data: Any) -> Any:
        """What a reader of a file's links and sizes needs of a record, its message made.

        The ids, links and types the client's rules read once each record has been seen
        whole (:func:`~ctxcli.formats.clients.scan_client_file`); small, and never the
        texts. None (the default): the format keeps its records whole, for a build that
        reads them all at once.
        """
        return None


class Format(LazyTexts, Resumable):
    """Base class of a JSONL transcript format (one record per line).

    A format implements the required core first: :meth:`sniff`, :meth:`to_message`,
    :meth:`new_record` and, when a block's text is not a plain field of its record,
    :meth:`apply`. The optional hooks below them have defaults that fit most formats.
    Two families of switches and hooks are opt-in, each documented in its mixin:
    :class:`~ctxcli.formats.lazy.LazyTexts` (large transcripts: long texts left in the
    input, short strings shared) and :class:`Resumable` (incremental re-runs of a grown
    file, resumed sessions). A whole-document format (``units = "document"``) also
    provides ``try_load_document`` (see :mod:`ctxcli.formats.json_doc`). The machinery
    after them (load, build, plan, dump) is shared by every format.
    """

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    units: ClassVar[str] = "lines"
    """``"lines"`` (JSONL: a record per line) or ``"document"`` (one JSON document)."""
    skips_invalid_lines: ClassVar[bool] = False
    """True when the format's own client reads past a line that is not JSON (Claude
    Code, Codex): ``on_invalid = "auto"`` then keeps such a line with a warning."""
    client: ClassVar[str] = ""
    """The agent client that writes this format's files and resumes sessions from them
    ("Claude Code", "Codex"; empty for a transcript no client resumes). ``ctx doctor``,
    ``ctx cost`` and ``ctx sessions`` read a client's files
    (:mod:`ctxcli.formats.clients`), and ``ctx doctor`` runs that client's rules."""

    # -- the required core -------------------------------------------------------------

    def sniff(self, records: Sequence[Any]) -> bool:
        """True if the first parsed records look like this format."""
        raise NotImplementedError

    def to_message(self, data: Any, key: int, line: int, path: str) -> Message | None:
        """The message a record holds, or None for a record the model never sees.

        Raises:
            TranscriptError: the record is not of this format at all.
        """
        raise NotImplementedError

    def apply(self, data: Any, old: Message, new: Message) -> Any:
        """A copy of ``data`` that holds ``new`` instead of ``old``."""
        data = self.apply_block_texts(data, old, new)
        return data

    def new_record(self, message: Message, neighbour: Any) -> Any:
        """A record for a message a stage created (a nudge, a summary)."""
        raise NotImplementedError

    # -- optional hooks ----------------------------------------------------------------

    def fixup(self, plan: list[OutRecord]) -> None:
        """Repair cross-record links after records were dropped or added (default: none)."""

    def keep_passthrough(self, record: Record, anchor_kept: bool) -> bool:
        """Whether a record the model never sees stays, given its preceding message's fate."""
        return anchor_kept

    # -- shared machinery --------------------------------------------------------------

    @staticmethod
    def apply_block_texts(data: Any, old: Message, new: Message) -> Any:
        """Write changed block texts back through their slots (path, codec)."""
        old_by_slot = {b.slot: b for b in old.blocks if b.slot is not None}
        for block in new.blocks:
            if block.slot is None:
                continue
            before = old_by_slot.get(block.slot)
            if before is not None and same_text(before, block):
                continue
            path, codec = block.slot
            data = set_in(data, path, encode_slot(codec, get_in(data, path), block.text))
        return data

    def load(
        self, raw: Input, path: str, *, on_invalid: OnInvalid = DEFAULT_ON_INVALID
    ) -> Document:
        """Parse JSONL bytes into a document (see :func:`ctxcli.formats.load`).

        Raises:
            ConfigError: ``on_invalid`` is none of :class:`~ctxcli.core.errors.OnInvalid`.
        """
        on_invalid = OnInvalid.of(on_invalid)
        if self.lazy_texts:
            return self.build_as_parsed(raw, path, [], iter_records(raw, path), on_invalid)
        records = parse_lines(raw, path, on_invalid=self.on_invalid(on_invalid))
        return self.build(raw, path, records)

    def build_as_parsed(
        self,
        raw: Input,
        path: str,
        parsed: list[Record],
        rest: Iterator[Record],
        on_invalid: OnInvalid = OnInvalid.AUTO,
    ) -> Document:
        """:meth:`build` over records still being parsed (``parsed``, then ``rest``).

        For a format with :attr:`lazy_texts`: each record's message is made, and its
        long texts left in the input, as soon as the record is parsed, so the parsed
        texts of the whole file never exist at once; a record without a message is
        made thin (:meth:`Record.thin`: parsed again when read). Errors are those of
        :func:`parse_lines` then :meth:`build`: a line that is not JSON (unless kept)
        is named before a record that is not of the format, wherever they are.
        """
        keep = self.on_invalid(on_invalid) is OnInvalid.KEEP
        records: list[Record] = []
        warnings: list[str] = []
        pages = Pages(raw)
        seen: dict[str, str] | None = {} if self.shares_strings else None
        for rec in itertools.chain(parsed, rest):
            key = len(records)
            records.append(rec)
            if rec.invalid is not None:
                if not keep:
                    raise_first_invalid([rec], path)
                warnings.append(f"{path}:{rec.line}: {rec.invalid}; kept unchanged")
                continue
            if rec.data is None or rec.kept:
                continue
            if seen is not None and type(rec.data) is dict:
                share_strings(rec.data, seen, self.unique_fields)
            try:
                message = self.to_message(rec.data, key, rec.line, path)
            except TranscriptError:
                if not keep:  # a line that is not JSON further on is named first
                    raise_first_invalid(list(rest), path)
                raise
            if message is None:
                # A record the model never sees is read again by the few that read it.
                rec.thin(pages)
                continue
            if len(rec.raw) >= LAZY_MIN_CHARS:
                message = leave_in_input(self, rec, message, pages)
            rec.message = message
        return self.assemble(raw, path, records, warnings)

    def on_invalid(self, on_invalid: OnInvalid) -> OnInvalid:
        """``KEEP`` or ``ERROR``: what ``on_invalid`` (maybe ``AUTO``) means here."""
        if on_invalid is OnInvalid.AUTO:
            return OnInvalid.KEEP if self.skips_invalid_lines else OnInvalid.ERROR
        return on_invalid

    def build(
        self, raw: Input, path: str, records: list[Record], *, whole_texts: bool = False
    ) -> Document:
        """Attach messages to parsed records.

        ``whole_texts``: leave no text in the input, even in a format with
        :attr:`lazy_texts`, for a reader of the records' data (``ctx doctor``'s rules
        and repairs read and write records as parsed).
        """
        warnings: list[str] = []
        pages = Pages(raw) if self.lazy_texts and not whole_texts else None
        seen: dict[str, str] | None = {} if self.shares_strings else None
        for key, rec in enumerate(records):
            if rec.invalid is not None:
                warnings.append(f"{path}:{rec.line}: {rec.invalid}; kept unchanged")
                continue
            if rec.data is None or rec.kept:
                continue
            if seen is not None and type(rec.data) is dict:
                share_strings(rec.data, seen, self.unique_fields)
            message = self.to_message(rec.data, key, rec.line, path)
            if pages is not None and len(rec.raw) >= LAZY_MIN_CHARS:
                message = leave_in_input(self, rec, message, pages)
            rec.message = message
        return self.assemble(raw, path, records, warnings)

    def record_from_data(self, data: Any, key: int, path: str) -> Record:
        """A record for an already parsed object (a message dict handed in by a program).

        Its ``raw`` is empty: such records are never written as bytes, only planned
        (see :meth:`plan`); ``line`` is ``key + 1`` so errors still name a position.
        """
        rec = Record(b"", key + 1, data)
        rec.message = self.to_message(data, key, key + 1, path)
        return rec

    def assemble(
        self, raw: Input, path: str, records: list[Record], warnings: list[str] | None = None
    ) -> Document:
        """The document of records whose messages are attached already.

        A message's ``key`` must be its record's index: :meth:`plan` looks it up there.
        """
        messages = [rec.message for rec in records if rec.message is not None]
        warnings = warnings if warnings is not None else []
        # Stages see every record too (read-only), to act on what the model never
        # sees through RecordEdits; see docs/ARCHITECTURE.md.
        meta = {
            "records": tuple(
                SourceRecord(
                    key,
                    None if rec.is_thin else rec.data,
                    len(rec.raw),
                    rec.message is not None,
                    source=rec if rec.is_thin else None,
                )
                for key, rec in enumerate(records)
            ),
            "resume_start": self.resume_start(records),
        }
        conv = Conversation(tuple(messages), self.name, meta)
        return Document(path, self, raw, records, conv, warnings)

    def plan(self, doc: Document, conv: Conversation, start: int = 0) -> list[OutRecord]:
        """Lay out the output: which records are copied, changed, dropped or new.

        ``start`` > 0 lays out only the records from there on (an incremental re-run:
        the ones before are the previous run's, and the stages left their messages
        alone); a message a stage created among them is an error.
        """
        kept, inserts = _placed(conv, start)
        plan: list[OutRecord] = []
        anchor_kept = True
        seen_message = bool(start) and conv.frozen > 0
        edits = conv.record_edits

        def emit_new(after: int | None, neighbour: Any) -> None:
            for m in inserts.pop(after, []):
                plan.append(OutRecord(State.NEW, None, self.new_record(m, neighbour), m))

        records = doc.records
        for key in range(start, len(records)):
            rec = records[key]
            if rec.message is None:
                keep = _passes(self, rec, key, edits, anchor_kept)
                plan.append(OutRecord.of(State.COPY if keep else State.DROPPED, rec))
                _edit(plan[-1], edits, key)
                continue
            if not seen_message:
                seen_message = True
                emit_new(None, rec.data)
            new = kept.get(key)
            anchor_kept = new is not None
            if new is None:
                plan.append(OutRecord.of(State.DROPPED, rec, rec.message))
                continue
            plan.append(_kept(self, rec, new))
            _edit(plan[-1], edits, key)
            emit_new(key, rec.data)
        for after in list(inserts):
            emit_new(after, None)
        self.fixup(plan)
        for out in plan:
            _check_removed(self, out, doc.path)
        return plan

    def dump(
        self,
        doc: Document,
        conv: Conversation,
        blobs: OriginalsSink,
        *,
        start: int = 0,
        into: Writable | None = None,
    ) -> tuple[bytes, RestoreScript]:
        """Serialise the output and the script that turns it back into the input.

        ``start`` > 0 (an incremental re-run) leaves out the first ``start`` records,
        which must be copied unchanged: their output is the previous run's. With
        ``into`` (a file), the output is written there as it is made and the bytes
        returned are empty. A format overriding ``dump`` without ``into`` gets its
        output written there by the caller.
        """
        plan = self.plan(doc, conv, start)
        script = RestoreScript()
        parts: list[bytes | memoryview] = []
        # With ``into``, the parts go out every 4 MB of new bytes: a session whose
        # records were relinked is mostly changed records, whose new bytes would all be
        # held until the end (100 MB of a 1 GB Claude Code session's peak).
        fresh = 0
        live = [i for i, r in enumerate(plan) if r.state is not State.DROPPED]
        last_live = live[-1] if live else -1
        del live
        # Each planned record is let go once written: a changed one holds its new data
        # (90 MB of relinked records in a 1 GB Claude Code session).
        plan.reverse()
        for i in range(len(plan)):
            rec = plan.pop()
            orig = rec.orig
            if rec.state is State.DROPPED:
                assert orig is not None
                script.original(blobs.add_original(orig.raw, _texts_of(orig)))
                continue
            if rec.state is State.COPY and orig is not None:
                _copy(orig, i == last_live, parts, script, blobs)
                continue
            parts.append(_serialised(doc, rec, i == last_live))
            if orig is not None:
                script.original(blobs.add_original(orig.raw, _texts_of(orig)))
            script.skip()
            fresh += len(parts[-1])
            if into is not None and fresh >= RELEASE_BYTES:
                join_parts(parts, into)
                parts.clear()
                fresh = 0
        return join_parts(parts, into), script


def _placed(
    conv: Conversation, start: int
) -> tuple[dict[int, Message], dict[int | None, list[Message]]]:
    """Map each record's key to the messages that stand for it.

    The messages that stand for a record, by its key, and those a stage created, by
    the key of the record they follow (None: before the first message).

    Raises:
        PrefixChanged: ``start`` > 0 and a stage moved or created a message among the
            first ``start`` records.
    """
    kept: dict[int, Message] = {}
    inserts: dict[int | None, list[Message]] = {}
    prev: int | None = None
    for msg in conv.messages[conv.frozen if start else 0 :]:
        if msg.key is None:
            if start and prev is None:
                raise PrefixChanged("a stage created a message in the kept prefix")
            inserts.setdefault(prev, []).append(msg)
        elif msg.key < start:
            raise PrefixChanged("a message of the kept prefix moved")
        else:
            kept[msg.key] = msg
            prev = msg.key
    return kept, inserts


def _passes(fmt: Format, rec: Record, key: int, edits: RecordEdits, anchor_kept: bool) -> bool:
    """Whether a record the model never sees stays: as a stage said, else as the format says."""
    if key in edits.drop or key in edits.keep:
        return key not in edits.drop
    return not rec.has_data or fmt.keep_passthrough(rec, anchor_kept)


def _kept(fmt: Format, rec: Record, new: Message) -> OutRecord:
    """The planned record of a message the stages kept, as they left it."""
    if new is rec.message or new == rec.message:
        return OutRecord.of(State.COPY, rec, new)
    assert rec.message is not None
    old = rec.data
    data = fmt.apply(old, rec.message, new)
    # A format may decline a change (signed thinking is never rewritten): the record
    # is then copied byte-for-byte, not re-serialised.
    return OutRecord(State.COPY if data is old else State.CHANGED, rec, data, new)


def _tool_ids(message: Message) -> set[str]:
    """The call ids of a message's tool calls and results."""
    return {
        b.call_id
        for b in message.blocks
        if b.call_id is not None and b.kind in (Kind.TOOL_CALL, Kind.TOOL_RESULT)
    }


def _check_removed(fmt: Format, out: OutRecord, path: str) -> None:
    """Refuse a record still holding a call or result a stage removed from its message.

    A stage removes a call with its results (or leaves both); a format whose ``apply``
    cannot write the removal would leave its partner orphaned in the output, which the
    API rejects (issue 41: OpenHands actions). Better no output than a broken one. Only
    a changed record whose message lost a tool block is read again.

    Raises:
        TranscriptError: the written record still holds such a block.
    """
    rec, new = out.orig, out.message
    if out.state is State.DROPPED or rec is None or rec.message is None or new is None:
        return
    lost = _tool_ids(rec.message) - _tool_ids(new)
    if not lost:
        return
    written: Message | None = rec.message  # a format that declined the change copies it
    if out.state is not State.COPY:
        written = fmt.to_message(hydrate(out.data), rec.message.key or 0, rec.line, path)
    kept = sorted(lost & _tool_ids(written)) if written is not None else []
    if kept:
        raise TranscriptError(
            path,
            rec.line,
            f"the {fmt.name} format cannot remove tool call {kept[0]!r} from this record "
            "while keeping the rest, and its partner is gone; a stage must remove the "
            "whole message or leave the pair",
        )


def _edit(out: OutRecord, edits: RecordEdits, key: int) -> None:
    """The record edits stages asked for on record ``key``: fields stripped, values set."""
    _strip_fields(out, edits.strip.get(key))
    _set_values(out, edits.set_values.get(key))


def _copy(
    orig: Record,
    last: bool,
    parts: list[bytes | memoryview],
    script: RestoreScript,
    blobs: OriginalsSink,
) -> None:
    """Copy an unchanged record's bytes to the output."""
    if orig.terminator or last:
        parts.append(orig.raw)
        script.copy()
        return
    # An unterminated last line that is no longer last needs a newline.
    parts.append(bytes(orig.raw) + b"\n")
    script.original(blobs.add_original(orig.raw))
    script.skip()


def _serialised(doc: Document, rec: OutRecord, last: bool) -> bytes:
    """A changed or created record's line, written in its file's style."""
    orig = rec.orig
    try:
        if orig is not None:
            lead = BOM if orig.has_bom else b""
            body = dumps_like(hydrate(rec.data), orig.body, orig.data)
            end = orig.terminator or (b"\n" if not last else b"")
        else:
            lead, body = b"", dumps_like(hydrate(rec.data), _style_sample(doc))
            end = b"\n" if (not last or _ends_with_newline(doc)) else b""
    except (ValueError, RecursionError) as exc:
        raise _unwritable(doc, rec, exc) from None
    return lead + body + end


def _unwritable(doc: Document, rec: OutRecord, exc: Exception) -> TranscriptError:
    """A changed record that cannot be written as JSON: refused, never written wrongly."""
    line = rec.orig.line if rec.orig is not None else None
    reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
    return TranscriptError(
        doc.path,
        line,
        f"cannot write the changed record as JSON ({reason}); "
        "leave this record out of the reduction or fix the value",
    )


def _strip_fields(out: OutRecord, fields: frozenset[str] | None) -> None:
    """Remove top-level ``fields`` a stage asked to strip from a kept record."""
    data = out.data
    if not fields or out.state is State.DROPPED or not isinstance(data, dict):
        return
    if any(f in data for f in fields):
        out.touch()
        out.data = {k: v for k, v in data.items() if k not in fields}


def _set_values(out: OutRecord, values: Mapping[tuple[str | int, ...], Any] | None) -> None:
    """Set the values a stage asked for inside a kept record."""
    if not values or out.state is State.DROPPED:
        return
    data = out.data
    for path, value in values.items():
        try:
            if get_in(data, path) == value:
                continue
        except (KeyError, IndexError, TypeError):
            pass
        data = set_in(data, path, value)
    if data is not out.data:
        out.touch()
        out.data = data


def _texts_of(record: Record) -> list[str]:
    """The block texts a record held: what its original may share with offloaded files."""
    message = record.message
    return [block.text for block in message.blocks] if message is not None else []


def _style_sample(doc: Document) -> bytes:
    for rec in doc.records:
        if rec.data is not None:
            return rec.body
    return b""


def _ends_with_newline(doc: Document) -> bool:
    return not doc.records or doc.records[-1].terminator != b""
