"""The live loop: keep the decisions made for a prefix; work only on what is new.

A conversation grows by appending. Every consumer that reduces it again and again on
every model call (the in-process :class:`~ctxcli.agent.reducer.Reducer`, the proxy, the
cost counterfactual) needs the same thing: recognise the part it has seen, send that part exactly
as it sent it before (same bytes: the provider's prompt cache stays valid), and run
the chain only over the conversation made of that already reduced part plus the new
records.

How it works:

- **Identity.** Input record *i* is identified by a hash chain over the original
  records ``0..i`` (:func:`chain_digests`), so "the first *k* records are the ones
  seen before" is one comparison per record, and a state can be matched by the
  last digest of its prefix alone (what a manifest or a proxy keeps).
- **Decisions.** :class:`PrefixState` holds, for the previous call, what was sent
  for each output record (its data, parsed once) and which input record it stands
  for. The entries standing for the first *k* input records are reused verbatim:
  their dict objects, their parsed messages, their token counts.
- **Work.** The stages run on ``kept entries + new records``. They are idempotent and
  recognise their own marks, so the kept part costs a scan, not a rewrite; a stage may
  still cut deeper into it (a budget crossed again), and the result says where the
  sent prefix first changed (``changed_prefix_at``).
- **Counting.** Token counts are memoised per message object (the kept ones are the
  same objects call after call) and per text, so only new texts reach the tokenizer.

The caller chooses the format (how a dict is a message) and the stage chain; this
module does no I/O beyond what the stages do through their offload store. A transcript
*file* that grew is re-run by :mod:`ctxcli.pipeline.rerun` (the ``incremental``
setting), which keeps its decisions in the manifest instead.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import orjson

from ctxcli.core.errors import PrefixChanged, TranscriptError
from ctxcli.core.model import Conversation, Message
from ctxcli.formats.format import Format, OutRecord, State
from ctxcli.formats.lines import Record
from ctxcli.pipeline.config import StageConfig
from ctxcli.pipeline.run import StageReport, run_pipeline, settled_prefix
from ctxcli.stages import StageContext

__all__ = [
    "Entry",
    "Increment",
    "IncrementOptions",
    "PrefixState",
    "chain_digests",
    "common_prefix",
    "first_difference",
    "record_digest",
    "run_increment",
]

_ROOT = b"ctx-chain-v1"
_DUMP_OPTIONS = orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS


def record_digest(previous: bytes, data: Any) -> bytes:
    """The chain digest of a record given the digest of the records before it.

    The record is hashed in a canonical JSON form (sorted keys), so two dicts that
    are equal hash equal whatever their key order or origin.
    """
    try:
        body = orjson.dumps(data, option=_DUMP_OPTIONS, default=repr)
    except TypeError:  # integers past 64 bits, lone surrogates: the stdlib copes
        body = json.dumps(data, sort_keys=True, default=repr).encode("utf-8", "surrogatepass")
    return hashlib.blake2b(previous + body, digest_size=16).digest()


def chain_digests(records: Sequence[Any], *, start: bytes = _ROOT) -> list[bytes]:
    """The hash chain of ``records``: element *i* identifies records ``0..i``.

    ``start`` seeds the chain (a system prompt's digest, say).
    """
    out: list[bytes] = []
    previous = start
    for data in records:
        previous = record_digest(previous, data)
        out.append(previous)
    return out


def common_prefix(a: Sequence[bytes], b: Sequence[bytes]) -> int:
    """How many leading digests two chains share (a chain diverges for good)."""
    n = min(len(a), len(b))
    if n and a[n - 1] == b[n - 1]:
        return n  # the usual case: one chain extends the other
    lo, hi = 0, n
    # Chains agree on a prefix and disagree after it: binary search the boundary.
    while lo < hi:
        mid = (lo + hi) // 2
        if a[mid] == b[mid]:
            lo = mid + 1
        else:
            hi = mid
    return lo


@dataclass
class Entry:
    """One record of what was sent: its data, its parsed message, the input it stands for.

    ``anchor`` is the index of the input record this output record was made from; a
    record a stage created (a nudge, a summary) takes the anchor of the input record
    before it (-1 at the start).
    """

    record: Record
    anchor: int
    created: bool = False

    @property
    def data(self) -> Any:
        """What was sent."""
        return self.record.data

    @property
    def message(self) -> Message | None:
        """What was sent, parsed (its key is the entry's position)."""
        return self.record.message

    @property
    def source(self) -> int | None:
        """The input record this entry was made from (None for one a stage created)."""
        return None if self.created else self.anchor


@dataclass
class PrefixState:
    """The decisions of the previous call, kept for the next one.

    ``chain`` identifies the input records seen last time, ``tokens`` their original
    token counts, ``entries`` what was sent for them, in order.
    """

    chain: list[bytes] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    entries: list[Entry] = field(default_factory=list)
    originals: list[Any] | None = None
    settled: int | None = None
    """Leading input records whose decisions no appended record can change (the
    stages' frontiers, :func:`~ctxcli.pipeline.run.settled_prefix`); None when a stage
    of the chain declares no frontier."""
    """Copies of the input records, when kept: the prefix is then recognised by
    comparing records (a memcmp of their strings) instead of hashing them all again.
    Without them (bounded memory) every call hashes every record."""

    def shared_prefix(self, records: Sequence[Any], seed: bytes) -> tuple[int, list[bytes]]:
        """How many leading records are the ones seen last time, and the chain of all."""
        if self.originals is not None and len(self.originals) == len(self.chain):
            k = 0
            limit = min(len(records), len(self.originals))
            originals = self.originals
            while k < limit and (records[k] is originals[k] or records[k] == originals[k]):
                k += 1
            start = self.chain[k - 1] if k else seed
            return k, self.chain[:k] + chain_digests(records[k:], start=start)
        chain = chain_digests(records, start=seed)
        return common_prefix(chain, self.chain), chain

    @property
    def sent(self) -> list[Any]:
        """The records sent last time."""
        return [e.data for e in self.entries]

    def kept_entries(self, k: int) -> list[Entry]:
        """The leading entries standing for input records ``< k``."""
        if k <= 0:
            return []
        out: list[Entry] = []
        for entry in self.entries:
            if entry.anchor >= k:
                break
            out.append(entry)
        return out


@dataclass(frozen=True)
class Increment:
    """What one incremental call produced.

    Attributes:
        sent: the records to send (kept ones are the very objects sent before).
        reused: leading input records whose decisions were kept.
        changed_prefix_at: index of the first sent record that differs from the
            previous call's (None: the previous request is a prefix of this one).
        tokens_before: tokens of the input records as given.
        tokens_after: tokens of ``sent``.
        stages: what each stage did in this call.
    """

    sent: list[Any]
    reused: int
    changed_prefix_at: int | None
    tokens_before: int
    tokens_after: int
    stages: list[StageReport]


@dataclass(frozen=True, kw_only=True)
class IncrementOptions:
    """How :func:`run_increment` reads a call's records and what it keeps for the next.

    Attributes:
        seed: starts the hash chain (a system prompt's digest, say).
        path: what errors call the list: they name a record ``path[i]``.
        index_offset: records the caller prepended; an error's ``i`` is the record's
            index minus this.
        keep_originals: keep a copy of the input records in the state, so the next
            call recognises its prefix by comparison rather than by hashing every
            record; False holds only the digests and what was sent (bounded memory).
        exact: keep only the settled records (when every stage declares a frontier),
            so every call sends what a full reduction of the whole list would.
    """

    seed: bytes = _ROOT
    path: str = "messages"
    index_offset: int = 0
    keep_originals: bool = True
    exact: bool = False


def run_increment(
    state: PrefixState,
    records: Sequence[Any],
    *,
    fmt: Format,
    stages: Sequence[StageConfig],
    ctx: StageContext,
    options: IncrementOptions = IncrementOptions(),
) -> tuple[Increment, PrefixState]:
    """Reduce ``records`` reusing ``state``'s decisions for the prefix they share with it.

    Returns the outcome and the state for the next call (``state`` is not changed).
    ``ctx`` is what the stages get (its ledger memoises counts across calls);
    ``options`` says how records are named and what the state keeps.

    Two policies for what is kept. By default (cache first) everything shared keeps
    what was sent, and the stages run again over that reduced prefix: a stage may cut
    deeper into it, but it clears less than a full run would, so the sent prefix
    changes less often (the prompt cache stays warm; tests/agent/test_integration_*.py keep
    at least half the calls' prefixes). ``options.exact`` (when every stage declares a
    frontier) keeps only the settled records, as the file re-runs of
    :mod:`ctxcli.pipeline.rerun` do, so every call sends what a full reduction of the
    whole list would (tests/pipeline/test_rerun.py).

    Raises:
        TranscriptError: a new record is not a message of ``fmt``.
        CtxError: a stage or the offload store failed.
    """
    k, chain = state.shared_prefix(records, options.seed)
    exact = options.exact and bool(stages) and all(sc.stage.frontier is not None for sc in stages)
    call = _Call(records, chain, fmt, stages, ctx, replace(options, exact=exact), state.sent, k)
    try:
        return _increment(call, state, k)
    except PrefixChanged:
        # A stage reached into the kept prefix: decide everything again.
        return _increment(call, PrefixState(), 0)


@dataclass(frozen=True)
class _Call:
    """One :func:`run_increment` call: what it was given, and what it found."""

    records: Sequence[Any]
    chain: list[bytes]
    fmt: Format
    stages: Sequence[StageConfig]
    ctx: StageContext
    options: IncrementOptions
    previous_sent: list[Any]
    reused: int


@dataclass
class _Input:
    """The records the stages see: what was sent for the kept prefix, then the new ones."""

    records: list[Record] = field(default_factory=list)
    anchors: list[int] = field(default_factory=list)
    """The input record each one stands for."""
    created: list[bool] = field(default_factory=list)
    """Whether a stage created it (in an earlier call)."""
    tokens: list[int] = field(default_factory=list)
    """Original tokens of each input record."""
    originals: list[Any] | None = None


def _increment(call: _Call, state: PrefixState, k: int) -> tuple[Increment, PrefixState]:
    """:func:`run_increment` once ``k`` leading records are known to be the same.

    ``exact`` (every stage declares a frontier): only the records whose decisions are
    settled keep what was sent for them, and the stages see them as a kept prefix
    (``Conversation.frozen``), so the output is a full run's. Otherwise everything
    shared keeps what was sent, and the stages run over that, reduced already.
    """
    exact, ledger = call.options.exact, call.ctx.tokens
    start = min(k, state.settled or 0) if exact else k
    kept = state.kept_entries(start)
    given = _input(call, state, kept, start)
    doc = call.fmt.assemble(b"", call.options.path, given.records)
    conv_in = doc.conversation
    frozen = sum(1 for entry in kept if entry.message is not None)
    if exact and frozen:
        conv_in = Conversation(conv_in.messages, conv_in.format, {**conv_in.meta, "frozen": frozen})
    frontiers: list[int] | None = [] if exact else None
    conv, reports = run_pipeline(conv_in, call.stages, call.ctx, frontiers=frontiers)
    settled = None
    if frontiers is not None:
        # In input records: the settled messages' records, up to the next message's.
        end = settled_prefix(conv_in, frontiers)
        messages = conv_in.messages
        last = given.anchors[messages[end].key or 0] if end < len(messages) else len(call.records)
        settled = max(last, start)
    entries = _entries(call, call.fmt.plan(doc, conv), given)
    sent = [e.data for e in entries]
    new_state = PrefixState(call.chain, given.tokens, entries, given.originals, settled)
    ledger.retain([e.message for e in entries if e.message is not None])
    outcome = Increment(
        sent=sent,
        reused=call.reused,
        changed_prefix_at=first_difference(call.previous_sent, sent),
        tokens_before=sum(given.tokens),
        tokens_after=sum(ledger.message(e.message) for e in entries if e.message is not None),
        stages=reports,
    )
    return outcome, new_state


def _input(call: _Call, state: PrefixState, kept: list[Entry], start: int) -> _Input:
    """What was sent for the first ``start`` records, then the new records as given.

    Messages are re-keyed only when their position moved.
    """
    given = _Input(tokens=list(state.tokens[:start]))
    for entry in kept:
        # Entries are stored at their position, so their records serve as they are.
        given.records.append(entry.record)
        given.anchors.append(entry.anchor)
        given.created.append(entry.created)
    if call.options.keep_originals and (state.originals is not None or not state.chain):
        given.originals = (state.originals or [])[:start]
    path = call.options.path
    for j in range(start, len(call.records)):
        # A copy: what was sent must not change when the caller edits its dicts later.
        # Stages copy on write, so the copy doubles as the original the next call
        # compares against (shared with what is sent while a stage leaves it alone).
        data = _snapshot(call.records[j])
        if given.originals is not None:
            given.originals.append(data)
        try:
            rec = call.fmt.record_from_data(data, len(given.records), path)
        except TranscriptError as exc:
            # Name the record by its index in the caller's list, not a line number.
            i = j - call.options.index_offset
            raise TranscriptError(f"{path}[{i}]", None, exc.reason) from None
        given.records.append(rec)
        given.anchors.append(j)
        given.created.append(False)
        message = rec.message
        given.tokens.append(call.ctx.tokens.message(message) if message is not None else 0)
    return given


def _entries(call: _Call, plan: list[OutRecord], given: _Input) -> list[Entry]:
    """What is sent, one entry per planned record that is not dropped."""
    entries: list[Entry] = []
    anchor = -1
    index = {id(rec): i for i, rec in enumerate(given.records)}
    for out in plan:
        made = True  # a record a stage created in this call
        if out.orig is not None:
            i = index[id(out.orig)]
            anchor, made = given.anchors[i], given.created[i]
        if out.state is State.DROPPED:
            continue
        pos = len(entries)
        if out.state is State.COPY and out.orig is not None:
            rec = out.orig
            if rec.line != pos + 1:  # moved: a record before it was dropped or added
                msg = rec.message
                rec = Record(b"", pos + 1, rec.data)
                rec.message = None if msg is None else replace(msg, key=pos)
        else:
            # Changed or created: parse what will be sent, so the next call sees
            # exactly these bytes (and the stages their marks).
            rec = call.fmt.record_from_data(out.data, pos, call.options.path)
        entries.append(Entry(rec, anchor, made))
    return entries


def first_difference(before: Sequence[Any], after: Sequence[Any]) -> int | None:
    """Index of the first record of ``after`` that breaks ``before`` as its prefix."""
    for i, old in enumerate(before):
        if i >= len(after):
            return i
        new = after[i]
        if new is not old and new != old:
            return i
    return None


def _snapshot(data: Any) -> Any:
    """A deep copy of a JSON-like record (orjson round trip, else copy.deepcopy)."""
    try:
        return orjson.loads(orjson.dumps(data))
    except (TypeError, orjson.JSONDecodeError):
        return copy.deepcopy(data)
