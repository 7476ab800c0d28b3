"""The composition root: bytes in, reduced bytes and a report out, nothing written.

``reduce_bytes`` parses a transcript with its format, opens the token counter, builds the
stage context (counter, offload store, services) and runs the chain; the format then writes
the reduced transcript back. Everything above (files, batches, rows) calls this.
"""

from __future__ import annotations

import gc
import hashlib
import inspect
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from ctxcli.core.errors import TranscriptError
from ctxcli.core.io import Input, Pages, release
from ctxcli.core.model import Conversation
from ctxcli.core.monitors import conversation_monitors
from ctxcli.core.protocols import OriginalsSink, RestoreScript
from ctxcli.formats import Split, get_format, load, split_collection
from ctxcli.formats.base import Document, Format, Writable
from ctxcli.formats.collection import Part
from ctxcli.pipeline.config import Config, load_config
from ctxcli.pipeline.rerun import (
    Resume,
    chain_supports,
    config_digest,
    kept_record,
    load_tail,
    merge_ops,
)
from ctxcli.pipeline.results import Reduced, Report, Trace, Written
from ctxcli.pipeline.run import StageReport, run_pipeline
from ctxcli.services.anthropic_client import default_services
from ctxcli.services.counters import open_counter
from ctxcli.services.tokens import CountOptions, TokenCounter, block_tokens
from ctxcli.stages import StageContext, TokenLedger
from ctxcli.store.naming import DryRunOffload

__all__ = ["reduce_bytes"]


def reduce_bytes(
    raw: Input,
    *,
    config: Config | None = None,
    offload: DryRunOffload | None = None,
    path: str = "<stdin>",
    on_invalid: str = "auto",
    log: Callable[[str], None] | None = None,
    counting: CountOptions | None = None,
    monitors: bool = True,
    trace: bool = False,
    keep: bool = False,
    resume: Resume | None = None,
    into: Writable | None = None,
) -> Reduced:
    """Reduce a transcript held in memory.

    ``raw`` may be a map of the file (:func:`ctxcli.api.open_input`): its pages are
    given back as they are parsed, packed and copied. With the default ``offload``
    (a dry run) nothing is written: this is what
    ``ctx stats`` runs. Pass an :class:`~ctxcli.store.disk.OffloadStore` to keep the
    removed texts. ``counting`` says whether to use the count cache and how many
    processes may count (default: the cache and every core, for large inputs).
    ``monitors`` computes the six stuck-agent scores for the report (``ctx stats``
    shows them; ``ctx reduce`` skips them: on large logs they are a quarter of a run).
    ``trace`` keeps the conversation after every stage and the tokens of every block
    in ``Reduced.trace`` (``ctx report``). ``keep`` fills ``Reduced.rerun``: the prefix
    a run over a longer version of this transcript may keep. ``resume`` is such a
    prefix (:func:`ctxcli.pipeline.rerun.resume_from`): only the rest is parsed, counted
    and reduced, and the output and script start with the previous run's. ``into`` (a
    file open for writing) gets the output as it is made, so the output and the
    parsed input are never held at once: ``Reduced.output`` is then empty and
    ``Reduced.written`` has its size and hash.

    Raises:
        PrefixChanged: with ``resume``, a stage or the format touched the kept prefix;
            run again without it.

    Example::

        >>> from ctxcli.api import reduce_bytes
        >>> line = b'{"role": "user", "content": "hi"}\\n'
        >>> reduce_bytes(line).output == line
        True
    """
    with paused_collector():
        return _reduce(
            raw,
            config=config,
            offload=offload,
            path=path,
            on_invalid=on_invalid,
            log=log,
            counting=counting,
            monitors=monitors,
            trace=trace,
            keep=keep,
            resume=resume,
            into=into,
        )


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


def _reduce(
    raw: Input,
    *,
    config: Config | None,
    offload: DryRunOffload | None,
    path: str,
    on_invalid: str,
    log: Callable[[str], None] | None,
    counting: CountOptions | None,
    monitors: bool,
    trace: bool,
    keep: bool,
    resume: Resume | None,
    into: Writable | None,
) -> Reduced:
    config = config or load_config()
    offload = offload if offload is not None else DryRunOffload("ctx-offload")
    fmt = config.settings.format
    counting = counting or CountOptions()
    split = None if resume is not None else split_collection(raw, path, format=fmt)
    if split is not None:
        if trace and len(split.parts) > 1:
            raise TranscriptError(
                path,
                None,
                f"holds {len(split.parts)} trajectories ({split.format}); a report follows "
                "one transcript: report one of them",
            )
        reduced = _reduce_collection(
            raw, path, split, config, offload, on_invalid, log, counting, trace=trace
        )
        if into is not None:  # a collection is one restore unit: its output is joined
            out = _Tee(into)
            out.write(reduced.output)
            reduced.output, reduced.written = b"", out.written()
        return reduced
    prefix = resume.kept if resume is not None else None
    if resume is not None:
        docs = [load_tail(raw, path, get_format(resume.format), resume.kept, on_invalid)]
    else:
        docs = [load(raw, path, format=fmt, on_invalid=on_invalid)]
    cache_notes: list[str] = []
    counter = open_counter(config.settings.tokenizer, counting, cache_notes.append)
    keeping = keep and chain_supports(config, docs[0].format)
    frontiers: list[int] | None = [] if keeping else None
    counts: list[list[int]] | None = [] if keeping else None
    try:
        ledger = TokenLedger(counter)
        if prefix is not None:
            # The kept prefix is counted already: its tokens come from the manifest.
            ledger.seed(docs[0].conversation.messages[: prefix.messages])
        # Count every text up front, in bulk: the stats need them all, and in bulk
        # they come from the disk cache or from every core.
        for doc in docs:
            ledger.prime(doc.conversation, counting.progress)
        ctx = _stage_context(ledger, offload, config, log or cache_notes.append, counting)
        steps: list[tuple[str, Conversation]] | None = (
            [("input", docs[0].conversation)] if trace else None
        )
        runs = [
            run_pipeline(
                doc.conversation,
                config.stages,
                ctx,
                trace=steps,
                frontiers=frontiers,
                counts=counts,
            )
            for doc in docs
        ]
        counter.finish()
        kept = Trace(steps, _block_tokens(counter, steps)) if steps is not None else None
    finally:
        counter.close()
    tokens_before = sum(ledger.total(d.conversation) for d in docs)
    tokens_after = sum(ledger.total(conv) for conv, _ in runs)
    if prefix is not None:  # the kept stand-ins count 0: their tokens are the manifest's
        tokens_before += prefix.tokens[0]
        tokens_after += prefix.tokens[-1]
    resumed: tuple[int, int] | None = None
    if docs[0].conversation.resume_start is not None:
        kept_in: dict[int, int] = {}
        kept_out: dict[int, int] = {}
        if prefix is not None:
            for msg, (n_in, n_out) in zip(
                docs[0].conversation.messages, prefix.per_message, strict=False
            ):
                kept_in[id(msg)], kept_out[id(msg)] = n_in, n_out
        resumed = (
            _resume_tokens(ledger, docs[0].conversation, kept_in),
            _resume_tokens(ledger, runs[0][0], kept_out),
        )
    # Every count is taken: the ledger's and the counter's hold on the stages'
    # intermediate texts (the previews a later stage replaced) goes before the dump.
    ledger.retain(())
    counter.trim(0)
    rerun = None
    doc, (conv, reports) = docs[0], runs[0]
    sink = _Releasing(offload, raw)
    tee = _Tee(into) if into is not None else None
    if resume is None:
        output, script = _dump(doc, conv, sink, 0, tee)
        ops = script.ops
    else:
        if tee is not None:
            tee.write(resume.output)
        tail, script = _dump(doc, conv, sink, resume.kept.records, tee)
        output = resume.output + tail if tee is None else b""
        ops = merge_ops(resume.script, script.ops)
    release(raw)  # the copied records were read by the join
    written = tee.written() if tee is not None else None
    if frontiers is not None and counts is not None:
        digest = config_digest(config, doc.format, offload.root, on_invalid)
        rerun = kept_record(doc, doc.conversation, frontiers, counts, prefix, digest)
    report = Report(
        input=path,
        format=doc.format.name,
        tokenizer=config.settings.tokenizer,
        messages=sum(len(d.conversation) for d in docs),
        tokens_before=tokens_before,
        tokens_after=tokens_after,
        bytes_before=len(raw),
        bytes_after=written.size if written is not None else len(output),
        stages=reports,
        offload_dir=offload.root,
        warnings=[w for d in docs for w in d.warnings] + cache_notes,
        monitors=conversation_monitors(docs[0].conversation) if monitors else {},
    )
    if resumed is not None:
        report.resume_tokens_before, report.resume_tokens_after = resumed
    if prefix is not None:
        for i, stage in enumerate(report.stages):
            stage.tokens_before += prefix.tokens[i]
            stage.tokens_after += prefix.tokens[i + 1]
        report.kept_lines = prefix.records
    return Reduced(output, report, ops, doc.format.units, kept, rerun, written)


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


def _stage_context(
    ledger: TokenLedger,
    offload: DryRunOffload,
    config: Config,
    log: Callable[[str], None],
    counting: CountOptions,
) -> StageContext:
    """What the stages get; their notes meant for the user (a classifier falling back)
    go to ``log`` (the run's warnings unless the caller takes them)."""
    return StageContext(
        ledger,
        offload,
        config.settings.language,
        log,
        services=default_services(cache=counting.cache),
    )


PART_BATCH_BYTES = 16 * 1024 * 1024
"""A collection's trajectories are loaded, counted and reduced about this many bytes at
a time: counted in bulk (on every core), yet the file is never held parsed all at once."""


def _reduce_collection(
    raw: Input,
    path: str,
    split: Split,
    config: Config,
    offload: DryRunOffload,
    on_invalid: str,
    log: Callable[[str], None] | None,
    counting: CountOptions,
    *,
    trace: bool = False,
) -> Reduced:
    """Many trajectories in one file (tau-bench runs, dataset rows): each is reduced on
    its own with the same counter and offload store, a batch of parts at a time.

    ``trace`` (``ctx report``) follows the file's only trajectory.
    """
    cache_notes: list[str] = []
    kept: Trace | None = None
    counter = open_counter(config.settings.tokenizer, counting, cache_notes.append)
    outputs: list[bytes | None] = []
    runs: list[list[StageReport]] = []
    warnings: list[str] = []
    messages = tokens_before = tokens_after = 0
    try:
        ledger = TokenLedger(counter)
        ctx = _stage_context(ledger, offload, config, log or cache_notes.append, counting)
        for batch in _batches(split.parts, PART_BATCH_BYTES, raw):
            docs = [load(data, name, on_invalid=on_invalid) for data, name in batch]
            for doc in docs:
                ledger.prime(doc.conversation, counting.progress)
            for doc in docs:
                steps: list[tuple[str, Conversation]] | None = (
                    [("input", doc.conversation)] if trace else None
                )
                conv, reports = run_pipeline(doc.conversation, config.stages, ctx, trace=steps)
                if steps is not None:
                    kept = Trace(steps, _block_tokens(counter, steps))
                runs.append(reports)
                messages += len(doc.conversation)
                tokens_before += ledger.total(doc.conversation)
                tokens_after += ledger.total(conv)
                warnings += doc.warnings
                # A part's own originals are not kept: the file's original bytes are.
                out, _ = doc.format.dump(doc, conv, DryRunOffload(offload.root))
                outputs.append(None if out == doc.raw else out)
            # The batch is done: its counts (and, for a tokenizer counting in the
            # background, its workers and their copy of the texts) go.
            counter.finish()
            counter.trim(0)
            ledger.retain(())
            del doc, conv, docs
            release(raw)  # the batch's runs were read again to make its parts
    finally:
        counter.close()
    script = RestoreScript()
    if all(out is None for out in outputs):
        script.copy()
        output = raw[:]
    else:
        output = split.join(outputs)
        script.original(offload.add_original(memoryview(raw)))
        script.skip()
    release(raw)
    report = Report(
        input=path,
        format=split.format,
        tokenizer=config.settings.tokenizer,
        messages=messages,
        tokens_before=tokens_before,
        tokens_after=tokens_after,
        bytes_before=len(raw),
        bytes_after=len(output),
        stages=_merge(runs),
        offload_dir=offload.root,
        warnings=warnings + cache_notes,
    )
    return Reduced(output, report, script.ops, "document", kept, None)


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
        for r in reports:
            for key, value in r.counters.items():
                counters[key] = counters.get(key, 0) + value
            notes.extend(n for n in r.notes if n not in notes)
        merged.append(
            StageReport(
                stage=first.stage,
                changed=sum(r.changed for r in reports),
                offloaded=sum(r.offloaded for r in reports),
                tokens_before=sum(r.tokens_before for r in reports),
                tokens_after=sum(r.tokens_after for r in reports),
                counters=counters,
                notes=tuple(notes),
            )
        )
    return merged


def _resume_tokens(ledger: TokenLedger, conv: Conversation, kept: dict[int, int]) -> int:
    """Model-visible tokens a resume sends again: those after the last compaction.

    ``kept`` holds the tokens of a re-run's kept stand-ins (by ``id``).
    """
    return sum(kept.get(id(m), 0) + ledger.message(m) for m in conv.resumed_messages())
