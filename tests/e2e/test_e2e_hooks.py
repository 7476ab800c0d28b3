"""The real Claude Code CLI with ``ctx hooks install claude``: big outputs offloaded at the source.

A scripted session against the loopback fake Anthropic API (:class:`ScriptedAgent`, which
bills like prompt caching) in a temp project: a ``cat`` of a 300 KB log, a ``cat`` of an
80 KB test run, a ``Read`` of a large file, a small ``Grep``, then the agent's ``cat`` of
the file a ctx hint cites. What each request carries is asserted as the installed CLI
really behaves (docs/hooks.md):

- the 80 KB Bash output and the Read reach the model as ctx's preview and hint (Claude
  Code applied the native-shaped ``updatedToolOutput``);
- the 300 KB log reaches it as Claude Code's own ``<persisted-output>`` preview: the
  CLI saved that output itself (over ``BASH_MAX_OUTPUT_LENGTH``), so ctx leaves it alone;
- reading the cited file back returns the original bytes;
- no request changes a message an earlier request sent (the cached prefix only grows);
- ``/compact`` on the session runs the PreCompact hook: a snapshot of the session file.

The same script with eight small steps after the big ones, run without and with the hooks,
is priced by the fake and by ``ctx cost``: the hook route costs at least 25% less.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ctxcli.core.hints import truncated_path
from ctxcli.services.dirs import data_dir
from ctxcli.store.snapshots import snapshots_of
from support.clients import client_env, require
from support.fake_api import FakeServer, MessagesAPI, ScriptedAgent
from support.fake_api.anthropic import Step, _plain

pytestmark = pytest.mark.e2e

TOOLS = ["Read", "Bash(cat:*)", "Grep"]
MAX_CHARS = 20_000
REMINDER = re.compile(r"\n*<system-reminder>.*?</system-reminder>\s*$", re.S)


@pytest.fixture(scope="module")
def claude() -> str:
    return str(require("claude", install_missing=True))


def _project(root: Path) -> tuple[list[Step], dict[str, Path]]:
    root.mkdir(parents=True)
    files = {
        "log": root / "build.log",  # 300 KB: over Claude Code's own persistence limit
        "tests": root / "test-run.txt",  # 80 KB
        "big": root / "big.py",  # a Read of ~100 KB
    }
    files["log"].write_text(
        "".join(f"2026-11-28 INFO step {i}: compiling module_{i % 97}.c ok\n" for i in range(5800))
    )
    files["tests"].write_text(
        "".join(
            f"tests/test_m{i // 40}.py::test_case_{i} PASSED [{i % 100:3d}%]\n" for i in range(1400)
        )
    )
    files["big"].write_text("".join(f"def f_{i}(x):\n    return x * {i}\n" for i in range(2000)))
    # Under Claude Code's own inline limit for Bash (30,000 characters in 2.1.331: a longer
    # result, the hook's replacement included, is saved by the CLI and previewed in 2 KB).
    (root / "ctx.toml").write_text(
        f'[[stages]]\nuse = "truncate_tool_output"\nmax_chars = {MAX_CHARS}\n'
    )
    steps = [
        Step("Bash", {"command": f"cat {files['log']}", "description": "Show the build log"}),
        Step("Bash", {"command": f"cat {files['tests']}", "description": "Show the test run"}),
        Step("Read", {"file_path": str(files["big"])}, "Reading the module."),
        Step("Grep", {"pattern": "def f_19", "path": str(root), "output_mode": "content"}),
    ]
    return steps, files


def _results(body: dict[str, Any]) -> dict[str, str]:
    out: dict[str, str] = {}
    for msg in body["messages"]:
        for part in msg["content"] if isinstance(msg["content"], list) else []:
            if part.get("type") == "tool_result":
                content = part.get("content")
                if isinstance(content, list):
                    content = "".join(c.get("text", "") for c in content if isinstance(c, dict))
                # Claude Code may append a <system-reminder> (tokens left) to a result.
                out[part["tool_use_id"]] = REMINDER.sub("", str(content))
    return out


def _main(fake: ScriptedAgent) -> list[dict[str, Any]]:
    return [b for b in fake.bodies if any(t.get("name") == "Read" for t in b.get("tools") or [])]


def _session(home: Path) -> Path:
    found = sorted((home / ".claude" / "projects").glob("*/*.jsonl"))
    assert len(found) == 1, found
    return found[0]


def _run(
    claude: str, project: Path, home: Path, base_url: str, *args: str, wrap: bool = False
) -> Any:
    env = client_env(home, base_url)
    argv = [claude, *args]
    if wrap:  # through ctx wrap claude: a proxy in front of the fake API
        env["CTX_CLAUDE_BIN"] = claude
        off = str(project.parent / "wrap-offload")
        argv = [sys.executable, "-m", "ctxcli", "wrap", "claude", "--offload-dir", off, "--", *args]
    return subprocess.run(
        argv, cwd=project, env=env, capture_output=True, text=True, timeout=300, check=False
    )


def _scripted(
    claude: str,
    work: Path,
    hooks: bool,
    *,
    more: int = 0,
    read_back: bool = True,
    wrap: bool = False,
) -> tuple[ScriptedAgent, dict[str, Path], Path]:
    """The scripted session (``more`` small steps after the big ones) in ``work``."""
    project, home = work / "project", work / "home"
    steps, files = _project(project)
    steps += [
        Step("Grep", {"pattern": f"def f_{n}(", "path": str(project), "output_mode": "content"})
        for n in range(more)
    ]
    home.mkdir(parents=True)
    if hooks:
        subprocess.run(
            [sys.executable, "-m", "ctxcli", "hooks", "install", "claude", "--dir", str(project)],
            check=True,
            capture_output=True,
            env={**os.environ, "PATH": "/usr/bin:/bin"},  # no ctx on PATH: this interpreter
        )
    # The hint says "read it with Read": the agent does (Bash may not cat a file outside
    # the project unless the user's own settings allow its folder, see docs/hooks.md).
    offloads = str(data_dir() / "hooks") if read_back else ""
    fake = ScriptedAgent(steps, offload_dir=offloads, readback_tool="Read")
    with fake.serve() as server:
        args = ["-p", "Look at the build.", "--allowedTools", *TOOLS, "--output-format", "json"]
        args += ["--model", "claude-sonnet-4-5"]  # a model ctx cost has a price for
        done = _run(claude, project, home, server.base_url, *args, wrap=wrap)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout)["result"] == "All files read. Done."
    assert server.rejected() == []
    return fake, files, home


def test_claude_code_with_ctx_hooks(claude: str, tmp_path: Path) -> None:
    fake, files, home = _scripted(claude, tmp_path / "hooks", hooks=True)
    main = _main(fake)
    final = _results(main[-1])
    log, tests, read, grep = (final[f"toolu_{i:04d}"] for i in range(4))
    # The 300 KB log: Claude Code persisted it itself and sends its own 2 KB preview;
    # ctx's hook passes it through (the payload says persistedOutputPath).
    assert log.startswith("<persisted-output>") and len(log) < 5_000
    assert truncated_path(log) is None
    # The 80 KB test run and the Read: ctx's preview and hint, never the output itself.
    full_tests = files["tests"].read_text()
    assert len(tests) <= MAX_CHARS < len(full_tests)
    assert tests.startswith(full_tests[:200])
    cited = truncated_path(tests)
    # What the tool returned (Claude Code's Bash drops the last line break), byte for byte.
    assert cited is not None and Path(cited).read_text() == full_tests.rstrip("\n")
    assert "(read it with Read)" in tests
    # ctx cut the content to 20,000 characters; Claude Code numbers its lines after that.
    assert truncated_path(read) is not None and len(read) < MAX_CHARS * 1.3
    assert Path(truncated_path(read) or "").read_text() == files["big"].read_text()
    assert read.startswith("1\tdef f_0(x):")  # Claude Code numbered ctx's head
    assert "f_1999" not in read  # the end of the file is in the offload file only
    assert "def f_19(" in grep and truncated_path(grep) is None  # small: passed through
    # The agent read the cited file back and got the original.
    assert fake.readback.get("path") == cited, fake.readback
    back = REMINDER.sub("", fake.readback["text"])
    shown = "\n".join(line.split("\t", 1)[-1] for line in back.splitlines())
    assert shown == full_tests.rstrip("\n")  # Read numbers the lines it shows
    # Every request only appends to what the one before it sent: the cache prefix grows.
    for before, after in zip(main, main[1:], strict=False):
        sent = _plain(before["messages"])
        assert _plain(after["messages"][: len(sent)])[:-1] == sent[:-1]
    # What the session file records: the replacement, in the message and in toolUseResult.
    session = _session(home)
    records = [json.loads(line) for line in session.read_text().splitlines()]
    uses = {r["message"]["content"][0]["tool_use_id"]: r for r in records if "toolUseResult" in r}
    assert truncated_path(uses["toolu_0001"]["toolUseResult"]["stdout"]) == cited
    assert full_tests not in session.read_text()  # the original is in ctx's file only
    # ctx doctor finds the hook-written session healthy.
    ctx = [sys.executable, "-m", "ctxcli"]
    doctor = subprocess.run([*ctx, "doctor", str(session)], capture_output=True, text=True)
    assert doctor.returncode == 0 and "healthy" in doctor.stderr + doctor.stdout, doctor.stderr

    # /compact on the session: PreCompact snapshots the file as it was.
    before = session.read_bytes()
    with FakeServer(MessagesAPI()) as server:
        sid = session.stem
        done = _run(
            claude, files["log"].parent, home, server.base_url, "-p", "/compact", "--resume", sid
        )
    assert done.returncode == 0, done.stderr[-2000:]
    snaps = snapshots_of(session)
    assert snaps, "PreCompact ran no snapshot"
    # The file as it was when the client began to compact: the run, then the resumed turn.
    assert snaps[-1].path.read_bytes().startswith(before)
    print(f"PreCompact: {len(snaps)} snapshot(s) of {session.name} ({snaps[0].bytes:,} bytes)")


def _priced(session: Path) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "ctxcli", "cost", str(session), "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    data: dict[str, Any] = json.loads(done.stdout)
    return data


def test_priced_cost_direct_and_with_hooks(claude: str, tmp_path: Path) -> None:
    """The same script, direct, through ``ctx wrap`` and with the hooks, priced two ways."""
    runs = {}
    for mode in ("direct", "wrap", "hooks"):
        fake, _, home = _scripted(
            claude, tmp_path / mode, mode == "hooks", more=8, read_back=False, wrap=mode == "wrap"
        )
        runs[mode] = (fake, _priced(_session(home)))
    for mode, (fake, cost) in runs.items():
        print(
            f"\n{mode:<7} {fake.totals.requests} requests, cache read {fake.totals.cache_read:,}, "
            f"cache write {fake.totals.cache_write:,}, uncached {fake.totals.input_tokens:,}: "
            f"billed {fake.totals.billed():,.0f} token-equivalents, "
            f"ctx cost ${cost['recorded_usd']:.4f}"
        )
    (direct, d_cost), (hooked, h_cost) = runs["direct"], runs["hooks"]
    assert direct.totals.requests == hooked.totals.requests
    d, h = direct.totals.billed(), hooked.totals.billed()
    print(f"ctx hooks: {1 - h / d:.1%} less than direct")
    assert d_cost["recorded_usd"] > 0 and h_cost["recorded_usd"] > 0
    # ctx cost prices what the fake billed; the hook route is at least 25% cheaper (measured
    # 32% on 2.1.331: the Read and the 80 KB output, carried by 12 later requests, are cut).
    assert h <= 0.75 * d
    assert h_cost["recorded_usd"] <= 0.75 * d_cost["recorded_usd"]
    # No request of the hooked run changed what an earlier one sent.
    main = _main(hooked)
    for before, after in zip(main, main[1:], strict=False):
        sent = _plain(before["messages"])
        assert _plain(after["messages"][: len(sent)])[:-1] == sent[:-1]


def _cut_script(project: Path) -> list[Step]:
    """Every tool the hook cuts that runs offline, each over ``max_chars`` (4,000)."""
    project.mkdir(parents=True)
    # Under Claude Code's own 30,000-character Bash limit, so the run without the hook
    # keeps it inline too; with quotes, a backslash, tabs and non-ASCII to escape.
    mid = "".join(f'line {i}: output \u00e9\u4e2d "q" \\ tab\there\n' for i in range(700))
    (project / "mid.txt").write_text(mid)
    (project / "big.py").write_text(
        "".join(f"def f_{i}(x):\n    return x * {i}\n" for i in range(900))
    )
    data = project / "data"
    data.mkdir()
    for i in range(120):
        (data / f"{i:03d}-a-file-name-long-enough-for-the-glob-list-to-be-cut.txt").write_text("x")
    (project / "ctx.toml").write_text(
        '[[stages]]\nuse = "truncate_tool_output"\nmax_chars = 4000\n'
    )
    return [
        Step("Bash", {"command": f"cat {project / 'mid.txt'}", "description": "Show the file"}),
        Step("Read", {"file_path": str(project / "big.py")}, "Reading the module."),
        Step("Grep", {"pattern": "return x", "path": str(project), "output_mode": "content"}),
        Step("Glob", {"pattern": "data/*.txt", "path": str(project)}),
    ]


def _tool_records(session: Path) -> dict[str, tuple[str, dict[str, str]]]:
    """Each tool call's record: its line, and the exact text of its message and result."""
    from ctxcli.formats.jsontext import member_span

    out = {}
    for line in session.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        if "toolUseResult" not in record:
            continue
        spans = {}
        for key in ("message", "toolUseResult"):
            span = member_span(line, key)
            assert span is not None
            # How long the tool took differs between two runs; nothing else may.
            spans[key] = re.sub(r'"durationMs":\d+', '"durationMs":0', line[span[0] : span[1]])
        out[record["message"]["content"][0]["tool_use_id"]] = (line, spans)
    return out


def _outside(line: str) -> str:
    """A record's line without its message and toolUseResult."""
    from ctxcli.formats.jsontext import member_span

    for key in ("toolUseResult", "message"):
        span = member_span(line, key)
        assert span is not None
        line = line[: span[0]] + "0" + line[span[1] :]
    return line


def test_restore_gives_a_hook_written_session_the_tools_real_outputs(
    claude: str, tmp_path: Path
) -> None:
    """The same script without and with the hook; restore makes the second the first.

    Both runs use the same project and home paths, so every path in the records agrees:
    each tool call's message and ``toolUseResult`` after ``ctx restore`` are byte for byte
    what Claude Code wrote without the hook.
    """
    work, project, home = tmp_path / "run", tmp_path / "run" / "project", tmp_path / "run" / "home"
    sessions = {}
    for hooks in (False, True):
        shutil.rmtree(work, ignore_errors=True)
        steps = _cut_script(project)
        home.mkdir(parents=True)
        if hooks:
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "ctxcli",
                    "hooks",
                    "install",
                    "claude",
                    "--dir",
                    str(project),
                ],
                check=True,
                capture_output=True,
                env={**os.environ, "PATH": "/usr/bin:/bin"},
            )
        fake = ScriptedAgent(steps, offload_dir="", readback_tool="Read")
        with fake.serve() as server:
            args = ["-p", "Look.", "--allowedTools", "Read", "Bash(cat:*)", "Grep", "Glob"]
            args += ["--output-format", "json", "--model", "claude-sonnet-4-5"]
            done = _run(claude, project, home, server.base_url, *args)
        assert done.returncode == 0, done.stderr[-2000:]
        sessions[hooks] = _session(home)
        if not hooks:
            kept = tmp_path / "direct.jsonl"
            shutil.copy(sessions[hooks], kept)
            sessions[hooks] = kept
    direct, hooked = _tool_records(sessions[False]), _tool_records(sessions[True])
    assert sorted(direct) == sorted(hooked) == [f"toolu_{i:04d}" for i in range(4)]
    cut = [i for i in hooked if truncated_path(hooked[i][1]["toolUseResult"]) is not None]
    assert sorted(cut) == sorted(hooked), "the hook cut every one of the four outputs"

    # ctx restore --session ID, to stdout: the session's own route.
    env = {**os.environ, "HOME": str(home), "CLAUDE_CONFIG_DIR": str(home / ".claude")}
    ctx = [sys.executable, "-m", "ctxcli"]
    sid = sessions[True].stem
    done = subprocess.run([*ctx, "restore", "--session", sid], capture_output=True, env=env)
    assert done.returncode == 0, done.stderr.decode()
    out = tmp_path / "restored.jsonl"
    out.write_bytes(done.stdout)
    restored = _tool_records(out)
    for call, (line, spans) in restored.items():
        assert spans == direct[call][1], call  # byte for byte, message and toolUseResult
        hooked_line, hooked_spans = hooked[call]
        assert _outside(line) == _outside(hooked_line), call  # the rest of the record as it was
    # Every other line of the session is untouched.
    kept = [x for x in out.read_text().splitlines() if '"toolUseResult"' not in x]
    assert kept == [
        x for x in sessions[True].read_text().splitlines() if '"toolUseResult"' not in x
    ]

    # In place, then a restore of the restored file says there is nothing to undo.
    in_place = [*ctx, "restore", "--session", sid, "--in-place", "--force"]  # just written
    done = subprocess.run(in_place, capture_output=True, env=env)
    assert done.returncode == 0, done.stderr.decode()
    assert sessions[True].read_bytes() == out.read_bytes()
    done = subprocess.run(in_place, capture_output=True, env=env)
    assert done.returncode == 2 and b"nothing to restore" in done.stderr, done.stderr
