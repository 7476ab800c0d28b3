"""``ctx cost``: what a session cost, what the cache model says it cost, and with ctx."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import orjson
import typer

from ctxcli.cli import console
from ctxcli.cli.boundary import errors as _errors
from ctxcli.cli.options import ConfigOpt, Input, JsonOpt
from ctxcli.cli.sessions import LastOpt, ProjectOpt, SessionOpt, session_input
from ctxcli.core.errors import CtxError

__all__ = ["PresetsOpt", "cost", "cost_table"]

PresetsOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--preset",
        metavar="NAME",
        help="Price this shipped chain live (repeat for several; default: the live chain).",
    ),
]


def cost(
    input: Annotated[Input | None, typer.Argument(show_default=False)] = None,
    preset: PresetsOpt = None,
    config: ConfigOpt = None,
    json: JsonOpt = False,
    session: SessionOpt = None,
    last: LastOpt = False,
    project: ProjectOpt = None,
) -> None:
    """Price a Claude Code session or Codex rollout: as run, replayed, and with ctx live.

    The recorded bill counts each API response once. The replay rebuilds every
    request from the file and prices it through a model of the provider's prompt
    cache (5-minute and 1-hour entries, breakpoints, expiry). The same replay with
    ctx in the loop prices what 'ctx proxy' would have sent with each chain, and
    what reducing the file at its longest pause and resuming it would have cost.

    Example:

    \b
        ctx cost session.jsonl
        ctx cost --last --preset eino --preset live --json
    """
    with _errors():
        picked = session_input([input] if input else None, session, last, project)
        if not picked:
            raise CtxError("name a session file, or a session with --session/--last.")
        from ctxcli.cost.session import CostOptions, session_cost

        options = CostOptions(chains=_chains(preset or [], config))
        result = session_cost(picked[0], options)
        if json:
            console.write_stdout(orjson.dumps(result.to_dict()) + b"\n")
        else:
            console.err_console().print(cost_table(result))


def _chains(presets: list[str], config: Path | None) -> tuple[Any, ...]:
    """The chains asked for: the config file's, then each preset's (none: the default)."""
    from ctxcli.cost.counterfactual import Chain
    from ctxcli.pipeline.config import load_config

    chains = [Chain(str(config), load_config(config))] if config is not None else []
    return (*chains, *(Chain.preset(name) for name in presets))


def cost_table(result: Any) -> Any:
    """The Rich table of a :class:`~ctxcli.cost.session.SessionCost` (a pure function)."""
    from rich.table import Table

    s = result.session
    c = s.replay.calibration
    table = Table(
        title=f"{Path(result.name).name}: {len(s.replay.requests)} calls",
        caption=f"client prompt ~{c.overhead_tokens:,} tokens, provider/ours {c.token_ratio:.3f}",
    )
    for name in ("bill", "USD", "vs replayed", "input tok", "cache read", "cache write", "busts"):
        table.add_column(name, justify="left" if name == "bill" else "right")
    rows: list[tuple[str, Any, int | None]] = [
        ("as recorded", s.recorded, None),
        ("as replayed", s.replay, s.replay.busts),
    ]
    for chain in result.chains:
        note = f" ({sum(chain.held_back)} held back)" if any(chain.held_back) else ""
        rows.append((f"with ctx: {chain.name}{note}", chain.replay, chain.busts))
    if result.resume is not None:
        r = result.resume
        rows.append((f"reduce+resume: {r.name} at call {r.resume_at}", r.replay, r.busts))
    for label, bill, busts in rows:
        u = bill.usage
        delta = bill.usd / result.replayed_usd - 1 if result.replayed_usd else 0.0
        table.add_row(
            label,
            f"{bill.usd:,.3f}",
            f"{delta:+.1%}",
            f"{u.input_total:,}",
            f"{u.cache_read:,}",
            f"{u.cache_write:,}",
            "" if busts is None else str(busts),
        )
    return table
