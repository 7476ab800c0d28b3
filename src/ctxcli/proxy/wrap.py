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

CLIENTS = ("claude", "codex")


@dataclass
class WrapResult:
    """How the wrapped client ended and what the proxy did meanwhile."""

    returncode: int
    stats: dict[str, Any]
    url: str


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
    """``settings`` with the upstream the user's environment already names, if any."""
    if client == "claude" and os.environ.get("ANTHROPIC_BASE_URL"):
        return replace(settings, upstream=os.environ["ANTHROPIC_BASE_URL"])
    if client == "codex" and os.environ.get("OPENAI_BASE_URL"):
        return replace(settings, openai_upstream=os.environ["OPENAI_BASE_URL"])
    return settings


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
    with ProxyServer(core) as server:
        argv, extra_env = client_command(client, executable, args, server.url, settings.offload_dir)
        env = {**os.environ, **extra_env}
        proc = subprocess.Popen(argv, env=env)
        try:
            returncode = proc.wait()
        except KeyboardInterrupt:
            # The client got the same Ctrl-C (same process group): let it finish.
            returncode = proc.wait()
    return WrapResult(returncode, core.stats(), server.url)


def summary(stats: dict[str, Any]) -> list[str]:
    """What a run saved, in a few lines for people."""
    lines = [
        f"{stats['requests']} model requests, input tokens {stats['tokens_in']:,} -> "
        f"{stats['tokens_sent']:,} ({stats['tokens_saved_pct']:.1f}% fewer)"
    ]
    for api, figures in stats["by_api"].items():
        before, after = figures["without_proxy"], figures["with_proxy"]
        lines.append(
            f"{api}: billed input ~${before['cost_usd']:.4f} -> ~${after['cost_usd']:.4f} "
            f"({figures['billed_saved_pct']:.1f}% saved; cache read {after['cache_read']:,}, "
            f"written {after['cache_write']:,} tokens)"
        )
    lines.append(f"offloaded originals: {stats['offload_dir']}")
    return lines
