"""The reduce routes on this machine: a file or stdin into a file, stdout, or in place.

Each route chooses its record's directory (:func:`~ctxcli.api.location.locate`), runs
the chain into a :class:`~ctxcli.store.change.Transaction` and commits it: the store owns
staging, locking, comparing, renaming, the manifest and the index.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ctxcli.api.destination import Destination, Reduction, RunOptions
from ctxcli.api.local import (
    STDIO,
    changed_since,
    check_output,
    digest,
    offload_path,
    open_input,
)
from ctxcli.api.location import Location, locate
from ctxcli.core.errors import CtxError, OffloadError, PrefixChanged, TranscriptError
from ctxcli.core.io import Input, hash_input, same_bytes
from ctxcli.core.protocols import sha256
from ctxcli.formats import get_format
from ctxcli.pipeline.compose import reduce_bytes, rerun_bytes
from ctxcli.pipeline.config import Config
from ctxcli.pipeline.rerun import Resume, config_digest, pack_end, resume_from
from ctxcli.pipeline.results import PipelineResult, Report
from ctxcli.services.session_files import is_session_path
from ctxcli.store import history
from ctxcli.store.change import Record, Transaction, free_sibling
from ctxcli.store.disk import RecordTaken, check_offload_location
from ctxcli.store.index import HEAD_BYTES, head_digest
from ctxcli.store.inplace import Change, InPlace
from ctxcli.store.manifest import Header, InputSide, Side, manifest_for_rerun
from ctxcli.store.naming import Preview

__all__ = [
    "Gain",
    "Job",
    "Outcome",
    "gain",
    "reduce_and_commit",
    "reduce_in_place",
    "reduce_local",
]


@dataclass(frozen=True)
class Job:
    """One reduction to commit: its input, where its output and record go, how.

    ``change``: the in-place transaction the output replaces its input under;
    ``skip_unchanged``: an in-place change that changes nothing records nothing;
    ``skip_no_gain``: nor does one with nothing to gain (:func:`gain`). ``mapped`` is the
    input file's status when ``data`` is a map of it.
    """

    data: Input
    input_name: str
    out_path: Path | None
    root: str
    config: Config
    run: RunOptions
    dest: Destination
    previous: list[str] = field(default_factory=list)
    change: InPlace | None = None
    skip_unchanged: bool = False
    skip_no_gain: bool = False
    mapped: os.stat_result | None = None
    grown_from: str | None = None


@dataclass(frozen=True)
class Gain:
    """What an in-place change gains: worth writing when either holds.

    Attributes:
        tokens: a resume sends no more tokens than before (hints citing their files can
            outweigh short texts they replace: then it sends more).
        size: the file shrinks to half its size or less, which is what makes a client
            slow to load it even when a resume sends little (a compacted session).
    """

    tokens: bool
    size: bool

    @property
    def worth(self) -> bool:
        """True if the change is worth writing."""
        return self.tokens or self.size


class _Document(Exception):
    """The file changed in place is one document: it is changed whole."""


SIZE_GAIN = 0.5
"""A file this fraction of its size or smaller after a reduction loads faster: a gain."""


def gain(report: Report) -> Gain:
    """What reducing a transcript in place gains (see :class:`Gain`)."""
    before, after = report.resume_tokens_before, report.resume_tokens_after
    if before is None or after is None:
        before, after = report.tokens_before, report.tokens_after
    size = report.bytes_before > 0 and report.bytes_after <= report.bytes_before * SIZE_GAIN
    return Gain(tokens=after <= before, size=size)


@dataclass(frozen=True)
class Outcome:
    """What the commit of a :class:`Job` did.

    Attributes:
        written: the output's size (without the bytes carried over).
        carried: bytes carried over after it (in place: appended during the run).
        unchanged: nothing was written (the change changed nothing, or had no gain).
        no_gain: in place, the reduction gained nothing worth writing.
    """

    written: int = 0
    carried: int = 0
    unchanged: bool = False
    no_gain: bool = False
    gain: Gain | None = None


def reduce_and_commit(job: Job) -> tuple[PipelineResult, Outcome]:
    """Reduce into a staged record, then commit the pair in one transaction.

    A file changed during the run is refused unless its mapped bytes are still those
    hashed first (lines appended to a session are not part of this run, as with a read).
    With ``dest.stream`` the output is written to its staged file as it is made
    (``PipelineResult.output`` is empty).
    """
    off_path, display = offload_path(job.root)
    keep = [Path(job.input_name)] if job.input_name != STDIO else []
    check_offload_location(off_path, keep=keep + ([job.out_path] if job.out_path else []))
    root_cited = job.dest.cite_as or display
    input_hash = hashlib.sha256()
    resume: tuple[Resume, dict[str, Any]] | None = None
    hashed, grown_from = 0, None
    if job.out_path is not None and job.change is None:
        resume, hashed, grown_from = _resume(job, input_hash, off_path, root_cited)
    # First, before reading for the run: the check below compares the map with it. A
    # re-run's check hashed the previous input's bytes already.
    input_sha = hash_input(input_hash, job.data, hashed, len(job.data)).hexdigest()
    stdout = job.out_path is None and job.change is None
    grown_from = grown_from or job.grown_from
    record = Record(off_path, root_cited, grown_from=grown_from, same_output=stdout)
    tx = Transaction(
        record,
        file=job.out_path if job.change is None else None,
        change=job.change,
        write=job.dest.write,
        stream=job.dest.stream,
        log=job.run.log,
    )
    with tx:
        reduced = _run(job, tx, resume)
        if job.change is not None and reduced.units != "lines":
            if job.change.tail:
                raise _Document()
            job.change.whole()
        gained = gain(reduced.report) if job.skip_no_gain else None
        no_gain = gained is not None and not gained.worth
        if changed_since(job.input_name, job.mapped) and digest(job.data) != input_sha:
            raise TranscriptError(
                job.input_name,
                None,
                "the file changed while ctx read it; run again once it is no longer "
                "being rewritten, or reduce a copy",
            )
        header = _header(job, reduced, input_sha)
        same = header.output.sha256 == header.input.sha256
        if no_gain or (job.skip_unchanged and same):
            tx.cancel()
            return reduced, Outcome(header.output.bytes, unchanged=True, no_gain=no_gain)
        done = tx.commit(
            header,
            reduced.script,
            reduced.rerun,
            output=reduced.output,
            input_head=head_digest(job.data[:HEAD_BYTES]),
        )
    return reduced, Outcome(done.written, done.carried, gain=gained)


def _run(job: Job, tx: Transaction, resume: tuple[Resume, dict[str, Any]] | None) -> PipelineResult:
    """The reduction itself: keeping a previous run's prefix if it can, else in full."""
    opts = job.run
    incremental = opts.incremental and job.config.settings.incremental

    def run(kept: Resume | None) -> PipelineResult:
        options = replace(opts, monitors=False, trace=False)
        assert tx.store is not None
        if incremental and job.out_path is not None and job.change is None:
            # A file that may grow: keep what a later run over it can build on.
            return rerun_bytes(
                job.data,
                kept,
                config=job.config,
                offload=tx.store,
                path=job.input_name,
                into=tx.out,
                options=options,
            )
        return reduce_bytes(
            job.data,
            config=job.config,
            offload=tx.store,
            path=job.input_name,
            into=tx.out,
            options=options,
        )

    if resume is not None and incremental:
        try:
            tx.adopt(resume[1], pack_end(resume[0].script))
            return run(resume[0])
        except (OSError, OffloadError, PrefixChanged):
            # The previous directory changed under us, or a stage or the format
            # reached into the kept prefix: run in full.
            tx.restart()
    return run(None)


def _header(job: Job, reduced: PipelineResult, input_sha: str) -> Header:
    """What the manifest says of this run (the store adds script, files and pack)."""
    if reduced.written is not None:
        output = Side(sha256=reduced.written.sha256, bytes=reduced.written.size)
    else:
        output = Side(sha256=sha256(reduced.output), bytes=len(reduced.output))
    return Header.new(
        format=reduced.report.format,
        units=reduced.units,
        input=InputSide(name=job.input_name, sha256=input_sha, bytes=len(job.data)),
        output=output,
        previous=job.previous,
    )


def _resume(
    job: Job, input_hash: hashlib._Hash, off_path: Path, root: str
) -> tuple[tuple[Resume, dict[str, Any]] | None, int, str | None]:
    """Find the prefix a previous run into the same output lets this run keep.

    The prefix a previous run of the input into the output lets this run keep, if any;
    how many leading bytes of the input were hashed into ``input_hash`` to find out; and
    the sha256 of the previous input if the input starts with it (the same transcript,
    grown: its offload directory may be replaced without ``force``).

    That run's manifest must say what it kept and the input must start with the bytes it
    read (hashed once: the caller goes on hashing from there); its output must be
    unchanged on disk.
    """
    data, out_path = job.data, job.out_path
    assert out_path is not None
    manifest = manifest_for_rerun(off_path)
    if manifest is None or len(data) <= manifest["input"]["bytes"]:
        return None, 0, None  # no usable previous run: a full one
    old = manifest["input"]["bytes"]
    hash_input(input_hash, data, 0, old)
    if input_hash.copy().hexdigest() != manifest["input"]["sha256"]:
        return None, old, None
    grown = str(manifest["input"]["sha256"])
    try:
        if "rerun" not in manifest or not out_path.is_file():
            return None, old, grown
        output = out_path.read_bytes()
        fmt = get_format(manifest["format"])
    except (CtxError, OSError):
        return None, old, grown
    digest = config_digest(job.config, fmt, root, job.run.on_invalid)
    try:
        resume = resume_from(manifest, data, input_hash.copy(), output, digest)
    except (KeyError, TypeError, IndexError, ValueError):
        resume = None  # a manifest damaged where the re-run reads it: a full run
    return ((resume, manifest) if resume is not None else None), old, grown


def reduce_in_place(
    path: Path, config: Config, run: RunOptions, dest: Destination, raw: bytes | None = None
) -> Reduction:
    """The in-place route: which record it gets, then one transaction.

    A file that is already what this chain makes is left as it is (``change.record`` is
    None); one that would change again gets a record of its own, so every original is kept.
    A file under a client's session directory is left alone while it looks in use,
    wherever its record goes, unless forced.
    """
    session_file = is_session_path(path)
    live = None if run.force or not session_file else run.live_seconds
    # Read as a map of a private copy: a 1 GB session is not held in memory as well.
    with InPlace(path, live_seconds=live, raw=raw, mapped=True) as change:
        where = locate(str(path), dest, config, change.body, allocate=True, force=run.force)
        data = change.body
        name = str(change.path) if where.session else str(path)
        if where.previous:
            again = reduce_bytes(
                data,
                config=config,
                offload=Preview(where.cited),
                path=name,
                options=replace(run, monitors=True, trace=False),
            )
            if same_bytes(again.output, data):
                again.report.output = name
                history.prune(path)
                size = len(change.raw)
                done = Change(change.path, None, size, size)
                output = b"" if dest.stream else bytes(data)
                return Reduction(again.report, output, done, where.session)
        job = Job(
            data,
            name,
            change.target,
            where.root,
            config,
            run,
            dest,
            where.previous,
            change,
            skip_unchanged=where.session,  # a session's change that changes nothing is not kept
            skip_no_gain=True,
        )
        try:
            reduced, outcome = reduce_and_commit(job)
        except _Document:
            # A document has no line a client appends: what follows its first line is
            # part of it (and the run fails on it as a run into a file would).
            change.whole()
            reduced, outcome = reduce_and_commit(replace(job, data=change.body))
    reduced.report.output = name
    record = None if outcome.unchanged else Path(where.root)
    if record is None:
        history.prune(path)
    after = outcome.written + outcome.carried
    done = Change(change.path, record, len(change.raw), after, outcome.carried)
    return Reduction(
        reduced.report,
        reduced.output,
        done,
        where.session,
        no_gain=outcome.no_gain,
        moved=where.moved if record is not None else None,
    )


def reduce_local(
    name: str, config: Config, run: RunOptions, dest: Destination, raw: Input | None = None
) -> Reduction:
    """A file (or stdin) into a file or stdout, never in place (that is :func:`reduce_in_place`)."""
    out_name = check_output(name, dest.output, in_place=False)
    data, st = (raw, None) if raw is not None else open_input(name)
    where = locate(name, dest, config, data, allocate=True, force=run.force)
    out_path = None if out_name is None else Path(out_name)
    job = Job(
        data, name, out_path, where.root, config, run, dest, mapped=st, grown_from=where.grown_from
    )
    try:
        reduced, _ = reduce_and_commit(job)
    except RecordTaken:
        if out_path is not None or dest.offload_dir is not None:
            raise
        # Output to stdout whose record directory holds another output of this input (a
        # chain that does not give the same output twice): the record goes beside it.
        root = str(free_sibling(Path(where.root)))
        where = Location(root, moved=f"{where.root} holds the record of another reduction")
        reduced, _ = reduce_and_commit(replace(job, root=root))
    reduced.report.output = out_name or STDIO
    return Reduction(reduced.report, reduced.output, moved=where.moved)
