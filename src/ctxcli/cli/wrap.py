"""``ctx wrap claude|codex``: run a coding agent through a ctx proxy started for it."""

from __future__ import annotations

from typing import Annotated

import typer

from ctxcli.cli import console
from ctxcli.cli.boundary import errors as _errors
from ctxcli.cli.proxy import (
    ClearOpt,
    ConfigOpt,
    OffloadOpt,
    PresetOpt,
    PriceOpt,
    VerboseOpt,
    load_proxy,
    note,
    settings,
)

__all__ = ["wrap"]


def wrap(
    client: Annotated[
        str, typer.Argument(help="claude or codex.", show_default=False, metavar="CLIENT")
    ],
    args: Annotated[
        list[str] | None, typer.Argument(help="Arguments for the client, after --.", metavar="ARGS")
    ] = None,
    preset: PresetOpt = None,
    config: ConfigOpt = None,
    offload_dir: OffloadOpt = None,
    clear_at_least: ClearOpt = 0,
    prices: PriceOpt = None,
    verbose: VerboseOpt = False,
) -> None:
    """Run Claude Code or Codex through a ctx proxy; print what the run saved.

    The proxy listens on a free loopback port only while the client runs; no
    configuration file is changed. The client's exit code is ctx's (128 + N when a
    signal N killed it). Without --offload-dir the run gets a fresh directory under
    ctx's cache directory, removed at the end unless a hint cites a file in it (then
    its path is printed).

    Example:

    \b
        ctx wrap claude
        ctx wrap claude --clear-at-least 2000 -- -p "fix the failing test"
        ctx wrap codex -- exec "add a README"
    """
    with _errors():
        mod = load_proxy()
        chosen = settings(mod, preset, config, offload_dir, clear_at_least, prices)
        result = mod.run_wrapped(
            client,
            args or [],
            chosen,
            log=note("ctx wrap") if verbose else None,
            warn=console.warn,
        )
        from ctxcli.proxy.wrap import summary, where_offloaded

        for line in [*summary(result.stats), where_offloaded(result.offload_dir)]:
            note("ctx wrap")(line)
    raise typer.Exit(result.exit_code)
