"""The composition root: bytes in, reduced bytes and a report out, nothing written.

``reduce_bytes`` parses a transcript with its format, opens the token counter, builds the
stage context (counter, offload store, services) and runs the chain; the format then writes
the reduced transcript back. Everything above (files, batches, rows) calls this.
``rerun_bytes`` is the same run for a transcript that grows: it records the prefix a later
run may keep (:mod:`ctxcli.pipeline.rerun`), and keeps the one an earlier run recorded.
"""

from __future__ import annotations

import gc
import hashlib
import inspect
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from ctxcli.core.errors import Remedy, TranscriptError
from ctxcli.core.io import Input, Pages, release
from ctxcli.core.model import Conversation
from ctxcli.core.monitors import conversation_monitors
from ctxcli.core.protocols import OriginalsSink, RestoreScript
from ctxcli.formats import Split, get_format, load, split_collection
from ctxcli.formats.collection import Part
from ctxcli.formats.format import Document, Format
from ctxcli.formats.lines import Writable
from ctxcli.pipeline.config import Config, load_config
from ctxcli.pipeline.context import stage_context
from ctxcli.pipeline.options import RunOptions
from ctxcli.pipeline.presets import presets_for
from ctxcli.pipeline.rerun import (
    Kept,
    Resume,
    chain_supports,
    config_digest,
    kept_record,
    load_tail,
    merge_ops,
)
from ctxcli.pipeline.results import PipelineResult, Report, Trace, Written
from ctxcli.pipeline.run import StageReport, run_pipeline
from ctxcli.services.tokens.by_name import open_counter
from ctxcli.services.tokens.ledger import TokenCounter, block_tokens
from ctxcli.stages import StageContext, TokenLedger
from ctxcli.store.naming import NamingPolicy, Preview

__all__ = ["reduce_bytes", "rerun_bytes"]


def reduce_bytes(
    raw: Input,
    *,
    config: Config | None = None,
    offload: NamingPolicy | None = None,
    path: str = "<stdin>",
    into: Writable | None = None,
    options: RunOptions | None = None,
) -> PipelineResult:
    r"""Reduce a transcript held in memory.

    ``raw`` may be a map of the file (:func:`ctxcli.api.open_input`): its pages are
    given back as they are parsed, packed and copied. With the default ``offload``
    (a dry run) nothing is written: this is what ``ctx stats`` runs. Pass an
    :class:`~ctxcli.store.disk.OffloadStore` to keep the removed texts. ``into`` (a
    file open for writing) gets the output as it is made, so the output and the
    parsed input are never held at once: ``PipelineResult.output`` is then empty and
    ``PipelineResult.written`` has its size and hash. ``options`` says how to run
    (:class:`~ctxcli.pipeline.options.RunOptions`: ``on_invalid``, ``counting``,
    ``log``, ``monitors``, ``trace``; the other fields are the routes').

    Example::

        >>> from ctxcli.api import reduce_bytes
        >>> line = b'{"role": "user", "content": "hi"}\n'
        >>> reduce_bytes(line).output == line
        True
    """
    job = _Job.of(raw, config, offload, path, into, options)
    with paused_collector():
        return _reduce(job, None, keep=False)


def rerun_bytes(
    raw: Input,
    resume: Resume | None,
    *,
    config: Config | None = None,
    offload: NamingPolicy | None = None,
    path: str = "<stdin>",
    into: Writable | None = None,
    options: RunOptions | None = None,
) -> PipelineResult:
    """:func:`reduce_bytes` for a transcript that grows: a later run may build on this one.

    ``PipelineResult.rerun`` is filled (when the chain allows it): the prefix a run over a
    longer version of this transcript may keep. ``resume`` is such a prefix, kept by
    an earlier run (:func:`ctxcli.pipeline.rerun.resume_from`): only the rest is
    parsed, counted and reduced, and the output and script start with the previous
    run's.

    Raises:
        PrefixChanged: with ``resume``, a stage or the format touched the kept prefix;
            run again with ``resume=None``.
    """
    job = _Job.of(raw, config, offload, path, into, options)
    with paused_collector():
        return _reduce(job, resume, keep=True)


@contextmanager
def paused_collector() -> Iterator[None]:
    """The cyclic garbage collector off for a while, then as it was.

    Loading a transcript makes millions of containers (orjson's dicts and lists), and
    each collection walks all the live ones: a third of the CPU of a 100 MiB Claude
    Code session's reduce (3.8 s -> 2.7 s of user time without it). A transcript's
    data holds no cycles; what is freed is freed by reference counting.
    """
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


@dataclass(frozen=True)
class _Job:
    """One call of :func:`reduce_bytes` or :func:`rerun_bytes`, its defaults filled in."""

    raw: Input
    path: str
    config: Config
    offload: NamingPolicy
    into: Writable | None
    options: RunOptions

    @classmethod
    def of(
        cls,
        raw: Input,
        config: Config | None,
        offload: NamingPolicy | None,
        path: str,
        into: Writable | None,
        options: RunOptions | None,
    ) -> _Job:
        return cls(
            raw,
            path,
            config or load_config(),
            offload if offload is not None else Preview("ctx-offload"),
            into,
            options or RunOptions(),
        )


def _reduce(job: _Job, resume: Resume | None, *, keep: bool) -> PipelineResult:
    """Load ``job``'s transcript and reduce it.

    Load ``job``'s transcript (or, with ``resume``, what follows the kept prefix) and
    reduce it; ``keep`` fills ``PipelineResult.rerun``.
    """
    raw, path, on_invalid = job.raw, job.path, job.options.on_invalid
    if resume is not None:
        doc = load_tail(raw, path, get_format(resume.format), resume.kept, on_invalid)
        return _reduce_document(job, doc, resume, keep=keep)
    split = split_collection(raw, path, format=job.config.settings.format)
    if split is not None:
        return _reduce_split(job, split)
    doc = load(raw, path, format=job.config.settings.format, on_invalid=on_invalid)
    return _reduce_document(job, doc, None, keep=keep)


def _reduce_document(
    job: _Job, doc: Document, resume: Resume | None, *, keep: bool
) -> PipelineResult:
    """Count, run the chain over and write one loaded transcript."""
    prefix = resume.kept if resume is not None else None
    config, counting = job.config, job.options.counting
    notes: list[str] = []
    counter = open_counter(config.settings.tokenizer, counting, notes.append)
    keeping = keep and chain_supports(config, doc.format)
    frontiers: list[int] | None = [] if keeping else None
    counts: list[list[int]] | None = [] if keeping else None
    try:
        ledger = TokenLedger(counter)
        if prefix is not None:
            # The kept prefix is counted already: its tokens come from the manifest.
            ledger.seed(doc.conversation.messages[: prefix.messages])
        # Count every text up front, in bulk: the stats need them all, and in bulk
        # they come from the disk cache or from every core.
        ledger.prime(doc.conversation, counting.progress)
        ctx = _stage_context(job, ledger, notes)
        steps = [("input", doc.conversation)] if job.options.trace else None
        conv, reports = run_pipeline(
            doc.conversation, config.stages, ctx, trace=steps, frontiers=frontiers, counts=counts
        )
        counter.finish()
        trace = Trace(steps, _block_tokens(counter, steps)) if steps is not None else None
    finally:
        counter.close()
    tokens = _count(ledger, doc, conv, prefix)
    # Every count is taken: the ledger's and the counter's hold on the stages'
    # intermediate texts (the previews a later stage replaced) goes before the dump.
    ledger.retain(())
    counter.trim(0)
    output, ops, written = _write(job, doc, conv, resume)
    rerun = None
    if frontiers is not None and counts is not None:
        digest = config_digest(config, doc.format, job.offload.root, job.options.on_invalid)
        rerun = kept_record(doc, doc.conversation, frontiers, counts, prefix, digest)
    size = written.size if written is not None else len(output)
    report = _report(job, doc, reports, notes, tokens, size, prefix)
    return PipelineResult(output, report, ops, doc.format.units, trace, rerun, written)


@dataclass(frozen=True)
class _Tokens:
    """A run's token totals, a re-run's kept prefix included."""

    before: int
    after: int
    resumed: tuple[int, int] | None
    """What a resume of the session sends again, before and after (None: not resumed)."""


def _count(ledger: TokenLedger, doc: Document, conv: Conversation, prefix: Kept | None) -> _Tokens:
    """Total the tokens before and after the chain.

    The totals of ``doc``'s conversation and of the chain's output ``conv``; the kept
    stand-ins of a re-run count 0, their tokens are the manifest's.
    """
    before, after = ledger.total(doc.conversation), ledger.total(conv)
    if prefix is not None:
        before += prefix.tokens[0]
        after += prefix.tokens[-1]
    if doc.conversation.resume_start is None:
        return _Tokens(before, after, None)
    kept_in: dict[int, int] = {}
    kept_out: dict[int, int] = {}
    if prefix is not None:
        for msg, (n_in, n_out) in zip(doc.conversation.messages, prefix.per_message, strict=False):
            kept_in[id(msg)], kept_out[id(msg)] = n_in, n_out
    resumed = (
        _resume_tokens(ledger, doc.conversation, kept_in),
        _resume_tokens(ledger, conv, kept_out),
    )
    return _Tokens(before, after, resumed)


def _report(
    job: _Job,
    doc: Document,
    stages: list[StageReport],
    notes: list[str],
    tokens: _Tokens,
    bytes_after: int,
    prefix: Kept | None,
) -> Report:
    """The report of a run over ``doc``; a re-run's stages count its kept prefix too."""
    report = Report(
        input=job.path,
        format=doc.format.name,
        tokenizer=job.config.settings.tokenizer,
        messages=len(doc.conversation),
        tokens_before=tokens.before,
        tokens_after=tokens.after,
        bytes_before=len(job.raw),
        bytes_after=bytes_after,
        stages=stages,
        offload_dir=job.offload.root,
        warnings=doc.warnings + _fit(job, doc.format.name) + notes,
        monitors=conversation_monitors(doc.conversation) if job.options.monitors else {},
    )
    if tokens.resumed is not None:
        report.resume_tokens_before, report.resume_tokens_after = tokens.resumed
    if prefix is not None:
        for i, stage in enumerate(report.stages):
            stage.tokens_before += prefix.tokens[i]
            stage.tokens_after += prefix.tokens[i + 1]
        report.kept_lines = prefix.records
    return report


def _write(
    job: _Job, doc: Document, conv: Conversation, resume: Resume | None
) -> tuple[bytes, list[Any], Written | None]:
    """The output (empty when it went to ``job.into``), the restore ops, what was written."""
    sink = _Releasing(job.offload, job.raw)
    tee = _Tee(job.into) if job.into is not None else None
    if resume is None:
        output, script = _dump(doc, conv, sink, 0, tee)
        ops = script.ops
    else:
        if tee is not None:
            tee.write(resume.output)
        tail, script = _dump(doc, conv, sink, resume.kept.records, tee)
        output = resume.output + tail if tee is None else b""
        ops = merge_ops(resume.script, script.ops)
    release(job.raw)  # the copied records were read by the join
    return output, ops, tee.written() if tee is not None else None


class _Tee:
    """Writes to a file, hashing and counting what went through."""

    def __init__(self, fh: Writable) -> None:
        self.fh, self.sha, self.size = fh, hashlib.sha256(), 0

    def write(self, data: bytes | memoryview) -> int:
        self.sha.update(data)
        self.size += len(data)
        return self.fh.write(data)

    def written(self) -> Written:
        return Written(self.size, self.sha.hexdigest())


def _dump(
    doc: Document, conv: Conversation, sink: OriginalsSink, start: int, tee: _Tee | None
) -> tuple[bytes, RestoreScript]:
    """The format's dump; into ``tee`` as it is made when the format can."""
    if tee is None:
        return doc.format.dump(doc, conv, sink, start=start)
    if _dumps_into(type(doc.format)):
        return doc.format.dump(doc, conv, sink, start=start, into=tee)
    out, script = doc.format.dump(doc, conv, sink, start=start)  # a plugin's own dump
    tee.write(out)
    return b"", script


def _dumps_into(cls: type[Format]) -> bool:
    """Whether ``cls.dump`` takes ``into`` (a plugin format written before it may not)."""
    return "into" in inspect.signature(cls.dump).parameters


def _fit(job: _Job, format: str) -> list[str]:
    """Return the warning a chain made for other transcripts gets, or None.

    A client's preset on another client's file: the steps for its client do nothing here.
    """
    made_for = job.config.settings.made_for
    if not made_for or format in made_for:
        return []
    chain = f"preset {job.config.settings.preset}" if job.config.settings.preset else "the chain"
    meant = " and ".join(made_for)
    others = presets_for(format)
    instead = f"; preset {' or '.join(others)} is made for {format}" if others else ""
    return [
        f"{job.path}: {chain} is made for {meant} transcripts and this one is {format}: "
        f"its steps for {meant} files do nothing here{instead}"
    ]


def _stage_context(job: _Job, ledger: TokenLedger, notes: list[str]) -> StageContext:
    """Build the context the stages get.

    Their notes meant for the user (a classifier falling back) go to the caller's
    ``log``, else to ``notes`` (the run's warnings).
    """
    return stage_context(
        ledger,
        job.offload,
        language=job.config.settings.language,
        log=job.options.log or notes.append,
        cache=job.options.counting.cache,
    )


PART_BATCH_BYTES = 16 * 1024 * 1024
"""A collection's trajectories are loaded, counted and reduced about this many bytes at
a time: counted in bulk (on every core), yet the file is never held parsed all at once."""


def _reduce_split(job: _Job, split: Split) -> PipelineResult:
    """A file of many trajectories; written whole, as it is one restore unit."""
    if job.options.trace and len(split.parts) > 1:
        ids = [p.id for p in split.parts[:3] if p.id is not None]
        named = f": {', '.join(ids)}{', ...' if len(split.parts) > 3 else ''}" if ids else ""
        raise TranscriptError(
            job.path,
            None,
            f"holds {len(split.parts)} trajectories ({split.format}{named}); a report "
            "follows one transcript",
            remedy=Remedy.PICK_TRAJECTORY,
        )
    reduced = _reduce_collection(job, split)
    if job.into is not None:  # a collection is one restore unit: its output is joined
        out = _Tee(job.into)
        out.write(reduced.output)
        reduced.output, reduced.written = b"", out.written()
    return reduced


@dataclass
class _Parts:
    """What the trajectories of a collection add up to, as they are reduced."""

    outputs: list[bytes | None] = field(default_factory=list)
    """Each part's output, None for one the chain left as it was."""
    runs: list[list[StageReport]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    messages: int = 0
    tokens_before: int = 0
    tokens_after: int = 0
    trace: Trace | None = None


def _reduce_collection(job: _Job, split: Split) -> PipelineResult:
    """Reduce many trajectories in one file, each on its own.

    Many trajectories in one file (tau-bench runs, dataset rows): each is reduced on
    its own with the same counter and offload store, a batch of parts at a time.

    ``trace`` (``ctx report``) follows the file's only trajectory.
    """
    raw, parts = job.raw, _Parts()
    notes: list[str] = []
    counter = open_counter(job.config.settings.tokenizer, job.options.counting, notes.append)
    try:
        ledger = TokenLedger(counter)
        ctx = _stage_context(job, ledger, notes)
        for batch in _batches(split.parts, PART_BATCH_BYTES, raw):
            _reduce_batch(job, batch, ctx, parts)
            # The batch is done: its counts (and, for a tokenizer counting in the
            # background, its workers and their copy of the texts) go.
            counter.finish()
            counter.trim(0)
            ledger.retain(())
            release(raw)  # the batch's runs were read again to make its parts
    finally:
        counter.close()
    script = RestoreScript()
    if all(out is None for out in parts.outputs):
        script.copy()
        output = raw[:]
    else:
        output = split.join(parts.outputs)
        script.original(job.offload.add_original(memoryview(raw)))
        script.skip()
    release(raw)
    report = Report(
        input=job.path,
        format=split.format,
        tokenizer=job.config.settings.tokenizer,
        messages=parts.messages,
        tokens_before=parts.tokens_before,
        tokens_after=parts.tokens_after,
        bytes_before=len(raw),
        bytes_after=len(output),
        stages=_merge(parts.runs),
        offload_dir=job.offload.root,
        warnings=_fit(job, split.format) + parts.warnings + notes,
    )
    return PipelineResult(output, report, script.ops, "document", parts.trace, None)


def _reduce_batch(
    job: _Job, batch: list[tuple[bytes, str]], ctx: StageContext, parts: _Parts
) -> None:
    """Load, count and reduce a batch of a collection's parts into ``parts``."""
    docs = [load(data, name, on_invalid=job.options.on_invalid) for data, name in batch]
    ledger = ctx.tokens
    for doc in docs:
        ledger.prime(doc.conversation, job.options.counting.progress)
    for doc in docs:
        steps = [("input", doc.conversation)] if job.options.trace else None
        conv, reports = run_pipeline(doc.conversation, job.config.stages, ctx, trace=steps)
        if steps is not None:
            parts.trace = Trace(steps, _block_tokens(ledger.counter, steps))
        parts.runs.append(reports)
        parts.messages += len(doc.conversation)
        parts.tokens_before += ledger.total(doc.conversation)
        parts.tokens_after += ledger.total(conv)
        parts.warnings += doc.warnings
        # A part's own originals are not kept: the file's original bytes are.
        out, _ = doc.format.dump(doc, conv, Preview(job.offload.root))
        parts.outputs.append(None if out == doc.raw else out)


def _batches(parts: Iterable[Part], size: int, raw: Input) -> Iterator[list[tuple[bytes, str]]]:
    """The parts' bytes (each made once) and names, about ``size`` bytes at a time.

    Making a part reads its run or row again from ``raw``: a map's pages go back every
    4 MB of parts made.
    """
    batch: list[tuple[bytes, str]] = []
    pages, held = Pages(raw), 0
    for part in parts:
        data = part.raw
        batch.append((data, part.name))
        held += len(data)
        pages.read(len(data))
        if held >= size:
            yield batch
            batch, held = [], 0
    if batch:
        yield batch


def _block_tokens(counter: TokenCounter, steps: list[tuple[str, Conversation]]) -> dict[int, int]:
    """Tokens of every distinct block of ``steps`` (unchanged blocks are shared objects)."""
    tokens: dict[int, int] = {}
    for _name, conv in steps:
        for msg in conv.messages:
            for block in msg.blocks:
                if id(block) not in tokens:
                    tokens[id(block)] = block_tokens(counter, block)
    return tokens


class _Releasing:
    """The originals sink a dump writes to, giving a mapped input's pages back as it goes.

    The dump reads every changed record's original bytes to pack them: without this,
    those pages (most of a well-reduced input) would all be resident again at the end.
    """

    def __init__(self, sink: OriginalsSink, raw: Input) -> None:
        self._sink, self._pages = sink, Pages(raw)

    def add_original(self, raw: bytes | memoryview, texts: Iterable[str] = ()) -> list[Any]:
        op = self._sink.add_original(raw, texts)
        self._pages.read(len(raw))
        return op


def _merge(runs: list[list[StageReport]]) -> list[StageReport]:
    """One report per stage, summed over the trajectories of a collection."""
    merged: list[StageReport] = []
    for reports in zip(*runs, strict=True):
        first = reports[0]
        counters: dict[str, int] = {}
        notes: list[str] = []
        fallbacks: list[str] = []
        for r in reports:
            for key, value in r.counters.items():
                counters[key] = counters.get(key, 0) + value
            notes.extend(n for n in r.notes if n not in notes)
            fallbacks.extend(f for f in r.fallbacks if f not in fallbacks)
        merged.append(
            StageReport(
                stage=first.stage,
                changed=sum(r.changed for r in reports),
                offloaded=sum(r.offloaded for r in reports),
                tokens_before=sum(r.tokens_before for r in reports),
                tokens_after=sum(r.tokens_after for r in reports),
                counters=counters,
                notes=tuple(notes),
                fallbacks=tuple(fallbacks),
            )
        )
    return merged


def _resume_tokens(ledger: TokenLedger, conv: Conversation, kept: dict[int, int]) -> int:
    """Model-visible tokens a resume sends again: those after the last compaction.

    ``kept`` holds the tokens of a re-run's kept stand-ins (by ``id``).
    """
    return sum(kept.get(id(m), 0) + ledger.message(m) for m in conv.resumed_messages())
