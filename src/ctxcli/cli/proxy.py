"""``ctx proxy``: reduce a coding agent's requests on their way to the model API."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from ctxcli.cli import console
from ctxcli.cli.boundary import errors as _errors
from ctxcli.core.errors import CtxError
from ctxcli.core.install import install_command

__all__ = [
    "ClearOpt",
    "ConfigOpt",
    "OffloadOpt",
    "PresetOpt",
    "PriceOpt",
    "VerboseOpt",
    "load_proxy",
    "note",
    "proxy",
    "settings",
]

PresetOpt = Annotated[
    str | None,
    typer.Option(
        "--preset",
        metavar="NAME",
        help="Stage chain to run (default: live, the chain the prompt-cache bill chose).",
    ),
]
ConfigOpt = Annotated[
    Path | None,
    typer.Option(
        "--config", "-c", metavar="FILE", help="ctx.toml whose chain to run.", dir_okay=False
    ),
]
OffloadOpt = Annotated[
    str | None,
    typer.Option(
        "--offload-dir", metavar="DIR", help="Where offloaded text goes (default: a new cache dir)."
    ),
]
ClearOpt = Annotated[
    int,
    typer.Option(
        "--clear-at-least",
        metavar="TOKENS",
        min=0,
        help=(
            "Change already-sent (cached) messages only when the change pays for the cache "
            "it busts and reclaims at least this many tokens."
        ),
    ),
]
PriceOpt = Annotated[
    Path | None,
    typer.Option(
        "--prices",
        metavar="FILE",
        help="TOML price table for the cost figures (default: $CTX_PRICES, else list prices).",
        dir_okay=False,
    ),
]
VerboseOpt = Annotated[bool, typer.Option("--verbose", "-v", help="One line per request.")]


def note(prefix: str) -> Callable[[str], None]:
    """A printer of ``prefix: line`` on stderr (the -v lines and the summaries)."""

    def write(message: str) -> None:
        sys.stderr.write(console.redact(f"{prefix}: {message}\n"))
        sys.stderr.flush()

    return write


def load_proxy() -> Any:
    """The proxy package, or a one-line error naming the extra to install."""
    try:
        import ctxcli.proxy as proxy
    except ImportError as exc:
        raise CtxError(
            f"the proxy needs the 'proxy' extra ({exc.name} is missing): {install_command('proxy')}"
        ) from None
    return proxy


def settings(
    proxy: Any,
    preset: str | None,
    config: Path | None,
    offload_dir: str | None,
    clear_at_least: int,
    prices: Path | None,
    **more: Any,
) -> Any:
    """ProxySettings from the shared options (``--config`` alone runs the file's chain)."""
    values: dict[str, Any] = {
        "preset": preset if preset or config else proxy.ProxySettings().preset,
        "config": str(config) if config else None,
        "clear_at_least": clear_at_least,
        "prices": str(prices) if prices else None,
        **more,
    }
    if offload_dir:
        values["offload_dir"] = str(Path(offload_dir).resolve())
    return proxy.ProxySettings(**values)


def proxy(
    port: Annotated[
        int, typer.Option("--port", "-p", metavar="N", help="Port to listen on.")
    ] = 8787,
    host: Annotated[
        str, typer.Option("--host", metavar="ADDRESS", help="Address to listen on.")
    ] = "127.0.0.1",
    upstream: Annotated[
        str, typer.Option("--upstream", metavar="URL", help="Anthropic API base URL.")
    ] = "https://api.anthropic.com",
    openai_upstream: Annotated[
        str, typer.Option("--openai-upstream", metavar="URL", help="OpenAI API base URL.")
    ] = "https://api.openai.com",
    other_paths: Annotated[
        str | None,
        typer.Option(
            "--other-paths",
            metavar="anthropic|openai",
            help="The API that other paths than the model endpoints go to (default: none).",
        ),
    ] = None,
    preset: PresetOpt = None,
    config: ConfigOpt = None,
    offload_dir: OffloadOpt = None,
    clear_at_least: ClearOpt = 0,
    prices: PriceOpt = None,
    verbose: VerboseOpt = False,
) -> None:
    """Serve the Anthropic and OpenAI APIs locally, reducing each request's history.

    Point a client at it; /stats answers what it saved (tokens and cache-priced cost).
    Requests go by configuration, never by their headers: the model endpoints to their
    API, paths under /anthropic or /openai to that API, other paths to --other-paths
    (none by default: answered 404).

    Example:

    \b
        ctx proxy --port 8787 -v
        ANTHROPIC_BASE_URL=http://127.0.0.1:8787/anthropic claude
        codex -c openai_base_url=http://127.0.0.1:8787/openai/v1
    """
    with _errors():
        mod = load_proxy()
        chosen = settings(
            mod,
            preset,
            config,
            offload_dir,
            clear_at_least,
            prices,
            upstream=upstream,
            openai_upstream=openai_upstream,
            other_paths=other_paths,
        )
        _serve(mod, chosen, host, port, verbose)


def _serve(mod: Any, chosen: Any, host: str, port: int, verbose: bool) -> None:
    """Run the proxy in the foreground; say where it listens and, at the end, what it kept."""
    say = note("ctx proxy")
    core = mod.ProxyCore(chosen, log=say if verbose else None, warn=console.warn)

    def listening(url: str) -> None:
        say(
            f"listening on {url} (upstream {chosen.upstream}); offloaded text goes to "
            f"{console.shown_path(core.offload_dir)}"
        )

    kept = mod.serve(core, host=host, port=port, on_listening=listening)
    from ctxcli.proxy.wrap import where_offloaded

    say(where_offloaded(kept))
