"""``ctx cost``: the table on stderr, one JSON object on stdout, one-line errors."""

from __future__ import annotations

import io
from pathlib import Path

import orjson
import pytest
from rich.console import Console

from ctxcli.cli.cost import cost_table
from ctxcli.cost.session import CostOptions, session_cost
from support.cli import invoke
from support.cost_sessions import ClaudeSession, Words, text, tool_use, usage
from support.paths import SNAPSHOTS
from support.session_layout import build


def session(tmp_path: Path) -> Path:
    s = ClaudeSession()
    s.user("task " * 500, at=0)
    s.response("m1", [tool_use("t1", "cat notes.txt")], at=2, use=usage(write=3_000))
    s.result("t1", "note " * 3_000, at=3)
    s.response("m2", [text("done")], at=5, use=usage(read=3_000, write=3_000, out=40))
    s.user("thanks", at=600)
    s.response("m3", [text("welcome")], at=601, use=usage(write=6_100, out=3))
    return s.write(tmp_path / "s.jsonl")


def test_the_table_goes_to_stderr_and_stdout_stays_empty(tmp_path: Path) -> None:
    result = invoke(["cost", str(session(tmp_path))])
    assert result.stdout == ""
    for label in ("as recorded", "as replayed", "ctx live: live", "reduce+resume"):
        assert label in result.stderr


def test_json_prints_the_bills_and_every_request(tmp_path: Path) -> None:
    result = invoke(["cost", str(session(tmp_path)), "--json", "--preset", "eino"])
    data = orjson.loads(result.stdout)
    assert result.stderr == ""
    assert {"recorded_usd", "replayed_usd", "with_ctx_usd", "requests"} <= set(data)
    assert data["chain"] == "eino" and [c["name"] for c in data["chains"]] == ["eino"]
    assert [r["key"] for r in data["requests"]] == ["m1", "m2", "m3"]
    assert data["recorded_usd"] > 0 and data["with_ctx_usd"] > 0


def test_a_config_file_is_priced_first(tmp_path: Path) -> None:
    config = tmp_path / "ctx.toml"
    config.write_text('[[stages]]\nuse = "clear_tool_results"\nmax_tokens = 0\n', "utf-8")
    args = ["cost", str(session(tmp_path)), "--json", "--config", str(config), "--preset", "live"]
    data = orjson.loads(invoke(args).stdout)
    assert [c["name"] for c in data["chains"]] == [str(config), "live"]


def test_a_file_that_records_no_usage_is_one_line_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "chat.jsonl"
    path.write_text('{"role": "user", "content": "hi"}\n', "utf-8")
    result = invoke(["cost", str(path)], code=2)
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith(f"ctx: error: {path}: not a Claude Code session")


def test_nothing_to_price_is_a_usage_error() -> None:
    result = invoke(["cost"], code=2)
    assert "name a session file" in result.stderr


def test_a_session_is_found_by_its_id(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    layout = build(tmp_path / "home", monkeypatch)
    data = orjson.loads(invoke(["cost", "--session", "0199812e", "--json"]).stdout)
    assert data["session"] == str(layout.codex_archived)
    assert data["format"] == "codex" and data["calls"] == 58


def test_cost_table_snapshot(tmp_path: Path, update_goldens: bool) -> None:
    cost = session_cost(session(tmp_path), CostOptions(counter=Words(), resume=None))
    buf = io.StringIO()
    Console(file=buf, width=100, color_system=None, highlight=False).print(cost_table(cost))
    text = buf.getvalue().replace(str(tmp_path), "<tmp>")
    snap = SNAPSHOTS / "cost_table.txt"
    if update_goldens:
        snap.write_text(text)
    assert text == snap.read_text()


def test_why_and_compare_print_their_tables_and_json(tmp_path: Path) -> None:
    path = str(session(tmp_path))
    result = invoke(["cost", path, "--why", "--compare"])
    assert "Why the cache was written" in result.stderr
    assert "ttl_expired" in result.stderr and "cold_start" in result.stderr
    assert result.stderr.count("alt: ") == 4
    assert "observation_masking" in result.stderr and "client_compaction" in result.stderr
    data = orjson.loads(invoke(["cost", path, "--compare", "--json"]).stdout)
    names = [a["name"] for a in data["alternatives"]]
    assert names == ["anthropic_context_editing", "langchain_clear_tool_uses",
                     "observation_masking", "client_compaction"]  # fmt: skip
    causes = {c["cause"]: c["tokens"] for c in data["why"]["causes"]}
    assert causes == {"new_content": 3_097, "cold_start": 3_000, "ttl_expired": 6_003}
    plain = invoke(["cost", path])
    assert "alt: " not in plain.stderr and "Why the cache" not in plain.stderr
    assert orjson.loads(invoke(["cost", path, "--json"]).stdout)["alternatives"] == []
