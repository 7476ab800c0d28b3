"""ctx: shrink LLM-agent transcripts losslessly.

The command-line tool is a thin layer over these functions::

    from ctxcli import load_config, reduce_file, restore_file

    report, _ = reduce_file("session.jsonl", "reduced.jsonl")
    print(report.tokens_before, "->", report.tokens_after)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# The public API is imported on first use (PEP 562), so `import ctxcli` is cheap:
# `ctx --version` starts fast and Ctrl-C during start-up is caught by the CLI.
_LAZY = {
    "Report": "api",
    "reduce_bytes": "api",
    "reduce_file": "api",
    "restore_file": "api",
    "stats_file": "api",
    "ReducedRecords": "records",
    "reduce_records": "records",
    "Config": "config",
    "load_config": "config",
    "CtxError": "errors",
    "ExitCode": "errors",
}

if TYPE_CHECKING:
    from .api import Report, reduce_bytes, reduce_file, restore_file, stats_file
    from .config import Config, load_config
    from .errors import CtxError, ExitCode
    from .records import ReducedRecords, reduce_records


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'ctxcli' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


__all__ = [
    "Config",
    "CtxError",
    "ExitCode",
    "ReducedRecords",
    "Report",
    "__version__",
    "load_config",
    "reduce_bytes",
    "reduce_file",
    "reduce_records",
    "restore_file",
    "stats_file",
]
