"""Turn a :class:`~ctxcli.api.Report` into rows and Rich tables (the terminal's view).

Loaded only by what prints a table: ``ctx stats --json`` never imports it (start-up).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ctxcli.cli.payload import saved_pct
from ctxcli.core.monitors import MONITOR_HELP, StuckRule, looks_stuck

if TYPE_CHECKING:
    from rich.table import Table

    from ctxcli.api.batch import FileResult
    from ctxcli.pipeline.results import Report
    from ctxcli.report.data import Item, ToolRow

__all__ = [
    "batch_table",
    "monitors_fired",
    "monitors_table",
    "report_json",
    "report_rows",
    "report_table",
    "tools_table",
    "top_table",
]


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
        f"{report.input} · {report.format} · {report.messages:,} messages · "
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
        f"({saved_pct(report.bytes_before, report.bytes_after)} smaller)"
    )
    before, after = report.resume_tokens_before, report.resume_tokens_after
    if before is not None and after is not None:
        # What `claude --resume` sends again: the messages after the last compaction.
        table.caption += (
            f"\ntokens a resume sends (after the last compaction) {before:,} → {after:,} "
            f"({saved_pct(before, after)} saved)"
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


def batch_table(results: Sequence[FileResult]) -> Table:
    """The Rich table ``ctx stats`` prints for several files: one row per file."""
    from rich.table import Table

    table = Table(title=f"{len(results):,} transcripts · tokens", title_justify="left")
    table.add_column("file", overflow="fold")
    table.add_column("format", no_wrap=True)
    for name in ("messages", "before", "after", "saved"):
        table.add_column(name, justify="right", no_wrap=True)
    before = after = 0
    for r in results:
        rep = r.report
        if rep is None:
            table.add_row(r.name or r.input, "failed", "", "", "", "", style="red")
            continue
        before += rep.tokens_before
        after += rep.tokens_after
        table.add_row(
            r.name or rep.input,
            rep.format,
            f"{rep.messages:,}",
            f"{rep.tokens_before:,}",
            f"{rep.tokens_after:,}",
            saved_pct(rep.tokens_before, rep.tokens_after),
        )
    table.add_section()
    table.add_row(
        "total", "", "", f"{before:,}", f"{after:,}", saved_pct(before, after), style="bold"
    )
    return table


def tools_table(rows: Sequence[ToolRow]) -> Table:
    """Tokens per tool (calls and results) and per kind of other text: ``--by-tool``."""
    from rich.table import Table

    table = Table(title="tokens by tool", title_justify="left")
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
    """The largest removed or shortened blocks: ``--top N``."""
    from rich.table import Table

    table = Table(title=f"the {len(items)} largest removals", title_justify="left")
    table.add_column("#", justify="right", no_wrap=True)
    table.add_column("saved", justify="right", no_wrap=True)
    table.add_column("message", justify="right", no_wrap=True)
    table.add_column("what", no_wrap=True)
    table.add_column("stage", no_wrap=True)
    table.add_column("original in", overflow="fold")
    for rank, it in enumerate(items, 1):
        kind = it.kind.replace("tool_", "")
        what = f"{it.tool} {kind}" if it.tool else f"{it.role} {kind}"
        table.add_row(
            str(rank),
            f"{it.saved:,}",
            f"#{it.message}",
            f"{what} ({it.change})",
            it.stage,
            it.offload_path or "(restore pack)",
        )
    return table
