"""ctx report: the breakdown adds up to ctx stats, and the page holds it (browser: test_report_browser)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import orjson
import pytest

from ctxcli.api import reduce_bytes
from ctxcli.core.monitors import monitor_scores, monitor_series, steps_of
from ctxcli.formats import load
from ctxcli.pipeline.options import RunOptions
from ctxcli.report import analyze_bytes, render_html
from ctxcli.report.charts import timeline_rows
from ctxcli.report.data import MessageRow
from ctxcli.report.html import _listed
from support.cli import invoke
from support.paths import FIXTURES, SAMPLE, SNAPSHOTS, corpus, need_shared, shared_transcripts


def session(rounds: int = 8, lines: int = 400) -> bytes:
    """An OpenAI-chat agent session whose tool outputs are long enough to be reduced."""
    records: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Fix the failing test in app/cache.py please."},
    ]
    for i in range(rounds):
        tool = "read_file" if i % 2 else "bash"
        args = {"path": f"app/mod{i}.py"} if i % 2 else {"command": f"pytest tests/t{i}.py"}
        records.append(
            {
                "role": "assistant",
                "content": f"Step {i}: maybe I should look at module {i}.",
                "tool_calls": [
                    {
                        "id": f"call_{i}",
                        "type": "function",
                        "function": {"name": tool, "arguments": json.dumps(args)},
                    }
                ],
            }
        )
        body = "\n".join(
            f"{n:5} line {n} of module {i}: value = compute({n}, {i})" for n in range(lines)
        )
        if i == 3:
            body = "Traceback (most recent call last):\nValueError: bad cache key 42"
        records.append({"role": "tool", "tool_call_id": f"call_{i}", "content": body})
    records.append({"role": "assistant", "content": "Done: the cache key is fixed."})
    return b"".join(orjson.dumps(r) + b"\n" for r in records)


def write(tmp_path: Path, data: bytes, name: str = "s.jsonl") -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def test_trace_keeps_every_stage_and_block_tokens_add_up() -> None:
    reduced = reduce_bytes(session(), options=RunOptions(trace=True))
    trace = reduced.trace
    assert trace is not None
    assert [name for name, _ in trace.steps] == [
        "input",
        "truncate_tool_output",
        "clear_tool_results",
    ]
    for (_name, conv), total in zip(
        trace.steps,
        [reduced.report.tokens_before] + [s.tokens_after for s in reduced.report.stages],
        strict=True,
    ):
        assert sum(trace.tokens(b) for m in conv for b in m.blocks) == total
    assert reduce_bytes(session()).trace is None


def test_breakdowns_add_up_to_the_stats_totals() -> None:
    data = analyze_bytes(session())
    rep = data.report
    assert rep.tokens_after < rep.tokens_before
    assert sum(m.tokens_before for m in data.messages) == rep.tokens_before
    assert sum(m.tokens_after for m in data.messages) == rep.tokens_after
    assert sum(r.tokens_before for r in data.by_tool) == rep.tokens_before
    assert sum(r.tokens_after for r in data.by_tool) == rep.tokens_after
    tools = {r.name: r for r in data.by_tool}
    assert tools["bash"].calls == 4 and tools["read_file"].calls == 4
    assert tools["bash"].tokens_after < tools["bash"].tokens_before
    assert tools["(system text)"].tokens_before == tools["(system text)"].tokens_after > 0
    saved = [it.saved for it in data.top]
    assert saved == sorted(saved, reverse=True) and saved[0] > 0
    assert data.changed_blocks >= len(data.top) > 0
    assert {it.stage for it in data.top} <= {"truncate_tool_output", "clear_tool_results"}
    for it in data.top:
        assert it.tool in ("bash", "read_file") and it.kind == "tool_result"
        assert it.tokens_after < it.tokens_before and it.before and it.before != it.after


def test_the_offload_path_shown_is_the_file_reduce_writes(tmp_path: Path) -> None:
    src = write(tmp_path, session())
    data = analyze_bytes(src.read_bytes(), path=str(src))
    # `ctx reduce` to stdout offloads into ./ctx-offload/<input hash>: what the page cites,
    # by its absolute path as the hints do (issue 35 §3).
    invoke(["reduce", str(src), "-q"])
    with_path = [it for it in data.top if it.offload_path]
    assert with_path, "clear_tool_results offloads what it clears"
    for it in with_path:
        assert it.offload_path is not None
        assert it.offload_path.startswith(f"{Path('ctx-offload').resolve()}/")
        assert Path(it.offload_path).read_text(encoding="utf-8") == it.before


def test_monitor_series_equals_the_monitors_of_every_prefix() -> None:
    conv = load(session(rounds=12), "s.jsonl").conversation
    steps = steps_of(conv)
    series = monitor_series(steps, points=10_000)
    assert [k for k, _ in series] == list(range(1, len(steps) + 1))
    for k, scores in series:
        assert scores == monitor_scores(steps[:k])
    sampled = monitor_series(steps, points=5)
    assert len(sampled) <= 6 and sampled[-1] == series[-1]
    assert monitor_series([], points=5) == []


@pytest.mark.slow
@pytest.mark.parametrize("path", corpus(shared_transcripts()))
def test_monitor_series_on_real_transcripts(path: Path) -> None:
    steps = steps_of(load(path.read_bytes(), str(path), on_invalid="keep").conversation)
    series = monitor_series(steps, points=40)
    for k, scores in series:
        assert scores == pytest.approx(monitor_scores(steps[:k]))


def test_compaction_and_resume_point_are_found() -> None:
    raw = (FIXTURES / "claude_code_resume" / "session.jsonl").read_bytes()
    data = analyze_bytes(raw)
    assert data.compactions, "the fixture has a compact_boundary"
    assert data.resume_at == data.compactions[-1]
    conv = load(raw, "session.jsonl").conversation
    first_resumed = conv.resumed_messages()[0]
    assert conv.messages[data.resume_at] is first_resumed


def test_long_sessions_are_binned_and_cut() -> None:
    rows = [MessageRow(i, "tool", f"t{i % 12}", 10 + i, i % 7, "x" * 300) for i in range(5000)]
    bars, stride = timeline_rows(rows, max_bars=1000)
    assert stride == 5 and len(bars) == 1000
    assert sum(b["before"] for b in bars) == sum(r.tokens_before for r in rows)
    assert sum(b["after"] for b in bars) == sum(r.tokens_after for r in rows)
    assert len({b["category"] for b in bars}) == 10  # nine colours and "other"
    listed, chars, note = _listed(rows)
    assert len(listed) == 5000 and chars == 200 and "cut to 200 characters" in note
    many = [MessageRow(i, "user", "user", i, i, "y") for i in range(60_000)]
    listed, chars, note = _listed(many)
    assert len(listed) == 20_000 and chars == 50
    assert listed[0].index == 40_000 and "20,000 largest" in note and "cut to 50" in note


def test_page_is_self_contained_and_holds_the_numbers() -> None:
    data = analyze_bytes(session(), path="s.jsonl")
    page = render_html(data)
    # Nothing is fetched when the page opens.
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)
    assert "<script src" not in page
    rep = data.report
    assert f'id="tokens-before" data-value="{rep.tokens_before}"' in page
    assert f'id="tokens-after" data-value="{rep.tokens_after}"' in page
    for s in rep.stages:
        assert f'data-stage="{s.stage}" data-changed="{s.changed}"' in page
    assert data.input_sha256 in page and data.version in page
    assert "truncate_tool_output" in page and "&quot;tokenizer&quot;: &quot;cl100k&quot;" in page
    # The JSON payload cannot close its <script> element early.
    payload = page.split('<script type="application/json" id="ctx-data">', 1)[1]
    payload = payload.split("</script>", 1)[0]
    parsed = json.loads(payload)
    assert set(parsed["specs"]) == {"timeline", "tools", "stages", "monitors"}
    assert len(parsed["messages"]) == rep.messages


def test_cli_report_writes_the_page(tmp_path: Path) -> None:
    src = write(tmp_path, session())
    out = tmp_path / "r" / "report.html"
    result = invoke(["report", str(src), "-o", str(out)])
    assert result.stdout == ""
    assert f"report in {out}" in result.stderr
    page = out.read_text(encoding="utf-8")
    assert page.startswith("<!doctype html>") and "vegaEmbed" in page
    stdout = invoke(["report", str(src), "-o", "-"]).stdout
    assert stdout.startswith("<!doctype html>")
    not_a_file = invoke(["report", str(src), "-o", str(tmp_path)], code=2)
    assert (
        not_a_file.stderr
        == f"ctx: error: {tmp_path} is a directory; name the HTML file to write.\n"
    )
    bad = invoke(["report", str(tmp_path / "missing.jsonl")], code=2)
    assert "no such file" in bad.stderr and not (tmp_path / "work" / "report.html").exists()


def test_stats_by_tool_and_top_match_the_report(tmp_path: Path) -> None:
    src = write(tmp_path, session())
    data = analyze_bytes(src.read_bytes(), path=str(src))
    plain = json.loads(invoke(["stats", str(src), "--json"]).stdout)
    full = json.loads(invoke(["stats", str(src), "--json", "--by-tool", "--top", "3"]).stdout)
    # One shape for one file and several (issue 35 §3): the breakdowns are the file's.
    one = full["files"][0]
    assert {k: v for k, v in one.items() if k not in ("by_tool", "top")} == plain["files"][0]
    assert {k: v for k, v in full.items() if k != "files"} == {
        k: v for k, v in plain.items() if k != "files"
    }
    assert one["by_tool"] == [r.to_dict() for r in data.by_tool]
    assert one["top"] == [it.to_dict() for it in data.top[:3]]
    assert sum(r["tokens_after"] for r in one["by_tool"]) == plain["tokens_after"]
    table = invoke(["stats", str(src), "--by-tool", "--top", "2"]).stderr
    assert "tokens by tool" in table and "the 2 largest removals" in table
    bash = next(r for r in data.by_tool if r.name == "bash")
    assert re.search(rf"^bash +4 +{bash.tokens_before:,} +{bash.tokens_after:,} ", table, re.M)
    invoke(["stats", str(src), str(src), "--by-tool"], code=2)


def test_an_edited_block_gets_a_diff_and_a_replaced_one_does_not() -> None:
    from ctxcli.report.data import Item
    from ctxcli.report.html import _diff, _items

    lines = [f"line {i}" for i in range(10)]
    kept = "\n".join([*lines[:2], "[... 6 lines omitted ...]", *lines[-2:]])
    edited = Item(
        4, "tool", "tool_result", "bash", "head_tail", 80, 20, "\n".join(lines), kept, None
    )
    diff = _diff(edited)
    assert '<span class="del">-line 5</span>' in diff
    assert '<span class="add">+[... 6 lines omitted ...]</span>' in diff
    assert '<span class="ctx"> line 1</span>' in diff
    replaced = Item(
        5, "tool", "tool_result", "bash", "clear", 80, 9, "\n".join(lines), "[gone]", "d/x"
    )
    assert _diff(replaced) == ""
    assert (edited.change, replaced.change) == ("edited", "replaced")
    page = _items([edited, replaced])
    assert page.count("<summary>diff</summary>") == 1
    assert "original in <code>d/x</code>" in page and "no offload file" in page


@pytest.mark.parametrize("name", ["tools_table", "top_table"])
def test_terminal_table_snapshot(name: str, update_goldens: bool) -> None:
    import io

    from rich.console import Console

    from ctxcli.cli.render import tools_table, top_table
    from ctxcli.report.data import Item, ToolRow

    if name == "tools_table":
        table = tools_table(
            [
                ToolRow("Read", 31, 90_607, 2_186),
                ToolRow("Bash", 67, 17_094, 4_809),
                ToolRow("(user text)", 0, 3_843, 3_843, is_tool=False),
            ]
        )
    else:
        table = top_table(
            [
                Item(18, "user", "tool_result", "Read", "clear_tool_results", 9_300, 37, "a", "b",
                     "ctx-offload/clear/toolu_01WdfD9cV8AuWAiUsJEdcgAt"),
                Item(7, "assistant", "thinking", None, "clear_thinking", 1_200, 0, "c", "", None),
            ]
        )  # fmt: skip
    buf = io.StringIO()
    Console(file=buf, width=100, color_system=None, highlight=False).print(table)
    snap = SNAPSHOTS / f"{name}.txt"
    if update_goldens:
        snap.write_text(buf.getvalue())
    assert buf.getvalue() == snap.read_text()


def test_a_lone_surrogate_is_shown_escaped(tmp_path: Path) -> None:
    # Issue 34 item 9: "\ud800" is valid JSON; validate, stats and reduce took the file
    # and report exited 123 (the page could not be encoded).
    lines = SAMPLE.read_text("utf-8").splitlines(keepends=True)
    call = next(i for i, line in enumerate(lines) if '"tool_calls"' in line)
    lines[call] = lines[call].replace('"name": "', '"name": "grep\\ud800', 1)
    lines[call + 1] = lines[call + 1].replace('"content": "', '"content": "odd \\ud800 byte ', 1)
    src = tmp_path / "surrogate.jsonl"
    src.write_text("".join(lines), "utf-8")
    invoke(["validate", str(src)])
    out = tmp_path / "page.html"
    invoke(["report", str(src), "-o", str(out)])
    page = out.read_text("utf-8")
    assert "grep\\ud800" in page and "odd \\ud800 byte" in page
    stats = json.loads(invoke(["stats", str(src), "--json", "--by-tool"]).stdout)
    by_tool = stats["files"][0]["by_tool"]
    assert "grep\\ud800grep" in [row["name"] for row in by_tool]


# -- the page describes the run it shows (issue 35 §3) -------------------------------------


def _offloaded_texts(root: Path) -> list[str]:
    """The texts reduce wrote for the agent to read (not the restore pack)."""
    return [
        f.read_bytes().decode("utf-8", "replace")
        for f in sorted(root.rglob("*"))
        if f.is_file() and f.parent != root
    ]


@pytest.mark.real_data
@pytest.mark.parametrize(
    ("name", "preset", "stage", "whole"),
    [
        # drop_before_compaction writes the records it drops as one file
        ("cc_spotter_4d5611e5.jsonl", "claude-code-resume", "drop_before_compaction", True),
        # Codex's clear_thinking writes a response's summary parts as one file
        ("codex_agentcmd_2025-09-24T19-22-20.jsonl", "codex-resume", "clear_thinking", True),
        # strip_system_reminders changes a result that truncate_tool_output then offloads:
        # the file holds the text without the reminder, not the original
        ("cc_mclaude_c76e5be5.jsonl", "claude-code-resume", "strip_system_reminders", False),
    ],
)
def test_no_offload_file_only_for_blocks_reduce_offloads_nowhere(
    tmp_path: Path, name: str, preset: str, stage: str, whole: bool
) -> None:
    from ctxcli.api import Destination, RunOptions, reduce
    from ctxcli.core.errors import OnInvalid
    from ctxcli.pipeline.config import load_config
    from ctxcli.report import analyze_file

    src = need_shared() / name
    cfg = load_config(preset=preset)
    dest = Destination(output=str(tmp_path / "out.jsonl"))
    run = RunOptions(OnInvalid.KEEP)
    data = analyze_file(str(src), dest, config=cfg, options=run, top=100_000)
    reduce(src, dest, config=cfg, options=run)
    written = _offloaded_texts(tmp_path / "out.jsonl.offload")
    of_stage = [it for it in data.top if it.stage == stage]
    assert of_stage, f"{stage} changes {name}"
    for it in data.top:
        if it.offload_path is None:  # the page says "no offload file"
            assert not any(it.before in text for text in written), (it.stage, it.before[:80])
        else:  # "original in FILE" only when the file holds it as it was
            held = Path(it.offload_path).read_bytes().decode("utf-8", "replace")
            assert it.offload_whole == (it.before in held), (it.stage, it.offload_path)
    if whole:  # each block of the stage is in a file of its own or a shared one
        assert all(it.offload_path and it.offload_whole for it in of_stage)
    else:  # some blocks the stage changed are in a later stage's file, changed
        assert any(it.offload_path and not it.offload_whole for it in of_stage)
    page = render_html(data)
    assert page.count("no offload file") == sum(1 for it in data.top if not it.offload_path)
    assert page.count("as a later stage offloaded it") == sum(
        1 for it in data.top if not it.offload_whole
    )


def test_a_session_report_cites_the_data_directory_reduce_in_place_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A session is reduced in place, its offload in ctx's data directory: the page says so."""
    from support.session_layout import CC_SPOTTER, build

    layout = build(tmp_path / "home", monkeypatch)
    page = tmp_path / "page.html"
    invoke(["report", "--session", CC_SPOTTER[:8], "-o", str(page), "--no-cost"])
    cited = set(re.findall(r"original in <code>([^<]+)</code>", page.read_text()))
    assert cited and all(c.startswith(f"{layout.data}/changes/") for c in cited)
    invoke(["reduce", "--session", CC_SPOTTER[:8], "--in-place"])
    assert all(Path(c).is_file() for c in cited)
