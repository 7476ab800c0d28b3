"""Diagnose what breaks resuming a session (or the API call it makes), and repair it.

:func:`diagnose` reads a Claude Code session or Codex rollout with the one reader of the
clients' files (:func:`~ctxcli.formats.clients.read_client_file`: line by line, as the
client does; a line that is not JSON is skipped, so its record is lost to the chain) and
runs the diagnose engine (:mod:`ctxcli.formats.diagnose`) with the rules every transcript
is held to, which ``ctx validate`` runs too, and those of the client (:mod:`.client_rules`).
:func:`plan_fixes` computes the repaired bytes and the restore script that gives the
original back: every line it changes, drops or adds is recorded, with the original bytes
kept in the restore pack, so ``ctx restore`` undoes a repair exactly like a reduction.
Calls and results are paired again by the one pairing rule
(:func:`ctxcli.core.pairing.unpaired`) that found them unpaired.
"""

from __future__ import annotations

import hashlib
import re
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

import orjson

from ctxcli.api.local import open_input
from ctxcli.core.io import Input, Made, hash_input
from ctxcli.core.model import Conversation, Message
from ctxcli.core.pairing import ORPHAN_RESULT, UNANSWERED_CALL, Unpaired, unpaired
from ctxcli.formats import Format
from ctxcli.formats.claude_code import ENVELOPE, derived_uuid, is_compact_boundary, past_dropped
from ctxcli.formats.clients import ClientFile, bare
from ctxcli.formats.diagnose import (
    DEFAULT_MAX_LINE_BYTES,
    Diagnosis,
    Limits,
    Problem,
    diagnose_input,
    scan_diagnose,
)
from ctxcli.formats.diagnose import diagnose as run_rules
from ctxcli.formats.lazy import share_strings
from ctxcli.formats.lines import Record, parse_line
from ctxcli.services.session_files import CLAUDE, CODEX, identify
from ctxcli.sessions.client_rules import (
    CHECKS,
    UUID_RE,
    attachment_key,
    blocks_of,
    is_blank_text,
    is_message,
    payload_key,
    record_attachments,
    rules_for,
    stale_saved_context,
    unparseable_payload,
    visible_groups,
)
from ctxcli.store.change import Record as ChangeRecord
from ctxcli.store.change import Transaction
from ctxcli.store.history import new_change, prune
from ctxcli.store.index import head_digest
from ctxcli.store.inplace import DEFAULT_LIVE_SECONDS, Change, InPlace, Staged
from ctxcli.store.manifest import Header, InputSide, Side

__all__ = [
    "DEFAULT_MAX_LINE_BYTES",
    "Problem",
    "Repair",
    "Sink",
    "diagnose",
    "diagnose_file",
    "fix_in_place",
    "plan_fixes",
    "repair_json_line",
    "salvage_tail",
]

_PREVIEW_HEAD = 2000
_PREVIEW_TAIL = 1000
_BAD_ESCAPE = re.compile(rb'(?<!\\)((?:\\\\)*)\\([^"\\/bfnrtu])')
_PARENT_RE = re.compile(rb'"parentUuid"\s*:\s*(?:"([^"\\]+)"|null)')

_LINES = frozenset({"torn_last_line", "malformed_line"})
REPAIRS: dict[str, frozenset[str]] = {
    CLAUDE: _LINES
    | {
        "dangling_parent",
        "dangling_logical_parent",
        "empty_text",
        "unsigned_thinking",
        "unanswered_call",
        "orphan_result",
        "duplicate_tool_use_result",
        "oversized_line",
        "chain_starts_with_assistant",
        "repeated_attachment",
        "unparseable_tool_use_result",
    },
    CODEX: _LINES
    | {
        "unanswered_call",
        "orphan_result",
        "oversized_line",
        "codex_record_over_16mib",
        "codex_stale_token_count",
    },
}
"""The kinds of problem :func:`plan_fixes` repairs, by client format (others: lines only)."""


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


@dataclass(slots=True)
class _Rec:
    """A line as a repair edits it (the reader's record, then what the repair made of it)."""

    source: bytes | memoryview
    """The file's bytes (the line is ``source[start:end]``: a view of its own for each
    line is 184 bytes), or (a line with no data, an added one) the line's own bytes."""
    line: int | None
    data: Any = None
    error: str | None = None
    new_raw: bytes | None = None
    changed: bool = False
    dropped: bool = False
    added: bool = False
    texts: tuple[str, ...] = ()
    """Texts of the original line that went to files (the pack keeps the rest)."""
    thin: bool = False
    """``data`` holds only the record's ids, links and types (:meth:`Format.thin`): its
    whole data is read again from ``raw`` when a repair needs it."""
    own: bool = False
    """``data`` was parsed for this repair alone: edited without a copy."""
    packed: bytes | None = None
    """Changed, and held as its edited line, compressed, beside its thin ``data``."""
    packed_size: int = 0
    start: int = 0
    end: int = -1
    """Where the line is in ``source`` (-1: all of it)."""
    message: Message | None = None
    """The reader's message of the line (no texts), while the repair leaves it as read."""

    @classmethod
    def of(cls, rec: Record, thin: bool) -> _Rec:
        """The reader's record, its bytes still the file's (its thin data and message)."""
        buffer, start = rec.source()
        end = start + len(rec.raw)
        return cls(
            buffer,
            rec.line,
            rec.data,
            rec.invalid,
            thin=thin,
            start=start,
            end=end,
            message=rec.message,
        )

    @property
    def raw(self) -> bytes | memoryview:
        """The line's bytes."""
        return self.source if self.end < 0 else self.source[self.start : self.end]

    @property
    def is_dict(self) -> bool:
        return isinstance(self.data, dict)

    def whole(self) -> Any:
        """The record's whole data (read again from its line if it is held thin)."""
        if self.packed is not None:
            return parse_line(self.out())
        return parse_line(self.raw) if self.thin else self.data

    def pack(self, thin: Any) -> None:
        """Hold a changed record as its edited line and ``thin``, its ids and links.

        The line is compressed (zlib's fastest level): a session whose every copy of a
        payload is repaired changes a line in twenty, a sixth of the file held again.
        """
        line = orjson.dumps(self.data) + b"\n"
        self.packed, self.packed_size = zlib.compress(line, 1), len(line)
        self.data = thin

    def out(self) -> bytes:
        """The line a changed record is written as."""
        if self.new_raw is not None:
            return self.new_raw
        if self.packed is not None:
            return zlib.decompress(self.packed)
        return orjson.dumps(self.data) + b"\n"

    def edit(self) -> dict[str, Any]:
        """The record's data, copied once, for editing."""
        if self.packed is not None:
            self.data, self.packed = self.whole(), None
        elif not self.changed:
            if self.thin:
                self.data, self.thin = parse_line(self.raw), False
            elif not self.own:
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
    checked: Diagnosis | None = None
    """The diagnosis of the repaired bytes (its rules, format, and ``remaining``)."""
    output_sha256: str = ""
    """The repaired bytes' sha256 (also when they were written as they were made)."""
    output_bytes: int = 0


def diagnose(
    raw: Input, path: str = "<stdin>", *, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES
) -> Diagnosis:
    """Every problem of a session file by line, the rules that ran and the file's format.

    The rules are those ``ctx validate`` runs and those of the client that wrote the
    file (:func:`~ctxcli.sessions.client_rules.rules_for`); a problem is ``fixable`` when
    :func:`plan_fixes` repairs its kind.
    """
    return _marked(diagnose_input(raw, path, rules_for, Limits(max_line_bytes)))


def diagnose_file(file: ClientFile, *, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> Diagnosis:
    """:func:`diagnose` of a file already read (``ctx sessions`` reads each file once)."""
    return _marked(run_rules(file, rules_for(file), Limits(max_line_bytes)))


def _marked(found: Diagnosis) -> Diagnosis:
    """Each problem marked ``fixable`` (or not) and with the behaviour its check guards."""
    repairs = REPAIRS.get(found.format or "", _LINES)  # the clients' formats only
    found.problems = [
        replace(p, fixable=p.kind in repairs, guards=CHECKS.get(p.kind)) for p in found.problems
    ]
    return found


# --- repairs ---------------------------------------------------------------------------


def repair_json_line(body: bytes) -> Any:
    r"""The value of a line whose only fault is invalid backslash escapes, else None.

    Regex redaction tools leave ``\[`` behind (a backslash before a character JSON does
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


def plan_fixes(
    raw: Input,
    sink: Sink,
    *,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    into: Staged | None = None,
) -> Repair:
    """Repair every fixable problem; the bytes, the restore script and what was done.

    ``sink`` receives the original of every changed or dropped line and the full
    text of any tool output cut to fit ``max_line_bytes``. With ``into`` (a staged
    output, open) the repaired bytes are written there as they are made and read back
    mapped to check them (``Repair.output`` is then empty): a large session is not
    held twice, nor its records while the repair is checked.
    """
    before, script, changed, notes, made = _repair(raw, sink, max_line_bytes, into)
    output: Input = b""
    if into is None:
        output = made.bytes()
    elif made.size:
        assert into.fh is not None
        into.fh.flush()
        output = open_input(str(into.tmp))[0]
    checked = diagnose(output, max_line_bytes=max_line_bytes)
    checked.problems = [replace(p, fixable=False) for p in checked.problems]
    left = {(p.kind, p.message) for p in checked.problems}
    fixed = [p for p in before if (p.kind, p.message) not in left]
    kept = output if into is None else b""
    assert isinstance(kept, bytes)
    repair = Repair(kept, script, fixed, checked.problems, changed, notes, checked)
    repair.output_sha256, repair.output_bytes = made.hash.hexdigest(), made.size
    return repair


def _repair(
    raw: Input, sink: Sink, max_line_bytes: int, into: Staged | None
) -> tuple[list[Problem], list[Any], int, list[str], Made]:
    """The problems before, the restore script, lines changed, notes, and the output.

    The diagnosis reads each line once (:func:`~ctxcli.formats.diagnose.scan_diagnose`):
    a Claude Code session's records are then held thin (ids, links, types) and the
    repair reads each line again, one at a time (:func:`_fix_contents`), keeping whole
    only the records it changes; the edits that follow links read the thin records, and
    a record they change is read again from its line. The records it reads go once it
    returns, before the output is read to be checked.
    """
    visible: set[Any] = set()  # the responses with some content (see visible_groups)

    def groups(rec: Record) -> None:
        if rec.data is not None:
            visible.update(visible_groups((rec.data,)))

    file, found = scan_diagnose(raw, "<stdin>", rules_for, Limits(max_line_bytes), groups)
    before = _marked(found).problems
    agent = file.format_name if file.client else None
    fmt = file.format
    # A line with data is a view into ``raw``; the others (few) are copied to be read.
    thin = agent == CLAUDE
    recs = [
        _Rec.of(r, thin) if r.data is not None else _Rec(bytes(r.raw), r.line, None, r.invalid)
        for r in file.records
    ]
    del file  # its conversation: the repair makes its own, of the records as edited
    notes: list[str] = []
    _fix_lines(recs, agent)
    if agent == CLAUDE and fmt is not None:
        for rec in recs:
            if rec.changed and not rec.dropped:  # a line repaired: not seen whole yet
                visible.update(visible_groups((rec.data,)))
        messages = _fix_contents(recs, fmt, visible, sink, notes)
        _fix_pairs_claude(recs, fmt, messages)
        _relink(recs)
        _fix_dangling(recs)
        _shrink_lines(recs, sink, max_line_bytes, notes)
    elif agent == CODEX and fmt is not None:
        _fix_codex(recs, fmt, sink, max_line_bytes, notes)
    made = Made(into.fh if into is not None else None)
    script, changed = _emit(recs, sink, made)
    return before, script, changed, notes, made


def _fix_contents(
    recs: list[_Rec], fmt: Format, visible: set[Any], sink: Sink, notes: list[str]
) -> list[Message | None]:
    """Each record read whole once: its blocks, payload and attachments repaired.

    The message of each record left (no texts) is returned for the pairing rule, and
    the records the repair did not change are kept thin again.
    """
    seen_payloads: set[tuple[bytes, int]] = set()
    first: dict[str, int | None] = {}
    messages: list[Message | None] = []
    shared: dict[str, str] = {}  # one string for each id the thin records repeat
    for i, rec in enumerate(recs):
        nothing = rec.dropped or rec.data is None  # (dropped: a line that is not JSON)
        if nothing:
            messages.append(None)
            continue
        # A record the repair leaves as read keeps the reader's thin data and message.
        read = (rec.data, rec.message) if rec.thin else None
        if rec.thin:
            rec.data, rec.thin, rec.own = parse_line(rec.raw), False, True
        rec.message = None
        _fix_blocks(rec, visible, seen_payloads)
        if not rec.dropped and rec.is_dict:
            _offload_attachments(rec, first, sink, notes)
        if rec.dropped:
            messages.append(None)
        elif not rec.changed and read is not None:
            (rec.data, message), rec.thin, rec.own = read, True, False
            messages.append(message)
            continue
        else:
            message = fmt.to_message(rec.data, i, i + 1, "<repair>")
            messages.append(None if message is None else bare(message))
        thin = fmt.thin(rec.data)
        if isinstance(thin, dict):
            share_strings(thin, shared, ())
        if not rec.changed:
            rec.data, rec.thin, rec.own = thin, True, False
        elif rec.new_raw is None:  # (a line repaired as text keeps its text)
            rec.pack(thin)
    return messages


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
    # Read as a map of a private copy: a 1 GB session is not held in memory as well.
    with InPlace(path, live_seconds=None, lines=False, mapped=True) as change:
        raw = change.raw
        agent, _sid = identify(change.path, raw)
        change.check_live(None if force else live_seconds)
        record = new_change(change.path, "doctor")
        with Transaction(ChangeRecord(record, str(record)), change=change, stream=True) as tx:
            assert tx.store is not None
            repair = plan_fixes(raw, tx.store, max_line_bytes=max_line_bytes, into=tx.staged)
            if repair.changed_lines == 0:
                tx.cancel()
                prune(change.path)
                return repair, Change(change.path, None, len(raw), len(raw))
            header = Header.new(
                format=agent,
                units="lines",
                kind="doctor",
                input=InputSide(
                    name=str(change.path),
                    sha256=hash_input(hashlib.sha256(), raw).hexdigest(),
                    bytes=len(raw),
                ),
                output=Side(sha256=repair.output_sha256, bytes=repair.output_bytes),
            )
            done = tx.commit(header, repair.script, input_head=head_digest(raw))
    after = done.written + done.carried
    return repair, Change(change.path, record, len(raw), after, done.carried)


def _fix_lines(recs: list[_Rec], agent: str | None) -> None:
    """Repair or drop lines that are not JSON."""
    # A line with data is not blank; one without is a copy (see :func:`_repair`).
    live = [r for r in recs if r.data is not None or bytes(r.raw).strip()]
    for rec in recs:
        if rec.error is None:
            continue
        raw = bytes(rec.raw)
        body = raw.rstrip(b"\r\n")
        torn = rec is live[-1] and not raw.endswith(b"\n")
        value = None if torn else repair_json_line(body)
        if value is not None:
            rec.data = value
            rec.error = None
            rec.changed = True
            rec.new_raw = _BAD_ESCAPE.sub(rb"\1\\\\\2", body) + (raw[len(body) :] or b"\n")
            continue
        tail = None if torn else salvage_tail(body)
        if tail is not None:
            # A record cut off mid-write, with the next one appended to it: the cut-off
            # part goes (to the restore pack), the whole record after it stays.
            rec.data = orjson.loads(tail)
            rec.error = None
            rec.changed = True
            rec.new_raw = tail + (raw[len(body) :] or b"\n")
            continue
        rec.dropped = True
        if agent == CLAUDE:
            # Children of the lost record hang on to its parent instead.
            uuid = UUID_RE.search(raw)
            parent = _PARENT_RE.search(raw)
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


def _fix_blocks(rec: _Rec, visible: set[Any], seen_payloads: set[tuple[bytes, int]]) -> None:
    """Drop a message record's empty text and unsigned thinking, and a repeated payload."""
    if not is_message(rec.data):
        return
    data = rec.data
    content = data["message"].get("content")
    if isinstance(content, str) and not content.strip():
        rec.dropped = True
        return
    blocks = blocks_of(data)
    keep = [
        b
        for b in blocks
        if not (
            isinstance(b, dict)
            and (
                (b.get("type") == "text" and is_blank_text(b, data, visible))
                or (b.get("type") == "thinking" and not b.get("signature"))
            )
        )
    ]
    if len(keep) != len(blocks):
        if not keep:
            rec.dropped = True
            return
        rec.edit()["message"]["content"] = keep
    key = payload_key(data)
    if key is not None:
        if key in seen_payloads:
            del rec.edit()["toolUseResult"]
        seen_payloads.add(key)
    if unparseable_payload(rec.data):
        # The UI copy only: the model reads the tool_result, which stays.
        del rec.edit()["toolUseResult"]


def _shrink_lines(recs: list[_Rec], sink: Sink, max_line_bytes: int, notes: list[str]) -> None:
    for rec in recs:
        if not rec.dropped and rec.is_dict and _size(rec) > max_line_bytes:
            _shrink_line(rec, sink, max_line_bytes, notes)


def _size(rec: _Rec) -> int:
    if rec.new_raw is not None:
        return len(rec.new_raw)
    if rec.packed is not None:
        return rec.packed_size
    if rec.changed:
        return len(orjson.dumps(rec.data)) + 1
    return len(rec.raw)


def _unpaired(
    fmt: Format, recs: list[_Rec], messages: list[Message | None] | None = None
) -> list[tuple[Unpaired, int]]:
    """Run the pairing rule on the records as repaired so far.

    Each finding comes with the index of its record: the rule ``ctx validate`` and the
    diagnosis apply, on the same messages. ``messages``: those of the records, made
    already (by :func:`_fix_contents`, of records now held thin).
    """
    if messages is None:
        records = [Record(b"", i + 1, None if r.dropped else r.data) for i, r in enumerate(recs)]
        conv = fmt.build(b"", "<repair>", records, whole_texts=True).conversation
    else:  # the pairing rule reads the messages alone
        kept = [m for r, m in zip(recs, messages, strict=True) if m is not None and not r.dropped]
        conv = Conversation(tuple(kept), fmt.name)
    found: list[tuple[Unpaired, int]] = []
    for u in unpaired(conv):
        key = conv.messages[u.ref[0]].key
        if key is not None and u.call_id is not None:
            found.append((u, key))
    return found


def _fix_pairs_claude(recs: list[_Rec], fmt: Format, messages: list[Message | None]) -> None:
    found = _unpaired(fmt, recs, messages)
    # Orphan results: the block goes (the record too, if nothing else is left).
    for u, i in found:
        rec = recs[i]
        if u.kind != ORPHAN_RESULT or rec.dropped:
            continue
        blocks = blocks_of(rec.whole())
        keep = [
            b
            for b in blocks
            if not (
                isinstance(b, dict)
                and b.get("type") == "tool_result"
                and b.get("tool_use_id") == u.call_id
            )
        ]
        if keep:
            rec.edit()["message"]["content"] = keep
        else:
            rec.dropped = True
    inserts = [(i, str(u.call_id)) for u, i in found if u.kind == UNANSWERED_CALL]
    for i, call_id in sorted(inserts, reverse=True):
        owner = recs[i]
        odata = owner.whole()
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
    for block in blocks_of(data):
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


def _offload_attachments(
    rec: _Rec, first: dict[str, int | None], sink: Sink, notes: list[str]
) -> None:
    """Move every copy of an attachment seen before (``first``) to one file, by its hash."""
    found = list(record_attachments(rec.data))
    if not any(attachment_key(d) in first for _c, _k, d, _m, _b in found):
        for _c, _k, data, _m, _b in found:
            first.setdefault(attachment_key(data), rec.line)
        return
    # Walk the copy being edited: the containers must be the edited record's own.
    moved = 0
    for container, key, data, media, is_block in list(record_attachments(rec.edit())):
        digest = attachment_key(data)
        if digest not in first:
            first[digest] = rec.line
            continue
        path = sink.put("doctor", f"attachment-{digest[:32]}.b64", data)
        rec.texts += (data,)
        hint = (
            f"[ctx doctor: a copy of the {media} attachment first stored on line "
            f"{first[digest]} ({len(data):,} characters of base64) was moved to {path}]"
        )
        container[key] = {"type": "text", "text": hint} if is_block else hint
        moved += 1
    if moved:
        notes.append(f"line {rec.line}: {moved} repeated attachment(s) moved to one file each")


def _fix_codex(
    recs: list[_Rec], fmt: Format, sink: Sink, max_line_bytes: int, notes: list[str]
) -> None:
    for rec in recs:
        if not rec.dropped and rec.is_dict and _size(rec) > max_line_bytes:
            _shrink_codex_line(rec, sink, max_line_bytes, notes)
    found = _unpaired(fmt, recs)
    for u, i in found:
        if u.kind == ORPHAN_RESULT:
            recs[i].dropped = True  # an output is a record of its own
    inserts = [(i, str(u.call_id)) for u, i in found if u.kind == UNANSWERED_CALL]
    for i, call_id in sorted(inserts, reverse=True):
        call = recs[i].data
        payload = call.get("payload") if call.get("type") == "response_item" else None
        if not isinstance(payload, dict):
            continue  # a legacy rollout's bare item: left as it is (still reported)
        kind = (
            "custom_tool_call_output"
            if payload.get("type") == "custom_tool_call"
            else "function_call_output"
        )
        # What Codex itself sends for a call that never finished.
        record = {
            "timestamp": call.get("timestamp"),
            "type": "response_item",
            "payload": {"type": kind, "call_id": call_id, "output": "aborted"},
        }
        recs.insert(i + 1, _Rec(b"", None, record, changed=True, added=True))
    _fix_saved_context(recs, notes)


def _fix_saved_context(recs: list[_Rec], notes: list[str]) -> None:
    """Set a stale saved context size to the history's estimate (last: after the cuts).

    Only ``last_token_usage.total_tokens``, the figure Codex compacts on, changes: the
    counts usage trackers price stay, and the original line goes to the restore pack.
    """
    found = stale_saved_context([None if r.dropped else r.data for r in recs])
    if found is None:
        return
    rec = recs[found.index]
    rec.edit()["payload"]["info"]["last_token_usage"]["total_tokens"] = found.history
    notes.append(
        f"line {rec.line}: saved context size {found.tokens:,} -> {found.history:,} tokens "
        f"(under Codex's auto-compact limit of {found.limit:,})"
    )


def _codex_item(data: Any) -> dict[str, Any] | None:
    payload = data.get("payload") if isinstance(data, dict) else None
    if data.get("type") == "response_item" and isinstance(payload, dict):
        return payload
    return None


def _shrink_codex_line(rec: _Rec, sink: Sink, limit: int, notes: list[str]) -> None:
    """Move a tool output (or call input) too long for its line to a file; a preview stays."""
    item = _codex_item(rec.data)
    if item is None:
        return
    for name in ("output", "arguments", "input"):
        text = item.get(name)
        if not isinstance(text, str) or len(text) <= _PREVIEW_HEAD + _PREVIEW_TAIL:
            continue
        key = str(item.get("call_id") or f"line{rec.line}")
        path = sink.put("doctor", f"{key}-{name}", text)
        rec.texts += (text,)
        omitted = len(text) - _PREVIEW_HEAD - _PREVIEW_TAIL
        edited = _codex_item(rec.edit())
        assert edited is not None
        edited[name] = (
            f"{text[:_PREVIEW_HEAD]}\n\n[ctx doctor: {omitted:,} characters omitted; "
            f"the full text is in {path}]\n\n{text[-_PREVIEW_TAIL:]}"
        )
        notes.append(f"line {rec.line}: a {name} of {len(text):,} characters moved to {path}")
        if _size(rec) <= limit:
            return


def _emit(recs: list[_Rec], sink: Sink, out: Made) -> tuple[list[Any], int]:
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
            out.write(orjson.dumps(rec.data) + b"\n")
            skip()
            changed += 1
        elif rec.dropped:
            script.append(sink.add_original(rec.raw, rec.texts))
            changed += 1
        elif rec.changed:
            script.append(sink.add_original(rec.raw, rec.texts))
            out.write(rec.out())
            skip()
            changed += 1
        else:
            out.write(rec.raw)
            copy()
    return script, changed
