"""The library entry points: reduce, preview (stats) and restore transcripts."""

from __future__ import annotations

import hashlib
import mmap
import os
import stat
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ctxcli.core.errors import CtxError, OffloadError, OnInvalid, PrefixChanged, TranscriptError
from ctxcli.core.io import Input, hash_input
from ctxcli.core.protocols import sha256
from ctxcli.formats import get_format
from ctxcli.pipeline.compose import ReduceOptions, reduce_bytes, rerun_bytes
from ctxcli.pipeline.config import Config, load_config
from ctxcli.pipeline.rerun import Resume, config_digest, pack_end, resume_from
from ctxcli.pipeline.results import Reduced, Report
from ctxcli.pipeline.stats_cache import cached_stats, store_report
from ctxcli.services.session_files import is_session_path
from ctxcli.services.tokens import CountOptions
from ctxcli.store import history
from ctxcli.store.disk import OffloadStore, check_offload_location
from ctxcli.store.history import Restored
from ctxcli.store.index import ReductionIndex, remember
from ctxcli.store.inplace import (
    DEFAULT_LIVE_SECONDS,
    Change,
    ChangedError,
    InPlace,
    LiveSessionError,
    Staged,
    unreadable,
    write_atomic,
)
from ctxcli.store.lock import commit_lock
from ctxcli.store.manifest import Header, InputSide, Side, manifest_for_rerun
from ctxcli.store.naming import Preview

__all__ = [
    "STDIO",
    "Change",
    "ChangedError",
    "LiveSessionError",
    "Reduced",
    "Report",
    "Restored",
    "read_input",
    "reduce_bytes",
    "reduce_file",
    "reduce_in_place",
    "restore_file",
    "restore_transcript",
    "stats_file",
    "write_atomic",
]

STDIO = "-"


def default_offload_dir(output: str | None, config: Config, data: Input | None = None) -> str:
    """Where removed text goes when no offload directory is given.

    One rule: beside a file output (``OUT.offload``); for output to stdout, a directory
    per input under ``./ctx-offload`` (named by the input's hash), so two pipes never
    share one. A ``offload_dir`` setting in the config wins.
    """
    if config.settings.offload_dir:
        return config.settings.offload_dir
    if output and output != STDIO:
        return f"{output}.offload"
    if data is None:
        return "ctx-offload"
    return f"ctx-offload/{digest(data)[:12]}"


def _per_input_dirs(root: Path) -> list[Path]:
    """The per-input offload directories under a root (what output to stdout writes)."""
    try:
        return sorted(p.parent for p in root.glob("*/manifest.json"))
    except OSError:
        return []


def _free_sibling(root: str) -> str:
    """The first ``root.N`` (N >= 2) that does not exist."""
    n = 2
    while Path(f"{root}.{n}").exists():
        n += 1
    return f"{root}.{n}"


def read_input(path: str) -> bytes:
    """The bytes of ``path`` (``-`` reads stdin)."""
    if path == STDIO:
        return sys.stdin.buffer.read()
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise unreadable(path, exc) from None


MAP_MIN_BYTES = 1 << 20
"""Inputs from this size on are mapped, not read (:func:`open_input`)."""


def open_input(path: str) -> tuple[Input, os.stat_result | None]:
    """The bytes of ``path``, and the file's status when they are a map of it.

    A regular file of :data:`MAP_MIN_BYTES` or more is mapped read-only instead of read:
    its pages are given back once parsed (:func:`~ctxcli.core.io.release`), so a
    run does not hold the input and its parsed records at once. Check the returned
    status with :func:`changed_since` after using the result: a map shows what is in
    the file now, not a snapshot. (A file truncated under the map kills the process
    with SIGBUS: in-place and session runs, whose file a client may rewrite, read bytes.)
    """
    if path == STDIO:
        return read_input(path), None
    try:
        with open(path, "rb") as fh:
            st = os.fstat(fh.fileno())
            if stat.S_ISREG(st.st_mode) and st.st_size >= max(MAP_MIN_BYTES, 1):
                return mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ), st
            return fh.read(), None  # a pipe is read once, from this open
    except OSError as exc:
        raise unreadable(path, exc) from None


def digest(data: Input) -> str:
    """Hex SHA-256 of ``data``; a map is read in steps, its pages given back as it goes."""
    if isinstance(data, bytes):
        return sha256(data)
    return hash_input(hashlib.sha256(), data, 0, len(data)).hexdigest()


def changed_since(path: str, st: os.stat_result | None) -> bool:
    """True if the mapped file ``path`` is not as it was when mapped (``st``)."""
    if st is None:
        return False
    try:
        now = os.stat(path)
    except OSError:
        return True
    return (now.st_ino, now.st_size, now.st_mtime_ns) != (st.st_ino, st.st_size, st.st_mtime_ns)


def _offload_path(root: str) -> tuple[Path, str]:
    """The offload directory to write and how hints cite it (``w/sub/..`` is ``w``)."""
    path = Path(root)
    if ".." in path.parts or path.name in ("", "."):
        normal = os.path.normpath(root)
        return Path(os.path.realpath(normal)), normal
    return path, root.rstrip("/") or "."


def reduce_file(
    input: str | Path,
    output: str | Path | None = None,
    *,
    config: Config | None = None,
    offload_dir: str | Path | None = None,
    force: bool = False,
    on_invalid: str = "auto",
    raw: bytes | None = None,
    log: Callable[[str], None] | None = None,
    in_place: bool = False,
    counting: CountOptions | None = None,
    write: Callable[[bytes], None] | None = None,
    cite_as: str | None = None,
    incremental: bool = True,
    return_output: bool = True,
) -> tuple[Report, bytes]:
    """Reduce a transcript file and write the output and its offload directory.

    ``output`` of ``None`` or ``"-"`` writes no file but returns the bytes; give
    ``write`` (the CLI passes stdout) to have them written before the offload
    directory is committed, so a reader that fails leaves no orphan offload.
    The output is staged first, then the offload directory is renamed into place,
    then the output, under a lock on both directories: an output never exists
    without what it needs to be restored, and racing runs never cross their pairs.
    ``cite_as`` is the offload directory the hints name when it is not where the files
    are written (an upload to object storage follows). When ``output`` and its offload
    directory hold a previous run over the start of this input (the transcript grew by
    appending), that run's decisions for a prefix are kept and only the rest is
    reduced, with the same result as a full run (``incremental=False`` runs in full;
    see :mod:`ctxcli.pipeline.rerun`). ``return_output=False`` with an ``output``
    file writes the output to its staged file as it is made, so it is never held whole
    beside the parsed input (the memory of a large run); the bytes returned are then
    empty. ``in_place`` changes the file itself, as :func:`reduce_in_place` does.

    Returns:
        The report and the reduced bytes (empty when written as made, see above).
    """
    config = config or load_config()
    input_name = str(input)
    out_name = _check_output(input_name, None if output is None else str(output), in_place)
    if in_place:
        run = _InPlaceRun(config, offload_dir, force, on_invalid, counting, log)
        report, _change, held = _reduce_in_place(Path(input_name), run, raw, not return_output)
        return report, held
    data, st = (raw, None) if raw is not None else open_input(input_name)
    root = str(
        offload_dir if offload_dir is not None else default_offload_dir(out_name, config, data)
    )
    out_path = None if out_name in (None, STDIO) else Path(str(out_name))
    opts = _Options(
        force, on_invalid, log, counting, write, cite_as, incremental, not return_output
    )
    reduced = _reduce_and_commit(_Job(data, input_name, out_path, root, config, opts, mapped=st))
    reduced.report.output = out_name or STDIO
    return reduced.report, reduced.output


def reduce_in_place(
    path: str | Path,
    *,
    config: Config | None = None,
    offload_dir: str | Path | None = None,
    force: bool = False,
    on_invalid: str = "auto",
    counting: CountOptions | None = None,
    log: Callable[[str], None] | None = None,
    live_seconds: int = DEFAULT_LIVE_SECONDS,
) -> tuple[Report, Change]:
    """Reduce a file where it is, recording how to undo it (``restore_file`` does).

    A Claude Code or Codex session file (under the clients' session directories) keeps
    its record in its change directories under ctx's data directory, whose absolute
    paths the hints cite, and is left alone while it looks in use (written in the last
    ``live_seconds``, or open in another process) unless ``force``. Any other file, or
    any file given an ``offload_dir``, keeps it beside it (``FILE.offload``). Either way
    the change is one :class:`~ctxcli.store.inplace.InPlace` transaction: lines a client
    appends during the run are kept after the output; any other change during the run
    fails it (:class:`~ctxcli.store.inplace.ChangedError`) and leaves the file alone. A
    file that is already what this chain makes is left as it is (``Change.record`` None).

    Raises:
        LiveSessionError: the session looks in use and ``force`` is not set.
    """
    opts = _InPlaceRun(config or load_config(), offload_dir, force, on_invalid, counting, log)
    report, change, _ = _reduce_in_place(Path(path), opts, None, True, live_seconds)
    return report, change


@dataclass(frozen=True)
class _InPlaceRun:
    """What :func:`reduce_in_place` was asked for."""

    config: Config
    offload_dir: str | Path | None
    force: bool
    on_invalid: str
    counting: CountOptions | None
    log: Callable[[str], None] | None


def _reduce_in_place(
    path: Path,
    run: _InPlaceRun,
    raw: bytes | None,
    stream: bool,
    live_seconds: int = DEFAULT_LIVE_SECONDS,
) -> tuple[Report, Change, bytes]:
    """The in-place route: which record it gets, then one transaction (see above)."""
    session = run.offload_dir is None and is_session_path(path)
    live = None if run.force or not session else live_seconds
    with InPlace(path, live_seconds=live, raw=raw) as change:
        data = change.body
        name = str(change.path) if session else str(path)
        own = history.changes(path)[::-1] if session else []
        if session:
            root = str(history.new_change(path, "reduce"))
        else:
            root = str(run.offload_dir if run.offload_dir is not None else f"{path}.offload")
        siblings = [] if session else history.siblings(root)
        known = [*own, *siblings, *history.index_dirs(data, str(change.target))]
        previous = [str(p.resolve()) for p in known if history.match_reduction(data, p)]
        if previous:
            # Already a ctx output: a rerun that changes nothing writes nothing; one that
            # does change it gets a record of its own, so every original is kept.
            again = reduce_bytes(
                data,
                config=run.config,
                offload=Preview(root),
                path=name,
                options=ReduceOptions(on_invalid=OnInvalid.of(run.on_invalid), log=run.log),
            )
            if again.output == data:
                again.report.output = name
                history.prune(path)
                size = len(change.raw)
                return again.report, Change(change.path, None, size, size), data
            if not session and run.offload_dir is None and Path(root).exists():
                root = _free_sibling(root)
        options = _Options(run.force, run.on_invalid, run.log, run.counting, stream=stream)
        job = _Job(data, name, change.target, root, run.config, options, previous, change, session)
        reduced = _reduce_and_commit(job)
    reduced.report.output = name
    record = None if job.unchanged else Path(root)
    if record is None:
        history.prune(path)
    done = Change(change.path, record, len(change.raw), job.written + job.carried, job.carried)
    return reduced.report, done, reduced.output


def _check_output(input_name: str, out_name: str | None, in_place: bool) -> str | None:
    """The output path, after refusing combinations that would lose the input."""
    if in_place:
        if input_name == STDIO:
            raise OffloadError("an in-place reduction needs a file, not stdin.")
        if out_name not in (None, STDIO, input_name):
            raise OffloadError(
                "an in-place reduction writes to its input; do not give an output path too."
            )
        return input_name
    if out_name not in (None, STDIO) and input_name != STDIO:
        if Path(str(out_name)).resolve() == Path(input_name).resolve():
            raise OffloadError(
                f"{out_name}: output would overwrite the input; choose another output "
                "(the input is never modified)."
            )
    return out_name


@dataclass(frozen=True)
class _Options:
    """How a run writes: the switches of :func:`reduce_file` the commit needs."""

    force: bool = False
    on_invalid: str = "auto"
    log: Callable[[str], None] | None = None
    counting: CountOptions | None = None
    write: Callable[[bytes], None] | None = None
    cite_as: str | None = None
    incremental: bool = True
    stream: bool = False


@dataclass
class _Job:
    """One reduction to commit: its input, where its output and offload go, how.

    ``change``: the in-place transaction the output replaces its input under;
    ``skip_unchanged``: an in-place change that changes nothing records nothing.
    ``mapped`` is the input file's status when ``data`` is a map of it. Filled by the
    commit: ``written`` (the output's size), ``carried`` (bytes carried over after
    it), ``unchanged``.
    """

    data: Input
    input_name: str
    out_path: Path | None
    root: str
    config: Config
    opts: _Options
    previous: list[str] = field(default_factory=list)
    change: InPlace | None = None
    skip_unchanged: bool = False
    mapped: os.stat_result | None = None
    written: int = 0
    carried: int = 0
    unchanged: bool = False


def _reduce_and_commit(job: _Job) -> Reduced:
    """Reduce into a staging offload directory, then commit the pair (see :func:`_commit`).

    A file changed during the run is refused unless its mapped bytes are still those
    hashed first (lines appended to a session are not part of this run, as with a read).
    With ``opts.stream`` the output is written to its staged file as it is made
    (``Reduced.output`` is empty).
    """
    off_path, display = _offload_path(job.root)
    keep = [Path(job.input_name)] if job.input_name != STDIO else []
    check_offload_location(off_path, keep=keep + ([job.out_path] if job.out_path else []))
    root_cited = job.opts.cite_as or display
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
    if job.opts.stream and job.out_path is not None:
        staged = job.change.stage() if job.change is not None else Staged(job.out_path)
    try:
        # Both made inside: an interrupt at any moment leaves neither behind.
        store = OffloadStore(off_path, root_cited, force=job.opts.force)
        store.grown_from = grown_from
        if staged is not None:
            staged.open()
        store, reduced = _run(job, store, staged, resume)
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
        remember(header, off_path, written, job.opts.log)
    return reduced


def _run(
    job: _Job,
    store: OffloadStore,
    staged: Staged | None,
    resume: tuple[Resume, dict[str, Any]] | None,
) -> tuple[OffloadStore, Reduced]:
    """The reduction itself: keeping a previous run's prefix if it can, else in full."""
    opts = job.opts
    incremental = opts.incremental and job.config.settings.incremental

    def run(kept: Resume | None) -> Reduced:
        if staged is not None and staged.fh is not None:
            # A run in full after a re-run gave up starts anew.
            staged.fh.seek(0)
            staged.fh.truncate()
        options = ReduceOptions(
            on_invalid=OnInvalid.of(opts.on_invalid),
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


def _header(job: _Job, reduced: Reduced, input_sha: str) -> Header:
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
    job: _Job, input_hash: hashlib._Hash, off_path: Path, root: str
) -> tuple[tuple[Resume, dict[str, Any]] | None, int, str | None]:
    """The prefix a previous run of the input into the output lets this run keep, if any;
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
    digest = config_digest(job.config, fmt, root, job.opts.on_invalid)
    try:
        resume = resume_from(manifest, data, input_hash.copy(), output, digest)
    except (KeyError, TypeError, IndexError, ValueError):
        resume = None  # a manifest damaged where the re-run reads it: a full run
    return ((resume, manifest) if resume is not None else None), old, grown


def _commit(
    job: _Job,
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
    if job.skip_unchanged and header.output.sha256 == header.input.sha256:
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
            elif staged is None and job.opts.write is not None:
                job.opts.write(output)
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


def stats_file(
    input: str | Path,
    *,
    config: Config | None = None,
    on_invalid: str = "auto",
    raw: bytes | None = None,
    counting: CountOptions | None = None,
    output: str | Path | None = None,
    offload_dir: str | Path | None = None,
    in_place: bool = False,
) -> Report:
    """Run the reduction without writing anything and report what it would save.

    ``output``, ``offload_dir`` and ``in_place`` are those :func:`reduce_file` would get:
    the hints cite the offload directory, so the same paths give the same numbers as
    the file reduce writes. With the cache on (the default), the report of an unchanged
    file under the same configuration and ctx is remembered
    (:mod:`ctxcli.pipeline.stats_cache`).
    """

    config = config or load_config()
    st: os.stat_result | None = None
    if raw is not None:
        data: Input = raw
    else:
        data, st = open_input(str(input))
    out_name = _check_output(str(input), None if output is None else str(output), in_place)
    if offload_dir is not None:
        root = str(offload_dir)
    else:
        root = default_offload_dir(out_name, config, data)
    cache, key, hit = (None, None, None)
    if counting is None or counting.cache:
        cache, key, hit = cached_stats(data, f"{input}\0{root}", config, on_invalid)
    try:
        if hit is not None:
            return hit
        reduced = reduce_bytes(
            data,
            config=config,
            offload=Preview(root),
            path=str(input),
            options=ReduceOptions(
                on_invalid=OnInvalid.of(on_invalid), counting=counting or CountOptions()
            ),
        )
        if changed_since(str(input), st):
            # The map showed the file while it changed: count a snapshot of it instead.
            snapshot = read_input(str(input))
            return stats_file(
                input,
                config=config,
                on_invalid=on_invalid,
                raw=snapshot,
                counting=counting,
                output=output,
                offload_dir=offload_dir,
                in_place=in_place,
            )
        if cache is not None and key is not None:
            store_report(cache, key, reduced.report)
        return reduced.report
    finally:
        if cache is not None:
            cache.close()


def restore_transcript(
    reduced: str | Path,
    output: str | Path | None = None,
    *,
    offload_dir: str | Path | None = None,
    raw: bytes | None = None,
    in_place: bool = False,
    force: bool = False,
    live_seconds: int = DEFAULT_LIVE_SECONDS,
) -> Restored:
    """Rebuild the original transcript from a reduced one, through every reduction made.

    Without ``offload_dir`` it looks in every place a reduction or change of the file is
    recorded (:mod:`ctxcli.store.history`): its change directories (a session reduced or
    repaired in place), ``FILE.offload`` and the ``FILE.offload.N`` of later in-place runs,
    and the index of reductions made on this machine. Lines appended after a reduction (a
    resumed session) are carried over. With ``in_place`` the file itself is replaced,
    keeping its mode, in one :class:`~ctxcli.store.inplace.InPlace` transaction (lines
    appended meanwhile are kept; a session in use is left alone unless ``force``), and the
    file's change directories it used are discarded: no other file's records are touched.

    Raises:
        RestoreError: nothing is recorded, or something is missing, altered or does not
            belong together.
    """
    name = str(reduced)
    if in_place:
        if name == STDIO:
            raise CtxError("an in-place restore needs a file, not stdin.")
        if output not in (None, STDIO, name):
            raise CtxError("an in-place restore writes to its input; do not give an output too.")
        return _restore_in_place(Path(name), offload_dir, None if force else live_seconds)
    data = raw if raw is not None else read_input(name)
    restored = _restore(data, name, offload_dir)
    if output is not None and str(output) != STDIO:
        write_atomic(Path(output), restored.data)
    return restored


def _restore(data: bytes, name: str, offload_dir: str | Path | None) -> Restored:
    """Undo every reduction of ``data`` (the bytes of ``name``) that a record explains."""
    if offload_dir is not None:
        first = [Path(offload_dir), *_per_input_dirs(Path(offload_dir))]
        return history.restore_chain(
            data, first, lambda content: history.index_dirs(content, None), name=name
        )
    if name == STDIO:
        root = Path(default_offload_dir(None, load_config()))
        first = [*_per_input_dirs(root), *history.index_dirs(data, None)]
        if not first:
            raise CtxError("restoring from stdin needs the offload directory to be named.")
        return history.restore_chain(
            data, first, lambda content: history.index_dirs(content, None), name=name
        )
    path = Path(name)
    real = os.path.realpath(path)
    legacy = history.legacy_changes(path, data)
    changes = [*history.changes(path)[::-1], *legacy[::-1]]
    first = [*changes, *history.siblings(f"{name}.offload"), *history.index_dirs(data, real)]
    own = [*(p for p in legacy if history.owns(path, p)), *history.changes(path)]
    return history.restore_chain(
        data,
        first,
        lambda content: [*changes, *history.index_dirs(content, real)],
        name=name,
        own=own,
    )


def _restore_in_place(path: Path, offload_dir: str | Path | None, live: int | None) -> Restored:
    """Replace ``path`` by its original; discard the change directories of it that were used."""
    if not (is_session_path(path) or history.changes(path)):
        live = None  # a plain file is not a client's: nothing to be in use by
    with InPlace(path, live_seconds=live, lines=False) as change:
        restored = _restore(change.raw, str(path), offload_dir)
        if not restored.steps:
            return restored  # nothing to undo: the file is left as it is
        staged = change.stage()
        try:
            staged.open().write(restored.data)
            staged.close()
            change.settle(staged)
            change.replace(staged)
        except BaseException:
            staged.discard()
            raise
        spent = [p for p in (Path(s.offload_dir) for s in restored.steps) if history.owns(path, p)]
        ReductionIndex().forget([str(p.resolve()) for p in spent])
        for used in spent:
            history.discard(used)
        history.prune(path)
    return restored


def restore_file(
    reduced: str | Path,
    output: str | Path | None = None,
    *,
    offload_dir: str | Path | None = None,
    raw: bytes | None = None,
) -> bytes:
    """The original bytes (see :func:`restore_transcript`, which also says how)."""
    return restore_transcript(reduced, output, offload_dir=offload_dir, raw=raw).data
