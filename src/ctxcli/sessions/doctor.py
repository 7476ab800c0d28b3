"""Diagnose what breaks resuming a session (or the API call it makes), and repair it.

:func:`diagnose` reads a Claude Code session or Codex rollout line by line, the way the
client does (a line that is not JSON is skipped, so its record is lost to the chain),
and reports each problem with its line. :func:`plan_fixes` computes the repaired bytes
and the restore script that gives the original back: every line it changes, drops or
adds is recorded, with the original bytes kept in the restore pack, so ``ctx restore``
undoes a repair exactly like a reduction.

Claude Code problems: a torn last line, a malformed line, a ``parentUuid`` or
``logicalParentUuid`` naming no record, a chain that starts at an assistant turn (the
API rejects it), tool calls without results and the reverse, empty text blocks,
thinking blocks without a signature, one ``toolUseResult`` payload stored twice, and
lines over a size limit (multi-megabyte tool outputs freeze ``claude --resume``), a base64
image or PDF stored again (every copy after the first goes to one file named by its hash,
whatever the number of copies), and a ``toolUseResult`` cut so it no longer parses as the
JSON it holds. Codex: torn/malformed lines, unpaired calls and outputs, oversized lines
and records over 16 MiB. :data:`CHECKS` names, per problem, the client behaviour it
guards against and how that was confirmed.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import orjson

from ctxcli.core.protocols import sha256, split_units
from ctxcli.formats.claude_code import (
    ENVELOPE,
    derived_uuid,
    is_compact_boundary,
    past_dropped,
    resume_chain,
)
from ctxcli.services.session_files import CLAUDE, CODEX, identify, sniff_agent
from ctxcli.store.change import Record, Transaction
from ctxcli.store.history import new_change, prune
from ctxcli.store.index import head_digest
from ctxcli.store.inplace import DEFAULT_LIVE_SECONDS, Change, InPlace
from ctxcli.store.manifest import Header, InputSide, Side

DEFAULT_MAX_LINE_BYTES = 1_000_000
_PREVIEW_HEAD = 2000
_PREVIEW_TAIL = 1000
_DUP_MIN_BYTES = 1024
_BAD_ESCAPE = re.compile(rb'(?<!\\)((?:\\\\)*)\\([^"\\/bfnrtu])')
_UUID_RE = re.compile(rb'"uuid"\s*:\s*"([^"\\]+)"')
_PARENT_RE = re.compile(rb'"parentUuid"\s*:\s*(?:"([^"\\]+)"|null)')
_ATTACHMENT_MIN_CHARS = 1024
_BASE64 = re.compile(r"[A-Za-z0-9+/=\s]+")
CODEX_MAX_RECORD_BYTES = 16 * 1024 * 1024
_CALLS = ("function_call", "custom_tool_call", "local_shell_call")
_OUTPUTS = ("function_call_output", "custom_tool_call_output")


WARNINGS = frozenset({"duplicate_tool_use_result"})
"""Kinds of problem a resume goes through (a copy of a payload costs bytes, nothing else)."""

CHECKS: dict[str, str] = {
    "torn_last_line": "the client skips a line that is not JSON, so the newest record is "
    "lost (how the client reads lines: tests/e2e/test_e2e_claude_code.py, malformed line)",
    "malformed_line": "the client skips a line that is not JSON and its record leaves the "
    "chain (reproduced: the real CLI on cc_mclaude_c76e5be5 line 859, "
    "tests/e2e/test_e2e_claude_code.py)",
    "dangling_parent": "a resume walks parentUuid back from the last record and stops at a "
    "uuid no record has, so everything older is lost to the model",
    "dangling_logical_parent": "logicalParentUuid naming no record (the UI follows it)",
    "chain_starts_with_assistant": "the API answers 400 'first message must use the user "
    "role' (reproduced: the real CLI sends such a chain, tests/e2e/test_e2e_claude_code.py)",
    "unanswered_call": "the API answers 400 for a tool_use without its tool_result "
    "(the rule in ctxcli.proxy.rules, which the fake API enforces)",
    "orphan_result": "the API answers 400 for a tool_result without its tool_use "
    "(ctxcli.proxy.rules)",
    "empty_text": "the API answers 400 for an empty text block (ctxcli.proxy.rules)",
    "unsigned_thinking": "the API answers 400 for a thinking block without a signature "
    "(ctxcli.proxy.rules)",
    "duplicate_tool_use_result": "a toolUseResult stored again costs bytes to load (a warning)",
    "oversized_line": "a multi-megabyte line freezes claude --resume (reported: "
    "anthropics/claude-code#24118, a 12 MB tool_result line); a 12 MB line resumes once "
    "repaired, in the real CLI (tests/e2e/test_e2e_uncompact.py)",
    "repeated_attachment": "the client sends every stored copy of a base64 image or PDF "
    "(reported: anthropics/claude-code#67080, each PDF stored twice, 36.8 MB, would not "
    "resume; reproduced: the real CLI sends all eight copies of one PDF, one once repaired, "
    "tests/e2e/test_e2e_uncompact.py)",
    "codex_record_over_16mib": "Codex's state migration drops records over 16 MiB "
    "(reported: openai/codex#44141; not reproduced here)",
    "unparseable_tool_use_result": "Claude Code's TaskOutput renderer JSON.parses a "
    "toolUseResult held as JSON text on resume (reported in ctx issue 43; not reproduced "
    "here)",
}
"""Each kind of problem, with the client behaviour it guards against and how it was confirmed."""


@dataclass(frozen=True, order=True)
class Problem:
    """One thing that breaks a resume (or, a warning, only costs), on a line (1-based)."""

    line: int | None
    kind: str
    message: str
    fixable: bool = True

    @property
    def breaks_resume(self) -> bool:
        """False for a warning: the client resumes the session as it is."""
        return self.kind not in WARNINGS

    def render(self, path: str) -> str:
        """``path:line: message``."""
        where = f"{path}:{self.line}" if self.line is not None else path
        return f"{where}: {self.message}"

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape of ``ctx doctor --json``."""
        return {
            "line": self.line,
            "kind": self.kind,
            "message": self.message,
            "fixable": self.fixable,
            "breaks_resume": self.breaks_resume,
            "guards": CHECKS.get(self.kind),
        }


class Sink(Protocol):
    """Where a repair keeps original lines and full texts it shortened."""

    def put(self, area: str, key: str, text: str) -> str:
        """Store ``text``; return the path that cites it."""
        ...

    def add_original(self, raw: bytes | memoryview, texts: Iterable[str] = ()) -> list[Any]:
        """Keep an original line; return its restore op.

        ``texts`` are texts the line held that were :meth:`put` to files: the pack then
        holds only the bytes around them (one attachment stored eight times is one file).
        """
        ...


@dataclass
class _Rec:
    raw: bytes
    line: int | None
    data: Any = None
    error: str | None = None
    new_raw: bytes | None = None
    changed: bool = False
    dropped: bool = False
    added: bool = False
    texts: list[str] = field(default_factory=list)

    @property
    def is_dict(self) -> bool:
        return isinstance(self.data, dict)

    def edit(self) -> dict[str, Any]:
        """The record's data, copied once, for editing."""
        if not self.changed:
            self.data = orjson.loads(orjson.dumps(self.data))
            self.changed = True
        # A line repaired as text is written from its data once it is edited.
        self.new_raw = None
        assert isinstance(self.data, dict)
        return self.data


@dataclass
class Repair:
    """The outcome of :func:`plan_fixes`."""

    output: bytes
    script: list[Any]
    fixed: list[Problem]
    remaining: list[Problem]
    changed_lines: int = 0
    notes: list[str] = field(default_factory=list)


def _parse(raw: bytes) -> list[_Rec]:
    recs: list[_Rec] = []
    for no, unit in enumerate(split_units(raw), start=1):
        body = unit.rstrip(b"\r\n")
        rec = _Rec(unit, no)
        if body.strip():
            try:
                rec.data = orjson.loads(body)
            except orjson.JSONDecodeError as exc:
                rec.error = str(exc).split(": line")[0]
        recs.append(rec)
    return recs


def diagnose(
    raw: bytes, *, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES
) -> tuple[str | None, list[Problem]]:
    """The agent the file belongs to and every problem found, by line."""
    recs = _parse(raw)
    agent = sniff_agent([r.data for r in recs])
    return agent, _check(recs, agent, max_line_bytes)


def _check(recs: list[_Rec], agent: str | None, max_line_bytes: int) -> list[Problem]:
    live = [r for r in recs if not r.dropped]
    problems: list[Problem] = []
    for i, rec in enumerate(live):
        if rec.error is not None:
            torn = i == len(live) - 1 and not rec.raw.endswith(b"\n")
            if torn:
                problems.append(
                    Problem(rec.line, "torn_last_line", "the last line was cut off mid-write")
                )
            else:
                problems.append(
                    Problem(
                        rec.line,
                        "malformed_line",
                        f"not valid JSON ({rec.error}); the client skips this line",
                    )
                )
        size = len(rec.new_raw if rec.new_raw is not None else rec.raw)
        if size > max_line_bytes:
            problems.append(
                Problem(
                    rec.line,
                    "oversized_line",
                    f"line of {size:,} bytes exceeds {max_line_bytes:,} (large lines stall a resume)",
                )
            )
        if agent == CODEX and size > CODEX_MAX_RECORD_BYTES:
            problems.append(
                Problem(
                    rec.line,
                    "codex_record_over_16mib",
                    f"record of {size:,} bytes is over 16 MiB (Codex's migration drops it)",
                )
            )
    if agent == CLAUDE:
        problems.extend(_check_claude(live))
    elif agent == CODEX:
        problems.extend(_check_codex(live))
    return sorted(problems, key=lambda p: (p.line or 0, p.kind))


def _blocks(data: dict[str, Any]) -> list[Any]:
    message = data.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    return content if isinstance(content, list) else []


def _is_message(data: Any) -> bool:
    return (
        isinstance(data, dict)
        and data.get("type") in ("user", "assistant")
        and isinstance(data.get("message"), dict)
    )


def _visible_groups(recs: list[_Rec]) -> set[Any]:
    """``message.id`` of the responses that hold some non-blank content.

    The client merges the records of one response into one message and drops a
    whitespace-only text block beside other content (real 2.1.x files hold "\n\n"
    blocks before a tool call and resume); only a response with nothing else, or a
    block with no text at all, reaches the API as an empty text block.
    """
    out: set[Any] = set()
    for rec in recs:
        if rec.dropped or not _is_message(rec.data):
            continue
        for block in _blocks(rec.data):
            if isinstance(block, dict) and not (
                block.get("type") == "text" and not str(block.get("text") or "").strip()
            ):
                out.add(rec.data["message"].get("id"))
    out.discard(None)
    return out


def _is_blank_text(block: dict[str, Any], data: dict[str, Any], visible: set[Any]) -> bool:
    text = block.get("text")
    if not isinstance(text, str) or text == "":
        return True
    if text.strip():
        return False
    return data["message"].get("id") not in visible


def _final_response(recs: list[_Rec]) -> set[int]:
    """Indices of the records of the last assistant response, if nothing followed it.

    Its calls may still be running when the file is read (or the client was stopped
    before it ran them); the client answers them itself on resume.
    """
    out: set[int] = set()
    msg_id: Any = None
    for i in range(len(recs) - 1, -1, -1):
        rec = recs[i]
        if rec.dropped or not _is_message(rec.data):
            continue
        data = rec.data
        if data["type"] != "assistant":
            if out:
                break
            if any(isinstance(b, dict) and b.get("type") == "tool_result" for b in _blocks(data)):
                return out
            continue
        this_id = data["message"].get("id")
        if out and (msg_id is None or this_id != msg_id):
            break
        out.add(i)
        msg_id = this_id
    return out


def _check_claude(recs: list[_Rec]) -> list[Problem]:
    """Every problem of a Claude Code session, pass by pass (sorted by the caller)."""
    return [
        *_dangling_links(recs),
        *_block_problems(recs),
        *_duplicate_payloads(recs),
        *_assistant_start(recs),
        *_repeated_attachments(recs),
        *_unparseable_payloads(recs),
    ]


def _dangling_links(recs: list[_Rec]) -> list[Problem]:
    """``parentUuid``/``logicalParentUuid`` naming no record (or one the client skips)."""
    known: set[str] = set()
    unparsed: dict[str, int | None] = {}
    for rec in recs:
        if rec.is_dict and isinstance(rec.data.get("uuid"), str):
            known.add(rec.data["uuid"])
        elif rec.error is not None:
            for m in _UUID_RE.findall(rec.raw):
                unparsed[m.decode("utf-8", "replace")] = rec.line
    problems: list[Problem] = []
    for rec in recs:
        if not rec.is_dict:
            continue
        for field_name, kind in _LINKS:
            target = rec.data.get(field_name)
            if field_name == "logicalParentUuid" and is_compact_boundary(rec.data):
                # Only shown in the UI; a resume never follows it (real 2.1.x files
                # point it at records that were never written).
                continue
            if isinstance(target, str) and target not in known:
                why = (
                    f"line {unparsed[target]}, which the client cannot parse"
                    if target in unparsed
                    else "no record in the file"
                )
                problems.append(Problem(rec.line, kind, f"{field_name} {target!r} names {why}"))
    return problems


_LINKS = (("parentUuid", "dangling_parent"), ("logicalParentUuid", "dangling_logical_parent"))


def _block_problems(recs: list[_Rec]) -> list[Problem]:
    """Empty texts, unsigned thinking, results without calls and calls without results."""
    problems: list[Problem] = []
    calls: dict[str, int | None] = {}
    answered: set[str] = set()
    final = _final_response(recs)
    visible = _visible_groups(recs)
    for i, rec in enumerate(recs):
        data = rec.data
        if not _is_message(data):
            continue
        content = data["message"].get("content")
        if isinstance(content, str) and not content.strip():
            problems.append(Problem(rec.line, "empty_text", "message text is empty"))
        for block in _blocks(data):
            kind = block.get("type") if isinstance(block, dict) else None
            if kind == "text" and _is_blank_text(block, data, visible):
                problems.append(
                    Problem(rec.line, "empty_text", "empty text block (the API rejects it)")
                )
            elif kind == "thinking" and not block.get("signature"):
                problems.append(
                    Problem(rec.line, "unsigned_thinking", "thinking block without a signature")
                )
            elif kind == "tool_use" and isinstance(block.get("id"), str):
                calls.setdefault(block["id"], rec.line)
                if i in final:
                    answered.add(block["id"])  # a final call may still be running
            elif kind == "tool_result" and isinstance(block.get("tool_use_id"), str):
                call_id = block["tool_use_id"]
                if call_id not in calls:
                    message = f"tool result {call_id!r} has no matching tool call"
                    problems.append(Problem(rec.line, "orphan_result", message))
                answered.add(call_id)
    problems += [
        Problem(line, "unanswered_call", f"tool call {call_id!r} has no result")
        for call_id, line in calls.items()
        if call_id not in answered
    ]
    return problems


def _duplicate_payloads(recs: list[_Rec]) -> list[Problem]:
    """A ``toolUseResult`` payload (of some size) stored again by a later record."""
    problems: list[Problem] = []
    payloads: dict[bytes, int | None] = {}
    for rec in recs:
        payload = rec.data.get("toolUseResult") if rec.is_dict else None
        if payload is None:
            continue
        key = orjson.dumps(payload, option=orjson.OPT_SORT_KEYS)
        if len(key) < _DUP_MIN_BYTES:
            continue
        if key in payloads:
            message = f"toolUseResult of {len(key):,} bytes repeats line {payloads[key]}"
            problems.append(Problem(rec.line, "duplicate_tool_use_result", message))
        else:
            payloads[key] = rec.line
    return problems


def _attachments(node: Any) -> Iterator[tuple[Any, Any, str, str, bool]]:
    """Base64 attachments in a record: (container, key, data, media type, is a block).

    A block (``image``/``document`` with a base64 ``source``) is replaced whole by a text
    block, since the API refuses a block whose data is not base64; any other long base64
    string under ``data`` or ``base64`` (the UI copy in ``toolUseResult``) is replaced
    by the hint text itself.
    """
    if isinstance(node, list):
        for i, item in enumerate(node):
            if _is_base64_block(item):
                source = item["source"]
                yield node, i, source["data"], str(source.get("media_type") or "?"), True
            else:
                yield from _attachments(item)
    elif isinstance(node, dict):
        for key, value in node.items():
            if key in ("data", "base64") and _is_base64(value):
                media = node.get("media_type") or node.get("type") or "?"
                yield node, key, value, str(media), False
            else:
                yield from _attachments(value)


def _is_base64(value: Any) -> bool:
    return (
        isinstance(value, str)
        and len(value) >= _ATTACHMENT_MIN_CHARS
        and _BASE64.fullmatch(value[:4096]) is not None
    )


def _is_base64_block(item: Any) -> bool:
    if not isinstance(item, dict) or item.get("type") not in ("image", "document"):
        return False
    source = item.get("source")
    return (
        isinstance(source, dict)
        and source.get("type") == "base64"
        and _is_base64(source.get("data"))
    )


def _attachment_key(data: str) -> str:
    return hashlib.sha256(data.encode("ascii", "replace")).hexdigest()


def _record_attachments(data: Any) -> Iterator[tuple[Any, Any, str, str, bool]]:
    if not isinstance(data, dict):
        return
    for name in ("message", "toolUseResult"):
        if name in data:
            yield from _attachments(data[name])


def _repeated_attachments(recs: list[_Rec]) -> list[Problem]:
    """A base64 image or PDF stored again by a later record (or twice in one)."""
    problems: list[Problem] = []
    first: dict[str, int | None] = {}
    for rec in recs:
        repeats: list[tuple[str, int, int | None]] = []
        for _c, _k, data, media, _b in _record_attachments(rec.data):
            key = _attachment_key(data)
            if key in first:
                repeats.append((media, len(data), first[key]))
            else:
                first[key] = rec.line
        if repeats:
            media, size, line = repeats[0]
            copies = f"{len(repeats)} copies" if len(repeats) > 1 else "a copy"
            problems.append(
                Problem(
                    rec.line,
                    "repeated_attachment",
                    f"{copies} of a base64 {media} attachment ({size:,} characters) first "
                    f"stored on line {line}; the client loads and sends every copy",
                )
            )
    return problems


def _unparseable_payloads(recs: list[_Rec]) -> list[Problem]:
    """A ``toolUseResult`` that is JSON text cut so it no longer parses."""
    problems: list[Problem] = []
    for rec in recs:
        payload = rec.data.get("toolUseResult") if rec.is_dict else None
        if not isinstance(payload, str) or payload.lstrip()[:1] not in ("{", "["):
            continue
        try:
            orjson.loads(payload)
        except orjson.JSONDecodeError:
            problems.append(
                Problem(
                    rec.line,
                    "unparseable_tool_use_result",
                    "toolUseResult is JSON text that does not parse (the client's "
                    "renderer JSON.parses it on resume)",
                )
            )
    return problems


def _assistant_start(recs: list[_Rec]) -> list[Problem]:
    """The chain a resume rebuilds starting at an assistant turn (the API answers 400)."""
    chain = resume_chain([r.data for r in recs])
    first = next((recs[k] for k in chain if _is_message(recs[k].data)), None)
    if first is None or first.data["type"] != "assistant":
        return []
    return [
        Problem(
            first.line,
            "chain_starts_with_assistant",
            "a resume rebuilds the conversation from here, an assistant turn "
            "(the API answers 400: first message must use the user role)",
        )
    ]


def _codex_item(data: Any) -> dict[str, Any] | None:
    if isinstance(data, dict) and data.get("type") == "response_item":
        payload = data.get("payload")
        if isinstance(payload, dict):
            return payload
    return None


def _check_codex(recs: list[_Rec]) -> list[Problem]:
    problems: list[Problem] = []
    calls: dict[str, int | None] = {}
    answered: set[str] = set()
    last_call = -1
    for i, rec in enumerate(recs):
        item = _codex_item(rec.data)
        if item is None or not isinstance(item.get("call_id"), str):
            continue
        if item.get("type") in _CALLS:
            calls.setdefault(item["call_id"], rec.line)
            last_call = i
        elif item.get("type") in _OUTPUTS:
            if item["call_id"] not in calls:
                problems.append(
                    Problem(
                        rec.line,
                        "orphan_result",
                        f"output of call {item['call_id']!r} has no matching call",
                    )
                )
            answered.add(item["call_id"])
    tail = recs[last_call + 1 :] if last_call >= 0 else []
    final = _codex_item(recs[last_call].data) if last_call >= 0 else None
    for call_id, line in calls.items():
        if call_id in answered:
            continue
        if (
            final is not None
            and final.get("call_id") == call_id
            and not any(_codex_item(r.data) for r in tail)
        ):
            continue
        problems.append(Problem(line, "unanswered_call", f"call {call_id!r} has no output"))
    return problems


# --- repairs ---------------------------------------------------------------------------


def repair_json_line(body: bytes) -> Any:
    """The value of a line whose only fault is invalid backslash escapes, else None.

    Regex redaction tools leave ``\\[`` behind (a backslash before a character JSON does
    not escape); the backslash is then meant literally, so it is doubled.
    """
    fixed = _BAD_ESCAPE.sub(rb"\1\\\\\2", body)
    if fixed == body:
        return None
    try:
        return orjson.loads(fixed)
    except orjson.JSONDecodeError:
        return None


def salvage_tail(body: bytes, attempts: int = 200) -> bytes | None:
    """The complete JSON object that ends a line whose start was cut off, else None."""
    start = 1
    for _ in range(attempts):
        start = body.find(b'{"', start)
        if start < 0:
            return None
        try:
            value = orjson.loads(body[start:])
        except orjson.JSONDecodeError:
            start += 1
            continue
        return body[start:] if isinstance(value, dict) else None
    return None


def plan_fixes(raw: bytes, sink: Sink, *, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> Repair:
    """Repair every fixable problem; the bytes, the restore script and what was done.

    ``sink`` receives the original of every changed or dropped line and the full
    text of any tool output cut to fit ``max_line_bytes``.
    """
    recs = _parse(raw)
    agent = sniff_agent([r.data for r in recs])
    before = _check(recs, agent, max_line_bytes)
    notes: list[str] = []
    _fix_lines(recs, agent)
    if agent == CLAUDE:
        _fix_claude(recs, sink, max_line_bytes, notes)
    elif agent == CODEX:
        _fix_codex(recs)
        for rec in recs:
            if not rec.dropped and rec.is_dict and _size(rec) > max_line_bytes:
                _shrink_codex_line(rec, sink, max_line_bytes, notes)
    output, script, changed = _emit(recs, sink)
    after = _check(_parse(output), agent, max_line_bytes)
    left = {(p.kind, p.message) for p in after}
    fixed = [p for p in before if (p.kind, p.message) not in left]
    remaining = [Problem(p.line, p.kind, p.message, fixable=False) for p in after]
    return Repair(output, script, fixed, remaining, changed, notes)


def fix_in_place(
    path: Path,
    *,
    force: bool = False,
    live_seconds: int = DEFAULT_LIVE_SECONDS,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
) -> tuple[Repair, Change]:
    """Repair what :func:`diagnose` finds, where the client reads the session; record it.

    The change is recorded like an in-place reduction: a new change directory of the
    file (the original lines, a manifest) and an entry in the reduction index, so
    ``ctx restore`` and :func:`ctxcli.restore_file` undo it with every other change. It
    is one :class:`~ctxcli.store.inplace.InPlace` transaction: lines the client appends
    meanwhile are kept after the repaired ones. A session that needs no repair is left
    alone (``Change.record`` None).

    Raises:
        LiveSessionError: the session looks in use and ``force`` is not set.
        CtxError: the file is not a Claude Code session or a Codex rollout.
    """
    with InPlace(path, live_seconds=None, lines=False) as change:
        raw = change.raw
        agent, _sid = identify(change.path, raw)
        change.check_live(None if force else live_seconds)
        record = new_change(change.path, "doctor")
        with Transaction(Record(record, str(record)), change=change) as tx:
            assert tx.store is not None
            repair = plan_fixes(raw, tx.store, max_line_bytes=max_line_bytes)
            if repair.changed_lines == 0:
                tx.cancel()
                prune(change.path)
                return repair, Change(change.path, None, len(raw), len(raw))
            header = Header.new(
                format=agent,
                units="lines",
                kind="doctor",
                input=InputSide(name=str(change.path), sha256=sha256(raw), bytes=len(raw)),
                output=Side(sha256=sha256(repair.output), bytes=len(repair.output)),
            )
            done = tx.commit(
                header, repair.script, output=repair.output, input_head=head_digest(raw)
            )
    after = done.written + done.carried
    return repair, Change(change.path, record, len(raw), after, done.carried)


def _fix_lines(recs: list[_Rec], agent: str | None) -> None:
    """Repair or drop lines that are not JSON."""
    live = [r for r in recs if r.raw.strip()]
    for rec in recs:
        if rec.error is None:
            continue
        body = rec.raw.rstrip(b"\r\n")
        torn = rec is live[-1] and not rec.raw.endswith(b"\n")
        value = None if torn else repair_json_line(body)
        if value is not None:
            rec.data = value
            rec.error = None
            rec.changed = True
            rec.new_raw = _BAD_ESCAPE.sub(rb"\1\\\\\2", body) + (rec.raw[len(body) :] or b"\n")
            continue
        tail = None if torn else salvage_tail(body)
        if tail is not None:
            # A record cut off mid-write, with the next one appended to it: the cut-off
            # part goes (to the restore pack), the whole record after it stays.
            rec.data = orjson.loads(tail)
            rec.error = None
            rec.changed = True
            rec.new_raw = tail + (rec.raw[len(body) :] or b"\n")
            continue
        rec.dropped = True
        if agent == CLAUDE:
            # Children of the lost record hang on to its parent instead.
            uuid = _UUID_RE.search(rec.raw)
            parent = _PARENT_RE.search(rec.raw)
            if uuid is not None:
                rec.data = {
                    "uuid": uuid.group(1).decode(),
                    "parentUuid": parent.group(1).decode() if parent and parent.group(1) else None,
                }


def _relink(recs: list[_Rec]) -> None:
    """Point links at dropped records to their nearest kept ancestor."""
    dropped: dict[str, Any] = {}
    for rec in recs:
        if rec.dropped and rec.is_dict and isinstance(rec.data.get("uuid"), str):
            dropped[rec.data["uuid"]] = rec.data.get("parentUuid")

    for rec in recs:
        if rec.dropped or not rec.is_dict:
            continue
        for name in ("parentUuid", "logicalParentUuid"):
            value = rec.data.get(name)
            target = past_dropped(dropped, value)
            if target != value:
                rec.edit()[name] = target


def _fix_claude(recs: list[_Rec], sink: Sink, max_line_bytes: int, notes: list[str]) -> None:
    seen_payloads: set[bytes] = set()
    visible = _visible_groups(recs)
    for rec in recs:
        if rec.dropped or not _is_message(rec.data):
            continue
        data = rec.data
        content = data["message"].get("content")
        if isinstance(content, str) and not content.strip():
            rec.dropped = True
            continue
        blocks = _blocks(data)
        keep = [
            b
            for b in blocks
            if not (
                isinstance(b, dict)
                and (
                    (b.get("type") == "text" and _is_blank_text(b, data, visible))
                    or (b.get("type") == "thinking" and not b.get("signature"))
                )
            )
        ]
        if len(keep) != len(blocks):
            if not keep:
                rec.dropped = True
                continue
            rec.edit()["message"]["content"] = keep
        payload = data.get("toolUseResult")
        if payload is not None:
            key = orjson.dumps(payload, option=orjson.OPT_SORT_KEYS)
            if len(key) >= _DUP_MIN_BYTES:
                if key in seen_payloads:
                    del rec.edit()["toolUseResult"]
                seen_payloads.add(key)
        payload = data.get("toolUseResult")
        if isinstance(payload, str) and _unparseable_payloads([rec]):
            # The UI copy only: the model reads the tool_result, which stays.
            del rec.edit()["toolUseResult"]
    _offload_repeated_attachments(recs, sink, notes)
    _fix_pairs_claude(recs)
    _relink(recs)
    _fix_dangling(recs)
    for rec in recs:
        if not rec.dropped and rec.is_dict and _size(rec) > max_line_bytes:
            _shrink_line(rec, sink, max_line_bytes, notes)


def _offload_repeated_attachments(recs: list[_Rec], sink: Sink, notes: list[str]) -> None:
    """Every copy of an attachment after the first goes to one file, named by its hash."""
    first: dict[str, int | None] = {}
    for rec in recs:
        if rec.dropped or not rec.is_dict:
            continue
        found = list(_record_attachments(rec.data))
        if not any(_attachment_key(d) in first for _c, _k, d, _m, _b in found):
            for _c, _k, data, _m, _b in found:
                first.setdefault(_attachment_key(data), rec.line)
            continue
        # Walk the copy being edited: the containers must be the edited record's own.
        moved = 0
        for container, key, data, media, is_block in list(_record_attachments(rec.edit())):
            digest = _attachment_key(data)
            if digest not in first:
                first[digest] = rec.line
                continue
            path = sink.put("doctor", f"attachment-{digest[:32]}.b64", data)
            rec.texts.append(data)
            hint = (
                f"[ctx doctor: a copy of the {media} attachment first stored on line "
                f"{first[digest]} ({len(data):,} characters of base64) was moved to {path}]"
            )
            container[key] = {"type": "text", "text": hint} if is_block else hint
            moved += 1
        if moved:
            notes.append(f"line {rec.line}: {moved} repeated attachment(s) moved to one file each")


def _size(rec: _Rec) -> int:
    if rec.new_raw is not None:
        return len(rec.new_raw)
    if rec.changed:
        return len(orjson.dumps(rec.data)) + 1
    return len(rec.raw)


def _fix_pairs_claude(recs: list[_Rec]) -> None:
    calls: dict[str, int] = {}
    answered: set[str] = set()
    for i, rec in enumerate(recs):
        if rec.dropped or not _is_message(rec.data):
            continue
        for block in _blocks(rec.data):
            if not isinstance(block, dict):
                continue
            if block.get("type") == "tool_use" and isinstance(block.get("id"), str):
                calls.setdefault(block["id"], i)
            elif block.get("type") == "tool_result":
                answered.add(str(block.get("tool_use_id")))
    # Orphan results: the block goes (the record too, if nothing else is left).
    for rec in recs:
        if rec.dropped or not _is_message(rec.data):
            continue
        blocks = _blocks(rec.data)
        keep = [
            b
            for b in blocks
            if not (
                isinstance(b, dict)
                and b.get("type") == "tool_result"
                and b.get("tool_use_id") not in calls
            )
        ]
        if len(keep) != len(blocks):
            if keep:
                rec.edit()["message"]["content"] = keep
            else:
                rec.dropped = True
    final = _final_response(recs)
    inserts = [(i, cid) for cid, i in calls.items() if cid not in answered and i not in final]
    for i, call_id in sorted(inserts, reverse=True):
        owner = recs[i]
        odata = owner.data
        result = _missing_result(odata, call_id)
        new = _Rec(b"", None, result, changed=True, added=True)
        # The new result takes the call's place as the parent of its children.
        for rec in recs:
            if rec is not owner and rec.is_dict and not rec.dropped:
                if rec.data.get("parentUuid") == odata.get("uuid"):
                    rec.edit()["parentUuid"] = result["uuid"]
        recs.insert(i + 1, new)


def _missing_result(call_record: dict[str, Any], call_id: str) -> dict[str, Any]:
    record: dict[str, Any] = {"parentUuid": call_record.get("uuid")}
    record.update({k: call_record[k] for k in ENVELOPE if k in call_record})
    record["type"] = "user"
    record["message"] = {
        "role": "user",
        "content": [
            {
                "tool_use_id": call_id,
                "type": "tool_result",
                "content": "[ctx doctor: the result of this tool call was lost from the "
                "transcript]",
                "is_error": True,
            }
        ],
    }
    record["uuid"] = derived_uuid("ctx-doctor", str(call_record.get("uuid")), call_id)
    if "timestamp" in call_record:
        record["timestamp"] = call_record["timestamp"]
    record["sourceToolAssistantUUID"] = call_record.get("uuid")
    return record


def _fix_dangling(recs: list[_Rec]) -> None:
    known = {
        r.data["uuid"]
        for r in recs
        if not r.dropped and r.is_dict and isinstance(r.data.get("uuid"), str)
    }
    previous: dict[Any, str] = {}
    for rec in recs:
        if rec.dropped or not rec.is_dict:
            continue
        data = rec.data
        lane = data.get("isSidechain") is True
        for name in ("parentUuid", "logicalParentUuid"):
            target = data.get(name)
            if name == "logicalParentUuid" and is_compact_boundary(data):
                continue
            if isinstance(target, str) and target not in known:
                # The nearest earlier record of the same chain stands in for the lost one.
                rec.edit()[name] = previous.get(lane)
        if isinstance(data.get("uuid"), str):
            previous[lane] = data["uuid"]


def _shrink_line(rec: _Rec, sink: Sink, limit: int, notes: list[str]) -> None:
    data = rec.edit()
    uuid = str(data.get("uuid") or f"line{rec.line}")
    if data.get("toolUseResult") is not None:
        text = orjson.dumps(data["toolUseResult"], option=orjson.OPT_INDENT_2).decode()
        path = sink.put("doctor", f"{uuid}-toolUseResult.json", text)
        del data["toolUseResult"]
        notes.append(f"line {rec.line}: the UI copy of a tool output moved to {path}")
        if _size(rec) <= limit:
            return
    for block in _blocks(data):
        if not isinstance(block, dict) or block.get("type") != "tool_result":
            continue
        content = block.get("content")
        if isinstance(content, list):
            content = "\n".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
        if not isinstance(content, str) or len(content) <= _PREVIEW_HEAD + _PREVIEW_TAIL:
            continue
        path = sink.put("doctor", str(block.get("tool_use_id") or uuid), content)
        omitted = len(content) - _PREVIEW_HEAD - _PREVIEW_TAIL
        block["content"] = (
            f"{content[:_PREVIEW_HEAD]}\n\n[ctx doctor: {omitted:,} characters omitted; "
            f"the full output is in {path}]\n\n{content[-_PREVIEW_TAIL:]}"
        )
        notes.append(
            f"line {rec.line}: a tool output of {len(content):,} characters moved to {path}"
        )


def _shrink_codex_line(rec: _Rec, sink: Sink, limit: int, notes: list[str]) -> None:
    """A tool output (or call input) too long for its line goes to a file, a preview stays."""
    item = _codex_item(rec.data)
    if item is None:
        return
    for name in ("output", "arguments", "input"):
        text = item.get(name)
        if not isinstance(text, str) or len(text) <= _PREVIEW_HEAD + _PREVIEW_TAIL:
            continue
        key = str(item.get("call_id") or f"line{rec.line}")
        path = sink.put("doctor", f"{key}-{name}", text)
        rec.texts.append(text)
        omitted = len(text) - _PREVIEW_HEAD - _PREVIEW_TAIL
        _codex_item(rec.edit())[name] = (  # type: ignore[index]
            f"{text[:_PREVIEW_HEAD]}\n\n[ctx doctor: {omitted:,} characters omitted; "
            f"the full text is in {path}]\n\n{text[-_PREVIEW_TAIL:]}"
        )
        notes.append(f"line {rec.line}: a {name} of {len(text):,} characters moved to {path}")
        if _size(rec) <= limit:
            return


def _fix_codex(recs: list[_Rec]) -> None:
    calls: dict[str, int] = {}
    answered: set[str] = set()
    for i, rec in enumerate(recs):
        item = None if rec.dropped else _codex_item(rec.data)
        if item is None or not isinstance(item.get("call_id"), str):
            continue
        if item.get("type") in _CALLS:
            calls.setdefault(item["call_id"], i)
        elif item.get("type") in _OUTPUTS:
            if item["call_id"] not in calls:
                rec.dropped = True
            answered.add(item["call_id"])
    last = max(calls.values(), default=-1)
    tail_has_items = any(_codex_item(r.data) for r in recs[last + 1 :]) if last >= 0 else False
    for call_id, i in sorted(calls.items(), key=lambda kv: -kv[1]):
        if call_id in answered or (i == last and not tail_has_items):
            continue
        call = recs[i].data
        kind = (
            "custom_tool_call_output"
            if call["payload"].get("type") == "custom_tool_call"
            else "function_call_output"
        )
        # What Codex itself sends for a call that never finished.
        record = {
            "timestamp": call.get("timestamp"),
            "type": "response_item",
            "payload": {"type": kind, "call_id": call_id, "output": "aborted"},
        }
        recs.insert(i + 1, _Rec(b"", None, record, changed=True, added=True))


def _emit(recs: list[_Rec], sink: Sink) -> tuple[bytes, list[Any], int]:
    out: list[bytes] = []
    script: list[Any] = []
    changed = 0

    def copy() -> None:
        if script and script[-1][0] == "c":
            script[-1][1] += 1
        else:
            script.append(["c", 1])

    def skip() -> None:
        if script and script[-1][0] == "s":
            script[-1][1] += 1
        else:
            script.append(["s", 1])

    for rec in recs:
        if rec.added:
            out.append(orjson.dumps(rec.data) + b"\n")
            skip()
            changed += 1
        elif rec.dropped:
            script.append(sink.add_original(rec.raw))
            changed += 1
        elif rec.changed:
            script.append(sink.add_original(rec.raw, rec.texts))
            line = rec.new_raw if rec.new_raw is not None else orjson.dumps(rec.data) + b"\n"
            out.append(line)
            skip()
            changed += 1
        else:
            out.append(rec.raw)
            copy()
    return b"".join(out), script, changed
