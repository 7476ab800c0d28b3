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

import hashlib
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from ctxcli.api import Destination, Reduction, RunOptions, reduce
from ctxcli.api.local import open_input
from ctxcli.core.errors import CtxError
from ctxcli.core.io import RELEASE_BYTES, Input, Made, hash_input, release
from ctxcli.formats.claude_code import is_compact_boundary, past_dropped, resume_chain
from ctxcli.pipeline.config import Config, build_config
from ctxcli.services.session_files import CLAUDE, CODEX, identify, is_session_path
from ctxcli.services.tokens.ledger import CountOptions, Progress
from ctxcli.store.change import Record, Transaction
from ctxcli.store.history import new_change, prune
from ctxcli.store.index import HEAD_BYTES, head_digest
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

_HEAD = 1 << 20
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
        output_sha256: the output's sha256 (also when it was written as it was made).
        output_bytes: the output's size.
        chain_messages: messages on the chain a Claude Code resume walks (0 for Codex).
        partial: lines of partial compactions (a preserved segment), left as they are.
    """

    output: bytes
    script: list[Any]
    agent: str
    compactions: list[int] = field(default_factory=list)
    dropped: int = 0
    relinked: int = 0
    snapshot: Path | None = None
    output_sha256: str = ""
    output_bytes: int = 0
    chain_messages: int = 0
    partial: list[int] = field(default_factory=list)


@dataclass
class _Plan:
    """Per input line: absent (kept as is), b"" (dropped) or its new bytes."""

    edits: dict[int, bytes] = field(default_factory=dict)
    before: list[bytes] = field(default_factory=list)  # lines added before the first line
    compactions: list[int] = field(default_factory=list)
    relinked: int = 0
    from_snapshot: bool = False
    partial: list[int] = field(default_factory=list)
    # Claude Code: what a resume's walk reads of each output line, in output order.
    skeleton: list[Any] = field(default_factory=list)


_CHAIN_FIELDS = ("type", "subtype", "uuid", "parentUuid", "isSidechain", "isCompactSummary")


def _loads(unit: bytes | memoryview) -> Any:
    try:
        return orjson.loads(unit)
    except orjson.JSONDecodeError:
        return None


def _lines(data: Input) -> Iterator[bytes]:
    """Yield the lines of ``data`` with their terminators, one copy at a time.

    A map is never copied whole.
    """
    pos, size, given_back = 0, len(data), 0
    while pos < size:
        end = data.find(b"\n", pos)
        end = size if end < 0 else end + 1
        yield data[pos:end]
        pos = end
        if pos - given_back >= RELEASE_BYTES:
            release(data, pos)  # a map's pages read so far go back
            given_back = pos


def _skeleton(data: Any) -> Any:
    if not isinstance(data, dict):
        return None
    light = {k: data[k] for k in _CHAIN_FIELDS if k in data}
    if "message" in data:
        light["message"] = True
    return light


def _plan_claude(data_in: Input, progress: Progress | None) -> _Plan:
    plan = _Plan()
    redirect: dict[str, Any] = {}  # dropped uuid -> the record that stands in for it
    known: set[str] = set()
    last_message: str | None = None  # the newest main-chain message so far
    partial_boundaries: set[str] = set()
    done, total = 0, len(data_in)
    for i, unit in enumerate(_lines(data_in)):
        done += len(unit)
        if progress is not None and i % 4096 == 0:
            progress(done, total)
        data = _loads(unit)
        if not isinstance(data, dict):
            plan.skeleton.append(None)
            continue
        uuid = data.get("uuid")
        if is_compact_boundary(data) and _preserves_segment(data):
            # A partial compaction keeps some earlier messages after its summary: how
            # they link back is not known here, so it stays as it is (and its summary).
            plan.partial.append(i + 1)
            if isinstance(uuid, str):
                partial_boundaries.add(uuid)
                known.add(uuid)
            plan.skeleton.append(_skeleton(data))
            continue
        if is_compact_boundary(data):
            logical = data.get("logicalParentUuid")
            target = logical if isinstance(logical, str) and logical in known else last_message
            if isinstance(uuid, str):
                redirect[uuid] = target
            plan.edits[i] = b""
            plan.compactions.append(i + 1)
            continue
        if (
            data.get("type") == "user"
            and data.get("isCompactSummary") is True
            and data.get("parentUuid") not in partial_boundaries
        ):
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
        plan.skeleton.append(_skeleton(data))
        if isinstance(uuid, str):
            known.add(uuid)
            if data.get("type") in ("user", "assistant") and data.get("isSidechain") is not True:
                last_message = uuid
    return plan


def _preserves_segment(data: dict[str, Any]) -> bool:
    meta = data.get("compactMetadata")
    return bool(data.get("hasPreservedSegment")) or (
        isinstance(meta, dict) and bool(meta.get("preservedSegment"))
    )


def _is_compacted(data: Any) -> bool:
    return isinstance(data, dict) and data.get("type") == "compacted"


def _plan_codex(data_in: Input, snapshot: bytes | None) -> _Plan:
    plan = _Plan()
    last = -1
    items_before = 0
    for i, unit in enumerate(_lines(data_in)):
        if b'"compacted"' not in unit and last >= 0:
            continue  # only the records before the first compaction are counted
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
    kept = [bytes(u) for u in _lines(snapshot) if not _is_compacted(_loads(u))]
    snap_items = sum(
        1 for u in kept if isinstance(d := _loads(u), dict) and d.get("type") == "response_item"
    )
    if snap_items <= items_before:
        return plan  # the file still holds at least what the snapshot does
    plan.from_snapshot = True
    plan.before = [u if u.endswith(b"\n") else u + b"\n" for u in kept]
    for i in range(last):
        plan.edits[i] = b""
    return plan


def plan_uncompact(
    raw: Input,
    add_original: Callable[[bytes], list[Any]],
    *,
    snapshot: bytes | None = None,
    snapshot_path: Path | None = None,
    into: BinaryIO | None = None,
    progress: Progress | None = None,
) -> Uncompacted:
    """The session ``raw`` with every compaction undone, and its restore script.

    ``add_original`` keeps the original of a dropped or edited line and returns its
    restore op (:meth:`~ctxcli.store.disk.OffloadStore.add_original`). ``snapshot`` is a
    copy of a Codex rollout taken before the client rewrote it (``snapshot_path``, where
    it is kept, is what the result names). With ``into`` the output is written there as
    it is made (``Uncompacted.output`` is then empty); ``progress`` gets bytes read.

    Raises:
        CtxError: the file is neither a Claude Code session nor a Codex rollout.
    """
    agent, _sid = identify(Path("session.jsonl"), bytes(raw[:_HEAD]))
    plan = _plan_claude(raw, progress) if agent == CLAUDE else _plan_codex(raw, snapshot)
    out = Made(into)
    script = _emit(raw, plan, add_original, out)
    result = Uncompacted(
        out.bytes(),
        script,
        agent,
        plan.compactions,
        sum(1 for v in plan.edits.values() if v == b""),
        plan.relinked,
        snapshot_path if plan.from_snapshot else None,
        output_sha256=out.hash.hexdigest(),
        output_bytes=out.size,
    )
    result.partial = plan.partial
    if agent == CLAUDE:
        skeleton = plan.skeleton
        result.chain_messages = sum(
            1 for k in resume_chain(skeleton) if skeleton[k] and "message" in skeleton[k]
        )
    return result


def _emit(
    raw: Input, plan: _Plan, add_original: Callable[[bytes], list[Any]], out: Made
) -> list[Any]:
    script: list[Any] = []

    def run(op: str) -> None:
        if script and script[-1][0] == op:
            script[-1][1] += 1
        else:
            script.append([op, 1])

    for line in plan.before:
        out.write(line)
        run("s")
    for i, unit in enumerate(_lines(raw)):
        edit = plan.edits.get(i)
        if edit is None:
            out.write(unit)
            run("c")
            continue
        script.append(add_original(unit))
        if edit:
            out.write(edit)
            run("s")
    return script


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
    """Build the client's resume preset with a token budget.

    It clears old tool outputs and keeps the newest part whole once a resume would send
    more than ``budget_tokens``.
    """
    preset = "codex-resume" if agent == CODEX else "claude-code-resume"
    data = {
        "preset": preset,
        "stages": [
            {"use": "clear_tool_results", "max_tokens": budget_tokens},
            {
                "use": "keep_last",
                "keep_messages": 10**9,
                "max_tokens": budget_tokens,
                "start_on_user": True,
            },
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
    progress: Progress | None = None,
) -> UncompactResult:
    """Write ``path`` (or, with ``output``, that file) with its compactions undone.

    Two changes, each recorded so ``ctx restore`` undoes both byte for byte: the
    uncompaction (:func:`plan_uncompact`), then a lossless reduction of the result to
    ``budget_tokens`` (default :func:`default_budget`). In place, the session is
    left alone while it looks in use, unless ``force``. ``progress`` gets
    ``(done, total)`` while the file is read and while its tokens are counted.

    Raises:
        LiveSessionError: in place, the session looks in use and ``force`` is not set.
        CtxError: the file is not a Claude Code session or a Codex rollout, or
            ``output`` is the input.
    """
    if output is not None and output.resolve() == path.resolve():
        raise CtxError(f"{output}: the output would overwrite the input; name another file.")
    agent, _sid = identify(path, _head(path))
    snapshot = _snapshot(path, agent)
    budget = budget_tokens if budget_tokens is not None else default_budget(agent)
    config = budget_config(agent, budget)
    run = RunOptions(force=True, log=log, counting=CountOptions(progress=progress))
    if output is None:
        target, plan, record = _in_place(path, force, live_seconds, snapshot, progress)
        result = UncompactResult(target, plan, budget, record=record)
        if plan.compactions:
            # Streamed: the reduced session is written as it is made, never held whole.
            dest = Destination(in_place=True, stream=True)
            result.reduction = reduce(str(target), dest, config=config, options=run)
    else:
        result = _into_file(path, output, snapshot, progress, budget, config, run)
    if result.reduction is not None:
        for stage in result.reduction.report.stages:
            if stage.stage == "keep_last":
                result.left_out.extend(n for n in stage.notes if "hold every message" not in n)
    return result


def _into_file(
    path: Path,
    output: Path,
    snapshot: Path | None,
    progress: Progress | None,
    budget: int,
    config: Config,
    run: RunOptions,
) -> UncompactResult:
    """Stage the uncompacted file beside the output and reduce it into the output.

    As a mapped input, written as it is made (a 1 GB session is never held whole); its
    record is the output's, so a restore of the output finds it after the reduction's.
    """
    staged = output.with_name(f".{output.name}.uncompacted-{os.getpid()}")
    try:
        plan, record = _to_file(path, output, staged, snapshot, progress)
        result = UncompactResult(output, plan, budget, record=record)
        if plan.compactions:
            dest = Destination(output=str(output), stream=True)
            result.reduction = reduce(str(staged), dest, config=config, options=run)
    finally:
        staged.unlink(missing_ok=True)
    return result


def _head(path: Path) -> bytes:
    try:
        with open(path, "rb") as fh:
            return fh.read(_HEAD)
    except OSError as exc:
        raise CtxError(f"{path}: cannot read it ({exc.strerror or exc}).") from None


def _header(agent: str, data: Input, plan: Uncompacted, name: str) -> Header:
    return Header.new(
        format=agent,
        units="lines",
        kind="uncompact",
        input=InputSide(
            name=name, sha256=hash_input(hashlib.sha256(), data).hexdigest(), bytes=len(data)
        ),
        output=Side(sha256=plan.output_sha256, bytes=plan.output_bytes),
    )


def _in_place(
    path: Path, force: bool, live_seconds: int, snapshot: Path | None, progress: Progress | None
) -> tuple[Path, Uncompacted, Path | None]:
    # Up to the last complete line, as a reduction in place: a line the client is still
    # writing is carried after the output, so the line it completes stays outside the record.
    with InPlace(path, live_seconds=None, mapped=True) as change:
        raw = change.body
        # A file outside the clients' folders is nobody's session to be in use.
        live = None if force or not is_session_path(change.path) else live_seconds
        change.check_live(live)
        record = new_change(change.path, "uncompact")
        with Transaction(Record(record, str(record)), change=change, stream=True) as tx:
            plan = _plan(raw, tx, snapshot, progress)
            if not plan.compactions:
                tx.cancel()
                prune(change.path)
                return change.path, plan, None
            header = _header(plan.agent, raw, plan, str(change.path))
            tx.commit(header, plan.script, input_head=head_digest(raw))
    return change.path, plan, record


def _to_file(
    path: Path, output: Path, staged: Path, snapshot: Path | None, progress: Progress | None
) -> tuple[Uncompacted, Path | None]:
    data, _st = open_input(str(path))  # a map: the input is never held whole
    record = new_change(output, "uncompact")
    with Transaction(Record(record, str(record)), file=staged, stream=True) as tx:
        plan = _plan(data, tx, snapshot, progress)
        if not plan.compactions:
            tx.cancel()
            prune(output)
            return plan, None
        # The input's whole path: a restore tells this record (made from another file)
        # from the output's own changes by it.
        header = _header(plan.agent, data, plan, os.path.realpath(path))
        tx.commit(header, plan.script, input_head=head_digest(bytes(data[:HEAD_BYTES])))
    return plan, record


def _plan(
    raw: Input, tx: Transaction, snapshot: Path | None, progress: Progress | None
) -> Uncompacted:
    assert tx.store is not None and tx.out is not None
    copy = snapshot.read_bytes() if snapshot is not None else None
    return plan_uncompact(
        raw,
        tx.store.add_original,
        snapshot=copy,
        snapshot_path=snapshot,
        into=tx.out,
        progress=progress,
    )
