"""Turn a :class:`~ctxcli.api.Report` into rows and Rich tables (the terminal's view).

Loaded only by what prints a table: ``ctx stats --json`` never imports it (start-up).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ctxcli.cli import console
from ctxcli.cli.payload import saved, saved_pct
from ctxcli.core.monitors import MONITOR_HELP, StuckRule, looks_stuck

if TYPE_CHECKING:
    from rich.table import Table

    from ctxcli.api.batch import FileResult
    from ctxcli.pipeline.results import Report
    from ctxcli.report.data import Item, ToolRow

__all__ = [
    "batch_table",
    "fitting_columns",
    "plain_table",
    "print_table",
    "monitors_fired",
    "monitors_table",
    "report_json",
    "report_rows",
    "report_table",
    "tools_table",
    "top_table",
    "top_where",
]


def fitting_columns(
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    width: int | None,
    dropped: Sequence[str],
    narrowest: dict[str, int] | None = None,
) -> list[int]:
    """The indexes of the columns a table shows in ``width`` columns.

    All of them, less those of ``dropped`` (lowest priority first) while the table does
    not fit with each column at its widest cell (a column of ``narrowest`` at that
    width, as it can be cut), two spaces between columns. A figure is never cut: a
    column it does not fit is left out whole.
    """
    from rich.cells import cell_len

    shown = list(range(len(headers)))
    if width is None:
        return shown
    cut = narrowest or {}

    def needed() -> int:
        total = 2 * (len(shown) - 1)
        for i in shown:
            natural = max([cell_len(headers[i]), *(cell_len(r[i]) for r in rows)])
            total += min(natural, cut[headers[i]]) if headers[i] in cut else natural
        return total

    for name in dropped:
        if needed() <= width:
            break
        shown.remove(headers.index(name))
    return shown


def plain_table(title: str) -> Table:
    """An empty table in ctx's style: no frame, so no line ends in blanks or edges.

    The title on the left, a rule under the header, two spaces between columns.
    """
    from rich import box
    from rich.table import Table

    return Table(
        title=title,
        title_justify="left",
        box=box.SIMPLE_HEAVY,
        show_edge=False,
        pad_edge=False,
        collapse_padding=True,
    )


def print_table(table: Table) -> None:
    """Print a table on stderr with no blanks at the ends of its lines."""
    import re

    out = console.err_console()
    with out.capture() as captured:
        out.print(table)
    text = re.sub(r" +((?:\x1b\[[0-9;]*m)*)$", r"\1", captured.get(), flags=re.M)
    sys.stderr.write(text)


def report_rows(report: Report) -> list[tuple[str, ...]]:
    """One row per stage, then the total: stage, changed, offloaded, tokens, saved."""
    rows: list[tuple[str, ...]] = [
        (
            s.stage,
            f"{s.changed:,}",
            f"{s.offloaded:,}",
            f"{s.tokens_before:,}",
            f"{s.tokens_after:,}",
            saved_pct(s.tokens_before, s.tokens_after),
        )
        for s in report.stages
    ]
    rows.append(
        (
            "total",
            f"{sum(s.changed for s in report.stages):,}",
            f"{sum(s.offloaded for s in report.stages):,}",
            f"{report.tokens_before:,}",
            f"{report.tokens_after:,}",
            saved_pct(report.tokens_before, report.tokens_after),
        )
    )
    return rows


def report_table(report: Report) -> Table:
    """The Rich table ``ctx stats`` prints; it fits 80 columns without cutting a number.

    Lines between rows only (no vertical rules) and "tokens" said once, in the title: the
    widest stage name and 9-digit counts still fit in 80 columns.
    """
    from rich import box
    from rich.table import Table

    title = (
        f"{console.shown_path(report.input)} · {report.format} · {report.messages:,} messages · "
        f"tokens ({report.tokenizer})"
    )
    table = Table(
        title=title,
        title_justify="left",
        box=box.SIMPLE_HEAVY,
        pad_edge=False,
        collapse_padding=True,
    )
    table.add_column("stage", no_wrap=True)
    for name in ("changed", "offloaded", "before", "after", "saved"):
        table.add_column(name, justify="right", no_wrap=True)
    rows = report_rows(report)
    for row in rows[:-1]:
        table.add_row(*row)
    table.add_section()
    table.add_row(*rows[-1], style="bold")
    table.caption = (
        f"file bytes {report.bytes_before:,} → {report.bytes_after:,} "
        f"({saved(report.bytes_before, report.bytes_after, 'smaller')})"
    )
    before, after = report.resume_tokens_before, report.resume_tokens_after
    if before is not None and after is not None:
        # What `claude --resume` sends again: the messages after the last compaction.
        table.caption += (
            f"\na resume sends (after the last compaction) {before:,} → {after:,} tokens "
            f"({saved(before, after)})"
        )
    table.caption_justify = "left"
    return table


def monitors_fired(report: Report) -> bool:
    """True if the monitors look stuck by the rule ``nudge_early_exit`` acts on."""
    return looks_stuck(report.monitors)


def monitors_table(report: Report) -> Table:
    """The stuck-agent monitors of the input, one row each, labelled by what it measures."""
    from rich import box
    from rich.table import Table

    rule = StuckRule()
    verdict = "looks stuck" if monitors_fired(report) else "not stuck"
    table = Table(
        title=f"agent monitors: {verdict} (nudge_early_exit nudges when streak > "
        f"{rule.streak}, or hedge > {rule.hedge} with diversity > {rule.diversity})",
        title_justify="left",
        box=box.SIMPLE_HEAVY,
    )
    table.add_column("monitor", no_wrap=True, min_width=12)
    table.add_column("score", justify="right", no_wrap=True)
    table.add_column("measures")
    for name, score in report.monitors.items():
        table.add_row(name, f"{score:.2f}", MONITOR_HELP.get(name, ""))
    return table


def report_json(report: Report) -> dict[str, Any]:
    """The JSON object ``--json`` prints."""
    return report.to_dict()


def batch_table(results: Sequence[FileResult], width: int | None = None) -> Table:
    """The Rich table ``ctx stats`` prints for several files: one row per file.

    The figures keep their whole width; a file name too long for the terminal is cut
    with an ellipsis (never folded mid-word).
    """
    from rich.cells import cell_len

    rows: list[tuple[str, ...]] = []
    failed: list[bool] = []
    before = after = 0
    for r in results:
        rep = r.report
        failed.append(rep is None)
        if rep is None:
            rows.append((r.name or r.input, "failed", "", "", "", ""))
            continue
        before += rep.tokens_before
        after += rep.tokens_after
        rows.append(
            (
                r.name or rep.input,
                rep.format,
                f"{rep.messages:,}",
                f"{rep.tokens_before:,}",
                f"{rep.tokens_after:,}",
                saved_pct(rep.tokens_before, rep.tokens_after),
            )
        )
    total = ("total", "", "", f"{before:,}", f"{after:,}", saved_pct(before, after))
    table = plain_table(f"{len(results):,} transcripts · tokens")
    names = ("format", "messages", "before", "after", "saved")
    widths = [max(cell_len(row[i]) for row in [*rows, total, ("", *names)]) for i in range(1, 6)]
    room = None if width is None else max(12, width - sum(widths) - 2 * len(widths))
    table.add_column("file", no_wrap=True, overflow="ellipsis", max_width=room)
    for i, (name, widest) in enumerate(zip(names, widths, strict=True)):
        table.add_column(
            name, justify="left" if i == 0 else "right", no_wrap=True, min_width=widest
        )
    for row, bad in zip(rows, failed, strict=True):
        table.add_row(*row, style="red" if bad else None)
    table.add_section()
    table.add_row(*total, style="bold")
    return table


def tools_table(rows: Sequence[ToolRow]) -> Table:
    """Tokens per tool (calls and results) and per kind of other text: ``--by-tool``."""
    table = plain_table("tokens by tool")
    table.add_column("tool or text", no_wrap=True, min_width=20)
    for name in ("calls", "tokens before", "tokens after", "saved"):
        table.add_column(name, justify="right", no_wrap=True)
    for r in rows:
        table.add_row(
            r.name,
            f"{r.calls:,}",
            f"{r.tokens_before:,}",
            f"{r.tokens_after:,}",
            saved_pct(r.tokens_before, r.tokens_after),
        )
    before = sum(r.tokens_before for r in rows)
    after = sum(r.tokens_after for r in rows)
    table.add_section()
    table.add_row(
        "total",
        f"{sum(r.calls for r in rows):,}",
        f"{before:,}",
        f"{after:,}",
        saved_pct(before, after),
        style="bold",
    )
    return table


def top_table(items: Sequence[Item]) -> Table:
    """The largest removed or shortened blocks: ``--top N``.

    Every column is labelled and none is cut; where each original went is
    :func:`top_where`, printed under the table (a path is never cut).
    """
    table = plain_table(f"the {len(items)} largest removals")
    table.add_column("#", justify="right", no_wrap=True)
    table.add_column("saved", justify="right", no_wrap=True)
    table.add_column("message", justify="right", no_wrap=True)
    table.add_column("what", no_wrap=True)
    table.add_column("stage", no_wrap=True)
    for rank, it in enumerate(items, 1):
        kind = it.kind.replace("tool_", "")
        what = f"{it.tool} {kind}" if it.tool else f"{it.role} {kind}"
        table.add_row(
            str(rank), f"{it.saved:,}", f"#{it.message}", f"{what} ({it.change})", it.stage
        )
    return table


def top_where(items: Sequence[Item]) -> list[str]:
    """Where the original of each block of :func:`top_table` went, one line each."""
    return [
        f"#{rank} original in {console.shown_path(it.offload_path or '(the restore pack)')}"
        for rank, it in enumerate(items, 1)
    ]
