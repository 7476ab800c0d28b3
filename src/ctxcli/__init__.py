"""ctx: shrink LLM-agent transcripts losslessly.

The command-line tool is a thin layer over these functions::

    from ctxcli import load_config, reduce_file, restore_file

    report, _ = reduce_file("session.jsonl", "reduced.jsonl")
    print(report.tokens_before, "->", report.tokens_after)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ctxcli._version import __version__
from ctxcli.core.facade import lazy_getattr

# The public API is imported on first use (PEP 562), so `import ctxcli` is cheap:
# `ctx --version` starts fast and Ctrl-C during start-up is caught by the CLI.
_LAZY = {
    "Report": "pipeline.results",
    "Reducer": "agent.reducer",
    "ReducerResult": "agent.reducer",
    "reduce_bytes": "pipeline.compose",
    "ReduceOptions": "pipeline.compose",
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

if TYPE_CHECKING:
    from ctxcli.agent.reducer import Reducer, ReducerResult
    from ctxcli.api import reduce_file, restore_file, stats_file
    from ctxcli.core.errors import CtxError, ExitCode, OnInvalid
    from ctxcli.datasets.records import ReducedRecords, reduce_records
    from ctxcli.datasets.rows import RowReducer, reduce_row, restore_row
    from ctxcli.pipeline.compose import ReduceOptions, reduce_bytes
    from ctxcli.pipeline.config import Config, load_config
    from ctxcli.pipeline.results import Report


__getattr__ = lazy_getattr(__name__, _LAZY)


__all__ = [
    "Config",
    "CtxError",
    "ExitCode",
    "OnInvalid",
    "ReduceOptions",
    "ReducedRecords",
    "Reducer",
    "ReducerResult",
    "Report",
    "RowReducer",
    "__version__",
    "load_config",
    "reduce_bytes",
    "reduce_file",
    "reduce_records",
    "reduce_row",
    "restore_file",
    "restore_row",
    "stats_file",
]
