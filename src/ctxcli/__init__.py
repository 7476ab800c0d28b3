"""ctx: shrink LLM-agent transcripts losslessly.

The command-line tool is a thin layer over these functions::

    from ctxcli import load_config, reduce_file, restore_file

    report, _ = reduce_file("session.jsonl", "reduced.jsonl")
    print(report.tokens_before, "->", report.tokens_after)
"""

from __future__ import annotations

__version__ = "0.1.0"

from .api import Report, reduce_bytes, reduce_file, restore_file, stats_file  # noqa: E402
from .config import Config, load_config  # noqa: E402
from .errors import CtxError, ExitCode  # noqa: E402

__all__ = [
    "Config",
    "CtxError",
    "ExitCode",
    "Report",
    "__version__",
    "load_config",
    "reduce_bytes",
    "reduce_file",
    "restore_file",
    "stats_file",
]
