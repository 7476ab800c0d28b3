"""The Rich tables ctx stats prints, rendered at a fixed width against snapshots."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from ctxcli.api import Report
from ctxcli.cli.render import monitors_table, report_rows, report_table, saved_pct
from ctxcli.pipeline.run import StageReport
from support.paths import SNAPSHOTS


def _report() -> Report:
    return Report(
        input="session.jsonl",
        format="claude_code",
        tokenizer="cl100k",
        messages=408,
        tokens_before=169_343,
        tokens_after=17_420,
        bytes_before=3_158_801,
        bytes_after=235_378,
        stages=[
            StageReport("prune_sidecars", 120, 4, 169_343, 169_343),
            StageReport("truncate_tool_output", 31, 31, 169_343, 61_002),
            StageReport("clear_tool_results", 80, 80, 61_002, 17_420),
        ],
        monitors={
            "streak": 0.2,
            "no_progress": 1.0,
            "edit_revert": 0.0,
            "test_repeat": 0.5,
            "diversity": 0.0,
            "hedge": 0.125,
        },
        resume_tokens_before=51_205,
        resume_tokens_after=17_420,
    )


def _render(table: object) -> str:
    buf = io.StringIO()
    Console(file=buf, width=100, color_system=None, highlight=False).print(table)
    return buf.getvalue()


@pytest.mark.parametrize(
    ("name", "build"), [("stats_table", report_table), ("monitors_table", monitors_table)]
)
def test_table_snapshot(name: str, build: object, update_goldens: bool) -> None:
    text = _render(build(_report()))  # type: ignore[operator]
    snap = SNAPSHOTS / f"{name}.txt"
    if update_goldens:
        snap.write_text(text)
    assert text == snap.read_text()


def test_rows_add_up() -> None:
    rows = report_rows(_report())
    assert rows[-1] == ("total", "231", "115", "169,343", "17,420", "89.7%")
    assert saved_pct(0, 0) == "0.0%"


def test_stats_table_fits_80_columns_without_cutting_numbers() -> None:
    """Longest stage names and 9-digit counts: every number is printed whole in 80 columns."""
    report = _report()
    report.tokens_before = report.tokens_after = 123_456_789
    report.stages = [
        StageReport("strip_system_reminders", 12_345, 12_345, 123_456_789, 123_456_789),
        StageReport("drop_before_compaction", 12_345, 12_345, 123_456_789, 123_456_789),
    ]
    buf = io.StringIO()
    Console(file=buf, width=80, color_system=None, highlight=False).print(report_table(report))
    lines = buf.getvalue().splitlines()
    assert max(len(line) for line in lines) <= 80
    rows = [line for line in lines if "strip_system_reminders" in line or "total" in line]
    assert len(rows) == 2
    for row in rows:
        assert row.count("123,456,789") == 2, row
        assert "…" not in row
