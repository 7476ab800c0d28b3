"""The pre-commit hooks in .pre-commit-hooks.yaml, run the way pre-commit runs them."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from support.cli import invoke
from support.paths import REPO, SAMPLE, SHARED

MANIFEST = REPO / ".pre-commit-hooks.yaml"
README = REPO / "README.md"
GUARANTEES = REPO / "docs" / "guarantees.md"
ORPHAN = (
    '{"role": "user", "content": "hi"}\n'
    '{"role": "tool", "tool_call_id": "call_9", "content": "lost"}\n'
    '{"role": "assistant", "content": "done"}\n'
)

RULES = "ctx: rules: json_lines, tool_pairs (ctx doctor adds the rules of a session's client)"


def _hooks() -> dict[str, dict[str, Any]]:
    hooks = yaml.safe_load(MANIFEST.read_text(encoding="utf-8"))
    return {h["id"]: h for h in hooks}


def _run_hook(hook_id: str, files: list[Path], *, code: int, args: list[str] | None = None) -> Any:
    """What pre-commit does: entry + args + the staged files its `files` regex matches."""
    hook = _hooks()[hook_id]
    entry = shlex.split(hook["entry"])
    assert entry[0] == "ctx"
    matched = [str(f) for f in files if re.search(hook["files"], f.name)]
    hook_args = hook.get("args", []) if args is None else args
    return invoke([*entry[1:], *hook_args, *matched], code=code)


def test_manifest_passes_pre_commits_own_schema() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pre_commit", "validate-manifest", str(MANIFEST)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert set(_hooks()) == {"ctx-validate", "ctx-token-budget"}
    for hook in _hooks().values():
        assert hook["language"] == "python"
        assert hook.get("pass_filenames", True)


def _readme_config() -> str:
    """The .pre-commit-config.yaml the README shows."""
    section = GUARANTEES.read_text(encoding="utf-8").split("## Checking transcripts in git", 1)[1]
    (block,) = re.findall(r"```yaml\n(# \.pre-commit-config\.yaml\n.*?)```", section, re.S)
    return block


def _pre_commit(args: list[str], repo: Path) -> subprocess.CompletedProcess[str]:
    """pre-commit in ``repo``, its cache inside it, the ctx of this venv on PATH."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PRE_COMMIT", "GIT_"))}
    env["PRE_COMMIT_HOME"] = str(repo.parent / "pre-commit-cache")
    env["PATH"] = f"{Path(sys.executable).parent}:{env.get('PATH', '')}"
    return subprocess.run(
        [sys.executable, "-m", "pre_commit", *args],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def _repository(tmp_path: Path, files: dict[str, Path]) -> Path:
    """A scratch git repository holding copies of ``files``."""
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True, timeout=60)
    for name, path in files.items():
        shutil.copyfile(path, repo / f"{name}{path.suffix}")
    return repo


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_the_readme_config_runs_the_hooks(tmp_path: Path, staged: dict[str, Path]) -> None:
    """The README's `repo: local` snippet is a valid config, and the hooks run with it."""
    repo = _repository(tmp_path, staged)
    (repo / ".pre-commit-config.yaml").write_text(_readme_config(), encoding="utf-8")
    checked = _pre_commit(["validate-config", ".pre-commit-config.yaml"], repo)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    clean = _pre_commit(["run", "--files", "good.jsonl", "other.ndjson", "notes.txt"], repo)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert re.search(r"ctx validate\.+Passed", clean.stdout), clean.stdout
    assert re.search(r"ctx token budget\.+Passed", clean.stdout), clean.stdout
    broken = _pre_commit(["run", "--files", "good.jsonl", "orphan.jsonl"], repo)
    assert broken.returncode == 1
    assert "orphan.jsonl:2: tool result 'call_9' has no matching tool call" in broken.stdout


@pytest.mark.network
@pytest.mark.slow
@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_try_repo_installs_the_hooks_from_a_checkout(
    tmp_path: Path, staged: dict[str, Path]
) -> None:
    """What .pre-commit-hooks.yaml says: pre-commit installs ctx from a clone and runs it."""
    repo = _repository(tmp_path, staged)
    done = _pre_commit(["try-repo", str(REPO), "ctx-validate", "--files", "orphan.jsonl"], repo)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "orphan.jsonl:2: tool result 'call_9' has no matching tool call" in done.stdout


@pytest.fixture
def staged(tmp_path: Path) -> dict[str, Path]:
    files = {
        "good": tmp_path / "good.jsonl",
        "other": tmp_path / "other.ndjson",
        "orphan": tmp_path / "orphan.jsonl",
        "notes": tmp_path / "notes.txt",
    }
    files["good"].write_bytes(SAMPLE.read_bytes())
    files["other"].write_bytes(SAMPLE.read_bytes())
    files["orphan"].write_text(ORPHAN, encoding="utf-8")
    files["notes"].write_text("not a transcript\n", encoding="utf-8")
    return files


def test_validate_hook_checks_every_file(staged: dict[str, Path]) -> None:
    result = _run_hook("ctx-validate", list(staged.values()), code=1)
    assert result.stdout == ""
    assert result.stderr.splitlines() == [
        f"ctx: {staged['good']}: valid",
        f"ctx: {staged['other']}: valid",
        f"{staged['orphan']}:2: tool result 'call_9' has no matching tool call",
        RULES,
    ]
    _run_hook("ctx-validate", [staged["good"], staged["other"], staged["notes"]], code=0)


def test_validate_keeps_going_past_an_unreadable_file(staged: dict[str, Path]) -> None:
    broken = staged["good"].with_name("broken.jsonl")
    broken.write_text('{"role": "user", "content": "hi"}\n{not json\n', encoding="utf-8")
    result = invoke(["validate", str(broken), str(staged["good"])], code=2)
    assert result.stderr.splitlines()[0].startswith(f"ctx: error: {broken}:2: not valid JSON")
    assert result.stderr.splitlines()[1] == f"ctx: {staged['good']}: valid"


def test_validate_json_for_several_files(staged: dict[str, Path]) -> None:
    result = invoke(["validate", "--json", str(staged["good"]), str(staged["orphan"])], code=1)
    payload = json.loads(result.stdout)
    assert payload["failed"] == 1
    assert [(f["input"], f["valid"]) for f in payload["files"]] == [
        (str(staged["good"]), True),
        (str(staged["orphan"]), False),
    ]
    assert payload["files"][1]["problems"][0]["kind"] == "orphan_result"
    single = json.loads(invoke(["validate", "--json", str(staged["good"])]).stdout)
    # One shape for one file or many: the file's entry at the top, plus files and failed.
    entry = {
        "input": str(staged["good"]),
        "format": "openai_chat",
        "rules": ["json_lines", "tool_pairs"],
        "valid": True,
        "problems": [],
    }
    assert single == {**entry, "files": [entry], "failed": 0}


def test_token_budget_hook(staged: dict[str, Path]) -> None:
    files = [staged["good"], staged["other"], staged["notes"]]
    _run_hook("ctx-token-budget", files, code=0)
    over = _run_hook("ctx-token-budget", files, code=1, args=["100"])
    for name in ("good", "other"):
        pattern = rf"ctx: error: {re.escape(str(staged[name]))}: [\d,]+ tokens after reduction exceed --fail-over 100\.\n"
        assert re.search(pattern, over.stderr), over.stderr
    assert "notes.txt" not in over.stderr


@pytest.mark.real_data
def test_validate_hook_on_real_transcripts() -> None:
    """cc_mclaude has one malformed line (859, see MANIFEST.md): reported, the rest still checked."""
    names = [
        "cc_mclaude_c76e5be5.jsonl",
        "oai_taubench_airline_task2_trial1.jsonl",
        "codex_agent-history_real_session-01_v0.135.jsonl",
    ]
    real = [SHARED / n for n in names]
    strict = _run_hook("ctx-validate", real, code=2)
    assert strict.stderr.splitlines() == [
        f"ctx: error: {real[0]}:859: not valid JSON (Invalid \\escape); fix the line or pass "
        "--on-invalid keep.",
        f"ctx: {real[1]}: valid",
        f"ctx: {real[2]}: valid",
        RULES,
    ]
    # Kept as is, the broken line is a problem, and it hides a tool result, so its call
    # is unanswered.
    kept = _run_hook("ctx-validate", real, code=1, args=["--on-invalid", "keep"])
    assert kept.stderr.splitlines() == [
        f"{real[0]}:858: tool call 'toolu_0176bQ5rmozshkuUeNB9iJKJ' (Bash) has no result",
        f"{real[0]}:859: not valid JSON (Invalid \\escape); the client skips this line",
        f"ctx: {real[1]}: valid",
        f"ctx: {real[2]}: valid",
        RULES,
    ]
