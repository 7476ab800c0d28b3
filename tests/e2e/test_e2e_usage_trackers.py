"""Usage trackers report the same spend after a reduction as before.

ccusage (npm, ``--offline``: prices bundled) reads ``message.usage`` of the assistant
records of every Claude Code session file; ``@ccusage/codex`` reads the ``token_count``
events of Codex rollouts. A reduction must neither lose a response's usage nor count
one twice. Each session runs alone in its own config directory, original and reduced,
and the session and daily reports must be equal.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from harness import reduced_copy, require, require_shared, shared

from support.paths import no_corpus

pytestmark = pytest.mark.e2e


def place_claude(session: Path, home: Path) -> dict[str, str]:
    project = home / ".claude" / "projects" / "-work-project"
    project.mkdir(parents=True, exist_ok=True)
    (project / session.name).write_bytes(session.read_bytes())
    return {"CLAUDE_CONFIG_DIR": str(home / ".claude")}


def place_codex(rollout: Path, home: Path) -> dict[str, str]:
    day = home / ".codex" / "sessions" / "2025" / "01" / "01"
    day.mkdir(parents=True, exist_ok=True)
    (day / f"rollout-{rollout.name}").write_bytes(rollout.read_bytes())
    return {"CODEX_HOME": str(home / ".codex")}


# tracker -> (sessions it reads, preset that targets them, how to lay one out)
TRACKERS = {
    "ccusage": ("cc_", "claude-code-resume", place_claude),
    "ccusage-codex": ("codex_", "codex-resume", place_codex),
}
CASES = [
    pytest.param(tracker, path, id=f"{tracker}-{path.name}")
    for tracker, (prefix, _preset, _place) in TRACKERS.items()
    for path in shared(prefix)
] or [no_corpus("a Claude Code or Codex session", arity=2)]


def report_of(tracker: str, session: Path, home: Path, report: str) -> Any:
    exe = require(tracker)
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(home), "TZ": "UTC"}
    env |= TRACKERS[tracker][2](session, home)
    proc = subprocess.run(
        [str(exe), report, "--offline", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return json.loads(proc.stdout)


@pytest.mark.parametrize(("tracker", "session"), CASES)
def test_tracker_reports_the_same_after_the_resume_preset(
    tracker: str, session: Path, tmp_path: Path
) -> None:
    require_shared()
    require(tracker)
    reduced, _ = reduced_copy(session, TRACKERS[tracker][1], tmp_path)
    for report in ("session", "daily"):
        before = report_of(tracker, session, tmp_path / f"orig-{report}", report)
        after = report_of(tracker, reduced, tmp_path / f"red-{report}", report)
        assert after == before, report
    totals = before["totals"]
    cost = totals.get("totalCost", totals.get("costUSD"))
    assert totals["totalTokens"] > 0
    print(f"{tracker} {session.name}: ${cost:.2f}, {totals['totalTokens']:,} tokens, same after")
