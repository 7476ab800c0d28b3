"""``ctx cost``: what a session cost, what the cache model says it cost, and with ctx."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import orjson
import typer

from ctxcli.cli import console
from ctxcli.cli.boundary import errors as _errors
from ctxcli.cli.options import ConfigOpt, JsonOpt
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
    input: Annotated[
        str | None,
        typer.Argument(
            help="A session file (or use --session/--last).", show_default=False, metavar="FILE"
        ),
    ] = None,
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
            from ctxcli.cli.render import print_table

            print_table(cost_table(result, console.width()))


def _chains(presets: list[str], config: Path | None) -> tuple[Any, ...]:
    """The chains asked for: the config file's, then each preset's (none: the default)."""
    from ctxcli.cost.counterfactual import Chain
    from ctxcli.pipeline.config import load_config

    chains = [Chain(str(config), load_config(config))] if config is not None else []
    return (*chains, *(Chain.preset(name) for name in presets))


COST_COLUMNS = ("bill", "USD", "vs replay", "input", "cache read", "cache write", "busts")
COST_DROPPED = ("busts", "cache write", "cache read", "input")
"""The columns left out first when the table does not fit the terminal."""


def cost_table(result: Any, width: int | None = None) -> Any:
    """The Rich table of a :class:`~ctxcli.cost.session.SessionCost` (a pure function).

    Fitted to ``width`` (None: as wide as it is): short row labels, the details under
    the table, the columns of :data:`COST_DROPPED` left out first; a figure is never cut.
    """
    from ctxcli.cli.render import fitting_columns, plain_table

    s = result.session
    c = s.replay.calibration
    notes = [
        f"The client's hidden prompt (system prompt, tools) is ~{c.overhead_tokens:,} tokens; "
        f"the provider counts {c.token_ratio:.3f} tokens per token ctx counts "
        "(provider/ours). Both are fitted to the recorded usage and scale the replay."
    ]
    rows: list[tuple[str, Any, int | None]] = [
        ("as recorded", s.recorded, None),
        ("as replayed", s.replay, s.replay.busts),
    ]
    for chain in result.chains:
        rows.append((f"ctx live: {chain.name}", chain.replay, chain.busts))
        if any(chain.held_back):
            notes.append(f"ctx live: {chain.name}: {sum(chain.held_back)} change(s) held back.")
    if result.resume is not None:
        r = result.resume
        rows.append(("reduce+resume", r.replay, r.busts))
        notes.append(f"reduce+resume: the file reduced with {r.name} at call {r.resume_at}.")
    cells = []
    for label, bill, busts in rows:
        u = bill.usage
        delta = bill.usd / result.replayed_usd - 1 if result.replayed_usd else 0.0
        cells.append(
            (
                label,
                f"{bill.usd:,.3f}",
                f"{delta:+.1%}",
                f"{u.input_total:,}",
                f"{u.cache_read:,}",
                f"{u.cache_write:,}",
                "" if busts is None else str(busts),
            )
        )
    shown = fitting_columns(COST_COLUMNS, cells, width, COST_DROPPED)
    table = plain_table(f"{Path(result.name).name}: {len(s.replay.requests)} calls")
    table.caption = "\n".join(notes)
    table.caption_justify = "left"
    for i in shown:
        name = COST_COLUMNS[i]
        table.add_column(name, justify="left" if i == 0 else "right", no_wrap=True)
    for row in cells:
        table.add_row(*(row[i] for i in shown))
    return table
