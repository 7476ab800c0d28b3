"""The library's front door: reduce, preview (stats) and restore transcripts.

One place picks the route. A call names its source (a path, ``-`` for stdin, or an
object-storage URL), a :class:`Destination` (stdout, a file, a URL, or the input itself)
and :class:`RunOptions`; :func:`reduce`, :func:`stats` and :func:`restore` decide what to
do with them, and :func:`stats` names the offload directory :func:`reduce` would write,
so a preview gives the numbers of the file a reduction writes. ``reduce_file``,
``stats_file`` and ``restore_file`` are the same calls with plain arguments (thin
wrappers); ``reduce_in_place`` and ``restore_transcript`` are deprecated (a
:class:`Destination` with ``in_place``, and :func:`restore`, say the same).
"""

from __future__ import annotations

import os
import warnings
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from ctxcli.api.commit import reduce_in_place as _in_place
from ctxcli.api.commit import reduce_local
from ctxcli.api.destination import Destination, Reduction, RunOptions
from ctxcli.api.local import (
    STDIO,
    changed_since,
    check_output,
    open_input,
    read_input,
)
from ctxcli.api.location import locate
from ctxcli.api.undo import original_of, restore_in_place
from ctxcli.core.errors import VALIDATE_ON_INVALID, CtxError, OffloadError, OnInvalid
from ctxcli.core.io import Input, is_url, local_path
from ctxcli.pipeline.compose import reduce_bytes
from ctxcli.pipeline.config import Config, load_config
from ctxcli.pipeline.results import PipelineResult, Report
from ctxcli.pipeline.stats_cache import cached_stats, store_report
from ctxcli.store.history import Restored
from ctxcli.store.inplace import Change, ChangedError, LiveSessionError, write_atomic
from ctxcli.store.naming import Preview

if TYPE_CHECKING:
    from ctxcli.formats.diagnose import Diagnosis

__all__ = [
    "STDIO",
    "Change",
    "ChangedError",
    "Destination",
    "LiveSessionError",
    "PipelineResult",
    "Reduction",
    "Report",
    "Restored",
    "RunOptions",
    "offload_root",
    "read_input",
    "reduce",
    "reduce_bytes",
    "reduce_file",
    "reduce_in_place",
    "restore",
    "restore_file",
    "restore_transcript",
    "stats",
    "stats_file",
    "validate",
    "write_atomic",
]


def _name(source: str | os.PathLike[str]) -> str:
    """A source as text; a ``file://`` URL is the local path it names."""
    text = os.fspath(source)
    local = local_path(text)
    return local if local is not None else text


def _text(value: str | os.PathLike[str] | None) -> str | None:
    return None if value is None else os.fspath(value)


def reduce(
    source: str | os.PathLike[str],
    destination: Destination | None = None,
    *,
    config: Config | None = None,
    options: RunOptions | None = None,
    raw: Input | None = None,
) -> Reduction:
    """Reduce a transcript; write the output and an offload directory holding what was removed.

    The route follows from the source and the destination: in place (a session keeps its
    change record in ctx's data directory, any other file beside it), through object
    storage (a URL anywhere), or a local file or stdin into a file or stdout. ``raw`` is
    the source's bytes when the caller has read them already.

    Raises:
        OffloadError: the output would overwrite the input, or the offload directory
            holds another transcript's offload (``force`` replaces it).
        LiveSessionError: in place, the session looks in use (``force`` changes it).
    """
    dest = destination or Destination()
    config = config or load_config()
    run = options or RunOptions()
    name = _name(source)
    if dest.in_place:
        if is_url(name) or dest.remote:
            raise OffloadError("an in-place reduction takes a local file; write a URL as output.")
        check_output(name, dest.output, in_place=True)
        return _in_place(Path(name), config, run, dest, _bytes(raw))
    if is_url(name) or dest.remote:
        from ctxcli.api import remote  # object storage: only for a URL

        report, output = remote.reduce_url(name, dest, config=config, run=run)
        return Reduction(report, output)
    return reduce_local(name, config, run, dest, raw)


def _bytes(raw: Input | None) -> bytes | None:
    return None if raw is None else bytes(raw)


def offload_root(
    source: str | os.PathLike[str], destination: Destination, config: Config, data: Input
) -> str:
    """The offload directory :func:`reduce` of ``source`` into ``destination`` writes.

    Hints cite it, so a preview (:func:`stats`, ``ctx report``) must name the same one.
    """
    name = _name(source)
    check_output(name, destination.output, in_place=destination.in_place)
    return locate(name, destination, config, data).cited


def stats(
    source: str | os.PathLike[str],
    destination: Destination | None = None,
    *,
    config: Config | None = None,
    options: RunOptions | None = None,
    raw: Input | None = None,
) -> Report:
    """Run the reduction without writing anything and report what it would save.

    Give it the destination :func:`reduce` would get: the hints cite the offload
    directory, so the numbers are those of the file reduce writes. With the cache on
    (the default), the report of an unchanged file under the same configuration and ctx
    is remembered (:mod:`ctxcli.pipeline.stats_cache`).
    """
    dest = destination or Destination()
    config = config or load_config()
    run = options or RunOptions()
    name = _name(source)
    st: os.stat_result | None = None
    if raw is not None:
        data: Input = raw
    elif dest.in_place:
        data = read_input(name)  # as the in-place run reads it: a client may rewrite it
    else:
        data, st = open_input(name)
    root = offload_root(name, dest, config, data)
    cache, key, hit = (None, None, None)
    if run.counting.cache:
        cache, key, hit = cached_stats(data, f"{name}\0{root}", config, run.on_invalid)
    try:
        if hit is not None:
            return hit
        # A preview reports: the stages' notes go to its warnings, and it always has the
        # monitors (``ctx stats`` shows them; the cached report has them too).
        preview = replace(run, log=None, monitors=True, trace=False)
        reduced = reduce_bytes(
            data, config=config, offload=Preview(root), path=name, options=preview
        )
        if changed_since(name, st):
            # The map showed the file while it changed: count a snapshot of it instead.
            return stats(name, dest, config=config, options=run, raw=read_input(name))
        if cache is not None and key is not None:
            store_report(cache, key, reduced.report)
        return reduced.report
    finally:
        if cache is not None:
            cache.close()


def restore(
    source: str | os.PathLike[str],
    destination: Destination | None = None,
    *,
    options: RunOptions | None = None,
    raw: bytes | None = None,
) -> Restored:
    """Rebuild the original transcript from a reduced one, through every reduction made.

    Without an offload directory it looks in every place a reduction or change of the
    file is recorded (:mod:`ctxcli.store.history`): its change directories (a session
    reduced or repaired in place), ``FILE.offload`` and the ``FILE.offload.N`` of later
    in-place runs, and the index of reductions made on this machine. Lines appended
    after a reduction (a resumed session) are carried over. In place, the file itself is
    replaced, keeping its mode, in one transaction (lines appended meanwhile are kept; a
    session in use is left alone unless ``force``), and the change directories of it
    that were used are discarded: no other file's records are touched.

    Raises:
        RestoreError: nothing is recorded, or something is missing, altered or does not
            belong together.
    """
    dest = destination or Destination()
    run = options or RunOptions()
    name = _name(source)
    if is_url(name) or dest.remote:
        from ctxcli.api import remote  # object storage: only for a URL

        data = remote.restore_url(name, dest.output, offload_dir=dest.offload_dir)
        return Restored(data, ())
    if dest.in_place:
        if name == STDIO:
            raise CtxError("an in-place restore needs a file, not stdin.")
        if dest.output not in (None, name):
            raise CtxError("an in-place restore writes to its input; do not give an output too.")
        live = None if run.force else run.live_seconds
        return restore_in_place(Path(name), dest.offload_dir, live)
    restored = original_of(raw if raw is not None else read_input(name), name, dest.offload_dir)
    if dest.output is not None:
        write_atomic(Path(dest.output), restored.data)
    return restored


def reduce_file(
    input: str | os.PathLike[str],
    output: str | os.PathLike[str] | None = None,
    *,
    config: Config | None = None,
    offload_dir: str | os.PathLike[str] | None = None,
    options: RunOptions | None = None,
    raw: bytes | None = None,
) -> tuple[Report, bytes]:
    """:func:`reduce` of a file into ``output`` (``None`` or ``-``: the bytes are returned).

    A thin wrapper: ``reduce(input, Destination(output, offload_dir), ...)``.

    Example::

        >>> report, _ = reduce_file("session.jsonl", "reduced.jsonl")  # doctest: +SKIP

    Returns:
        The report and the reduced bytes.
    """
    dest = Destination(_text(output), _text(offload_dir))
    done = reduce(input, dest, config=config, options=options, raw=raw)
    return done.report, done.output


def reduce_in_place(
    path: str | os.PathLike[str],
    *,
    config: Config | None = None,
    offload_dir: str | os.PathLike[str] | None = None,
    options: RunOptions | None = None,
) -> tuple[Report, Change]:
    """Deprecated: ``reduce(path, Destination(in_place=True, stream=True), ...)`` does it.

    The front door's :class:`Reduction` carries the report and the change (and says
    whether the file was a session, or left alone for lack of gain).
    """
    _deprecated("reduce_in_place", "reduce(path, Destination(in_place=True, stream=True))")
    dest = Destination(offload_dir=_text(offload_dir), in_place=True, stream=True)
    done = reduce(path, dest, config=config, options=options)
    assert done.change is not None  # in place
    return done.report, done.change


def stats_file(
    input: str | os.PathLike[str],
    *,
    config: Config | None = None,
    output: str | os.PathLike[str] | None = None,
    offload_dir: str | os.PathLike[str] | None = None,
    in_place: bool = False,
    options: RunOptions | None = None,
    raw: bytes | None = None,
) -> Report:
    """:func:`stats` with the paths :func:`reduce_file` would get.

    A thin wrapper: ``stats(input, Destination(output, offload_dir, in_place=in_place), ...)``.
    """
    dest = Destination(_text(output), _text(offload_dir), in_place=in_place)
    return stats(input, dest, config=config, options=options, raw=raw)


def restore_transcript(
    reduced: str | os.PathLike[str],
    output: str | os.PathLike[str] | None = None,
    *,
    offload_dir: str | os.PathLike[str] | None = None,
    in_place: bool = False,
    options: RunOptions | None = None,
    raw: bytes | None = None,
) -> Restored:
    """Deprecated: ``restore(reduced, Destination(output, offload_dir, in_place=...))`` does it."""
    _deprecated("restore_transcript", "restore(reduced, Destination(output, offload_dir))")
    dest = Destination(_text(output), _text(offload_dir), in_place=in_place)
    return restore(reduced, dest, options=options, raw=raw)


def restore_file(
    reduced: str | os.PathLike[str],
    output: str | os.PathLike[str] | None = None,
    *,
    offload_dir: str | os.PathLike[str] | None = None,
    raw: bytes | None = None,
) -> bytes:
    """The original bytes (see :func:`restore`, which also says how).

    A thin wrapper: ``restore(reduced, Destination(output, offload_dir)).data``.
    """
    return restore(reduced, Destination(_text(output), _text(offload_dir)), raw=raw).data


def _deprecated(name: str, instead: str) -> None:
    """Warn, at the caller's line, that ``name`` is deprecated and what does it now."""
    warnings.warn(
        f"ctxcli.api.{name} is deprecated and will be removed; use {instead}",
        DeprecationWarning,
        stacklevel=3,
    )


def validate(
    source: str | os.PathLike[str],
    *,
    format: str = "auto",
    on_invalid: OnInvalid = VALIDATE_ON_INVALID,
    raw: bytes | None = None,
) -> Diagnosis:
    """List what breaks a transcript.

    The rules every transcript is held to (each line is JSON; calls without results,
    results without calls), the problems they found (none: it is valid) and their names.
    ``ctx doctor`` runs these and a client's own rules. A line that is not JSON is a
    finding by default (:data:`~ctxcli.core.errors.VALIDATE_ON_INVALID`: strict by design).

    Raises:
        TranscriptError: the file cannot be read or parsed (a line that is not JSON is an
            error unless ``on_invalid`` keeps it; kept, it is a problem).
    """
    from ctxcli.formats.validate import validate_transcript

    name = _name(source)
    data = raw if raw is not None else read_input(name)
    return validate_transcript(data, name, format=format, on_invalid=OnInvalid.of(on_invalid))
