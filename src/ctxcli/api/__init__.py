"""The library entry points: reduce, preview (stats) and restore transcripts."""

from __future__ import annotations

import glob
import hashlib
import mmap
import os
import secrets
import stat
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

from ctxcli.core.errors import CtxError, OffloadError, PrefixChanged, TranscriptError
from ctxcli.core.io import Input, hash_input
from ctxcli.core.protocols import sha256
from ctxcli.formats import get_format
from ctxcli.pipeline.compose import reduce_bytes
from ctxcli.pipeline.config import Config, load_config
from ctxcli.pipeline.rerun import Resume, config_digest, pack_end, resume_from
from ctxcli.pipeline.results import Reduced, Report
from ctxcli.pipeline.stats_cache import cached_stats, store_report
from ctxcli.services.tokens import CountOptions
from ctxcli.store.disk import OffloadStore, check_offload_location, remove_stale
from ctxcli.store.history import Restored, match_reduction, restore_chain
from ctxcli.store.index import Entry, Ledger
from ctxcli.store.lock import commit_lock
from ctxcli.store.manifest import Header, InputSide, Side, manifest_for_rerun
from ctxcli.store.naming import Preview

__all__ = [
    "STDIO",
    "Reduced",
    "Report",
    "Restored",
    "read_input",
    "reduce_bytes",
    "reduce_file",
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


def offload_siblings(root: str) -> list[Path]:
    """``root`` and the ``root.N`` directories later in-place reductions made, newest first."""
    base = Path(root)
    numbered = []
    for path in base.parent.glob(f"{glob.escape(base.name)}.*"):
        suffix = path.name[len(base.name) + 1 :]
        if suffix.isdigit() and path.is_dir():
            numbered.append((int(suffix), path))
    return [p for _, p in sorted(numbered, reverse=True)] + [base]


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
        raise _unreadable(path, exc) from None


def _unreadable(path: str, exc: OSError) -> TranscriptError:
    if isinstance(exc, FileNotFoundError):
        return TranscriptError(path, None, "no such file")
    if isinstance(exc, IsADirectoryError):
        return TranscriptError(path, None, "is a directory; pass a transcript file")
    return TranscriptError(path, None, f"cannot read ({exc.strerror})")


MAP_MIN_BYTES = 1 << 20
"""Inputs from this size on are mapped, not read (:func:`open_input`)."""


def open_input(path: str) -> tuple[Input, os.stat_result | None]:
    """The bytes of ``path``, and the file's status when they are a map of it.

    A regular file of :data:`MAP_MIN_BYTES` or more is mapped read-only instead of read:
    its pages are given back once parsed (:func:`~ctxcli.formats.base.release`), so a
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
        raise _unreadable(path, exc) from None


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


def write_atomic(path: Path, data: bytes, *, mode: int | None = None) -> None:
    """Write ``data`` to ``path`` through a temporary file and a rename."""
    tmp = _stage_file(path, data, mode=mode)
    try:
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _stage_file(path: Path, data: bytes, *, mode: int | None = None) -> Path:
    """Write ``data`` to a synced temporary file beside ``path``; return its name.

    Temporary files of killed runs (their process is gone) are removed first.
    """
    tmp, fh = _open_stage(path, mode)
    try:
        with fh:
            fh.write(data)
            _sync(fh)
    except BaseException as exc:
        tmp.unlink(missing_ok=True)
        _name_output(exc, tmp, path)
        raise
    return tmp


def _open_stage(path: Path, mode: int | None) -> tuple[Path, BinaryIO]:
    """A new temporary file beside ``path``, open for writing (see :func:`_stage_file`)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale(path.parent, path.name, "tmp")
    tmp = path.parent / f".{path.name}.ctx-tmp-{os.getpid()}-{secrets.token_hex(4)}"
    try:
        fh = open(tmp, "wb")  # noqa: SIM115  # the caller closes it
    except OSError as exc:
        _name_output(exc, tmp, path)
        raise
    try:
        if mode is not None:
            os.fchmod(fh.fileno(), mode)
    except BaseException as exc:
        fh.close()
        tmp.unlink(missing_ok=True)
        _name_output(exc, tmp, path)
        raise
    return tmp, fh


def _sync(fh: BinaryIO) -> None:
    fh.flush()
    os.fsync(fh.fileno())


def _name_output(exc: BaseException, tmp: Path, path: Path) -> None:
    """An error about the temporary file names the file the user asked for."""
    if isinstance(exc, OSError) and exc.filename in (None, str(tmp)):
        exc.filename = str(path)


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
    empty.

    Returns:
        The report and the reduced bytes (empty when written as made, see above).
    """
    config = config or load_config()
    input_name = str(input)
    out_name = _check_output(input_name, None if output is None else str(output), in_place)
    st: os.stat_result | None = None
    if raw is not None or in_place:
        data: Input = raw if raw is not None else read_input(input_name)
    else:
        data, st = open_input(input_name)
    root = (
        str(offload_dir) if offload_dir is not None else default_offload_dir(out_name, config, data)
    )
    previous: list[str] = []
    if in_place:
        assert isinstance(data, bytes)  # read, not mapped: the output replaces the input
        previous = [str(p.resolve()) for p in _reductions_of(data, input_name, root)]
        if previous:
            # Already a ctx output: a rerun that changes nothing writes nothing; one that
            # does change it gets a directory of its own, so every original is kept.
            rerun = reduce_bytes(
                data,
                config=config,
                offload=Preview(root),
                path=input_name,
                on_invalid=on_invalid,
                log=log,
            )
            if rerun.output == data:
                rerun.report.output = input_name
                return rerun.report, rerun.output
            if offload_dir is None and Path(root).exists():
                root = _free_sibling(root)
    reduced = _reduce_and_commit(
        data,
        input_name,
        out_name,
        root,
        config,
        force=force,
        on_invalid=on_invalid,
        log=log,
        counting=counting,
        in_place=in_place,
        previous=previous,
        write=write,
        cite_as=cite_as,
        incremental=incremental,
        mapped=st,
        stream=not return_output,
    )
    return reduced.report, reduced.output


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


def _reductions_of(data: bytes, name: str, root: str) -> list[Path]:
    """Offload directories whose output ``data`` is (exactly, or plus appended lines)."""
    candidates = [*offload_siblings(root), *_ledger_dirs(data, name)]
    return [p for p in dict.fromkeys(candidates) if match_reduction(data, p) is not None]


def _ledger_dirs(data: bytes, name: str) -> list[Path]:
    """Directories the ledger knows for this content or this path."""
    path = str(Path(name).resolve()) if name != STDIO else None
    entries = Ledger().find(output_sha256=sha256(data), path=path)
    return [Path(e.offload_dir) for e in entries]


def _reduce_and_commit(
    data: Input,
    input_name: str,
    out_name: str | None,
    root: str,
    config: Config,
    *,
    force: bool,
    on_invalid: str,
    log: Callable[[str], None] | None,
    counting: CountOptions | None,
    in_place: bool,
    previous: list[str],
    write: Callable[[bytes], None] | None,
    cite_as: str | None = None,
    incremental: bool = True,
    mapped: os.stat_result | None = None,
    stream: bool = False,
) -> Reduced:
    """Reduce into a staging offload directory, then commit the pair (see :func:`_commit`).

    ``mapped`` is the input file's status when ``data`` is a map of it: a file changed
    during the run is refused unless its mapped bytes are still those hashed first
    (lines appended to a session are not part of this run, as with a read). ``stream``
    writes the output to its staged file as it is made (``Reduced.output`` is empty).
    """
    out_path = None if out_name in (None, STDIO) else Path(str(out_name))
    off_path, display = _offload_path(root)
    keep = [Path(input_name)] if input_name != STDIO else []
    check_offload_location(off_path, keep=keep + ([out_path] if out_path is not None else []))
    root_cited = cite_as or display
    input_hash = hashlib.sha256()
    resume: tuple[Resume, dict[str, Any]] | None = None
    hashed, grown_from = 0, None
    incremental = incremental and config.settings.incremental
    if out_path is not None and not in_place:
        resume, hashed, grown_from = _resume(
            data, input_hash, out_path, off_path, root_cited, config, on_invalid
        )
        if not incremental:
            resume = None
    # First, before reading for the run: the check below compares the map with it. A
    # re-run's check hashed the previous input's bytes already.
    input_sha = hash_input(input_hash, data, hashed, len(data)).hexdigest()

    def fresh_store() -> OffloadStore:
        store = OffloadStore(off_path, root_cited, force=force)
        store.grown_from = grown_from
        return store

    store = fresh_store()
    staged: tuple[Path, BinaryIO] | None = None
    try:
        if stream and out_path is not None:
            mode = Path(input_name).stat().st_mode & 0o777 if in_place else None
            staged = _open_stage(out_path, mode)

        def run(kept: Resume | None) -> Reduced:
            if staged is not None:  # a run in full after a re-run gave up starts anew
                staged[1].seek(0)
                staged[1].truncate()
            return reduce_bytes(
                data,
                config=config,
                offload=store,
                path=input_name,
                on_invalid=on_invalid,
                log=log,
                counting=counting,
                monitors=False,
                keep=incremental and out_path is not None and not in_place,
                resume=kept,
                into=staged[1] if staged is not None else None,
            )

        reduced = None
        if resume is not None:
            try:
                store.adopt(resume[1], pack_end(resume[0].script))
                reduced = run(resume[0])
            except (OSError, OffloadError, PrefixChanged):
                # The previous directory changed under us, or a stage or the format
                # reached into the kept prefix: run in full.
                store.abort()
                store = fresh_store()
        if reduced is None:
            reduced = run(None)
        if changed_since(input_name, mapped) and digest(data) != input_sha:
            raise TranscriptError(
                input_name,
                None,
                "the file changed while ctx read it; run again once it is no longer "
                "being rewritten, or reduce a copy",
            )
        if reduced.written is not None:
            output_sha, output_bytes = reduced.written.sha256, reduced.written.size
        else:
            output_sha, output_bytes = sha256(reduced.output), len(reduced.output)
        header = Header.new(
            format=reduced.report.format,
            units=reduced.units,
            input=InputSide(name=input_name, sha256=input_sha, bytes=len(data)),
            output=Side(sha256=output_sha, bytes=output_bytes),
            previous=previous,
        )
        if staged is not None:
            with staged[1] as fh:
                _sync(fh)
        _commit(
            store,
            (header, reduced.script, reduced.rerun),
            out_path,
            reduced.output,
            in_place,
            input_name,
            write,
            staged[0] if staged is not None else None,
        )
    except BaseException as exc:
        store.abort()
        if staged is not None:
            staged[1].close()
            staged[0].unlink(missing_ok=True)
        if isinstance(exc, OSError) and exc.filename is None:
            exc.filename = str(out_path or root)
        raise
    written = str(out_path.resolve()) if out_path is not None else ""
    Ledger(log=log).record(
        Entry(
            output_sha,
            output_bytes,
            input_sha,
            str(off_path.resolve()),
            written,
        )
    )
    reduced.report.output = out_name or STDIO
    return reduced


def _resume(
    data: Input,
    input_hash: hashlib._Hash,
    out_path: Path,
    off_path: Path,
    root: str,
    config: Config,
    on_invalid: str,
) -> tuple[tuple[Resume, dict[str, Any]] | None, int, str | None]:
    """The prefix a previous run of ``data`` into ``out_path`` lets this run keep, if any;
    how many leading bytes of ``data`` were hashed into ``input_hash`` to find out; and
    the sha256 of the previous input if ``data`` starts with it (the same transcript,
    grown: its offload directory may be replaced without ``force``).

    That run's manifest must say what it kept and ``data`` must start with the bytes it
    read (hashed once: the caller goes on hashing from there); its output must be
    unchanged on disk.
    """
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
    digest = config_digest(config, fmt, root, on_invalid)
    try:
        resume = resume_from(manifest, data, input_hash.copy(), output, digest)
    except (KeyError, TypeError, IndexError, ValueError):
        resume = None  # a manifest damaged where the re-run reads it: a full run
    return ((resume, manifest) if resume is not None else None), old, grown


def _commit(
    store: OffloadStore,
    manifest: tuple[Header, list[Any], dict[str, Any] | None],
    out_path: Path | None,
    output: bytes,
    in_place: bool,
    input_name: str,
    write: Callable[[bytes], None] | None,
    staged: Path | None = None,
) -> None:
    """Stage the output, rename the offload directory, then the output, under a lock.

    ``staged``: the output was written to this temporary file already.
    """
    with commit_lock(store.path, *([out_path] if out_path is not None else [])):
        tmp = staged
        if out_path is not None and tmp is None:
            mode = Path(input_name).stat().st_mode & 0o777 if in_place else None
            tmp = _stage_file(out_path, output, mode=mode)
        elif write is not None:
            write(output)
        try:
            store.commit(*manifest)
            if tmp is not None and out_path is not None:
                os.replace(tmp, out_path)
        except BaseException:
            if tmp is not None:
                tmp.unlink(missing_ok=True)
            raise
        store.finish()


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
            on_invalid=on_invalid,
            counting=counting,
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
) -> Restored:
    """Rebuild the original transcript from a reduced one, through every reduction made.

    Without ``offload_dir`` it looks beside the file (``FILE.offload`` and the
    ``FILE.offload.N`` of later in-place runs) and in the ledger of reductions made on this
    machine. Lines appended after a reduction (a resumed session) are carried over. With
    ``in_place`` the file itself is replaced, atomically, keeping its mode.

    Raises:
        RestoreError: something is missing, altered or does not belong together.
    """
    name = str(reduced)
    if in_place:
        if name == STDIO:
            raise CtxError("an in-place restore needs a file, not stdin.")
        if output not in (None, STDIO, name):
            raise CtxError("an in-place restore writes to its input; do not give an output too.")
        output = name
    data = raw if raw is not None else read_input(name)
    if offload_dir is not None:
        first = [Path(offload_dir), *_per_input_dirs(Path(offload_dir))]
    elif name == STDIO:
        first = [
            *_per_input_dirs(Path(default_offload_dir(None, load_config()))),
            *_ledger_dirs(data, name),
        ]
    else:
        first = [*offload_siblings(f"{name}.offload"), *_ledger_dirs(data, name)]
    if not first:
        raise CtxError("restoring from stdin needs the offload directory to be named.")
    restored = restore_chain(data, first, lambda content: _ledger_dirs(content, name), name=name)
    if output is not None and str(output) != STDIO:
        mode = Path(name).stat().st_mode & 0o777 if in_place else None
        write_atomic(Path(output), restored.data, mode=mode)
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
