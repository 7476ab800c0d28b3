"""Build Claude Code and Codex session directories from ../shared/transcripts in a temp HOME."""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from support.paths import SHARED, need_shared

CC_MCLAUDE = "c76e5be5-ffd2-4901-a935-885527c83a61"
CC_SPOTTER = "4d5611e5-241a-462a-8d15-5122611a9569"
CODEX_ID = "01997e76-d124-7592-9cac-2ec05abbca08"
CODEX_ID_2 = "0199812e-64f0-7f73-91fc-095dda01c36e"
SPOTTER_CWD = "/home/USER/projects/spotter-worktrees/spotter-dov"


@dataclass
class Layout:
    """Where each session of the fake machine lives."""

    home: Path
    mclaude: Path
    spotter: Path
    subagent: Path
    codex: Path
    codex_archived: Path

    @property
    def data(self) -> Path:
        """ctx's data directory under this HOME."""
        return self.home / ".local" / "share" / "ctx"

    def shown(self, path: Path) -> str:
        """``path`` as ctx prints it for a person: from ``~`` (the tests run outside HOME)."""
        return f"~/{path.relative_to(self.home)}"


def age(path: Path, seconds: float) -> None:
    """Set a file's modification time ``seconds`` into the past."""
    moment = time.time() - seconds
    os.utime(path, (moment, moment))


def build(home: Path, monkeypatch: pytest.MonkeyPatch) -> Layout:
    """A HOME with two Claude Code sessions (one with a subagent) and two Codex rollouts."""
    need_shared()
    for var in ("CLAUDE_CONFIG_DIR", "CODEX_HOME", "XDG_DATA_HOME", "CTX_DATA_DIR", "CTX_PRICES"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(home))
    projects = home / ".claude" / "projects"
    p1 = projects / "-home-USER-projects-spotter-worktrees-spotter-dov"
    p2 = projects / "C--Users-Mischa"
    sub_dir = p1 / CC_SPOTTER / "subagents"
    sub_dir.mkdir(parents=True)
    p2.mkdir(parents=True)
    spotter = p1 / f"{CC_SPOTTER}.jsonl"
    shutil.copyfile(SHARED / "cc_spotter_4d5611e5.jsonl", spotter)
    subagent = sub_dir / "agent-a2898e3.jsonl"
    shutil.copyfile(SHARED / "cc_spotter_4d5611e5_subagent_a2898e3.jsonl", subagent)
    mclaude = p2 / f"{CC_MCLAUDE}.jsonl"
    shutil.copyfile(SHARED / "cc_mclaude_c76e5be5.jsonl", mclaude)
    day = home / ".codex" / "sessions" / "2025" / "09" / "24"
    day.mkdir(parents=True)
    codex = day / f"rollout-2025-09-24T19-22-20-{CODEX_ID}.jsonl"
    shutil.copyfile(SHARED / "codex_agentcmd_2025-09-24T19-22-20.jsonl", codex)
    archive = home / ".codex" / "archived_sessions"
    archive.mkdir(parents=True)
    archived = archive / f"rollout-2025-09-25T08-02-05-{CODEX_ID_2}.jsonl"
    shutil.copyfile(SHARED / "codex_agentcmd_2025-09-25T08-02-05.jsonl", archived)
    # Oldest to newest: codex, mclaude, spotter (and its subagent): none looks live.
    for path, seconds in (
        (archived, 9 * 86400),
        (codex, 5 * 86400),
        (mclaude, 2 * 86400),
        (subagent, 3 * 3600),
        (spotter, 2 * 3600),
    ):
        age(path, seconds)
    return Layout(home, mclaude, spotter, subagent, codex, archived)
