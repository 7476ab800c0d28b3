"""Every `$` line of the README runs as written, in order, in a scratch copy of the checkout.

A console block's `$` lines are commands; the lines after them are sample output (not
compared: numbers depend on paths). A trailing `# exit N` says the command is expected to
fail with N. A block preceded by `<!-- readme-test: skip REASON -->` is not run; the reason
must name the test that runs it instead (real clients, object storage, a Ray cluster).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, SHARED

BLOCK = re.compile(
    r"(<!-- readme-test: skip (?P<skip>[^>]*)-->\s*\n)?```console\n(?P<body>.*?)```", re.S
)
EXPECT = re.compile(r"#\s*exit (\d+)\b")


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
