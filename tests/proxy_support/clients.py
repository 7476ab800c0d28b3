"""The real Claude Code CLI for the end-to-end tests and the bench, and the scripted project.

``claude_binary()`` installs the pinned ``@anthropic-ai/claude-code`` with npm into
``${CTX_E2E_CACHE:-~/.cache/ctx-e2e}/npm`` once and returns its executable (None with the
reason when npm or the registry is unavailable). ``scripted_project`` writes the large
files of a tool-heavy run and the steps the fake model takes on them; ``run_claude`` runs
the CLI (directly or through ``ctx wrap``) against a :class:`FakeAnthropic`, isolated from
the user's own Claude configuration (a private HOME).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.proxy_support.fake_anthropic import Step

CLAUDE_CODE_VERSION = "2.1.331"
PACKAGE = "@anthropic-ai/claude-code"
CODEX_VERSION = "0.169.0"


def cache_dir() -> Path:
    return Path(os.environ.get("CTX_E2E_CACHE") or Path.home() / ".cache" / "ctx-e2e")


def claude_binary() -> tuple[str | None, str]:
    """(path to ``claude``, "") or (None, why it cannot be had here)."""
    return npm_binary("npm", PACKAGE, CLAUDE_CODE_VERSION, "claude")


def codex_binary() -> tuple[str | None, str]:
    """(path to ``codex``, "") or (None, why it cannot be had here)."""
    return npm_binary("npm-codex", "@openai/codex", CODEX_VERSION, "codex")


def npm_binary(folder: str, package: str, version: str, name: str) -> tuple[str | None, str]:
    """Install ``package@version`` into the cache once; its ``name`` executable, or why not."""
    prefix = cache_dir() / folder
    binary = prefix / "node_modules" / ".bin" / name
    if not binary.exists():
        npm = shutil.which("npm")
        if npm is None:
            return None, "npm is not installed"
        prefix.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(
            [npm, "install", "--prefix", str(prefix), "--no-audit", "--no-fund",
             f"{package}@{version}"],
            capture_output=True, text=True, timeout=600, check=False,
        )  # fmt: skip
        if done.returncode != 0 or not binary.exists():
            return None, f"npm install {package} failed: {done.stderr.strip()[-300:]}"
    check = subprocess.run(
        [str(binary), "--version"], capture_output=True, text=True, timeout=60, check=False
    )
    if check.returncode != 0:
        return None, f"{binary} --version failed: {check.stderr.strip()[-300:]}"
    return str(binary), ""


def scripted_project(root: Path, turns: int = 40, lines: int = 150) -> list[Step]:
    """Write ``turns`` large source files under ``root``; one Read or Bash step per file."""
    steps: list[Step] = []
    for i in range(turns):
        path = root / f"module_{i:02d}.py"
        body = "".join(
            f"def handler_{i}_{n}(request, retries={n % 7}):\n"
            f"    return dispatch(request, route='/api/v{i}/item/{n}', retries=retries)\n"
            for n in range(lines)
        )
        path.write_text(body)
        if i % 3 == 2:
            steps.append(Step("Bash", {"command": f"cat {path}", "description": "Show the file"}))
        else:
            steps.append(Step("Read", {"file_path": str(path)}, f"Reading module {i}."))
    return steps


def client_env(home: Path, base_url: str) -> dict[str, str]:
    """Environment for the CLI: fake key, private HOME, no traffic but to ``base_url``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "CLAUDE"))}
    env.update(
        HOME=str(home),
        ANTHROPIC_API_KEY="sk-test",
        ANTHROPIC_BASE_URL=base_url,
        DISABLE_TELEMETRY="1",
        DISABLE_ERROR_REPORTING="1",
        DISABLE_AUTOUPDATER="1",
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
        BASH_MAX_OUTPUT_LENGTH="100000",
    )
    return env


def claude_args(prompt: str = "Read every module in this project.") -> list[str]:
    return ["-p", prompt, "--allowedTools", "Read", "Bash(cat:*)", "--output-format", "json"]


def run_claude(
    binary: str,
    project: Path,
    home: Path,
    base_url: str,
    *,
    wrap: list[str] | None = None,
    timeout: float = 600,
) -> subprocess.CompletedProcess[str]:
    """Run the CLI on ``project``: directly, or as ``ctx wrap claude [wrap...] -- ARGS``."""
    env = client_env(home, base_url)
    if wrap is None:
        argv = [binary, *claude_args()]
    else:
        env["CTX_CLAUDE_BIN"] = binary
        ctx = [sys.executable, "-m", "ctxcli"]
        argv = [*ctx, "wrap", "claude", *wrap, "--", *claude_args()]
    return subprocess.run(
        argv, cwd=project, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
