"""ctx: shrink LLM-agent transcripts losslessly.

The command-line tool is a thin layer over the front door, :func:`reduce`, :func:`stats`
and :func:`restore`: a source, a :class:`Destination` (where the output and its offload
directory go) and :class:`RunOptions` (how the run goes)::

    from ctxcli import Destination, RunOptions, reduce, restore

    done = reduce("session.jsonl", Destination("reduced.jsonl"), options=RunOptions())
    print(done.report.tokens_before, "->", done.report.tokens_after)
    original = restore("reduced.jsonl").data

``reduce_file``, ``stats_file`` and ``restore_file`` are the same calls with plain
arguments.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ctxcli._version import __version__
from ctxcli.core.facade import lazy_getattr

# The public API is imported on first use (PEP 562), so `import ctxcli` is cheap:
# `ctx --version` starts fast and Ctrl-C during start-up is caught by the CLI.
_LAZY = {
    "Destination": "api",
    "Report": "pipeline.results",
    "Reducer": "agent.reducer",
    "ReducerResult": "agent.reducer",
    "RunOptions": "pipeline.options",
    "reduce": "api",
    "stats": "api",
    "restore": "api",
    "reduce_bytes": "pipeline.compose",
    "reduce_file": "api",
    "restore_file": "api",
    "stats_file": "api",
    "ReducedRecords": "datasets.records",
    "reduce_records": "datasets.records",
    "RowReducer": "datasets.rows",
    "reduce_row": "datasets.rows",
    "restore_row": "datasets.rows",
    "Config": "pipeline.config",
    "load_config": "pipeline.config",
    "CtxError": "core.errors",
    "ExitCode": "core.errors",
    "OnInvalid": "core.errors",
}

_DEPRECATED = {"ReduceOptions": ("pipeline.options", "RunOptions")}
"""Old names kept a while: each warns and gives the name that replaced it."""

if TYPE_CHECKING:
    from ctxcli.agent.reducer import Reducer, ReducerResult
    from ctxcli.api import (
        Destination,
        reduce,
        reduce_file,
        restore,
        restore_file,
        stats,
        stats_file,
    )
    from ctxcli.core.errors import CtxError, ExitCode, OnInvalid
    from ctxcli.datasets.records import ReducedRecords as ReducedRecords
    from ctxcli.datasets.records import reduce_records as reduce_records
    from ctxcli.datasets.rows import RowReducer, reduce_row, restore_row
    from ctxcli.pipeline.compose import reduce_bytes
    from ctxcli.pipeline.config import Config, load_config
    from ctxcli.pipeline.options import RunOptions
    from ctxcli.pipeline.results import Report


__getattr__ = lazy_getattr(__name__, _LAZY, _DEPRECATED)


__all__ = [
    "Config",
    "CtxError",
    "Destination",
    "ExitCode",
    "OnInvalid",
    "Reducer",
    "ReducerResult",
    "Report",
    "RowReducer",
    "RunOptions",
    "__version__",
    "load_config",
    "reduce",
    "reduce_bytes",
    "reduce_file",
    "reduce_row",
    "restore",
    "restore_file",
    "restore_row",
    "stats",
    "stats_file",
]
# reduce_records and its ReducedRecords (deprecated: reduce_row) are still importable;
# reduce_records warns when called.
