"""``--engine ray`` for ``ctx reduce``/``ctx restore``, and URL inputs for one transcript.

Parses nothing itself: ``app.py`` hands over the options; this module makes the one
library call and renders its summary.
"""

from __future__ import annotations

import sys

import orjson

from ctxcli.cli import console
from ctxcli.cli.payload import saved
from ctxcli.core.errors import CtxError
from ctxcli.pipeline.config import Config

__all__ = [
    "ENGINES",
    "check_engine",
    "reduce_ray",
    "restore_ray",
]

ENGINES = ("local", "ray")


def check_engine(engine: str, in_place: bool = False) -> str:
    """The engine, after refusing an unknown one or options the Ray engine cannot honour."""
    if engine not in ENGINES:
        raise CtxError(f"--engine {engine!r} is invalid: use 'local' or 'ray'.")
    if engine == "ray" and in_place:
        raise CtxError("--engine ray writes a new dataset; pass -o instead of --in-place.")
    return engine


def reduce_ray(
    inputs: list[str] | None,
    output: str,
    cfg: Config,
    offload_dir: str | None,
    column: str,
    jobs: int | None,
    *,
    view: tuple[bool, bool] = (False, False),
) -> None:
    """``ctx reduce --engine ray INPUT -o OUTPUT``; ``view``: (--json, --quiet)."""
    json, quiet = view
    from ctxcli.datasets.ray import DatasetOptions, reduce_path

    if not inputs or len(inputs) != 1 or output == "-":
        raise CtxError("--engine ray takes one dataset (a file or directory) and -o OUTPUT.")
    options = DatasetOptions(offload_uri=offload_dir, column=column, concurrency=jobs)
    summary = reduce_path(inputs[0], output, cfg, options)
    if json:
        console.write_json(orjson.dumps(summary.to_dict()) + b"\n")
    elif not quiet:
        s = summary
        sys.stderr.write(
            f"ctx: {inputs[0]}: {s.rows:,} rows, {s.tokens_before:,} → {s.tokens_after:,} "
            f"tokens ({saved(s.tokens_before, s.tokens_after)}) in {s.seconds:.1f}s; "
            f"{s.errors} rows kept unread; offload in {s.offload_uri}\n"
        )


def restore_ray(
    reduced: str, output: str, *, offload_dir: str | None, column: str, jobs: int | None
) -> None:
    """``ctx restore --engine ray REDUCED -o OUTPUT``."""
    from ctxcli.datasets.ray import DatasetOptions, restore_path

    if output == "-":
        raise CtxError("--engine ray writes a dataset; pass -o OUTPUT.")
    options = DatasetOptions(offload_uri=offload_dir, column=column, concurrency=jobs)
    rows = restore_path(reduced, output, options)
    sys.stderr.write(f"ctx: {reduced}: {rows:,} rows restored to {output}\n")
