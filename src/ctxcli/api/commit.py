"""Reduce into a staged offload directory and commit the pair; the in-place route.

The output is staged first, then the offload directory is renamed into place, then the
output, under a lock on both directories: an output never exists without what it needs
to be restored, and racing runs never cross their pairs. In place, the same commit runs
inside one :class:`~ctxcli.store.inplace.InPlace` transaction.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ctxcli.api.local import (
    STDIO,
    changed_since,
    check_output,
    cited_root,
    default_offload_dir,
    digest,
    free_sibling,
    offload_path,
    open_input,
)
from ctxcli.api.options import Destination, Reduction, RunOptions
from ctxcli.core.errors import CtxError, OffloadError, PrefixChanged, TranscriptError
from ctxcli.core.io import Input, hash_input
from ctxcli.core.protocols import sha256
from ctxcli.formats import get_format
from ctxcli.pipeline.compose import ReduceOptions, reduce_bytes, rerun_bytes
from ctxcli.pipeline.config import Config
from ctxcli.pipeline.rerun import Resume, config_digest, pack_end, resume_from
from ctxcli.pipeline.results import PipelineResult, Report
from ctxcli.services.session_files import is_session_path
from ctxcli.services.tokens.ledger import CountOptions
from ctxcli.store import history
from ctxcli.store.disk import OffloadStore, check_offload_location
from ctxcli.store.index import remember
from ctxcli.store.inplace import Change, InPlace, Staged
from ctxcli.store.lock import commit_lock
from ctxcli.store.manifest import Header, InputSide, Side, manifest_for_rerun
from ctxcli.store.naming import Preview

__all__ = [
    "InPlaceRoot",
    "Job",
    "in_place_root",
    "reduce_and_commit",
    "reduce_in_place",
    "reduce_local",
]


@dataclass
class Job:
    """One reduction to commit: its input, where its output and offload go, how.

    ``change``: the in-place transaction the output replaces its input under;
    ``skip_unchanged``: an in-place change that changes nothing records nothing;
    ``skip_no_gain``: nor does one that would make the transcript bigger (``no_gain``).
    ``mapped`` is the input file's status when ``data`` is a map of it. Filled by the
    commit: ``written`` (the output's size), ``carried`` (bytes carried over after
    it), ``unchanged``.
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
    no_gain: bool = False
    mapped: os.stat_result | None = None
    written: int = 0
    carried: int = 0
    unchanged: bool = False


def reduce_and_commit(job: Job) -> PipelineResult:
    """Reduce into a staging offload directory, then commit the pair (see :func:`_commit`).

    A file changed during the run is refused unless its mapped bytes are still those
    hashed first (lines appended to a session are not part of this run, as with a read).
    With ``opts.stream`` the output is written to its staged file as it is made
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
    store: OffloadStore | None = None
    staged = None
    if job.dest.stream and job.out_path is not None:
        staged = job.change.stage() if job.change is not None else Staged(job.out_path)
    try:
        # Both made inside: an interrupt at any moment leaves neither behind.
        store = OffloadStore(off_path, root_cited, force=job.run.force)
        store.grown_from = grown_from
        if staged is not None:
            staged.open()
        store, reduced = _run(job, store, staged, resume)
        job.no_gain = job.skip_no_gain and grows(reduced.report)
        if changed_since(job.input_name, job.mapped) and digest(job.data) != input_sha:
            raise TranscriptError(
                job.input_name,
                None,
                "the file changed while ctx read it; run again once it is no longer "
                "being rewritten, or reduce a copy",
            )
        header = _header(job, reduced, input_sha)
        _commit(job, store, (header, reduced.script, reduced.rerun), reduced.output, staged)
    except BaseException as exc:
        if store is not None:
            store.abort()
        if staged is not None:
            staged.discard()
        if isinstance(exc, OSError) and exc.filename is None:
            exc.filename = str(job.out_path or job.root)
        raise
    if not job.unchanged:
        written = str(job.out_path.resolve()) if job.out_path is not None else ""
        remember(header, off_path, written, job.run.log)
    return reduced


def grows(report: Report) -> bool:
    """True if the reduction makes what a resume sends bigger (a negative saving).

    Hints citing their files can outweigh short texts they replace: such a run has
    nothing to gain, and an in-place one leaves the file as it is.
    """
    before, after = report.resume_tokens_before, report.resume_tokens_after
    if before is None or after is None:
        before, after = report.tokens_before, report.tokens_after
    return after > before


def _run(
    job: Job,
    store: OffloadStore,
    staged: Staged | None,
    resume: tuple[Resume, dict[str, Any]] | None,
) -> tuple[OffloadStore, PipelineResult]:
    """The reduction itself: keeping a previous run's prefix if it can, else in full."""
    opts = job.run
    incremental = opts.incremental and job.config.settings.incremental

    def run(kept: Resume | None) -> PipelineResult:
        if staged is not None and staged.fh is not None:
            # A run in full after a re-run gave up starts anew.
            staged.fh.seek(0)
            staged.fh.truncate()
        options = ReduceOptions(
            on_invalid=opts.on_invalid,
            log=opts.log,
            counting=opts.counting or CountOptions(),
            monitors=False,
        )
        into = staged.fh if staged is not None else None
        if incremental and job.out_path is not None and job.change is None:
            # A file that may grow: keep what a later run over it can build on.
            return rerun_bytes(
                job.data,
                kept,
                config=job.config,
                offload=store,
                path=job.input_name,
                into=into,
                options=options,
            )
        return reduce_bytes(
            job.data,
            config=job.config,
            offload=store,
            path=job.input_name,
            into=into,
            options=options,
        )

    if resume is not None and incremental:
        try:
            store.adopt(resume[1], pack_end(resume[0].script))
            return store, run(resume[0])
        except (OSError, OffloadError, PrefixChanged):
            # The previous directory changed under us, or a stage or the format
            # reached into the kept prefix: run in full.
            store.abort()
            fresh = OffloadStore(store.path, store.root, force=store.force)
            fresh.grown_from, store = store.grown_from, fresh
    return store, run(None)


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


def _commit(
    job: Job,
    store: OffloadStore,
    manifest: tuple[Header, list[Any], dict[str, Any] | None],
    output: bytes,
    staged: Staged | None,
) -> None:
    """Stage the output, rename the offload directory, then the output, under a lock.

    ``staged``: the output was written to this temporary file already. In place, the
    transaction settles right before the output replaces the input: what was appended
    meanwhile is carried over, and any other change undoes the commit (the file is
    left as it was). An in-place change that changes nothing with ``skip_unchanged``
    commits nothing at all.
    """
    header = manifest[0]
    job.written = header.output.bytes
    if job.no_gain or (job.skip_unchanged and header.output.sha256 == header.input.sha256):
        job.unchanged = True
        store.abort()
        if staged is not None:
            staged.discard()
        return
    out_path, change = job.out_path, job.change
    held = staged is None and out_path is not None
    if staged is None and out_path is not None:
        staged = change.stage() if change is not None else Staged(out_path)
    try:
        with commit_lock(store.path, *([out_path] if out_path is not None else [])):
            if staged is not None and held:
                staged.open().write(output)
            elif staged is None and job.dest.write is not None:
                job.dest.write(output)
            if change is not None and staged is not None:
                job.carried = change.commit(store, manifest, staged)
                return
            if staged is not None:
                staged.close()
            store.commit(*manifest)
            if staged is not None:
                staged.replace()
            store.finish()
    except BaseException:
        if staged is not None:
            staged.discard()
        raise


@dataclass(frozen=True)
class InPlaceRoot:
    """Where an in-place run of a file records its change, and what it builds on.

    Attributes:
        root: the offload directory (a change directory of a session, else beside it).
        previous: the recorded reductions whose output the file is (it is a ctx output).
        session: the file is a client's session (recorded in ctx's data directory).
    """

    root: str
    previous: list[str]
    session: bool

    def fresh(self, dest: Destination) -> str:
        """The root a run that changes the file again writes to: a new sibling if needed."""
        if self.previous and not self.session and dest.offload_dir is None:
            if Path(self.root).exists():
                return free_sibling(self.root)
        return self.root


def in_place_root(path: Path, dest: Destination, data: bytes, *, allocate: bool) -> InPlaceRoot:
    """Where an in-place run of ``path`` (holding ``data``) records its change.

    ``allocate`` takes the next change directory of a session (under the file's lock);
    without it the name is only predicted (what ``ctx stats --in-place`` cites).
    """
    session = dest.offload_dir is None and is_session_path(path)
    if session:
        change = history.new_change if allocate else history.next_change
        root = str(change(path, "reduce"))
        known = history.changes(path)[::-1]
    else:
        root = dest.offload_dir or f"{path}.offload"
        known = history.siblings(root)
    known += history.index_dirs(data, os.path.realpath(path))
    previous = [str(p.resolve()) for p in known if history.match_reduction(data, p)]
    return InPlaceRoot(root, previous, session)


def reduce_in_place(
    path: Path, config: Config, run: RunOptions, dest: Destination, raw: bytes | None = None
) -> Reduction:
    """The in-place route: which record it gets, then one transaction.

    A file that is already what this chain makes is left as it is (``change.record`` is
    None); one that would change again gets a record of its own, so every original is kept.
    """
    session = dest.offload_dir is None and is_session_path(path)
    live = None if run.force or not session else run.live_seconds
    with InPlace(path, live_seconds=live, raw=raw) as change:
        data = change.body
        name = str(change.path) if session else str(path)
        where = in_place_root(path, dest, data, allocate=True)
        if where.previous:
            again = reduce_bytes(
                data,
                config=config,
                offload=Preview(cited_root(where.root)),
                path=name,
                options=ReduceOptions(on_invalid=run.on_invalid, log=run.log),
            )
            if again.output == data:
                again.report.output = name
                history.prune(path)
                size = len(change.raw)
                return Reduction(again.report, data, Change(change.path, None, size, size), session)
        root = where.fresh(dest)
        job = Job(data, name, change.target, root, config, run, dest, where.previous, change)
        job.skip_unchanged = session  # a session's change that changes nothing is not kept
        job.skip_no_gain = True
        reduced = reduce_and_commit(job)
    reduced.report.output = name
    record = None if job.unchanged else Path(root)
    if record is None:
        history.prune(path)
    done = Change(change.path, record, len(change.raw), job.written + job.carried, job.carried)
    return Reduction(reduced.report, reduced.output, done, session, no_gain=job.no_gain)


def reduce_local(
    name: str, config: Config, run: RunOptions, dest: Destination, raw: Input | None = None
) -> Reduction:
    """A file (or stdin) into a file or stdout, never in place (that is :func:`reduce_in_place`)."""
    out_name = check_output(name, dest.output, in_place=False)
    data, st = (raw, None) if raw is not None else open_input(name)
    root = dest.offload_dir
    if root is None:
        root = default_offload_dir(out_name, config, data)
    out_path = None if out_name is None else Path(out_name)
    reduced = reduce_and_commit(Job(data, name, out_path, root, config, run, dest, mapped=st))
    reduced.report.output = out_name or STDIO
    return Reduction(reduced.report, reduced.output)
