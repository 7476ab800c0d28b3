"""The library entry points: reduce, preview (stats) and restore transcripts."""

from __future__ import annotations

import os
import secrets
import sys
from collections.abc import Callable
from pathlib import Path

from ctxcli._version import __version__
from ctxcli.core.errors import CtxError, OffloadError, TranscriptError
from ctxcli.core.restore import sha256
from ctxcli.pipeline.config import Config, load_config
from ctxcli.pipeline.offload import (
    MANIFEST_VERSION,
    DryRunOffload,
    OffloadStore,
    read_manifest,
    restore_bytes,
)
from ctxcli.pipeline.reducer import reduce_bytes
from ctxcli.pipeline.report import Reduced, Report
from ctxcli.services.tokens import CountOptions

__all__ = [
    "STDIO",
    "Reduced",
    "Report",
    "read_input",
    "reduce_bytes",
    "reduce_file",
    "restore_file",
    "stats_file",
    "write_atomic",
]

STDIO = "-"


def default_offload_dir(output: str | None, config: Config) -> str:
    """Where removed text goes when ``--offload-dir`` is not given."""
    if config.settings.offload_dir:
        return config.settings.offload_dir
    if output and output != STDIO:
        return f"{output}.offload"
    return "ctx-offload"


def read_input(path: str) -> bytes:
    """The bytes of ``path`` (``-`` reads stdin)."""
    if path == STDIO:
        return sys.stdin.buffer.read()
    try:
        return Path(path).read_bytes()
    except FileNotFoundError:
        raise TranscriptError(path, None, "no such file") from None
    except IsADirectoryError:
        raise TranscriptError(path, None, "is a directory; pass a transcript file") from None
    except OSError as exc:
        raise TranscriptError(path, None, f"cannot read ({exc.strerror})") from None


def write_atomic(path: Path, data: bytes, *, mode: int | None = None) -> None:
    """Write ``data`` to ``path`` through a temporary file and a rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.ctx-tmp-{os.getpid()}-{secrets.token_hex(4)}"
    try:
        with open(tmp, "wb") as fh:
            if mode is not None:
                os.fchmod(fh.fileno(), mode)
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def reduce_file(
    input: str | Path,
    output: str | Path | None = None,
    *,
    config: Config | None = None,
    offload_dir: str | Path | None = None,
    force: bool = False,
    on_invalid: str = "error",
    raw: bytes | None = None,
    log: Callable[[str], None] | None = None,
    in_place: bool = False,
    counting: CountOptions | None = None,
    cite_as: str | None = None,
) -> tuple[Report, bytes]:
    """Reduce a transcript file and write the output and its offload directory.

    ``output`` of ``None`` or ``"-"`` writes nothing but returns the bytes (the CLI
    prints them). ``cite_as`` is the offload directory the hints name when it is not
    where the files are written (an upload to object storage follows). The offload directory is always written, atomically, before the
    output, so an output never exists without what it needs to be restored.

    Returns:
        The report and the reduced bytes.
    """
    config = config or load_config()
    input_name = str(input)
    out_name = None if output is None else str(output)
    if in_place:
        if input_name == STDIO:
            raise OffloadError("--in-place needs a file, not stdin.")
        if out_name not in (None, STDIO, input_name):
            raise OffloadError("--in-place and -o cannot be combined; pick one.")
        # The offload directory sits beside the file, so `ctx restore FILE` still works.
        out_name = input_name
    elif out_name not in (None, STDIO) and input_name != STDIO:
        if Path(str(out_name)).resolve() == Path(input_name).resolve():
            raise OffloadError(
                f"{out_name}: output would overwrite the input; choose another -o "
                "(the input is never modified)."
            )
    data = raw if raw is not None else read_input(input_name)
    root = str(offload_dir) if offload_dir is not None else default_offload_dir(out_name, config)
    if in_place:
        previous = read_manifest(Path(root))
        if previous is not None and previous["output"]["sha256"] == sha256(data):
            # Already reduced in place: its offload directory holds the original, and
            # replacing it would lose that. A rerun that changes nothing is fine.
            reduced = reduce_bytes(
                data,
                config=config,
                offload=DryRunOffload(root),
                path=input_name,
                on_invalid=on_invalid,
                log=log,
            )
            if reduced.output != data:
                raise OffloadError(
                    f"{input_name} was already reduced in place and {root} holds its original; "
                    "reduce it to another file with -o, or restore it first."
                )
            reduced.report.output = input_name
            return reduced.report, reduced.output
    store = OffloadStore(Path(root), cite_as or root.rstrip("/") or ".", force=force)
    try:
        reduced = reduce_bytes(
            data,
            config=config,
            offload=store,
            path=input_name,
            on_invalid=on_invalid,
            log=log,
            counting=counting,
            monitors=False,
        )
        store.commit(
            {
                "tool": "ctx",
                "version": MANIFEST_VERSION,
                "ctx_version": __version__,
                "format": reduced.report.format,
                "units": reduced.units,
                "input": {"name": input_name, "sha256": sha256(data), "bytes": len(data)},
                "output": {"sha256": sha256(reduced.output), "bytes": len(reduced.output)},
                "script": reduced.script,
            }
        )
        if out_name not in (None, STDIO):
            mode = Path(input_name).stat().st_mode & 0o777 if in_place else None
            write_atomic(Path(str(out_name)), reduced.output, mode=mode)
    except BaseException:
        store.abort()
        raise
    reduced.report.output = out_name or STDIO
    return reduced.report, reduced.output


def stats_file(
    input: str | Path,
    *,
    config: Config | None = None,
    on_invalid: str = "error",
    raw: bytes | None = None,
    counting: CountOptions | None = None,
) -> Report:
    """Run the reduction without writing anything and report what it would save.

    With the cache on (the default), the report of an unchanged file under the same
    configuration and ctx is remembered (:mod:`ctxcli.pipeline.stats_cache`).
    """
    from ctxcli.pipeline.stats_cache import cached_stats, store_report

    config = config or load_config()
    data = raw if raw is not None else read_input(str(input))
    cache, key, hit = (None, None, None)
    if counting is None or counting.cache:
        cache, key, hit = cached_stats(data, str(input), config, on_invalid)
    try:
        if hit is not None:
            return hit
        # The hints cite the directory `ctx reduce INPUT` (output to stdout) would use.
        root = default_offload_dir(None, config)
        reduced = reduce_bytes(
            data,
            config=config,
            offload=DryRunOffload(root),
            path=str(input),
            on_invalid=on_invalid,
            counting=counting,
        )
        if cache is not None and key is not None:
            store_report(cache, key, reduced.report)
        return reduced.report
    finally:
        if cache is not None:
            cache.close()


def restore_file(
    reduced: str | Path,
    output: str | Path | None = None,
    *,
    offload_dir: str | Path | None = None,
    raw: bytes | None = None,
) -> bytes:
    """Rebuild the original transcript from a reduced one and its offload directory.

    Raises:
        RestoreError: something is missing, altered or does not belong together.
    """
    name = str(reduced)
    data = raw if raw is not None else read_input(name)
    if offload_dir is None:
        if name == STDIO:
            raise CtxError("restoring from stdin needs --offload-dir.")
        offload_dir = f"{name}.offload"
    original = restore_bytes(data, Path(offload_dir), reduced_name=name)
    if output is not None and str(output) != STDIO:
        write_atomic(Path(output), original)
    return original
