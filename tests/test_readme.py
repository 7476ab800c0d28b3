"""Every `$` line of the README runs as written, in order, in a scratch copy of the checkout.

A console block's `$` lines are commands; the lines after them are sample output (not
compared: numbers depend on paths). A trailing `# exit N` says the command is expected to
fail with N. A block preceded by `<!-- readme-test: skip REASON -->` is not run; the reason
must name the test that runs it instead (real clients, object storage, a Ray cluster).
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from conftest import REPO, SHARED

BLOCK = re.compile(
    r"(<!-- readme-test: skip (?P<skip>[^>]*)-->\s*\n)?```console\n(?P<body>.*?)```", re.S
)
EXPECT = re.compile(r"#\s*exit (\d+)\b")
SAMPLES = REPO / "sample_transcripts"


def _load(name: str, path: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, REPO / path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(name, module)
    spec.loader.exec_module(module)
    return module


def readme_commands() -> tuple[list[str], list[str]]:
    """The `$` commands to run, in order, and the reasons of the blocks that are skipped."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    commands: list[str] = []
    skipped: list[str] = []
    for match in BLOCK.finditer(text):
        lines = [line[2:] for line in match["body"].splitlines() if line.startswith("$ ")]
        if match["skip"]:
            skipped.append(match["skip"].strip())
        else:
            commands += lines
    return commands, skipped


def _script(commands: list[str]) -> str:
    out = ["set -u", 'fail() { echo "README command failed ($1, wanted $2): $3" >&2; exit 97; }']
    for cmd in commands:
        expected = EXPECT.search(cmd)
        code = int(expected.group(1)) if expected else 0
        quoted = cmd.replace("'", "'\\''")
        out.append(f"{cmd}\nrc=$?; [ $rc -eq {code} ] || fail $rc {code} '{quoted}'")
    return "\n".join(out) + "\necho README-OK\n"


def test_skipped_blocks_name_the_test_that_runs_them() -> None:
    _, skipped = readme_commands()
    for reason in skipped:
        assert re.search(r"tests/\S+\.py", reason), (
            f"skip without the test that covers it: {reason}"
        )


@pytest.mark.slow
def test_every_readme_command_runs_as_written(tmp_path: Path) -> None:
    if not SHARED.is_dir():
        pytest.fail(f"{SHARED} is missing: the README's examples use the shared transcripts")
    commands, _ = readme_commands()
    assert len(commands) >= 20
    # A scratch checkout beside a `shared` link, so `../shared/transcripts` resolves as in CI.
    work = tmp_path / "checkout"
    work.mkdir()
    (tmp_path / "shared").symlink_to(SHARED.parent)
    for name in ("sample_transcripts", "docs", "tests", "pyproject.toml", "README.md"):
        (work / name).symlink_to(REPO / name)
    (work / ".venv").symlink_to(Path(sys.executable).parent.parent)
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("CTX_CACHE", "CTX_DATA", "HOME"))
    }
    env.update(HOME=str(tmp_path / "home"), TMPDIR=str(tmp_path), COLUMNS="100")
    env["PATH"] = f"{Path(sys.executable).parent}:{env['PATH']}"
    (tmp_path / "home").mkdir()
    bash = shutil.which("bash")
    assert bash is not None
    result = subprocess.run(
        [bash, "-c", _script(commands)],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0 and result.stdout.endswith("README-OK\n"), result.stderr[-3000:]


def test_samples_regenerate_byte_for_byte() -> None:
    """The bundled samples are what sample_transcripts/make_samples.py makes, every time."""
    make = _load("make_samples", "sample_transcripts/make_samples.py")
    names = sorted(p.name for p in SAMPLES.iterdir() if p.suffix in (".jsonl", ".traj"))
    assert names == sorted(make.SAMPLES)
    for name, build in make.SAMPLES.items():
        assert build() == (SAMPLES / name).read_bytes(), f"{name}: run make_samples.py"
        assert build() == build()


def test_the_samples_have_what_the_readme_shows() -> None:
    """Tool calls, a compaction and a malformed line (Claude Code); reasoning (Codex)."""
    cc = (SAMPLES / "claude_code_session.jsonl").read_bytes()
    assert b'"subtype": "compact_boundary"' in cc and b'"type": "tool_use"' in cc
    assert sum(b"\\[REDACTED" in line for line in cc.splitlines()) == 1
    codex = (SAMPLES / "codex_rollout.jsonl").read_bytes()
    assert b'"encrypted_content"' in codex and b'"custom_tool_call"' in codex
    traj = (SAMPLES / "sweagent_function_calling.traj").read_text(encoding="utf-8")
    assert traj.count('"message_type": "observation"') > 10  # more than swe-agent keeps
