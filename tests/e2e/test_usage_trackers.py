"""Usage trackers report the same spend after a reduction as before.

ccusage (npm, ``--offline``: prices bundled) reads ``message.usage`` of the assistant
records of every session file; a reduction must neither lose a response's usage nor
count one twice. Each session runs alone in its own CLAUDE_CONFIG_DIR, original and
reduced, and the session and daily reports must be equal.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from harness import reduce

from conftest import require, require_shared, shared

pytestmark = pytest.mark.e2e


def ccusage(exe: Path, session: Path, work: Path, report: str) -> Any:
    home = work / "home"
    project = home / ".claude" / "projects" / "-work-project"
    project.mkdir(parents=True, exist_ok=True)
    (project / session.name).write_bytes(session.read_bytes())
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(home),
        "CLAUDE_CONFIG_DIR": str(home / ".claude"),
        "TZ": "UTC",
    }
    proc = subprocess.run(
        [str(exe), report, "--offline", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return json.loads(proc.stdout)


@pytest.mark.parametrize("session", shared("cc_"), ids=lambda p: p.name)
def test_ccusage_reports_the_same_after_claude_code_resume(session: Path, tmp_path: Path) -> None:
    require_shared()
    exe = require("ccusage")
    reduced = tmp_path / "reduced" / session.name
    reduced.parent.mkdir()
    reduce(session, "claude-code-resume", reduced)
    for report in ("session", "daily"):
        before = ccusage(exe, session, tmp_path / f"orig-{report}", report)
        after = ccusage(exe, reduced, tmp_path / f"red-{report}", report)
        assert after == before, report
    totals = before["totals"]
    assert totals["totalTokens"] > 0
    print(f"{session.name}: ccusage ${totals['totalCost']:.2f}, {totals['totalTokens']:,} tokens")
