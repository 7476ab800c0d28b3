"""ctx sessions, --session/--last and in-place reduction on layouts built in a temp HOME."""

from __future__ import annotations

import tracemalloc
from pathlib import Path
from typing import Any

import orjson
import pytest

from ctxcli.api import Destination, RunOptions, reduce
from ctxcli.cost.recorded import recorded_cost
from ctxcli.pipeline.config import build_config, load_config
from ctxcli.services.session_files import count_messages
from ctxcli.sessions import listing
from ctxcli.sessions.discover import resolve_session, short_ids
from ctxcli.store.history import changes, changes_dir
from support.cli import invoke
from support.paths import SHARED
from support.session_layout import (
    CC_MCLAUDE,
    CC_SPOTTER,
    CODEX_ID,
    CODEX_ID_2,
    SPOTTER_CWD,
    Layout,
    age,
    build,
)


@pytest.fixture
def layout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Layout:
    return build(tmp_path / "home", monkeypatch)


def _json(args: list[str], code: int = 0) -> Any:
    return orjson.loads(invoke(args, code=code).stdout)


def test_lists_every_session_with_subagents_under_their_parent(layout: Layout) -> None:
    rows = _json(["sessions", "--json"])["sessions"]
    assert [(r["id"], r["agent"], r["parent"]) for r in rows] == [
        (CC_SPOTTER, "claude_code", None),
        (f"{CC_SPOTTER}/agent-a2898e3", "claude_code", CC_SPOTTER),
        (CC_MCLAUDE, "claude_code", None),
        (CODEX_ID, "codex", None),
    ]
    spotter, _sub, mclaude, codex = rows
    assert spotter["project"] == SPOTTER_CWD
    assert spotter["git_branch"] == "spotter-dov"
    assert spotter["bytes"] == layout.spotter.stat().st_size == 3158801
    assert spotter["records"] == 1512
    assert spotter["largest_line_bytes"] >= 69130
    assert spotter["model"].startswith("claude-opus")
    assert spotter["resume_tokens_after"] < spotter["resume_tokens_before"]
    assert 0 < spotter["cost_after"] < spotter["cost_before"]
    assert mclaude["summary"] == "**Router hardening complete: cloud/VPN/telemetry removal**"
    assert mclaude["title"] == mclaude["summary"]
    assert "malformed_line" in mclaude["health"]
    assert "chain_starts_with_assistant" in mclaude["health"]
    assert codex["health"] == []
    assert codex["project"] == "/Users/jnarowski/Dev/spectora/src/spectora-labs-monorepo-v2"
    assert codex["short_id"] == "01997e76"


def test_table_on_stdout(layout: Layout) -> None:
    out = invoke(["sessions"], code=0).stdout
    lines = out.splitlines()
    assert lines[0].split()[:4] == ["id", "agent", "project", "modified"]
    assert lines[1].startswith("4d5611e5 ")
    assert lines[2].startswith("└ agent-a2898e3")
    assert "bad-start" in lines[3] and lines[3].endswith(
        "  Router hardening complete: cloud/VPN/telemetry removal"
    )


def test_filters_and_sorting(layout: Layout, monkeypatch: pytest.MonkeyPatch) -> None:
    ids = [r["id"] for r in _json(["sessions", "--json", "--agent", "codex"])["sessions"]]
    assert ids == [CODEX_ID]
    ids = [
        r["id"] for r in _json(["sessions", "--json", "--agent", "codex", "--archived"])["sessions"]
    ]
    assert ids == [CODEX_ID, CODEX_ID_2]
    rows = _json(["sessions", "--json", "--since", "1d"])["sessions"]
    assert [r["id"] for r in rows] == [CC_SPOTTER, f"{CC_SPOTTER}/agent-a2898e3"]
    rows = _json(["sessions", "--json", "--project", SPOTTER_CWD])["sessions"]
    assert {r["project"] for r in rows} == {SPOTTER_CWD}
    rows = _json(["sessions", "--json", "--sort", "size"])["sessions"]
    tops = [r["bytes"] for r in rows if r["parent"] is None]
    assert tops == sorted(tops, reverse=True)
    work = layout.home / "elsewhere"
    work.mkdir()
    monkeypatch.chdir(work)
    assert _json(["sessions", "--json", "--project", "."])["count"] == 0
    invoke(["sessions", "--agent", "cursor"], code=2)
    invoke(["sessions", "--since", "yesterday-ish"], code=2)


def test_a_second_listing_reads_no_session(layout: Layout, monkeypatch: pytest.MonkeyPatch) -> None:
    scanned: list[str] = []
    real = listing.scan_session

    def spy(session: Any, **kw: Any) -> Any:
        scanned.append(session.id)
        return real(session, **kw)

    monkeypatch.setattr(listing, "scan_session", spy)
    first = listing.list_sessions()
    assert len(scanned) == 4
    scanned.clear()
    assert [r.to_dict() for r in listing.list_sessions()] == [r.to_dict() for r in first]
    assert scanned == []
    with layout.codex.open("ab") as fh:
        fh.write(b"\n")
    age(layout.codex, 3600)
    listing.list_sessions()
    assert scanned == [CODEX_ID]


def test_sessions_index_is_used_when_fresh_and_ignored_when_stale(layout: Layout) -> None:
    st = layout.mclaude.stat()
    entry = {
        "sessionId": CC_MCLAUDE,
        "fullPath": str(layout.mclaude),
        "fileMtime": st.st_mtime_ns // 1_000_000,
        "summary": "From the index",
        "messageCount": 986,
        "projectPath": "C:\\Users\\Mischa",
        "isSidechain": False,
    }
    index = layout.mclaude.parent / "sessions-index.json"
    index.write_bytes(orjson.dumps({"version": 1, "entries": [entry]}))
    row = next(r for r in _json(["sessions", "--json"])["sessions"] if r["id"] == CC_MCLAUDE)
    assert row["summary"] == "From the index"
    entry["fileMtime"] -= 60_000
    index.write_bytes(orjson.dumps({"version": 1, "entries": [entry]}))
    row = next(r for r in _json(["sessions", "--json"])["sessions"] if r["id"] == CC_MCLAUDE)
    assert row["summary"].startswith("**Router hardening")


def test_prices_can_be_overridden(layout: Layout, tmp_path: Path) -> None:
    prices = tmp_path / "prices.toml"
    prices.write_text('[prices]\n"claude-opus-4-6" = 100.0\n')
    row = _json(["sessions", "--json", "--prices", str(prices)])["sessions"][0]
    assert row["cost_before"] == pytest.approx(row["resume_tokens_before"] * 100 / 1e6)
    prices.write_text('[prices]\n"claude-opus-4-6" = "free"\n')
    err = invoke(["sessions", "--prices", str(prices)], code=2).stderr
    assert "prices.claude-opus-4-6 = 'free' is invalid" in err


def test_each_session_shows_what_it_spent_as_ctx_cost_reads_it(layout: Layout) -> None:
    """Issue 36 item 5: the recorded bill, each API response once (recorded_cost's count)."""
    rows = {r["id"]: r for r in _json(["sessions", "--json"])["sessions"]}
    for sid, path in (
        (CC_SPOTTER, layout.spotter),
        (f"{CC_SPOTTER}/agent-a2898e3", layout.subagent),
        (CC_MCLAUDE, layout.mclaude),
        (CODEX_ID, layout.codex),
    ):
        assert rows[sid]["recorded_usd"] == pytest.approx(recorded_cost(path).usd), sid
    assert round(rows[CC_SPOTTER]["recorded_usd"], 2) == 9.53  # as README's bill table
    assert round(rows[CC_MCLAUDE]["recorded_usd"], 2) == 11.49
    lines = invoke(["sessions"], code=0).stdout.splitlines()
    assert "spent $" in lines[0]
    assert "$9.53" in lines[1].split() and "$11.49" in lines[3].split()


def test_another_price_table_reprices_the_cached_usage(
    layout: Layout, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cache holds tokens by model: new prices need no new read of any session."""
    first = {r.id: r.recorded_usd for r in listing.list_sessions()}
    prices = tmp_path / "prices.toml"
    prices.write_text('[prices]\n"claude-opus-4-6" = 50.0\n')  # ten times list input

    def no_read(session: Any, **kw: Any) -> Any:
        raise AssertionError(f"read {session.id} again")

    monkeypatch.setattr(listing, "scan_session", no_read)
    table = listing.load_price_table(prices)
    again = {r.id: r.recorded_usd for r in listing.list_sessions(prices=table)}
    assert again[CC_SPOTTER] == pytest.approx(recorded_cost(layout.spotter, prices=table).usd)
    assert again[CC_SPOTTER] > 5 * first[CC_SPOTTER]
    assert again[CC_MCLAUDE] == pytest.approx(first[CC_MCLAUDE])  # Sonnet: unchanged


# --- resolving ------------------------------------------------------------------------


def test_session_prefix_last_and_errors(layout: Layout, monkeypatch: pytest.MonkeyPatch) -> None:
    assert resolve_session("c76e").path == layout.mclaude
    assert resolve_session("agent-a2898e3").path == layout.subagent
    assert resolve_session(CODEX_ID_2).path == layout.codex_archived
    twin = layout.mclaude.parent / "c76e0000-0000-4000-8000-000000000000.jsonl"
    twin.write_bytes(layout.mclaude.read_bytes())
    err = invoke(["stats", "--session", "c76e"], code=2).stderr
    assert "'c76e' matches 2 sessions" in err
    assert CC_MCLAUDE in err and "c76e0000-0000-4000-8000-000000000000" in err
    err = invoke(["stats", "--session", "zzzz"], code=2).stderr
    assert "no session id starts with 'zzzz'" in err
    err = invoke(["stats", "--last"], code=2).stderr
    assert "no session of the project" in err
    monkeypatch.chdir("/")
    err = invoke(["stats", "--last", "--project", SPOTTER_CWD, "--json"]).stdout
    assert orjson.loads(err)["files"][0]["input"] == str(layout.spotter)
    invoke(["stats", str(layout.spotter), "--session", "c76e5be5-ffd2"], code=2)
    assert short_ids(["abcdef0123", "abcdef9999", "ffff"]) == {
        "abcdef0123": "abcdef01",
        "abcdef9999": "abcdef99",
        "ffff": "ffff",
    }


def test_every_transcript_command_takes_a_session(layout: Layout) -> None:
    report = _json(["stats", "--session", "4d56", "--json"])["files"][0]
    assert report["input"] == str(layout.spotter)
    assert _json(["validate", "--session", "01997e76", "--json"])["valid"] is True
    out = invoke(["reduce", "--session", "01997e76", "-q"]).stdout
    assert out.startswith('{"timestamp"')
    # Not in place: the session is left alone and no change of it is recorded (the
    # ledger of reductions may note the output, but no session state directory is made).
    assert not (layout.data / "offload").exists()


# --- in place ---------------------------------------------------------------------------


def test_reduce_in_place_refuses_a_live_session(layout: Layout) -> None:
    original = layout.spotter.read_bytes()
    age(layout.spotter, 5)
    err = invoke(["reduce", "--session", "4d56", "--in-place"], code=2).stderr
    assert "the session looks in use (it was modified " in err
    assert "s ago, less than 60s)" in err
    assert layout.spotter.read_bytes() == original
    invoke(["reduce", "--session", "4d56", "--in-place", "--live-seconds", "2", "-q"])
    assert layout.spotter.read_bytes() != original


def test_reduce_in_place_and_restore_a_claude_session(layout: Layout) -> None:
    original = layout.spotter.read_bytes()
    st = layout.spotter.stat()
    index = layout.spotter.parent / "sessions-index.json"
    index.write_bytes(
        orjson.dumps(
            {
                "version": 1,
                "entries": [
                    {
                        "sessionId": CC_SPOTTER,
                        "fullPath": str(layout.spotter),
                        "fileMtime": st.st_mtime_ns // 1_000_000,
                        "messageCount": count_messages(original),
                    }
                ],
            },
            option=orjson.OPT_INDENT_2,
        )
    )
    result = invoke(["reduce", "--session", "4d56", "--in-place", "--preset", "claude-code-resume"])
    layer = changes_dir(layout.spotter) / "0001-reduce"
    assert str(layer).startswith(str(layout.data))
    # What is printed reads the same wherever ctx runs (issue 45): from ~, not absolute.
    assert f"offload in {layout.shown(layer)}\n" in result.stderr
    assert f"undo with: ctx restore {layout.shown(layout.spotter)} --in-place" in result.stderr
    reduced = layout.spotter.read_bytes()
    assert len(reduced) < len(original) // 2
    # The hints the agent reads cite the absolute offload path.
    assert str(layer).encode() in reduced
    entry = orjson.loads(index.read_bytes())["entries"][0]
    assert entry["fileMtime"] == layout.spotter.stat().st_mtime_ns // 1_000_000
    assert entry["messageCount"] == count_messages(reduced) < count_messages(original)
    assert index.read_bytes().startswith(b"{\n")
    assert _json(["validate", str(layout.spotter), "--json"])["valid"] is True
    # The listing sees the change (the cache key holds size and mtime).
    row = _json(["sessions", "--json"])["sessions"][0]
    assert row["bytes"] == len(reduced)
    # A plain restore prints the original; --in-place puts it back and spends the layers.
    assert invoke(["restore", str(layout.spotter)]).stdout_bytes == original
    invoke(["restore", "--session", "4d56", "--in-place"])
    assert layout.spotter.read_bytes() == original
    assert not changes_dir(layout.spotter).exists()
    err = invoke(["restore", "--session", "4d56", "--in-place"], code=2).stderr
    assert "nothing to restore" in err or "REDUCED.offload" in err or "not a ctx" in err


def test_repeated_changes_undo_in_one_step_and_keep_appended_lines(layout: Layout) -> None:
    original = layout.mclaude.read_bytes()
    invoke(["doctor", "--session", "c76e", "--fix"])
    invoke(["reduce", "--session", "c76e", "--in-place", "--preset", "claude-code-resume"])
    invoke(["reduce", "--session", "c76e", "--in-place"])
    assert [p.name for p in changes(layout.mclaude)][:2] == ["0001-doctor", "0002-reduce"]
    appended = b'{"type":"user","message":{"role":"user","content":"go on"},"uuid":"new-1"}\n'
    with layout.mclaude.open("ab") as fh:
        fh.write(appended)
    age(layout.mclaude, 120)
    result = invoke(["restore", "--session", "c76e", "--in-place"])
    assert f"kept {len(appended)} bytes the client appended since" in result.stderr
    assert layout.mclaude.read_bytes() == original + appended


def test_restore_refuses_an_edit_inside_what_ctx_wrote(layout: Layout) -> None:
    invoke(["reduce", "--session", "01997e76", "--in-place"])
    data = layout.codex.read_bytes()
    cut = data.rindex(b'"timestamp":"2025')
    layout.codex.write_bytes(data[:cut] + b'"timestamp":"2024' + data[cut + 17 :])
    age(layout.codex, 120)
    err = invoke(["restore", "--session", "01997e76"], code=2).stderr
    assert "was changed inside what ctx wrote" in err


def test_reduce_in_place_and_restore_a_codex_session(layout: Layout) -> None:
    original = layout.codex.read_bytes()
    report = _json(["reduce", "--session", "01997e76", "--in-place", "--json"])["files"][0]
    assert report["offload_dir"] == str(changes_dir(layout.codex) / "0001-reduce")
    assert report["bytes_after"] < report["bytes_before"]
    assert layout.codex.read_bytes() != original
    invoke(["restore", str(layout.codex), "--in-place"])
    assert layout.codex.read_bytes() == original


def test_a_copy_outside_the_session_dirs_gets_its_own_layers(
    layout: Layout, tmp_path: Path
) -> None:
    copy = tmp_path / "copy.jsonl"
    copy.write_bytes((SHARED / "codex_agentcmd_2025-09-24T19-22-20.jsonl").read_bytes())
    age(copy, 120)
    invoke(["doctor", str(copy), "--fix"])  # healthy: nothing recorded
    assert not list((layout.data / "changes").glob("*/0*"))
    invoke(["reduce", "--session", "01997e76", "--in-place"])
    assert changes(copy) == [] and len(changes(layout.codex)) == 1
    assert changes_dir(copy) != changes_dir(layout.codex)


def test_the_readme_sessions_walkthrough_runs_as_written(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    from support.paths import REPO

    text = (REPO / "docs" / "sessions.md").read_text(encoding="utf-8")
    section = text[text.index("## Sessions: find, diagnose") :]
    start = section.index("```console\n") + len("```console\n")
    block = section[start : section.index("\n```", start)]
    commands = [line[2:] for line in block.splitlines() if line.startswith("$ ")]
    assert len(commands) >= 10
    script = "\n".join(["set -u", *commands])
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    env["TMPDIR"] = str(tmp_path)
    env.pop("CTX_CACHE_DIR", None)
    (tmp_path / "sample_transcripts").symlink_to(REPO / "sample_transcripts")
    result = subprocess.run(
        ["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.rstrip().endswith("byte for byte")
    assert "reduced in place; 249,590 → " in result.stderr  # after: depends on HOME
    assert "repaired; the originals are in" in result.stderr


def test_env_homes_old_subagent_layout_and_exact_counts(
    layout: Layout, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 2.0.x keeps a subagent beside its session as agent-<id>.jsonl; it names its parent.
    old = layout.mclaude.parent / "agent-abc3cb6.jsonl"
    old.write_bytes(layout.mclaude.read_bytes()[:20000].rsplit(b"\n", 1)[0] + b"\n")
    age(old, 3 * 86400)
    rows = _json(["sessions", "--json", "--agent", "claude_code"])["sessions"]
    assert [(r["id"], r["parent"]) for r in rows][-2:] == [
        (CC_MCLAUDE, None),
        ("agent-abc3cb6", CC_MCLAUDE),
    ]
    approx = next(r for r in rows if r["id"] == CC_MCLAUDE)["tokens"]
    exact = next(
        r for r in _json(["sessions", "--json", "--exact"])["sessions"] if r["id"] == CC_MCLAUDE
    )["tokens"]
    assert exact != approx and abs(exact - approx) < approx * 0.5
    # $CLAUDE_CONFIG_DIR and $CODEX_HOME move the clients' homes.
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "none"))
    monkeypatch.setenv("CODEX_HOME", str(layout.home / ".codex"))
    assert [r["id"] for r in _json(["sessions", "--json"])["sessions"]] == [CODEX_ID]


def test_a_session_open_in_another_process_is_live(layout: Layout) -> None:
    import subprocess
    import sys
    import time

    from ctxcli.store.inplace import liveness

    assert liveness(layout.codex) is None
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; f = open(sys.argv[1], 'ab'); print('open', flush=True); "
            "time.sleep(60)",
            str(layout.codex),
        ],
        stdout=subprocess.PIPE,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"open\n"
        assert liveness(layout.codex) == f"process {holder.pid} has it open"
        err = invoke(["reduce", "--session", "01997e76", "--in-place"], code=2).stderr
        assert f"process {holder.pid} has it open" in err
    finally:
        holder.kill()
        holder.wait()
        if holder.stdout is not None:
            holder.stdout.close()
    deadline = time.monotonic() + 5
    while liveness(layout.codex) is not None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert liveness(layout.codex) is None


def test_jobs_read_uncached_sessions_in_parallel_with_the_same_rows(layout: Layout) -> None:
    one = [r.to_dict() for r in listing.list_sessions(cache=False)]
    two = [r.to_dict() for r in listing.list_sessions(cache=False, jobs=2)]
    assert one == two and len(one) == 4
    assert _json(["sessions", "--json", "-j", "2"])["sessions"] == one


def test_reduce_in_place_writes_the_session_as_it_is_made(layout: Layout) -> None:
    # A chain that changes nothing: the held output would be a second copy of the file.
    nothing = build_config({"tokenizer": "approx", "stages": []}, "no stage")
    raw = layout.spotter.read_bytes()
    twin = layout.spotter.with_name("twin.jsonl")
    twin.write_bytes(raw)
    peaks = []
    for run in ("streamed", "held"):
        tracemalloc.start()
        try:
            if run == "streamed":
                dest = Destination(in_place=True, stream=True)
                done = reduce(layout.spotter, dest, config=nothing, options=RunOptions(force=True))
                change = done.change
            else:
                reduce(
                    twin,
                    Destination(in_place=True),
                    config=nothing,
                    options=RunOptions(force=True),
                    raw=twin.read_bytes(),
                )
            peaks.append(tracemalloc.get_traced_memory()[1])
        finally:
            tracemalloc.stop()
    assert layout.spotter.read_bytes() == raw == twin.read_bytes()
    # Nothing changed: no layer is left to undo.
    assert change is not None and change.record is None
    assert change.bytes_after == change.bytes_before == len(raw)
    assert changes(layout.spotter) == []
    streamed, held = peaks
    assert held - streamed > 0.8 * len(raw), (streamed, held)


def test_reduce_in_place_reports_the_size_it_wrote(layout: Layout) -> None:
    change = reduce(
        layout.spotter,
        Destination(in_place=True, stream=True),
        config=load_config(preset="claude-code-resume"),
        options=RunOptions(force=True),
    ).change
    assert (
        change is not None
        and change.record is not None
        and (change.record / "manifest.json").is_file()
    )
    assert change.bytes_after == layout.spotter.stat().st_size < change.bytes_before


# -- issue 35 §3: the small things a user trips on in ctx sessions -----------------------


def test_the_agent_is_named_as_the_table_shows_it(layout: Layout) -> None:
    claude = _json(["sessions", "--json", "--agent", "claude"])["sessions"]
    assert {r["agent"] for r in claude} == {"claude_code"}
    assert claude == _json(["sessions", "--json", "--agent", "claude_code"])["sessions"]
    err = invoke(["sessions", "--agent", "cursor"], code=2).stderr
    assert err.count("\n") == 1 and "'claude', 'claude_code', 'codex'" not in err
    assert "use one of claude, claude_code, codex" in err


def test_a_project_is_named_by_the_end_of_its_path(layout: Layout) -> None:
    rows = _json(["sessions", "--json", "--project", "spotter-dov"])["sessions"]
    assert {r["project"] for r in rows} == {SPOTTER_CWD}
    assert len(rows) == 2  # the session and its subagent
    tail = _json(["sessions", "--json", "--project", "spotter-worktrees/spotter-dov"])
    assert tail["sessions"] == rows
    assert _json(["sessions", "--json", "--project", "tter-dov"])["count"] == 0  # whole names
    picked = invoke(["stats", "--last", "--project", "spotter-dov", "--json"]).stdout
    assert orjson.loads(picked)["files"][0]["input"].endswith(f"{CC_SPOTTER}.jsonl")


def test_an_ambiguous_project_suffix_lists_the_candidates(tmp_path: Path) -> None:
    from ctxcli.core.errors import CtxError
    from ctxcli.sessions.discover import SessionFile, match_project

    def session(n: int, project: str) -> SessionFile:
        return SessionFile(
            f"s{n}", "claude_code", tmp_path / f"s{n}.jsonl", 1, 1, index={"projectPath": project}
        )

    pool = [session(1, "/a/app"), session(2, "/b/app"), session(3, "/b/tool")]
    assert match_project("tool", pool) == "/b/tool"
    assert match_project("b/app", pool) == "/b/app"
    with pytest.raises(CtxError) as info:
        match_project("app", pool)
    assert str(info.value) == (
        "project 'app' matches 2 projects: /a/app, /b/app; give more of the path."
    )


def test_the_table_fits_the_terminal_and_shows_titles_as_text(
    layout: Layout, monkeypatch: pytest.MonkeyPatch
) -> None:
    for columns in (100, 140):
        monkeypatch.setenv("COLUMNS", str(columns))
        out = invoke(["sessions"]).stdout
        lines = out.splitlines()
        assert len(lines) == 5 and all(len(line) <= columns for line in lines), out
        assert all(f"{n:,}" in out for n in (1512, 1043, 823)), out  # figures are never cut
        assert "**" not in out
    monkeypatch.delenv("COLUMNS")
    wide = invoke(["sessions"]).stdout  # not a terminal: nothing is cut
    assert "  Router hardening complete: cloud/VPN/telemetry removal\n" in wide
    assert "**" not in wide


def test_a_session_to_a_terminal_is_refused_with_what_to_pass(
    layout: Layout, tmp_path: Path
) -> None:
    import os
    import pty
    import subprocess
    import sys

    work = tmp_path / "cwd"
    work.mkdir()
    master, slave = pty.openpty()
    proc = subprocess.run(
        [sys.executable, "-m", "ctxcli", "reduce", "--session", CODEX_ID[:8]],
        cwd=work,
        stdin=subprocess.DEVNULL,
        stdout=slave,
        stderr=subprocess.PIPE,
        timeout=120,
        check=False,
    )
    os.close(slave)
    os.set_blocking(master, False)
    try:
        drawn = os.read(master, 65536)
    except OSError:  # nothing was written to the terminal
        drawn = b""
    os.close(master)
    assert proc.returncode == 2
    assert proc.stderr == (
        b"ctx: error: the reduced transcript would flood the terminal (and its offload go to "
        b"./ctx-offload); pass -o FILE, redirect stdout, or --in-place.\n"
    )
    assert drawn == b"" and list(work.iterdir()) == []  # no JSONL, no ./ctx-offload


def test_a_reduction_that_makes_the_transcript_bigger_leaves_the_file(tmp_path: Path) -> None:
    # Nudging an agent appends a message: the transcript grows, it never shrinks.
    lines = [{"role": "system", "content": "sys"}, {"role": "user", "content": "go"}]
    for i in range(12):
        call = {
            "id": f"call_{i}",
            "type": "function",
            "function": {"name": "ls", "arguments": "{}"},
        }
        lines += [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"call_{i}", "content": "ok"},
        ]
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    config = tmp_path / "nudge.toml"
    config.write_text(
        'tokenizer = "approx"\n[[stages]]\nuse = "nudge_early_exit"\n'
        "min_model_calls = 0\nstreak_threshold = 0\n"
    )
    before = path.read_bytes()
    done = reduce(path, Destination(in_place=True), config=load_config(config))
    assert done.no_gain and done.change is not None and done.change.record is None
    assert done.report.tokens_after > done.report.tokens_before
    assert path.read_bytes() == before and not (tmp_path / "t.jsonl.offload").exists()
    err = invoke(["reduce", str(path), "--in-place", "--config", str(config)]).stderr
    assert (
        err == f"ctx: {path}: nothing to gain (it would make 38 → 83 tokens, and the file would "
        "not shrink to half its size); the file is unchanged\n"
    )
    assert path.read_bytes() == before
