"""Run a coding agent (Claude Code or Codex) through a proxy started just for it.

Nothing of the user's configuration is changed: the base URL goes in through the
environment (Claude Code: ``ANTHROPIC_BASE_URL``) or the command line (Codex:
``-c openai_base_url=...``), and only the child process sees it. A base URL the user had
already set becomes the proxy's upstream, so the chain stays intact.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ctxcli.core.errors import CtxError
from ctxcli.proxy.engine import ProxyCore, ProxySettings
from ctxcli.proxy.server import ProxyServer

__all__ = [
    "CLIENTS",
    "WrapResult",
    "client_command",
    "find_client",
    "run_wrapped",
    "summary",
    "upstream_settings",
    "where_offloaded",
]

CLIENTS = ("claude", "codex")


@dataclass
class WrapResult:
    """How the wrapped client ended and what the proxy did meanwhile.

    Attributes:
        returncode: the client's, as :mod:`subprocess` reports it (``-N``: killed by
            signal N).
        stats: the proxy's figures.
        url: where the proxy listened.
        offload_dir: the directory the hints cite, or None when nothing was offloaded
            (the run directory was then removed).
    """

    returncode: int
    stats: dict[str, Any]
    url: str
    offload_dir: str | None = None

    @property
    def exit_code(self) -> int:
        """The client's exit code as a shell reports it: 128 + N for a kill by signal N."""
        return 128 - self.returncode if self.returncode < 0 else self.returncode


def client_command(
    client: str, executable: str, args: Sequence[str], url: str, offload_dir: str
) -> tuple[list[str], dict[str, str]]:
    """The argv and the extra environment that point ``client`` at the proxy at ``url``."""
    if client == "claude":
        # --add-dir: the agent may read the offloaded originals without a permission prompt.
        return [executable, "--add-dir", offload_dir, *args], {"ANTHROPIC_BASE_URL": url}
    if client == "codex":
        return [executable, "-c", f'openai_base_url="{url}/v1"', *args], {}
    raise CtxError(f"cannot wrap {client!r}: choose one of {', '.join(CLIENTS)}")


def find_client(client: str) -> str:
    """The client's executable: ``CTX_<CLIENT>_BIN`` if set, else the one on PATH."""
    override = os.environ.get(f"CTX_{client.upper()}_BIN")
    found = override or shutil.which(client)
    if not found:
        package = "@anthropic-ai/claude-code" if client == "claude" else "@openai/codex"
        raise CtxError(f"{client} is not on PATH; install it (npm install -g {package})")
    return found


def upstream_settings(client: str, settings: ProxySettings) -> ProxySettings:
    """``settings`` for one client: its API the only upstream, the one its environment names.

    The proxy serves this client alone, so every path it requests goes to the client's
    own API (never a credential to the other one).
    """
    if client == "claude":
        chosen = replace(settings, single_upstream="anthropic")
        if os.environ.get("ANTHROPIC_BASE_URL"):
            chosen = replace(chosen, upstream=os.environ["ANTHROPIC_BASE_URL"])
        return chosen
    chosen = replace(settings, single_upstream="openai")
    if os.environ.get("OPENAI_BASE_URL"):
        chosen = replace(chosen, openai_upstream=os.environ["OPENAI_BASE_URL"])
    return chosen


def run_wrapped(
    client: str,
    args: Sequence[str],
    settings: ProxySettings,
    *,
    log: Callable[[str], None] | None = None,
    warn: Callable[[str], None] | None = None,
) -> WrapResult:
    """Start a proxy, run ``client`` with ``args`` through it, stop the proxy, report.

    Raises:
        CtxError: the client is unknown or not installed.
    """
    if client not in CLIENTS:
        raise CtxError(f"cannot wrap {client!r}: choose one of {', '.join(CLIENTS)}")
    executable = find_client(client)
    core = ProxyCore(upstream_settings(client, settings), log=log, warn=warn)
    try:
        with ProxyServer(core) as server:
            argv, extra_env = client_command(client, executable, args, server.url, core.offload_dir)
            returncode = _run_client(argv, {**os.environ, **extra_env})
    finally:
        kept = core.finish()
    return WrapResult(returncode, core.stats(), server.url, kept)


def _run_client(argv: list[str], env: dict[str, str]) -> int:
    """Run the client to its end; its return code.

    Raises:
        CtxError: the client cannot be started.
    """
    try:
        proc = subprocess.Popen(argv, env=env)
    except OSError as exc:
        raise CtxError(f"cannot run {argv[0]}: {exc.strerror or exc}") from None
    try:
        return proc.wait()
    except KeyboardInterrupt:
        # The client got the same Ctrl-C (same process group): let it finish.
        return proc.wait()


def summary(stats: dict[str, Any]) -> list[str]:
    """What a run saved, in a few lines for people."""
    lines = [
        f"{stats['requests']} model requests, input tokens {stats['tokens_in']:,} -> "
        f"{stats['tokens_sent']:,} ({stats['tokens_saved_pct']:.1f}% fewer)"
    ]
    for api, figures in stats["by_api"].items():
        before, after = figures["without_proxy"], figures["with_proxy"]
        lines.append(
            f"{api}: billed input ~${before['usd']:.4f} -> ~${after['usd']:.4f} "
            f"({figures['billed_saved_pct']:.1f}% saved; cache read {after['cache_read']:,}, "
            f"written {after['cache_write']:,} tokens; cache busts {before['busts']} -> "
            f"{after['busts']})"
        )
    return lines


def where_offloaded(kept: str | None) -> str:
    """The line that says where the run's offloaded text is (or that there is none)."""
    if kept is None:
        return "nothing was offloaded; the run directory was removed"
    return f"offloaded originals kept in {kept} (the conversation's hints cite them)"
