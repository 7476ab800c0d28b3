"""Undo a client's compaction: the conversation from before it back in a session, losslessly.

A compaction replaces a session's context by a summary, yet the file still holds what
came before it. Claude Code 2.x writes a ``system``/``compact_boundary`` record (its
``parentUuid`` null, so a resume stops walking back there) followed by the summary, a
user record with ``isCompactSummary``; 1.0.x has no boundary and restarts the chain at
the summary itself. Codex writes a ``compacted`` record, which a resume replaces the
history with (``replacement_history``, or the summary and the user messages); the
``response_item`` records before it stay in the rollout unless Codex rewrote the file, in
which case the newest PreCompact snapshot (:mod:`ctxcli.store.snapshots`) holds them.

:func:`plan_uncompact` drops the boundaries, the summaries and the ``compacted``
records, and links the first record after each compaction to the last message before
it, so the chain a resume walks runs from the newest record back to the very first
one. Every line it drops or edits goes to the restore pack; ``ctx restore`` gives the
compacted file back byte for byte. :func:`uncompact` then reduces the result losslessly
(the client's resume preset; tool outputs offloaded with hints) to a token budget and,
when even that does not fit, keeps the newest part whole and says where the rest is.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from ctxcli.api import Destination, Reduction, RunOptions, read_input, reduce
from ctxcli.core.errors import CtxError
from ctxcli.core.protocols import sha256, split_units
from ctxcli.formats.claude_code import is_compact_boundary, past_dropped, resume_chain
from ctxcli.pipeline.config import Config, build_config
from ctxcli.services.session_files import CLAUDE, CODEX, identify, is_session_path
from ctxcli.store.change import Record, Transaction
from ctxcli.store.history import new_change, prune
from ctxcli.store.index import head_digest
from ctxcli.store.inplace import DEFAULT_LIVE_SECONDS, InPlace
from ctxcli.store.manifest import Header, InputSide, Side
from ctxcli.store.snapshots import snapshots_of

__all__ = [
    "CLAUDE_WINDOW_TOKENS",
    "CODEX_WINDOW_TOKENS",
    "Uncompacted",
    "UncompactResult",
    "default_budget",
    "plan_uncompact",
    "uncompact",
]

CLAUDE_WINDOW_TOKENS = 200_000
"""Claude Code's context window (Sonnet/Opus 4.x without the 1M beta)."""
CLAUDE_RESERVE_TOKENS = 80_000
"""Left for work: the system prompt and tools (~20k), the auto-compact buffer Claude Code
2.x keeps free (45k, ``/context``: "Autocompact buffer") and room for the next turns."""
CODEX_WINDOW_TOKENS = 272_000
"""Codex's window for gpt-5-codex (``model_context_window``)."""
CODEX_RESERVE_TOKENS = 112_000
"""Left for work: Codex compacts automatically at 90% of the window; the rest is turns."""


def default_budget(agent: str) -> int:
    """Tokens an uncompacted session may send on resume: the window minus a work reserve."""
    if agent == CODEX:
        return CODEX_WINDOW_TOKENS - CODEX_RESERVE_TOKENS
    return CLAUDE_WINDOW_TOKENS - CLAUDE_RESERVE_TOKENS


@dataclass
class Uncompacted:
    """What :func:`plan_uncompact` found and made.

    Attributes:
        output: the session with the conversation from before each compaction back.
        script: the restore script from ``output`` to the input.
        agent: ``claude`` or ``codex``.
        compactions: 1-based lines of the boundaries / restarts / ``compacted`` records.
        dropped: lines dropped (boundaries, summaries, ``compacted`` records).
        relinked: records whose parent link was moved to the message before a compaction.
        snapshot: the snapshot a rewritten Codex rollout was rebuilt from.
        chain_messages: messages on the chain a Claude Code resume walks (0 for Codex).
    """

    output: bytes
    script: list[Any]
    agent: str
    compactions: list[int] = field(default_factory=list)
    dropped: int = 0
    relinked: int = 0
    snapshot: Path | None = None
    chain_messages: int = 0


@dataclass
class _Plan:
    """Per input line: None (kept as is), b"" (dropped) or its new bytes."""

    edits: dict[int, bytes] = field(default_factory=dict)
    before: list[bytes] = field(default_factory=list)  # lines added before the first line
    compactions: list[int] = field(default_factory=list)
    relinked: int = 0
    from_snapshot: bool = False


def _loads(unit: bytes | memoryview) -> Any:
    try:
        return orjson.loads(unit)
    except orjson.JSONDecodeError:
        return None


def _plan_claude(units: list[bytes]) -> _Plan:
    plan = _Plan()
    redirect: dict[str, Any] = {}  # dropped uuid -> the record that stands in for it
    known: set[str] = set()
    last_message: str | None = None  # the newest main-chain message so far

    for i, unit in enumerate(units):
        data = _loads(unit)
        if not isinstance(data, dict):
            continue
        uuid = data.get("uuid")
        if is_compact_boundary(data):
            logical = data.get("logicalParentUuid")
            target = logical if isinstance(logical, str) and logical in known else last_message
            if isinstance(uuid, str):
                redirect[uuid] = target
            plan.edits[i] = b""
            plan.compactions.append(i + 1)
            continue
        if data.get("type") == "user" and data.get("isCompactSummary") is True:
            parent = data.get("parentUuid")
            if parent is None:  # 1.0.x: the summary restarts the chain itself
                plan.compactions.append(i + 1)
                target = last_message
            else:
                target = past_dropped(redirect, parent)
            if isinstance(uuid, str):
                redirect[uuid] = target
            plan.edits[i] = b""
            continue
        changed = False
        for name in ("parentUuid", "logicalParentUuid"):
            value = data.get(name)
            if isinstance(value, str) and value in redirect:
                data[name] = past_dropped(redirect, value)
                changed = True
        if changed:
            plan.edits[i] = orjson.dumps(data) + b"\n"
            plan.relinked += 1
        if isinstance(uuid, str):
            known.add(uuid)
            if data.get("type") in ("user", "assistant") and data.get("isSidechain") is not True:
                last_message = uuid
    return plan


def _is_compacted(data: Any) -> bool:
    return isinstance(data, dict) and data.get("type") == "compacted"


def _plan_codex(units: list[bytes], snapshot: bytes | None) -> _Plan:
    plan = _Plan()
    last = -1
    items_before = 0
    for i, unit in enumerate(units):
        data = _loads(unit)
        if _is_compacted(data):
            plan.edits[i] = b""
            plan.compactions.append(i + 1)
            last = i
        elif last < 0 and isinstance(data, dict) and data.get("type") == "response_item":
            items_before += 1
    if snapshot is None or last < 0:
        return plan
    # A rollout Codex rewrote: the snapshot holds what came before the compaction. Its
    # records (but its own compactions) come first; the rewritten part before the newest
    # ``compacted`` record goes to the restore pack, what followed it stays.
    kept = [u for u in split_units(snapshot) if not _is_compacted(_loads(u))]
    snap_items = sum(
        1 for u in kept if isinstance(d := _loads(u), dict) and d.get("type") == "response_item"
    )
    if snap_items <= items_before:
        return plan  # the file still holds at least what the snapshot does
    plan.from_snapshot = True
    plan.before = [bytes(u) if bytes(u).endswith(b"\n") else bytes(u) + b"\n" for u in kept]
    for i in range(last):
        plan.edits[i] = b""
    return plan


def plan_uncompact(
    raw: bytes,
    add_original: Callable[[bytes], list[Any]],
    *,
    snapshot: bytes | None = None,
    snapshot_path: Path | None = None,
) -> Uncompacted:
    """The session ``raw`` with every compaction undone, and its restore script.

    ``add_original`` keeps the original of a dropped or edited line and returns its
    restore op (:meth:`~ctxcli.store.disk.OffloadStore.add_original`). ``snapshot`` is a
    copy of a Codex rollout taken before the client rewrote it (``snapshot_path``, where
    it is kept, is what the result names).

    Raises:
        CtxError: the file is neither a Claude Code session nor a Codex rollout.
    """
    agent, _sid = identify(Path("session.jsonl"), raw)
    units = split_units(raw)
    plan = _plan_claude(units) if agent == CLAUDE else _plan_codex(units, snapshot)
    out, script = _emit(units, plan, add_original)
    result = Uncompacted(
        out,
        script,
        agent,
        plan.compactions,
        sum(1 for v in plan.edits.values() if v == b""),
        plan.relinked,
        snapshot_path if plan.from_snapshot else None,
    )
    if agent == CLAUDE:
        datas = [_loads(u) for u in split_units(out)]
        chain = resume_chain(datas)
        result.chain_messages = sum(
            1 for k in chain if isinstance(datas[k], dict) and "message" in datas[k]
        )
    return result


def _emit(
    units: list[bytes], plan: _Plan, add_original: Callable[[bytes], list[Any]]
) -> tuple[bytes, list[Any]]:
    out: list[bytes] = []
    script: list[Any] = []

    def run(op: str) -> None:
        if script and script[-1][0] == op:
            script[-1][1] += 1
        else:
            script.append([op, 1])

    for line in plan.before:
        out.append(line)
        run("s")
    for i, unit in enumerate(units):
        edit = plan.edits.get(i)
        if edit is None:
            out.append(bytes(unit))
            run("c")
            continue
        script.append(add_original(bytes(unit)))
        if edit:
            out.append(edit)
            run("s")
    return b"".join(out), script


@dataclass
class UncompactResult:
    """What :func:`uncompact` did.

    Attributes:
        path: the file written (the session itself, in place).
        plan: the uncompaction (``compactions`` empty: none found, nothing written).
        budget_tokens: what a resume may send.
        reduction: the lossless reduction to the budget (None: nothing to reduce).
        record: the uncompaction's change record.
        left_out: notes naming what did not fit and the file that holds it.
    """

    path: Path
    plan: Uncompacted
    budget_tokens: int
    reduction: Reduction | None = None
    record: Path | None = None
    left_out: list[str] = field(default_factory=list)

    @property
    def resume_tokens(self) -> int | None:
        """Tokens a resume of the result sends (as counted by the reduction)."""
        if self.reduction is None:
            return None
        report = self.reduction.report
        return (
            report.resume_tokens_after
            if report.resume_tokens_after is not None
            else (report.tokens_after)
        )


def budget_config(agent: str, budget_tokens: int) -> Config:
    """The client's resume preset, clearing old tool outputs and keeping the newest part
    whole once a resume would send more than ``budget_tokens``."""
    preset = "codex-resume" if agent == CODEX else "claude-code-resume"
    data = {
        "preset": preset,
        "stages": [
            {"use": "clear_tool_results", "max_tokens": budget_tokens},
            {"use": "keep_last", "n": 10**9, "max_tokens": budget_tokens, "start_on_user": True},
        ],
    }
    return build_config(data, f"ctx uncompact (preset {preset}, budget {budget_tokens})")


def _snapshot(path: Path, agent: str) -> Path | None:
    """The newest PreCompact snapshot of a Codex rollout (Claude Code keeps its records)."""
    if agent != CODEX:
        return None
    found = snapshots_of(path)
    return found[0].path if found else None


def uncompact(
    path: Path,
    *,
    output: Path | None = None,
    budget_tokens: int | None = None,
    force: bool = False,
    live_seconds: int = DEFAULT_LIVE_SECONDS,
    log: Callable[[str], None] | None = None,
) -> UncompactResult:
    """Write ``path`` (or, with ``output``, that file) with its compactions undone.

    Two changes, each recorded so ``ctx restore`` undoes both byte for byte: the
    uncompaction (:func:`plan_uncompact`), then a lossless reduction of the result to
    ``budget_tokens`` (default :func:`default_budget`). In place, the session is
    left alone while it looks in use, unless ``force``.

    Raises:
        LiveSessionError: in place, the session looks in use and ``force`` is not set.
        CtxError: the file is not a Claude Code session or a Codex rollout, or
            ``output`` is the input.
    """
    if output is not None and output.resolve() == path.resolve():
        raise CtxError(f"{output}: the output would overwrite the input; name another file.")
    raw = read_input(str(path))
    agent, _sid = identify(path, raw)
    snapshot = _snapshot(path, agent)
    budget = budget_tokens if budget_tokens is not None else default_budget(agent)
    if output is None:
        target, plan, record = _in_place(path, force, live_seconds, snapshot)
    else:
        target, plan, record = _to_file(path, raw, output, snapshot)
    result = UncompactResult(target, plan, budget, record=record)
    if not plan.compactions:
        return result
    notes: list[str] = []

    def keep(note: str) -> None:
        notes.append(note)
        if log is not None:
            log(note)

    result.reduction = reduce(
        str(target),
        Destination(in_place=True),
        config=budget_config(agent, budget),
        options=RunOptions(force=True, log=keep),
    )
    reports = result.reduction.report.stages
    for stage in reports:
        if stage.stage == "keep_last":
            result.left_out.extend(n for n in stage.notes if "nothing dropped" not in n)
    return result


def _header(agent: str, raw: bytes, plan: Uncompacted, name: str) -> Header:
    return Header.new(
        format=agent,
        units="lines",
        kind="uncompact",
        input=InputSide(name=name, sha256=sha256(raw), bytes=len(raw)),
        output=Side(sha256=sha256(plan.output), bytes=len(plan.output)),
    )


def _in_place(
    path: Path, force: bool, live_seconds: int, snapshot: Path | None
) -> tuple[Path, Uncompacted, Path | None]:
    with InPlace(path, live_seconds=None, lines=False) as change:
        raw = change.raw
        # A file outside the clients' folders is nobody's session to be in use.
        live = None if force or not is_session_path(change.path) else live_seconds
        change.check_live(live)
        record = new_change(change.path, "uncompact")
        with Transaction(Record(record, str(record)), change=change) as tx:
            assert tx.store is not None
            plan = _plan(raw, tx.store.add_original, snapshot)
            if not plan.compactions:
                tx.cancel()
                prune(change.path)
                return change.path, plan, None
            header = _header(plan.agent, raw, plan, str(change.path))
            tx.commit(header, plan.script, output=plan.output, input_head=head_digest(raw))
    return change.path, plan, record


def _to_file(
    path: Path, raw: bytes, output: Path, snapshot: Path | None
) -> tuple[Path, Uncompacted, Path | None]:
    record = new_change(output, "uncompact")
    with Transaction(Record(record, str(record)), file=output) as tx:
        assert tx.store is not None
        plan = _plan(raw, tx.store.add_original, snapshot)
        if not plan.compactions:
            tx.cancel()
            prune(output)
            return output, plan, None
        header = _header(plan.agent, raw, plan, str(path))
        tx.commit(header, plan.script, output=plan.output, input_head=head_digest(raw))
    return output, plan, record


def _plan(
    raw: bytes, add_original: Callable[[bytes], list[Any]], snapshot: Path | None
) -> Uncompacted:
    copy = snapshot.read_bytes() if snapshot is not None else None
    return plan_uncompact(raw, add_original, snapshot=copy, snapshot_path=snapshot)
