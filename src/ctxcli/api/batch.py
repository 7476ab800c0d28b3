"""Reduce or preview many transcripts at once, on several processes.

``ctx reduce DIR -o OUT`` and ``ctx stats a.jsonl b.jsonl`` land here. Each file is
handled exactly as a single-file run would handle it (:func:`ctxcli.api.reduce_file`,
:func:`ctxcli.api.stats_file`); a file that fails is reported with its name and the
others go on. Results come back in input order, whatever order the workers finish in.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field, replace
from pathlib import Path

from ctxcli import api
from ctxcli.core.errors import CtxError, ExitCode, Remedy, TranscriptError
from ctxcli.pipeline.config import Config
from ctxcli.pipeline.options import RunOptions
from ctxcli.services.tokens.bulk import ignore_sigint
from ctxcli.services.tokens.ledger import CountOptions

__all__ = [
    "FileProgress",
    "FileResult",
    "RestoreResult",
    "TRANSCRIPT_SUFFIXES",
    "exit_code",
    "expand_inputs",
    "reduce_many",
    "restore_many",
    "stats_many",
]

TRANSCRIPT_SUFFIXES = (".jsonl", ".json", ".ndjson", ".traj")
"""Files a directory contributes (other files in it are not transcripts)."""

FileProgress = Callable[["FileResult", int, int], None]
"""Called after each file with its result, files done, and files in all."""


@dataclass
class FileResult:
    """What happened to one input of a batch.

    Attributes:
        input: the input path as given (or as found in a directory).
        output: where the reduced transcript went (None for stats and failures).
        report: the run's report, None if it failed.
        error: the one-line reason it failed, None if it succeeded.
        exit_code: the exit code a single-file run would have ended with.
        name: the input's name relative to the directory it was found in.
    """

    input: str
    output: str | None = None
    report: api.Report | None = None
    error: str | None = None
    exit_code: int = int(ExitCode.OK)
    name: str = ""

    @property
    def ok(self) -> bool:
        """True if the file was processed."""
        return self.error is None

    def to_dict(self) -> dict[str, object]:
        """The JSON shape: the report's, or input and error for a failure."""
        if self.report is not None:
            return self.report.to_dict()
        return {"input": self.input, "error": self.error, "exit_code": self.exit_code}


@dataclass
class _Job:
    input: str
    name: str
    output: str | None
    offload_dir: str | None
    bytes: int = 0
    error: str | None = field(default=None)


def expand_inputs(
    paths: Iterable[str | Path], *, allow_empty: bool = False
) -> list[tuple[str, str]]:
    """The transcript files named by ``paths``, each with its name relative to its root.

    A file stands for itself (its relative name is its base name); a directory for
    every transcript file under it (``*.jsonl``, ``*.json``, ``*.ndjson``, ``*.traj``),
    sorted, skipping hidden entries and ``*.offload`` directories.

    Raises:
        TranscriptError: a path does not exist, or (unless ``allow_empty``) a directory
            holds no transcript file.
    """
    found: list[tuple[str, str]] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            items = sorted(_walk(path))
            if not items and not allow_empty:
                raise TranscriptError(
                    str(raw),
                    None,
                    f"no transcript files ({', '.join('*' + s for s in TRANSCRIPT_SUFFIXES)}) "
                    "in this directory",
                    remedy=Remedy.ALLOW_EMPTY,
                )
            for item in items:
                found.append((str(item), str(item.relative_to(path))))
        elif path.exists():
            found.append((str(raw), path.name))
        else:
            raise TranscriptError(str(raw), None, "no such file or directory")
    return found


_OFFLOAD_DIR = re.compile(r"(\.offload(\.\d+)?|^ctx-offload)$")


def _is_offload_dir(name: str) -> bool:
    """Offload directories (``X.offload``, ``X.offload.2``, ``ctx-offload``) hold no transcript."""
    return _OFFLOAD_DIR.search(name) is not None


def _walk(root: Path) -> Iterable[Path]:
    for entry in os.scandir(root):
        if entry.name.startswith(".") or _is_offload_dir(entry.name):
            continue
        if entry.is_dir(follow_symlinks=False):
            yield from _walk(Path(entry.path))
        elif entry.is_file() and entry.name.endswith(TRANSCRIPT_SUFFIXES):
            yield Path(entry.path)


def _plan(
    inputs: Sequence[tuple[str, str]], out_dir: Path | None, offload_root: str | None
) -> list[_Job]:
    jobs: list[_Job] = []
    taken: dict[str, str] = {}
    for source, rel in inputs:
        job = _Job(source, rel, None, None)
        try:
            job.bytes = os.path.getsize(source)
        except OSError:
            job.bytes = 0
        if out_dir is not None:
            target = out_dir / rel
            key = str(target.resolve())
            if key in taken:
                job.error = (
                    f"{source}: would be written to {target}, like {taken[key]}; "
                    "pass them in separate runs or rename one."
                )
            taken.setdefault(key, source)
            job.output = str(target)
            if offload_root is not None:
                job.offload_dir = str(Path(offload_root) / rel)
        jobs.append(job)
    return jobs


def _refuse_overlaps(jobs: Sequence[_Job], *, offloads: bool = True) -> None:
    """Refuse the whole batch, before anything is written, if a write would hit an input.

    An output (or, with ``offloads``, an offload directory) that is, or holds, an input
    would replace it before that input is read: its bytes would be gone, never reduced
    or restored. One rule for reduce and restore: the whole plan is checked first.

    Raises:
        CtxError: naming the output and the input it would overwrite.
    """
    inputs: dict[str, str] = {}
    ids: dict[tuple[int, int], str] = {}
    for job in jobs:
        inputs[os.path.realpath(job.input)] = job.input
        try:
            st = os.stat(job.input)
        except OSError:
            continue
        ids[(st.st_dev, st.st_ino)] = job.input
    for job in jobs:
        if job.output is None:
            continue
        targets = [(job.output, "output")]
        if offloads:
            targets.append((job.offload_dir or f"{job.output}.offload", "offload directory"))
        for target, what in targets:
            hit = _input_at(target, inputs, ids)
            if hit is not None:
                raise CtxError(
                    f"{target}: the {what} of {job.input} would overwrite the input {hit}; "
                    "nothing was written. Choose an output directory that holds no input."
                )


def _input_at(target: str, inputs: dict[str, str], ids: dict[tuple[int, int], str]) -> str | None:
    """The input that ``target`` is (same file) or holds, if any."""
    real = os.path.realpath(target)
    for path, name in inputs.items():
        if path == real or path.startswith(real.rstrip("/") + "/"):
            return name
    try:
        st = os.stat(target)
    except OSError:
        return None
    return ids.get((st.st_dev, st.st_ino))


@dataclass(frozen=True)
class _Run:
    """What every file of a batch is run with (sent to the worker processes)."""

    mode: str
    config: Config
    options: RunOptions


def _run_one(job: _Job, run: _Run) -> FileResult:
    """Process one file; every error becomes a result, never an exception."""
    result = _try_one(job, run)
    result.name = job.name
    return result


def _try_one(job: _Job, run: _Run) -> FileResult:
    if job.error is not None:
        return FileResult(job.input, error=job.error, exit_code=int(ExitCode.USAGE_ERROR))
    config, options = run.config, run.options
    try:
        if run.mode == "reduce":
            dest = api.Destination(job.output, job.offload_dir, stream=True)
            report = api.reduce(job.input, dest, config=config, options=options).report
            return FileResult(job.input, job.output, report)
        report = api.stats(job.input, config=config, options=options)
        return FileResult(job.input, None, report)
    except CtxError as exc:
        message = str(exc)
        if job.input not in message:
            message = f"{job.input}: {message}"
        return FileResult(job.input, error=message, exit_code=int(exc.exit_code))
    except OSError as exc:  # the environment (permissions, full disk), not a bug
        where = exc.filename if exc.filename is not None else job.input
        return FileResult(
            job.input,
            error=f"{job.input}: {where}: {exc.strerror or exc}",
            exit_code=int(ExitCode.USAGE_ERROR),
        )
    except Exception as exc:  # one broken file must not stop the batch
        return FileResult(
            job.input,
            error=f"{job.input}: internal error: {type(exc).__name__}: {exc}",
            exit_code=int(ExitCode.INTERNAL_ERROR),
        )


def _run_all(
    jobs: list[_Job],
    mode: str,
    config: Config,
    options: RunOptions,
    progress: FileProgress | None,
) -> list[FileResult]:
    results: list[FileResult | None] = [None] * len(jobs)
    done = 0

    def finish(i: int, result: FileResult) -> None:
        nonlocal done
        results[i] = result
        done += 1
        if progress is not None:
            progress(result, done, len(jobs))

    # Each file is counted without a progress bar (the batch shows files) and, on the
    # workers, without the caller's log (a callable does not travel to a process).
    cache = options.counting.cache
    if options.jobs <= 1 or len(jobs) <= 1:
        # One file at a time; a large one may still count on every core.
        run = _Run(mode, config, replace(options, counting=CountOptions(cache=cache)))
        for i, job in enumerate(jobs):
            finish(i, _run_one(job, run))
    else:
        # Files are the unit of work: each worker counts on its own core only.
        counting = CountOptions(cache=cache, workers=1)
        run = _Run(mode, config, replace(options, counting=counting, log=None))
        _run_pool(jobs, run, options.jobs, finish)
    return [r for r in results if r is not None]


def _run_pool(
    jobs: list[_Job], run: _Run, workers: int, finish: Callable[[int, FileResult], None]
) -> None:
    """Run the files on ``workers`` processes, largest first; ``finish`` takes each result."""
    # Largest first, so one big file does not start last and finish alone.
    order = sorted(range(len(jobs)), key=lambda i: -jobs[i].bytes)
    pool = ProcessPoolExecutor(max_workers=min(workers, len(jobs)), initializer=ignore_sigint)
    try:
        futures: dict[Future[FileResult], int] = {
            pool.submit(_run_one, jobs[i], run): i for i in order
        }
        for fut in as_completed(futures):
            i = futures[fut]
            try:
                result = fut.result()
            except Exception as exc:  # the worker process died (killed, out of memory)
                result = FileResult(
                    jobs[i].input,
                    error=f"{jobs[i].input}: worker failed: {type(exc).__name__}: {exc}",
                    exit_code=int(ExitCode.INTERNAL_ERROR),
                    name=jobs[i].name,
                )
            finish(i, result)
    except BaseException:
        # Ctrl-C (the workers ignore it) or an error here: stop now rather than
        # finish every queued file. A killed worker leaves only a staging
        # directory, which the next run removes.
        _terminate(pool)
        raise
    pool.shutdown()


def _terminate(pool: ProcessPoolExecutor) -> None:
    processes = list(getattr(pool, "_processes", {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        process.terminate()


def reduce_many(
    paths: Iterable[str | Path],
    out_dir: str | Path,
    config: Config,
    *,
    offload_dir: str | Path | None = None,
    options: RunOptions | None = None,
    progress: FileProgress | None = None,
) -> list[FileResult]:
    """Reduce every transcript in ``paths`` into ``out_dir``, ``options.jobs`` files at a time.

    Each input goes to ``out_dir/<name>`` (a directory's files keep their relative
    paths) with its offload directory beside it, ``<output>.offload``; with
    ``offload_dir`` (or the ``offload_dir`` setting) they go to
    ``<offload_dir>/<name>`` instead. ``progress`` is called after each file.

    Returns:
        One result per input, in input order; failed inputs carry their error.

    Raises:
        TranscriptError: a path does not exist (nothing is processed then).
    """
    options = options or RunOptions()
    inputs = expand_inputs(paths, allow_empty=options.allow_empty)
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise CtxError(f"{out} is a file", remedy=Remedy.OUTPUT_DIRECTORY)
    root = offload_dir if offload_dir is not None else config.settings.offload_dir
    plan = _plan(inputs, out, None if root is None else str(root))
    _refuse_overlaps(plan)
    return _run_all(plan, "reduce", config, options, progress)


def stats_many(
    paths: Iterable[str | Path],
    config: Config,
    *,
    options: RunOptions | None = None,
    progress: FileProgress | None = None,
) -> list[FileResult]:
    """Preview the reduction of every transcript in ``paths``, ``options.jobs`` files at a time.

    ``progress`` is called after each file.
    """
    options = options or RunOptions()
    plan = _plan(expand_inputs(paths, allow_empty=options.allow_empty), None, None)
    return _run_all(plan, "stats", config, options, progress)


def exit_code(results: Sequence[FileResult]) -> int:
    """2 if any file failed, else 0."""
    return int(ExitCode.USAGE_ERROR) if any(not r.ok for r in results) else int(ExitCode.OK)


@dataclass
class RestoreResult:
    """What happened to one input of a batch restore."""

    input: str
    output: str | None = None
    restored: api.Restored | None = None
    error: str | None = None
    exit_code: int = int(ExitCode.OK)

    @property
    def ok(self) -> bool:
        """True if the file was restored."""
        return self.error is None


def restore_many(
    paths: Iterable[str | Path],
    out_dir: str | Path | None,
    *,
    in_place: bool = False,
    options: RunOptions | None = None,
) -> list[RestoreResult]:
    """Restore every reduced transcript in ``paths``, like :func:`reduce_many` reduced them.

    Each goes to ``out_dir/<name>`` (a directory's files keep their relative paths), or
    back over itself with ``in_place``; each finds its own offload directory (beside it,
    or in the ledger). A file that fails is reported and the others go on. Of
    ``options``, ``allow_empty`` and, in place, ``force`` and ``live_seconds`` apply.
    """
    if (out_dir is None) == (not in_place):
        raise CtxError("restoring several files needs an output directory, or in place.")
    options = options or RunOptions()
    inputs = expand_inputs(paths, allow_empty=options.allow_empty)
    plan = _plan(inputs, None if out_dir is None else Path(out_dir), None)
    if not in_place:
        _refuse_overlaps(plan, offloads=False)
    results: list[RestoreResult] = []
    for job in plan:
        if job.error is not None:
            results.append(RestoreResult(job.input, error=job.error, exit_code=2))
            continue
        try:
            dest = api.Destination(job.output, in_place=in_place)
            restored = api.restore(job.input, dest, options=options)
        except CtxError as exc:
            results.append(RestoreResult(job.input, error=str(exc), exit_code=int(exc.exit_code)))
            continue
        results.append(RestoreResult(job.input, job.output or job.input, restored))
    return results
