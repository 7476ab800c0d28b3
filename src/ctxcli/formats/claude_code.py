"""Claude Code session and subagent transcripts (``~/.claude/projects/**/*.jsonl``).

Only ``user`` and ``assistant`` records are model-visible: their ``message.content``
(a string or a list of Anthropic content blocks, see :mod:`.anthropic`). Every other
record type (``progress``, ``system``, ``summary``, ``file-history-snapshot``,
``queue-operation``, ``attachment`` and types yet to come) is passed through untouched.

Quirks this module handles:

- One API response is split over several ``assistant`` records, one content block
  each, sharing ``message.id``: that id becomes :attr:`Message.group` so a round is
  the whole response. Parallel results come in separate ``user`` records, laid out
  after all calls (v2.1.6) or interleaved with them (v2.1.39); the conversation links
  pair them by ``tool_use.id`` across records.
- The model never sees the copies of a tool's output kept for the UI: the record's
  top-level ``toolUseResult`` (often several times the tool_result itself, and the
  full output behind a ``<persisted-output>`` stub) and the ``bash_progress`` records
  streamed while the command ran (``output``/``fullOutput``). When a stage shortens a
  result these copies are dropped/emptied too, so the file really shrinks; the
  original records go to the restore pack like any changed record.
- Records form a tree by ``uuid``/``parentUuid`` (``logicalParentUuid`` across a
  compaction). When records are dropped, kept records pointing at them are relinked
  to the nearest kept ancestor; records a stage adds are chained in, with a uuid
  derived from their content (never random), so reruns are byte-identical.
- A ``summary`` record's ``leafUuid`` may point into another session: not an error.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from ctxcli.core.errors import TranscriptError
from ctxcli.core.io import Input
from ctxcli.core.model import Block, Message, TextSpan
from ctxcli.core.usage import tracker_key, usage_of, usage_stub
from ctxcli.formats.anthropic import (
    blocks_from_content,
    call_input,
    content_from_blocks,
    text_path,
    write_content,
)
from ctxcli.formats.fixups import changed_result_ids, drop_emptied, require_recognised
from ctxcli.formats.format import Document, Format, OutRecord, State
from ctxcli.formats.lines import Datas, Record
from ctxcli.formats.registry import register_format
from ctxcli.formats.slots import Path_

__all__ = [
    "CONTENT",
    "ClaudeCode",
    "ENVELOPE",
    "ID_KEYS",
    "KNOWN_TYPES",
    "LINKS",
    "derived_uuid",
    "is_chain_restart",
    "is_compact_boundary",
    "resume_chain",
    "resume_leaf",
]

KNOWN_TYPES = {
    "user",
    "assistant",
    "progress",
    "system",
    "summary",
    "file-history-snapshot",
    "queue-operation",
    "attachment",
}
ID_KEYS = ("uuid", "sessionId", "leafUuid", "messageId")
CONTENT = ("message", "content")
# Envelope fields a record made by ctx copies from its neighbour.
ENVELOPE = (
    "isSidechain",
    "userType",
    "cwd",
    "sessionId",
    "version",
    "gitBranch",
    "agentId",
    "slug",
)
# Fields holding the uuid of another record; relinked when that record is dropped.
LINKS = ("parentUuid", "logicalParentUuid", "sourceToolAssistantUUID", "leafUuid")


def derived_uuid(*parts: str) -> str:
    """A uuid-shaped id (version 5 layout) derived from ``parts``: same input, same id."""
    digest = bytearray(
        hashlib.sha256("\x00".join(parts).encode("utf-8", "surrogatepass")).digest()[:16]
    )
    digest[6] = (digest[6] & 0x0F) | 0x50
    digest[8] = (digest[8] & 0x3F) | 0x80
    h = digest.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def _edit(rec: OutRecord, data: Any = None, /, **fields: Any) -> None:
    """Set fields on a plan record without touching the loaded document's dicts.

    ``data``: the record's data as just read (a thin record's is not parsed again).
    """
    rec.data = {**(rec.data if data is None else data), **fields}
    rec.touch()


@register_format
class ClaudeCode(Format):
    """Claude Code session/subagent JSONL."""

    name = "claude_code"
    client = "Claude Code"
    skips_invalid_lines = True
    incremental = True
    lazy_texts = True
    shares_strings = True
    unique_fields = frozenset({"timestamp"})
    description = "Claude Code session JSONL (~/.claude/projects/**/*.jsonl)"

    def sniff(self, records: Sequence[Any]) -> bool:
        """Claim records typed as Claude Code's, with its uuid keys."""
        if not records or not all(
            isinstance(r, dict) and isinstance(r.get("type"), str) and "payload" not in r
            for r in records
        ):
            return False
        return any(r["type"] in KNOWN_TYPES and any(k in r for k in ID_KEYS) for r in records)

    def to_message(self, data: Any, key: int, line: int, path: str) -> Message | None:
        """Read a user or assistant record as a message; other records have none."""
        if not isinstance(data, dict):
            raise TranscriptError(path, line, "not a Claude Code record (expected a JSON object)")
        rtype = data.get("type")
        message = data.get("message")
        if rtype not in ("user", "assistant") or not isinstance(message, dict):
            return None
        if "content" not in message:
            return None  # a usage stub (drop_before_compaction): never sent to the model
        role = message.get("role")
        if not isinstance(role, str):
            role = rtype
        blocks = blocks_from_content(message.get("content"), CONTENT)
        group = message.get("id") if rtype == "assistant" else None
        return Message(role, tuple(blocks), key, group if isinstance(group, str) else None)

    def apply(self, data: Any, old: Message, new: Message) -> Any:
        """Write ``new`` into the record, and drop the UI copy of a changed result."""
        out = write_content(data, CONTENT, old, new)
        if "toolUseResult" in out and changed_result_ids(old, new):
            # The UI copy of the result (stdout, file contents, originalFile...) would
            # keep every byte the stage removed; the original record is in the pack.
            out = {k: v for k, v in out.items() if k != "toolUseResult"}
        return out

    def new_record(self, message: Message, neighbour: Any) -> Any:
        """Make a record for a message a stage added, in its neighbour's envelope."""
        near = neighbour if isinstance(neighbour, dict) else {}
        text = "\n".join(b.text for b in message.blocks)
        record: dict[str, Any] = {"parentUuid": None}
        record.update({k: near[k] for k in ENVELOPE if k in near})
        uuid = derived_uuid(str(near.get("uuid")), message.role, text)
        content = content_from_blocks(message.blocks)
        if message.role == "assistant":
            record["type"] = "assistant"
            record["message"] = {
                "id": f"msg_ctx_{uuid.replace('-', '')[:24]}",
                "type": "message",
                "role": "assistant",
                "model": "<synthetic>",
                "content": [{"type": "text", "text": content}]
                if isinstance(content, str)
                else content,
                "stop_reason": "end_turn",
                "stop_sequence": None,
            }
        else:
            # Summaries and nudges are user turns (a system message is shown as one).
            record["type"] = "user"
            record["message"] = {"role": "user", "content": content}
        record["uuid"] = uuid
        if "timestamp" in near:
            record["timestamp"] = near["timestamp"]
        return record

    def fixup(self, plan: list[OutRecord]) -> None:
        """Drop emptied records, stub their usage, trim UI copies and relink the uuid tree."""
        drop_emptied(plan)
        self._stub_usage(plan)
        self._reduce_copies(plan)
        self._relink(plan)

    # -- fixup steps ------------------------------------------------------------------

    @staticmethod
    def _stub_usage(plan: list[OutRecord]) -> None:
        """A dropped record with the usage trackers count for a response stays as a stub."""
        seen: set[tuple[str, str]] = set()
        for rec in plan:
            data = rec.orig.data if rec.orig is not None else rec.data
            if usage_of(data) is None:
                continue
            pair = tracker_key(data)
            if pair is not None:
                if pair in seen:
                    continue  # trackers count only the first record of a response
                seen.add(pair)
            if rec.state is State.DROPPED and rec.message is not None:
                rec.state, rec.data, rec.message = State.CHANGED, usage_stub(data), None

    @staticmethod
    def _reduce_copies(plan: list[OutRecord]) -> None:
        """Empty the ``bash_progress`` copies of results a stage shortened."""
        changed: set[str] = set()
        for rec in plan:
            if rec.state is State.CHANGED and rec.orig is not None and rec.orig.message is not None:
                if rec.message is not None:  # None: a stub left for usage trackers
                    changed |= changed_result_ids(rec.orig.message, rec.message)
        if not changed:
            return
        for rec in plan:
            if rec.state is State.DROPPED:
                continue
            data = rec.data
            if not isinstance(data, dict) or data.get("type") != "progress":
                continue
            progress = data.get("data")
            if not isinstance(progress, dict) or progress.get("type") != "bash_progress":
                continue
            owner = data.get("parentToolUseID")
            if owner not in changed and data.get("toolUseID") not in changed:
                continue
            emptied = {k: "" for k in ("output", "fullOutput") if progress.get(k)}
            if emptied:
                _edit(rec, data, data={**progress, **emptied})

    @staticmethod
    def _relink(plan: list[OutRecord]) -> None:
        """Keep the uuid tree valid after drops and inserts."""
        dropped, taken = _left_and_kept(plan)
        if not dropped and not any(r.state is State.NEW for r in plan):
            return
        # A record inserted after P takes P's place as the parent of P's later
        # children, so it lies on the chain Claude Code walks when it resumes. An
        # insert at the very start becomes the root of the first root only (later
        # null parents are compaction boundaries and stay roots).
        redirect: dict[Any, str] = {}
        last_uuid: Any = None
        for rec in plan:
            if rec.state is State.DROPPED:
                continue
            data = rec.data  # read once: a thin record's is parsed again on each read
            if not isinstance(data, dict):
                continue
            if rec.state is State.NEW:
                uuid = _free_uuid(str(data.get("uuid")), taken)
                taken.add(uuid)
                _edit(rec, data, parentUuid=last_uuid, uuid=uuid)
                redirect[last_uuid] = uuid
                last_uuid = uuid
                continue
            updates = _relinked(data, dropped, redirect)
            if updates:
                _edit(rec, data, **updates)
            if isinstance(data.get("uuid"), str):  # a relink changes parents, never uuids
                last_uuid = data["uuid"]

    def assemble(
        self, raw: Input, path: str, records: list[Record], warnings: list[str] | None = None
    ) -> Document:
        """Refuse a file with a record that is not Claude Code's, then assemble it."""
        _require_recognised(records, path)
        return super().assemble(raw, path, records, warnings)

    def text_path(self, block: Block) -> Path_ | None:
        """Return where a block's text is a string of its own in the record."""
        return text_path(block)

    def text_source(self, block: Block, data: Any) -> TextSpan | None:
        """Return the span of a call's input, made again when read."""
        return call_input(block, data)  # a call's input (a file written whole, say)

    def lazy_fields(self, data: dict[str, Any]) -> list[str]:
        """Name the UI copies whose long strings stay in the input."""
        # The copies kept for the UI: toolUseResult (stdout, originalFile...), a
        # progress record's data (Bash output, whole subagent turns), attachments.
        # Their readers (prune_sidecars, the fixup here) expect lazy texts.
        return [k for k, v in data.items() if k != "message" and isinstance(v, (dict, list))]

    def keep_passthrough(self, record: Record, anchor_kept: bool) -> bool:
        """Keep the session title and compaction boundaries whatever happens around them."""
        # The session title stays whatever happens to the messages around it, and so
        # does a compaction boundary: a resume starts its context there.
        data = record.data  # read once: a thin record's is parsed again on each read
        if isinstance(data, dict) and (data.get("type") == "summary" or is_compact_boundary(data)):
            return True
        return anchor_kept

    def skeleton(self, data: Any) -> Any:
        """Return what :func:`resume_chain` reads of a record."""
        # What resume_chain reads of a record, for a re-run's kept prefix.
        if not isinstance(data, dict):
            return None
        return {k: data[k] for k in _CHAIN_FIELDS if k in data}

    def thin(self, data: Any) -> Any:
        """Return the ids, links and types of a record; its message as a bare mark."""
        if not isinstance(data, dict):
            return None
        out = {k: data[k] for k in _THIN_FIELDS if k in data}
        if isinstance(data.get("message"), dict):
            out["message"] = {}  # a message record (its content is in its Message)
        return out

    def resume_start(self, records: Sequence[Record]) -> int | None:
        """Return the first record ``claude --resume`` sends, walking back from the leaf."""
        # `claude --resume` walks parentUuid back from the leaf it resumes; the walk
        # ends at a compaction restart (a compact_boundary, or in 1.0.x the
        # isCompactSummary user record with parentUuid null). It sends what follows
        # that record; without a restart on the chain, the whole file.
        chain = resume_chain(Datas(records))
        if chain and is_chain_restart(records[chain[0]].data):
            return chain[0]
        return -1


_CHAIN_FIELDS = ("type", "subtype", "uuid", "parentUuid", "isSidechain", "isCompactSummary")
"""The fields the resume walk (:func:`resume_chain`) reads."""
_THIN_FIELDS = (*_CHAIN_FIELDS, "logicalParentUuid", "agentId")
"""The fields the resume walk and the client's link rules (``ctx doctor``) read."""


def _require_recognised(records: Sequence[Record], path: str) -> None:
    require_recognised(
        records,
        path,
        lambda d: isinstance(d, dict) and d.get("type") in KNOWN_TYPES,
        "a Claude Code record (type user, assistant, progress, system...)",
    )


def is_chain_restart(data: Any) -> bool:
    """True for a record where the chain a resume walks starts anew after a compaction.

    Claude Code 2.x writes a ``system``/``compact_boundary`` record with ``parentUuid``
    null; 1.0.x has no boundary and restarts the chain at the ``isCompactSummary`` user
    record itself (``parentUuid`` null). Both end the walk back from the leaf.
    """
    if is_compact_boundary(data):
        return True
    return (
        isinstance(data, dict)
        and data.get("type") == "user"
        and data.get("isCompactSummary") is True
        and data.get("parentUuid") is None
    )


def resume_leaf(datas: Sequence[Any]) -> int | None:
    """Key of the record ``claude --resume`` continues from: the last message record.

    Sidechain records (a subagent's, in files of versions that kept them inline) are
    skipped unless the file holds nothing else, as in a subagent file.
    """
    fallback = None
    for key in range(len(datas) - 1, -1, -1):
        data = datas[key]
        if (
            not isinstance(data, dict)
            or data.get("type") not in ("user", "assistant")
            or not isinstance(data.get("uuid"), str)
        ):
            continue
        if data.get("isSidechain") is not True:
            return key
        if fallback is None:
            fallback = key
    return fallback


def resume_chain(datas: Sequence[Any]) -> list[int]:
    """Keys of the records on the chain a resume rebuilds, oldest first.

    The walk follows ``parentUuid`` from :func:`resume_leaf` and stops at a chain
    restart (:func:`is_chain_restart`), at a null parent, or at a parent that names
    no record (a line the client could not parse, for instance). ``datas`` holds
    each line's parsed value (``None`` for a line that is not JSON).
    """
    leaf = resume_leaf(datas)
    if leaf is None:
        return []
    by_uuid: dict[str, int] = {}
    for i, item in enumerate(datas):
        if isinstance(item, dict) and isinstance(item.get("uuid"), str):
            by_uuid.setdefault(item["uuid"], i)
    chain: list[int] = []
    seen: set[int] = set()
    key: int | None = leaf
    while key is not None and key not in seen:
        seen.add(key)
        chain.append(key)
        data = datas[key]
        if is_chain_restart(data):
            break
        parent = data.get("parentUuid")
        key = by_uuid.get(parent) if isinstance(parent, str) else None
    chain.reverse()
    return chain


def is_compact_boundary(data: Any) -> bool:
    """True for the ``system`` record Claude Code writes where it compacted the context."""
    return (
        isinstance(data, dict)
        and data.get("type") == "system"
        and data.get("subtype") == "compact_boundary"
    )


def _left_and_kept(plan: list[OutRecord]) -> tuple[dict[str, Any], set[str]]:
    """The uuids that leave the tree, each with its parent; and those that stay."""
    dropped: dict[str, Any] = {}
    taken: set[str] = set()
    for rec in plan:
        data = rec.data
        if rec.message is None and rec.orig is not None and rec.orig.message is not None:
            data = rec.orig.data  # a usage stub: its record left the tree
            if rec.state is not State.DROPPED and isinstance(data, dict):
                dropped[str(data.get("uuid"))] = data.get("parentUuid")
                continue
        if not isinstance(data, dict) or not isinstance(data.get("uuid"), str):
            continue
        if rec.state is State.DROPPED:
            dropped[data["uuid"]] = data.get("parentUuid")
        elif rec.state is not State.NEW:
            taken.add(data["uuid"])
    return dropped, taken


def _free_uuid(base: str, taken: set[str]) -> str:
    """``base``, or the first uuid derived from it that no record has."""
    uuid, n = base, 1
    while uuid in taken:
        uuid = derived_uuid(base, str(n))
        n += 1
    return uuid


def _relinked(
    data: dict[str, Any], dropped: dict[str, Any], redirect: dict[Any, str]
) -> dict[str, Any]:
    """The link fields of a kept record that must point elsewhere now, and where."""
    updates: dict[str, Any] = {}
    for field in LINKS:
        if field not in data:
            continue
        value = data[field]
        target = past_dropped(dropped, value)
        if field == "parentUuid":
            target = _follow(redirect, target)
        if target != value:
            updates[field] = target
    return updates


def past_dropped(dropped: dict[str, Any], uuid: Any) -> Any:
    """The nearest ancestor of ``uuid`` that stays (``uuid`` itself if it does)."""
    seen: set[str] = set()
    while isinstance(uuid, str) and uuid in dropped and uuid not in seen:
        seen.add(uuid)
        uuid = dropped[uuid]
    return uuid


def _follow(redirect: dict[Any, str], parent: Any) -> Any:
    """The parent after inserts: follow ``redirect``; a root redirect is used once."""
    seen: set[Any] = set()
    while parent in redirect and parent not in seen:
        seen.add(parent)
        if parent is None:
            parent = redirect.pop(None)
        else:
            parent = redirect[parent]
    return parent
