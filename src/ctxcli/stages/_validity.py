"""Helpers for stages that act on records the model never sees (see RecordEdits).

A stage that drops records, or messages whose records hold a place in Claude Code's
``uuid``/``parentUuid`` tree, checks here first that the output will still be a
valid session: every tool call answered as before, and no tree split into two (a
record whose ancestors are all dropped would become a second root, and a resume
would start from the wrong place). The format does the relinking itself; these
checks predict its outcome so the stage can undo itself and say why instead.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from typing import Any

from ctxcli.core.model import Conversation, SourceRecord
from ctxcli.core.pairing import unpaired
from ctxcli.stages.base import StageContext, StageResult


def record_labels(data: Any) -> tuple[str, ...]:
    """The names a record answers to: its ``type`` and ``type:subtype``.

    The subtype is ``subtype`` (``system:compact_boundary``) or, for progress
    records, ``data.type`` (``progress:bash_progress``).
    """
    if not isinstance(data, dict) or not isinstance(data.get("type"), str):
        return ()
    rtype = data["type"]
    sub = data.get("subtype")
    if not isinstance(sub, str):
        inner = data.get("data")
        sub = inner.get("type") if isinstance(inner, dict) else None
    return (rtype, f"{rtype}:{sub}") if isinstance(sub, str) else (rtype,)


def matches(data: Any, names: Collection[str]) -> bool:
    """True if the record's type or type:subtype is one of ``names``."""
    return any(label in names for label in record_labels(data))


def messages_removed(before: Conversation, after: Conversation) -> set[int]:
    """Keys of the records whose message ``after`` no longer holds."""
    kept = {m.key for m in after.messages if m.key is not None}
    return {m.key for m in before.messages if m.key is not None and m.key not in kept}


def trailing_records(records: Sequence[SourceRecord], key: int) -> list[int]:
    """Keys of the records without a message that follow record ``key`` up to the next message.

    Formats drop these with the message before them unless told to keep them.
    """
    out: list[int] = []
    for rec in records[key + 1 :]:
        if rec.message:
            break
        out.append(rec.key)
    return out


def _uuid(data: Any) -> str | None:
    value = data.get("uuid") if isinstance(data, dict) else None
    return value if isinstance(value, str) else None


def chain_problems(records: Sequence[SourceRecord], dropped: Collection[int]) -> list[str]:
    """Why dropping ``dropped`` would break the ``uuid``/``parentUuid`` tree (empty if fine).

    Mirrors the format's relinking: a kept record whose parent is dropped gets the
    nearest kept ancestor. That must never leave one tree with two roots.
    """
    if not dropped:
        return []
    parent: dict[str, Any] = {}
    uuids: list[str | None] = []
    for rec in records:
        data = rec.data  # read once: a large file's records are parsed again when read
        uuid = _uuid(data)
        uuids.append(uuid)
        if uuid is not None:
            parent[uuid] = data.get("parentUuid")
    gone = {u for k in dropped if k < len(uuids) and (u := uuids[k])}
    if not gone:
        return []
    roots: dict[str, str] = {}

    def root_of(uuid: str) -> str:
        # The topmost ancestor in the original file (memoised; cycles stop the walk).
        path: list[str] = []
        node: Any = uuid
        while isinstance(node, str) and node in parent and node not in roots and node not in path:
            path.append(node)
            node = parent[node]
        top = roots.get(node, node) if isinstance(node, str) else (path[-1] if path else uuid)
        for step in path:
            roots[step] = top
        return top

    def resolve(node: Any) -> Any:
        seen: set[str] = set()
        while isinstance(node, str) and node in gone and node not in seen:
            seen.add(node)
            node = parent.get(node)
        return node

    tops: dict[str, list[str]] = {}
    for rec, uuid in zip(records, uuids, strict=True):
        if uuid is None or uuid in gone or rec.key in dropped:
            continue
        if resolve(parent[uuid]) is None:
            tops.setdefault(root_of(uuid), []).append(uuid)
    return [
        f"records {', '.join(repr(u) for u in kept[:3])} would all become roots of one "
        "conversation tree (their common ancestors are dropped)"
        for kept in tops.values()
        if len(kept) > 1
    ]


def validity_problems(
    before: Conversation, after: Conversation, extra_drops: Iterable[int] = ()
) -> list[str]:
    """Why ``after`` would be a worse session file than ``before`` (empty if it is not).

    Checks that tool calls and results stay paired (no new orphans, by the one pairing
    rule ``ctx validate`` and ``ctx doctor`` apply), and that the record tree keeps one
    root per conversation (as ``ctx doctor`` checks it).
    """
    problems: list[str] = []
    new_orphans = len(unpaired(after)) - len(unpaired(before))
    if new_orphans > 0:
        problems.append(f"{new_orphans} tool call(s) or result(s) would lose their partner")
    dropped = messages_removed(before, after) | set(after.record_edits.drop) | set(extra_drops)
    problems += chain_problems(before.records, dropped)
    return problems


def unless_worse(
    stage: str,
    before: Conversation,
    after: Conversation,
    counters: dict[str, int],
    ctx: StageContext,
    notes: Sequence[str] = (),
) -> StageResult:
    """``after`` as the stage's result, or ``before`` unchanged with a note saying why.

    The one refusal the record-editing stages share: an edit that would orphan a tool
    call or split the session tree (:func:`validity_problems`) is not made.
    """
    problems = validity_problems(before, after)
    if problems:
        note = "left unchanged: " + "; ".join(problems)
        ctx.log(f"{stage}: {note}")
        return StageResult(before, dict.fromkeys(counters, 0), (note,))
    return StageResult(after, counters, tuple(notes))
