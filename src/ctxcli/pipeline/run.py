"""Run configured stages in order and collect what each one did."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ctxcli.core.errors import PrefixChanged
from ctxcli.core.model import Conversation, Kind, RecordEdits
from ctxcli.formats.lines import Record
from ctxcli.pipeline.config import StageConfig
from ctxcli.stages import StageContext, StageResult
from ctxcli.store.naming import NamingPolicy

__all__ = ["StageReport", "run_pipeline", "settled_prefix"]


@dataclass
class StageReport:
    """What one stage did, counted with the run's tokenizer."""

    stage: str
    changed: int
    offloaded: int
    tokens_before: int
    tokens_after: int
    counters: dict[str, int] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    fallbacks: tuple[str, ...] = ()
    """What the stage did instead of what it was configured to do (see ``StageResult``)."""

    def to_dict(self) -> dict[str, object]:
        """The stable JSON shape of a stage's stats."""
        return {
            "stage": self.stage,
            "changed": self.changed,
            "offloaded": self.offloaded,
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            **({"counters": dict(self.counters)} if self.counters else {}),
            **({"notes": list(self.notes)} if self.notes else {}),
            **({"fallbacks": list(self.fallbacks)} if self.fallbacks else {}),
        }


def _offload_count(ctx: StageContext) -> int:
    offload = ctx.offload
    return offload.count if isinstance(offload, NamingPolicy) else 0


def _records_touched(before: RecordEdits, after: RecordEdits) -> int:
    """Records a stage newly dropped, stripped fields from or rewrote."""
    if after is before:
        return 0
    stripped = {k for k, f in after.strip.items() if f - before.strip.get(k, frozenset())}
    replaced = {k for k, v in after.set_values.items() if before.set_values.get(k) != v}
    return len((after.drop - before.drop) | ((stripped | replaced) - after.drop))


def _check_frozen(name: str, before: Conversation, after: Conversation) -> None:
    """Hold a stage to its promise over a kept prefix (see ``ctxcli.stages.register``)."""
    frozen = before.frozen
    old, new = before.messages, after.messages
    if (
        len(new) != len(old)
        or any(new[i] is not old[i] for i in range(frozen))
        or after.record_edits != before.record_edits
    ):
        raise PrefixChanged(f"stage {name} changed the kept prefix")


def settled_prefix(
    conv: Conversation,
    frontiers: Sequence[int],
    records: Sequence[Record] | None = None,
    *,
    start: int = 0,
) -> int:
    """How many leading messages a later run over a longer ``conv`` may keep as they are.

    The smallest of the stages' ``frontiers`` (see ``ctxcli.stages.register``), moved
    back so that no kept tool call lacks a result (a result still to come would be
    reduced next to a call its stages cannot read) and, for a file's ``records``, so
    that no kept record lacks its line end (an append would extend that line).
    The calls of the first ``start`` messages are known to be answered among them.
    """
    if not frontiers:
        return 0
    frontier = min(frontiers)
    messages = conv.messages
    if records and not records[-1].terminator:
        while frontier > 0 and messages[frontier - 1].key == len(records) - 1:
            frontier -= 1
    while frontier > 0:
        first_open = frontier
        for mi in range(min(start, frontier), frontier):
            for bi, block in enumerate(messages[mi].blocks):
                if block.kind is Kind.TOOL_CALL:
                    results = conv.results_of((mi, bi))
                    if not results or any(r[0] >= frontier for r in results):
                        first_open = mi
                        break
            if first_open != frontier:
                break
        if first_open == frontier:
            return frontier
        frontier = first_open
    return frontier


def run_pipeline(
    conv: Conversation,
    stages: Sequence[StageConfig],
    ctx: StageContext,
    *,
    trace: list[tuple[str, Conversation]] | None = None,
    frontiers: list[int] | None = None,
    counts: list[list[int]] | None = None,
) -> tuple[Conversation, list[StageReport]]:
    """Run ``stages`` over ``conv``; each stage sees the previous stage's output.

    ``trace``, when given, receives ``(stage name, conversation after it)`` for each
    stage in order (``ctx report`` shows what each stage removed). ``frontiers``
    receives each stage's frontier (0 for a stage that declares none; see
    ``ctxcli.stages.register``) and ``counts`` the tokens of every message of each
    stage's input and of the output: what an incremental re-run keeps of this run.

    Raises:
        PrefixChanged: ``conv`` has a kept prefix (``conv.frozen``) and a stage
            touched it.
    """
    done: list[_Done] = []
    for sc in stages:
        done.append(_run_stage(sc, conv, ctx, frontiers))
        if trace is not None:
            trace.append((sc.use, done[-1].after))
        conv = done[-1].after
    # The totals are taken last: a large input is still being counted in the
    # background while the stages run, and only the report needs every count. Each
    # conversation is counted once: a stage's output is the next one's input.
    tokens: dict[int, list[int]] = {}

    def per_message(c: Conversation) -> list[int]:
        got = tokens.get(id(c))  # every conversation here stays alive in ``done``
        if got is None:
            got = tokens[id(c)] = ctx.tokens.per_message(c)
        return got

    reports = [
        StageReport(
            stage=d.config.use,
            changed=d.changed,
            offloaded=d.offloaded,
            tokens_before=sum(per_message(d.before)),
            tokens_after=sum(per_message(d.after)),
            counters=dict(d.result.counters),
            notes=d.result.notes,
            fallbacks=d.result.fallbacks,
        )
        for d in done
    ]
    if counts is not None:
        counts.extend(per_message(d.before) for d in done)
        counts.append(per_message(conv))
    return conv, reports


@dataclass(frozen=True)
class _Done:
    """One stage's run: its input and output, and what it changed and offloaded."""

    config: StageConfig
    before: Conversation
    after: Conversation
    result: StageResult
    offloaded: int
    changed: int


def _run_stage(
    sc: StageConfig, conv: Conversation, ctx: StageContext, frontiers: list[int] | None
) -> _Done:
    """Run one stage over ``conv``, holding it to a kept prefix and noting its frontier."""
    spec = sc.stage
    files_before = _offload_count(ctx)
    result = spec.fn(conv, sc.options, ctx)
    new = result.conversation
    if conv.frozen:
        _check_frozen(sc.use, conv, new)
    if frontiers is not None:
        frontiers.append(spec.frontier(conv, result, sc.options) if spec.frontier else 0)
    # Texts the stage wrote (truncation previews can be megabytes) are counted in
    # bulk, on every core when they are many, like the input.
    ctx.tokens.prime(new)
    old_ids = {id(m) for m in conv.messages}
    new_ids = {id(m) for m in new.messages}
    changed = sum(1 for m in conv.messages if id(m) not in new_ids) + sum(
        1 for m in new.messages if m.key is None and id(m) not in old_ids
    )
    # Records the model never sees (progress, toolUseResult fields) count too.
    changed += _records_touched(conv.record_edits, new.record_edits)
    return _Done(sc, conv, new, result, _offload_count(ctx) - files_before, changed)
