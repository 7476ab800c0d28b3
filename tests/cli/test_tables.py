"""Tables at 80 columns: every figure whole, low-priority columns dropped first, every
column labelled, no blanks at the ends of lines; and the words around them."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from ctxcli.cli import app
from ctxcli.cli.sessions import sessions_table
from ctxcli.sessions.listing import SessionRow
from support.paths import REPO

SAMPLE = REPO / "sample_transcripts" / "claude_code_session.jsonl"
NOW = time.time()


def _row(i: int, **changes: Any) -> SessionRow:
    values: dict[str, Any] = {
        "id": f"4d5611e5-aaaa-bbbb-cccc-00000000000{i}",
        "short_id": f"4d5611e{i}",
        "agent": "claude_code",
        "path": "/x",
        "project": "/home/someone/src/github.com/alexander-yaroslavovitskiy/long-project-name",
        "parent": None,
        "archived": False,
        "modified": NOW - 3600 * i,
        "bytes": 12_345_678 * i,
        "records": 12_345,
        "largest_line_bytes": 2_345_678,
        "largest_line": 3,
        "tokens": 297_850,
        "resume_tokens_before": 2443,
        "resume_tokens_after": 2443,
        "health": ["torn_last_line", "malformed_line", "unanswered_call"],
        "title": "**Fix** the failing test in the parser module",
        "first_prompt": None,
        "summary": None,
        "git_branch": "feature/some-long-branch-name",
        "model": "claude-sonnet-4-5",
        "created": None,
        "preset": None,
        "cost_before": 12.34,
        "cost_after": 1.23,
        "recorded_usd": 123.45,
    }
    values.update(changes)
    return SessionRow(**values)


def _fits(text: str, width: int = 80) -> None:
    """Every line of the tables (not the ``ctx:`` messages) fits ``width``, with no blanks at its end."""
    for line in text.splitlines():
        if line.startswith("ctx: "):
            continue
        assert len(line) <= width, f"{len(line)} columns: {line!r}"
        assert line == line.rstrip(), f"trailing blanks: {line!r}"


@pytest.mark.parametrize("width", [60, 80, 100])
def test_sessions_table_keeps_money_whole_and_cuts_the_project_at_its_start(width: int) -> None:
    rows = [_row(1), _row(2, cost_before=0.01, cost_after=0.0, title=None), _row(3, parent="p")]
    text = sessions_table(rows, now=NOW, width=width)
    _fits(text, width)
    header = text.splitlines()[0].split()
    assert {"id", "resume", "$", "tokens"} <= set(header)
    assert "$12.34→$1.23" in text and "$0.01→$0.00" in text and "297.9k" in text
    if width >= 80:
        assert "spent" in header and "$123.45" in text and "title" in header
        # The project's end (its name), never a middle piece.
        assert re.search(r"  …[a-z-]*project-name  ", text), text


def test_sessions_table_drops_branch_before_money() -> None:
    wide = sessions_table([_row(1)], now=NOW, width=None)
    assert "branch" in wide.splitlines()[0]
    narrow = sessions_table([_row(1)], now=NOW, width=80).splitlines()[0]
    assert "branch" not in narrow and "resume $" in narrow and "spent $" in narrow


def _run(args: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.chdir(tmp_path)
    return CliRunner().invoke(app, args, prog_name="ctx", env={"COLUMNS": "80", "NO_COLOR": "1"})


def test_cost_table_fits_80_columns_and_says_what_provider_ours_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = _run(["cost", str(SAMPLE)], tmp_path, monkeypatch)
    assert result.exit_code == 0, result.output
    _fits(result.stderr)
    text = result.stderr
    assert "(provider/ours)" in text and "tokens per token ctx counts" in text
    for label in ("as recorded", "as replayed", "ctx live: live"):
        assert re.search(rf"^\s*{re.escape(label)}\s+\d", text, re.M), label  # one line each


def test_stats_tables_fit_80_columns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    args = ["stats", str(SAMPLE), "--preset", "claude-code-resume", "--by-tool", "--top", "3"]
    result = _run(args, tmp_path, monkeypatch)
    assert result.exit_code == 0, result.output
    tables = result.stderr.split("the 3 largest removals")
    _fits(tables[0])
    top = tables[1].splitlines()
    header = top[1].split()
    assert header == ["#", "saved", "message", "what", "stage"]  # every column labelled
    rows = [line for line in top[3:] if re.match(r"\d+ ", line)]
    assert len(rows) == 3 and all(len(r.split()) >= 5 for r in rows)
    assert [line.split(" original in ")[0] for line in top if "original in" in line] == [
        "#1",
        "#2",
        "#3",
    ]


def test_batch_table_cuts_a_long_name_never_a_figure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "many"
    folder.mkdir()
    long = "a-very-long-file-name-for-a-session-transcript-kept-here.jsonl"
    for name in (long, "b.jsonl"):
        (folder / name).write_bytes(SAMPLE.read_bytes())
    result = _run(["stats", "many"], tmp_path, monkeypatch)
    assert result.exit_code == 0, result.output
    _fits(result.stderr)
    assert result.stderr.count("21,446") >= 4 and "42,892" in result.stderr
    assert "…" in result.stderr


def test_growth_is_said_as_growth() -> None:
    from ctxcli.cli.payload import saved

    assert saved(1000, 1016) == "grew by 1.6%"
    assert saved(1000, 375) == "62.5% saved"
    assert saved(1000, 1000, "smaller") == "0.0% smaller"


def test_install_hint_names_the_checkout_this_ctx_runs_from() -> None:
    from ctxcli.core.install import install_command

    hint = install_command("report")
    origin = json.loads(
        __import__("importlib.metadata")
        .metadata.distribution("ctx-lossless")
        .read_text("direct_url.json")
        or "{}"
    )
    if origin.get("dir_info", {}).get("editable"):
        assert hint == f"pip install -e '{REPO}[report]'"
    else:
        assert hint.endswith("[report]'")
