"""``ctx report``: one self-contained HTML page of where a transcript's tokens go.

:func:`analyze_file` breaks down what ``ctx stats`` computes (per message, per tool,
per stage, the largest removals, the monitors over time); :func:`render_html` turns
that into the page and :func:`write_html` does both and writes the file.
"""

from __future__ import annotations

from pathlib import Path

from ctxcli import api
from ctxcli.core.errors import CtxError
from ctxcli.pipeline.config import Config, load_config
from ctxcli.report.cost import CostTimeline, cost_timeline
from ctxcli.report.data import (
    Item,
    MessageRow,
    ReportData,
    ToolRow,
    analyze_bytes,
    analyze_file,
)
from ctxcli.report.html import render_html

__all__ = [
    "CostTimeline",
    "Item",
    "MessageRow",
    "ReportData",
    "ToolRow",
    "analyze_bytes",
    "analyze_file",
    "cost_timeline",
    "render_html",
    "write_html",
]


def write_html(
    input: str,
    output: str | Path,
    destination: api.Destination | None = None,
    *,
    config: Config | None = None,
    options: api.RunOptions | None = None,
    cost: bool = True,
    trajectory: str | None = None,
) -> tuple[ReportData, bytes]:
    """Analyze ``input`` and write the page to ``output`` atomically (``-``: write nothing).

    ``destination`` is where the reduction the page describes writes (default: stdout,
    whose offload directory is ``./ctx-offload/<hash>``; a session reduced in place
    writes to its change directory). ``cost``: a Claude Code session or Codex rollout
    (a file, not stdin) gets the cost timeline, as run and with the config's chain live
    (:func:`~ctxcli.report.cost.cost_timeline`). ``trajectory`` picks one of a file of
    several (see :func:`~ctxcli.report.data.analyze_file`).

    Returns:
        The data shown and the page's bytes.
    """
    if str(output) != api.STDIO and Path(output).is_dir():
        raise CtxError(f"{output} is a directory; name the HTML file to write.")
    data = analyze_file(input, destination, config=config, options=options, trajectory=trajectory)
    timeline = None
    if cost and input != api.STDIO and trajectory is None:
        chosen = config or load_config()
        timeline = cost_timeline(input, chosen, chosen.settings.preset or chosen.source)
    page = render_html(data, timeline).encode("utf-8")
    if str(output) != api.STDIO:
        api.write_atomic(Path(output), page)
    return data, page
