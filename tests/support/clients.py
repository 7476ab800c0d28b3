"""The real agent CLIs for the end-to-end tests and the benches, and how to run Claude Code.

``scripts/install_clients.sh`` is the one installer: it pins the versions and puts each
client under ``$CTX_E2E_CACHE`` (else ``$XDG_CACHE_HOME/ctx-e2e``, else
``~/.cache/ctx-e2e``) in ``<cache>/<folder>/node_modules/.bin/<binary>``. :func:`client`
says where an installed one is, or why it is not there; :func:`install` runs the script
first when it is missing (``make e2e`` runs it up front).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
INSTALLER = REPO / "scripts" / "install_clients.sh"
CLIENTS = {
    "claude": ("claude-code", "claude"),
    "codex": ("codex", "codex"),
    "ccusage": ("ccusage", "ccusage"),
    "ccusage-codex": ("ccusage-codex", "ccusage-codex"),
}
"""Client name -> (folder in the cache, executable), as the installer lays them out."""


def cache_dir() -> Path:
    """Where scripts/install_clients.sh puts the clients."""
    if os.environ.get("CTX_E2E_CACHE"):
        return Path(os.environ["CTX_E2E_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "ctx-e2e"


def client(name: str) -> tuple[Path | None, str]:
    """(path of the installed CLI, "") or (None, why it is not there)."""
    folder, binary = CLIENTS[name]
    path = cache_dir() / folder / "node_modules" / ".bin" / binary
    if not shutil.which("node"):
        return None, "node is not installed (run .ci/run or apt-get install nodejs npm)"
    if not path.exists():
        return None, f"{name} is not installed in {path.parent} (run {INSTALLER.name})"
    return path, ""


def install(name: str) -> tuple[Path | None, str]:
    """:func:`client`, after running the installer if the client is missing."""
    path, why = client(name)
    if path is None and shutil.which("npm"):
        subprocess.run([str(INSTALLER)], capture_output=True, timeout=1800, check=False)
        path, why = client(name)
    return path, why


def require(name: str, *, install_missing: bool = False) -> Path:
    """The installed CLI ``name``, or skip the calling test saying why it is missing.

    ``install_missing`` runs the installer first when it is missing (:func:`install`).
    """
    import pytest

    path, why = install(name) if install_missing else client(name)
    if path is None:
        pytest.skip(f"cannot run {name} here: {why}")
    return path


# -- Claude Code against a fake API --------------------------------------------------------


def client_env(home: Path, base_url: str) -> dict[str, str]:
    """Environment for Claude Code: fake key, private HOME, no traffic but to ``base_url``."""
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
    binary: str | Path,
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
        argv = [str(binary), *claude_args()]
    else:
        env["CTX_CLAUDE_BIN"] = str(binary)
        argv = [sys.executable, "-m", "ctxcli", "wrap", "claude", *wrap, "--", *claude_args()]
    return subprocess.run(
        argv, cwd=project, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
