"""The numbers of ``ctx report``: where a transcript's tokens go and what each stage removed.

:func:`analyze_bytes` runs the same reduction ``ctx stats`` runs (a dry-run offload,
so nothing is written) with ``trace=True``, and breaks the totals down: tokens per
message before and after, per tool, per stage, the largest removed or shortened
blocks with the file that would hold their original, and the six monitors as the
session went on. Every breakdown adds up to the report's totals exactly: the page,
``ctx stats --by-tool``/``--top`` and ``ctx stats --json`` show the same numbers.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ctxcli import api
from ctxcli._version import __version__
from ctxcli.core.errors import TranscriptError
from ctxcli.core.model import Block, Conversation, Kind, Message
from ctxcli.core.monitors import monitor_series, steps_of
from ctxcli.core.protocols import sha256
from ctxcli.formats import split_collection
from ctxcli.formats.claude_code import is_compact_boundary
from ctxcli.pipeline.config import Config, load_config
from ctxcli.pipeline.results import Report, Trace
from ctxcli.store.naming import Preview, agent_text

__all__ = [
    "Item",
    "MessageRow",
    "ReportData",
    "ToolRow",
    "analyze_bytes",
    "analyze_file",
    "config_dict",
    "printable",
]

TOP_ITEMS = 20
"""How many removed or shortened blocks the page shows."""
MONITOR_POINTS = 200
"""At most this many points per monitor line."""
_TEXT_SHOWN_CHARS = 4000
"""Before/after texts longer than this are shown as head and tail."""


@dataclass(frozen=True)
class MessageRow:
    """One message of the input, with what the reduction left of it."""

    index: int
    role: str
    category: str
    """The tool it calls or answers, else its role (``user``, ``assistant``...)."""
    tokens_before: int
    tokens_after: int
    preview: str
    """The start of what the model reads in it."""


@dataclass(frozen=True)
class ToolRow:
    """Tokens of one tool (its calls and results) or one kind of other text."""

    name: str
    calls: int
    tokens_before: int
    tokens_after: int
    is_tool: bool = True

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape ``ctx stats --by-tool --json`` prints."""
        return {
            "name": self.name,
            "is_tool": self.is_tool,
            "calls": self.calls,
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
        }


@dataclass(frozen=True)
class Item:
    """A block a stage removed or shortened."""

    message: int
    """Index of its message in the input."""
    role: str
    kind: str
    tool: str | None
    stage: str
    """The first stage that changed it."""
    tokens_before: int
    tokens_after: int
    before: str
    after: str
    """Empty when the block was removed."""
    offload_path: str | None
    """The file that holds the original (as ``ctx reduce`` would write it), if any."""
    offload_whole: bool = True
    """The offload file holds the block's text as it was; False: what a later stage
    offloaded of it after this one changed it (the restore pack has the original)."""

    @property
    def removed(self) -> bool:
        """True if nothing of the block is left."""
        return self.tokens_after == 0 and not self.after

    @property
    def change(self) -> str:
        """``removed``, ``edited`` (some of its lines kept) or ``replaced`` (by other text)."""
        if self.removed:
            return "removed"
        kept = set(self.before.splitlines()) & set(self.after.splitlines())
        return "edited" if kept - {""} else "replaced"

    @property
    def saved(self) -> int:
        """Tokens the change saved."""
        return self.tokens_before - self.tokens_after

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape ``ctx stats --top N --json`` prints (without the texts)."""
        return {
            "message": self.message,
            "role": self.role,
            "kind": self.kind,
            "tool": self.tool,
            "stage": self.stage,
            "change": self.change,
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "offload_path": self.offload_path,
        }


@dataclass
class ReportData:
    """Everything the page shows."""

    report: Report
    messages: list[MessageRow]
    by_tool: list[ToolRow]
    top: list[Item]
    changed_blocks: int
    """Blocks removed or shortened in all (``top`` holds the largest)."""
    monitors: list[tuple[int, dict[str, float]]]
    steps: int
    """Tool calls of the agent (the monitors' x axis)."""
    compactions: list[int] = field(default_factory=list)
    """Message indexes just after each compaction boundary."""
    resume_at: int | None = None
    """Index of the first message a resumed session sends again (None: not resumed)."""
    config: dict[str, Any] = field(default_factory=dict)
    input_sha256: str = ""
    version: str = __version__


def printable(text: str) -> str:
    r"""``text`` as a page and JSON can carry it: a lone surrogate is shown as its escape.

    ``"\ud800"`` is valid JSON and ctx reduces such a transcript unchanged, but no
    UTF-8 page can hold the character itself; ``\ud800`` says what is there.
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def config_dict(config: Config) -> dict[str, Any]:
    """The configuration a run used, as plain data."""
    return {
        "source": config.source,
        "settings": config.settings.model_dump(mode="json", exclude_none=True),
        "stages": [{"use": sc.use, **sc.options.model_dump(mode="json")} for sc in config.stages],
    }


def analyze_file(
    input: str,
    destination: api.Destination | None = None,
    *,
    config: Config | None = None,
    options: api.RunOptions | None = None,
    top: int = TOP_ITEMS,
    trajectory: str | None = None,
) -> ReportData:
    """:func:`analyze_bytes` of a file (``-`` reads stdin), reduced as into ``destination``.

    The destination is the one :func:`ctxcli.api.reduce` would get: the hints cite its
    offload directory, so the numbers are those of the file a reduction writes.
    ``trajectory`` picks one of the trajectories of a file that holds several (tau-bench
    runs, an OpenHands ``output.jsonl``): its number (1 for the first) or its id.

    Raises:
        TranscriptError: the file holds several trajectories and none is picked, or
            ``trajectory`` names none of them (or the file holds only one transcript).
    """
    config = config or load_config()
    run = options or api.RunOptions()
    raw = api.read_input(input)
    path = input
    if trajectory is not None:
        split = split_collection(raw, input, format=config.settings.format or "auto")
        if split is None:
            raise TranscriptError(
                input, None, f"holds one transcript: there is no trajectory {trajectory!r} to pick"
            )
        part = split.pick(trajectory, input)
        raw, path = part.raw, part.name
        config = config.with_overrides(format="auto")  # the part is of its own format
    return analyze_bytes(
        raw,
        path=path,
        config=config,
        options=run,
        top=top,
        root=api.offload_root(input, destination or api.Destination(), config, raw),
    )


def analyze_bytes(
    raw: bytes,
    *,
    path: str = "<stdin>",
    config: Config | None = None,
    options: api.RunOptions | None = None,
    top: int = TOP_ITEMS,
    root: str | None = None,
) -> ReportData:
    r"""Run ``ctx stats``' reduction on ``raw`` and break its totals down for the report.

    ``options`` are those of ``ctx stats`` (its ``on_invalid`` default included: the
    report previews what ``reduce`` does). ``root`` is the offload directory the hints
    cite (default: the one ``ctx stats`` of ``raw`` on stdin names).

    Example::

        >>> data = analyze_bytes(b'{"role": "user", "content": "hi"}\n')
        >>> data.messages[0].tokens_before == data.report.tokens_before
        True
    """
    config = config or load_config()
    # The same offload root `ctx stats` cites, so the paths match what it says.
    offload = _KeptPreview(
        root if root is not None else api.offload_root("-", api.Destination(), config, raw)
    )
    reduced = api.reduce_bytes(
        raw,
        config=config,
        offload=offload,
        path=path,
        options=replace(options or api.RunOptions(), log=None, monitors=True, trace=True),
    )
    trace = reduced.trace
    assert trace is not None  # asked for with trace=True
    before = trace.steps[0][1]
    after = trace.steps[-1][1]
    matched = _match_messages(before, after)
    steps = steps_of(before)
    items = list(_changed_blocks(trace, matched, offload))
    items.sort(key=lambda it: (-it.saved, it.message))
    return ReportData(
        report=reduced.report,
        messages=_message_rows(trace, matched),
        by_tool=_by_tool(trace),
        top=items[:top],
        changed_blocks=len(items),
        monitors=monitor_series(steps, MONITOR_POINTS),
        steps=len(steps),
        compactions=_compactions(before),
        resume_at=_resume_at(before),
        config=config_dict(config),
        input_sha256=sha256(raw),
    )


# -- messages ----------------------------------------------------------------------------


def _match_messages(before: Conversation, after: Conversation) -> list[list[Message]]:
    """For each input message, the output messages that stand for it.

    Messages keep the key of the record they came from, so an input message's
    successor is the output message with the same key (the n-th of that key for the
    n-th). A message a stage created (no key) goes with the message before it, so
    every output message is counted exactly once.
    """
    by_key: dict[int, list[list[Message]]] = {}
    out: list[list[Message]] = [[] for _ in before.messages]
    slots: dict[int, list[int]] = {}
    for i, msg in enumerate(before.messages):
        slots.setdefault(msg.key if msg.key is not None else -1 - i, []).append(i)
    for key, idx in slots.items():
        by_key[key] = [out[i] for i in idx]
    seen: dict[int, int] = {}
    last: list[Message] | None = out[0] if out else None
    for msg in after.messages:
        target: list[Message] | None = None
        if msg.key is not None and msg.key in by_key:
            n = seen.get(msg.key, 0)
            group = by_key[msg.key]
            target = group[min(n, len(group) - 1)]
            seen[msg.key] = n + 1
        target = target if target is not None else last
        if target is None:  # nothing in the input at all: cannot happen for real files
            continue
        target.append(msg)
        last = target
    return out


def _category(conv: Conversation, mi: int, names: dict[str, str]) -> str:
    """What a message is about: the tool it calls or answers, else its role."""
    msg = conv.messages[mi]
    for bi, block in enumerate(msg.blocks):
        if block.kind in (Kind.TOOL_CALL, Kind.TOOL_RESULT):
            return _tool_of(conv, (mi, bi), names) or "tool"
    return msg.role


def _tool_of(conv: Conversation, ref: tuple[int, int], names: dict[str, str]) -> str | None:
    name = conv.tool_name(ref)
    if name:
        return name
    block = conv.block(ref)
    return names.get(block.call_id) if block.call_id else None


def _call_names(trace: Trace) -> dict[str, str]:
    """Tool name per call id, from the input (a stage may drop the call of a result)."""
    names: dict[str, str] = {}
    for _ref, block in trace.steps[0][1].iter_blocks(Kind.TOOL_CALL):
        if block.call_id and block.name:
            names.setdefault(block.call_id, block.name)
    return names


def _preview(msg: Message, limit: int = 240) -> str:
    parts: list[str] = []
    size = 0
    for block in msg.blocks:
        if block.kind is Kind.TOOL_CALL:
            text = f"{block.name or 'tool'}({block.text[:limit]})"
        elif block.kind is Kind.IMAGE:
            text = "[image]"
        else:
            text = block.text[:limit]
        parts.append(text)
        size += len(text)
        if size >= limit:
            break
    return " ".join(" ".join(parts).split())[:limit]


def _message_rows(trace: Trace, matched: list[list[Message]]) -> list[MessageRow]:
    before = trace.steps[0][1]
    names = _call_names(trace)

    def tokens(msg: Message) -> int:
        return sum(trace.tokens(b) for b in msg.blocks)

    return [
        MessageRow(
            index=i,
            role=printable(msg.role),
            category=printable(_category(before, i, names)),
            tokens_before=tokens(msg),
            tokens_after=sum(tokens(m) for m in matched[i]),
            preview=printable(_preview(msg)),
        )
        for i, msg in enumerate(before.messages)
    ]


# -- tools -------------------------------------------------------------------------------


def block_category(conv: Conversation, ref: tuple[int, int], names: dict[str, str]) -> str:
    """The row of the by-tool table a block counts in."""
    block = conv.block(ref)
    if block.kind in (Kind.TOOL_CALL, Kind.TOOL_RESULT):
        return _tool_of(conv, ref, names) or "(unnamed tool)"
    if block.kind is Kind.TEXT:
        return f"({conv.messages[ref[0]].role} text)"
    return f"({block.kind.value})"


def _by_tool(trace: Trace) -> list[ToolRow]:
    names = _call_names(trace)
    totals: dict[str, list[int]] = {}
    for column, (_name, conv) in ((0, trace.steps[0]), (1, trace.steps[-1])):
        for mi, msg in enumerate(conv.messages):
            for bi, block in enumerate(msg.blocks):
                row = totals.setdefault(block_category(conv, (mi, bi), names), [0, 0, 0])
                row[column] += trace.tokens(block)
                if column == 0 and block.kind is Kind.TOOL_CALL:
                    row[2] += 1
    rows = [
        ToolRow(
            printable(name),
            calls,
            b,
            a,
            is_tool=not name.startswith("(") or name == "(unnamed tool)",
        )
        for name, (b, a, calls) in totals.items()
    ]
    rows.sort(key=lambda r: (-r.tokens_before, r.name))
    return rows


# -- what the stages removed -----------------------------------------------------------


def _pair_blocks(old: Message, new: Sequence[Message]) -> list[Block | None]:
    """For each block of ``old``, its successor among ``new``'s blocks (None: removed).

    Stages keep a block's kind and call id, and its order within the message.
    """
    pool = [b for m in new for b in m.blocks]
    used = [False] * len(pool)
    out: list[Block | None] = []
    for block in old.blocks:
        found: Block | None = None
        for j, cand in enumerate(pool):
            if not used[j] and cand.kind is block.kind and cand.call_id == block.call_id:
                used[j] = True
                found = cand
                break
        out.append(found)
    return out


_PATH_CHARS = r"[\w./@+-]+"


class _KeptPreview(Preview):
    """A :class:`Preview` that keeps the text of each file it names.

    A :class:`Preview` that keeps the text of each file it names, for the report to
    find a block a stage offloaded as part of a larger file (``drop_before_compaction``
    writes the records it drops as one file, Codex's ``clear_thinking`` a response's
    summary parts as one).
    """

    def __init__(self, root: str) -> None:
        super().__init__(root)
        self.texts: dict[str, str] = {}

    def put(self, area: str, key: str, text: str) -> str:
        cited = super().put(area, key, text)
        self.texts[cited] = text
        return cited


def _offload_path(
    text: str, after: str, stage: str, offload: _KeptPreview
) -> tuple[str | None, bool]:
    """Find the offload file holding ``text`` and whether it holds it as it was.

    The offload file holding ``text``, and whether it holds it as it was: by its
    hash, else the path the hint cites, else a file of ``stage`` (then of any stage)
    whose text holds it (a stage that offloads many blocks as one file).
    """
    digest = sha256(agent_text(text))  # the bytes the file holds
    for rel, dig in offload.files.items():
        if dig == digest:
            return f"{offload.root}/{rel}", True
    match = re.search(re.escape(offload.root + "/") + _PATH_CHARS, after)
    if match:
        cited = match.group(0).rstrip(".")
        return cited, text in offload.texts.get(cited, "")
    area = f"{offload.root}/{stage}/"
    for own in (True, False):
        for cited, held in offload.texts.items():
            if cited.startswith(area) == own and text in held:
                return cited, True
    return None, True


def _changed_blocks(
    trace: Trace, matched: list[list[Message]], offload: _KeptPreview
) -> Iterator[Item]:
    before = trace.steps[0][1]
    names = _call_names(trace)
    # The blocks alive after each stage: the first stage a block is missing from changed it.
    alive = [{id(b) for m in conv.messages for b in m.blocks} for _n, conv in trace.steps[1:]]
    stage_names = [n for n, _c in trace.steps[1:]]
    for mi, msg in enumerate(before.messages):
        succ = matched[mi]
        if len(succ) == 1 and succ[0] is msg:
            continue
        for bi, (old, new) in enumerate(zip(msg.blocks, _pair_blocks(msg, succ), strict=True)):
            if new is old:
                continue
            t_old = trace.tokens(old)
            t_new = trace.tokens(new) if new is not None else 0
            if t_new >= t_old:
                continue
            stage = next(
                (s for s, ids in zip(stage_names, alive, strict=True) if id(old) not in ids),
                stage_names[-1] if stage_names else "",
            )
            after_text = new.text if new is not None else ""
            path, whole = (
                _offload_path(old.text, after_text, stage, offload) if old.text else (None, True)
            )
            tool = (
                _tool_of(before, (mi, bi), names)
                if old.kind in (Kind.TOOL_CALL, Kind.TOOL_RESULT)
                else None
            )
            yield Item(
                message=mi,
                role=printable(msg.role),
                kind=old.kind.value,
                tool=printable(tool) if tool is not None else None,
                stage=stage,
                tokens_before=t_old,
                tokens_after=t_new,
                before=printable(old.text),
                after=printable(after_text),
                offload_path=path,
                offload_whole=whole,
            )


# -- compactions -------------------------------------------------------------------------


def _is_compaction(data: Any) -> bool:
    """Claude Code's compact_boundary record, or Codex's ``compacted`` item."""
    return is_compact_boundary(data) or (isinstance(data, dict) and data.get("type") == "compacted")


def _first_message_after(conv: Conversation, key: int) -> int | None:
    for i, msg in enumerate(conv.messages):
        if msg.key is not None and msg.key > key:
            return i
    return None


def _compactions(conv: Conversation) -> list[int]:
    out: list[int] = []
    for record in conv.records:
        if _is_compaction(record.data):
            at = _first_message_after(conv, record.key)
            if at is not None and at not in out:
                out.append(at)
    return out


def _resume_at(conv: Conversation) -> int | None:
    start = conv.resume_start
    if start is None:
        return None
    if start < 0:
        return 0 if conv.messages else None
    return _first_message_after(conv, start)


def shown_text(text: str, limit: int = _TEXT_SHOWN_CHARS) -> str:
    """``text``, or its head and tail with a marker when longer than ``limit``."""
    if len(text) <= limit:
        return text
    head = text[: limit * 2 // 3]
    tail = text[-(limit // 3) :]
    return f"{head}\n… {len(text) - len(head) - len(tail):,} characters not shown …\n{tail}"
