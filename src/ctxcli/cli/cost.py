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


WhyOpt = Annotated[
    bool,
    typer.Option(
        "--why", help="Attribute every cache write to its cause (expiry, prefix change, ...)."
    ),
]


CompareOpt = Annotated[
    bool,
    typer.Option(
        "--compare",
        help="Price the peers' strategies beside ctx: Anthropic's context editing, "
        "LangChain's ClearToolUsesEdit, observation masking, the client's compaction.",
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
    why: WhyOpt = False,
    compare: CompareOpt = False,
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
        ctx cost session.jsonl --why --compare
        ctx cost --last --preset eino --preset live --json
    """
    with _errors():
        picked = session_input([input] if input else None, session, last, project)
        if not picked:
            raise CtxError("name a session file, or a session with --session/--last.")
        from ctxcli.cost.alternatives import ALTERNATIVES
        from ctxcli.cost.session import CostOptions, session_cost

        options = CostOptions(
            chains=_chains(preset or [], config), alternatives=ALTERNATIVES if compare else ()
        )
        result = session_cost(picked[0], options)
        if json:
            console.write_stdout(orjson.dumps(result.to_dict()) + b"\n")
        else:
            from ctxcli.cli.render import print_table

            print_table(cost_table(result, console.width()))
            if why:
                print_table(why_table(result))


def _chains(presets: list[str], config: Path | None) -> tuple[Any, ...]:
    """The chains asked for: the config file's, then each preset's (none: the default)."""
    from ctxcli.cost.counterfactual import Chain
    from ctxcli.pipeline.config import load_config

    chains = [Chain(str(config), load_config(config))] if config is not None else []
    return (*chains, *(Chain.preset(name) for name in presets))


COST_COLUMNS = (
    "bill",
    "USD",
    "vs replay",
    "from records",
    "input",
    "cache read",
    "cache write",
    "busts",
)
COST_DROPPED = ("busts", "cache write", "cache read", "input")
"""The columns left out first when the table does not fit the terminal."""


def cost_table(result: Any, width: int | None = None) -> Any:
    """The Rich table of a :class:`~ctxcli.cost.session.SessionCost` (a pure function).

    Fitted to ``width`` (None: as wide as it is): short row labels, the details under
    the table, the columns of :data:`COST_DROPPED` left out first; a figure is never cut.
    """
    from ctxcli.cli.render import fitting_columns, plain_table

    s = result.session
    notes = _cost_notes(result)
    rows: list[tuple[str, Any, int | None, Any]] = [
        ("as recorded", s.recorded, None, None),
        ("as replayed", s.replay, s.replay.busts, None),
    ]
    for chain in result.chains:
        rows.append((f"ctx live: {chain.name}", chain.replay, chain.busts, chain))
        if any(chain.held_back):
            notes.append(f"ctx live: {chain.name}: {sum(chain.held_back)} change(s) held back.")
    if result.resume is not None:
        r = result.resume
        rows.append(("reduce+resume", r.replay, r.busts, r))
        notes.append(f"reduce+resume: the file reduced with {r.name} at call {r.resume_at}.")
    for alt in result.alternatives:
        rows.append((f"alt: {alt.name}", alt.replay, alt.busts, alt))
    cells = []
    for label, bill, busts, priced in rows:
        u = bill.usage
        delta = bill.usd / result.replayed_usd - 1 if result.replayed_usd else 0.0
        anchored = ""
        if priced is not None and result.recorded_usd:
            band = priced.band / result.recorded_usd
            versus = priced.anchored_usd / result.recorded_usd - 1
            anchored = f"{priced.anchored_usd:,.3f} {versus:+.1%}±{band:.1%}"
        cells.append(
            (
                label,
                f"{bill.usd:,.3f}",
                f"{delta:+.1%}",
                anchored,
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


def _cost_notes(result: Any) -> list[str]:
    """Return the lines under the cost table: the calibration, the per-request check, the band."""
    c = result.session.replay.calibration
    a = result.anchoring
    usd = a.distribution("usd")
    return [
        f"The client's hidden prompt (system prompt, tools) is ~{c.overhead_tokens:,} tokens; "
        f"the provider counts {c.token_ratio:.3f} tokens per token ctx counts "
        "(provider/ours). Both are fitted to the recorded usage and scale the replay.",
        f"{a.within}/{len(a.checks)} requests within {a.tolerance:.0%} of their record; "
        f"price error per request median {usd['median']:.1%}, p90 {usd['p90']:.1%}.",
        "from records: the recorded bill plus the model's price of what the row changes, "
        "± the replay's error on that change" + _horizons(result) + ".",
    ]


def _horizons(result: Any) -> str:
    """The payback horizons of the first chain's changes to sent prefixes, as a sentence."""
    from ctxcli.cost.horizon import horizon_summary

    h = horizon_summary(result.chains[0].horizons)
    if not h["changes"]:
        return ""
    return (
        f"; {h['changes']} prefix changes pay back in {h['median_calls']} calls (median), "
        f"{h['p90_calls']} (p90); {h['paid_back']} paid within the session, {h['never']} never"
    )


def why_table(result: Any) -> Any:
    """Cache writes by cause (a pure function of a :class:`~ctxcli.cost.session.SessionCost`)."""
    from ctxcli.cli.render import plain_table

    why = result.why()
    table = plain_table("Why the cache was written")
    table.caption = f"{why.diagnosed} explained by the file's diagnostics, the rest inferred"
    table.caption_justify = "left"
    for name in ("cause", "tokens", "USD", "source"):
        table.add_column(
            name, justify="left" if name in ("cause", "source") else "right", no_wrap=True
        )
    sources: dict[str, set[str]] = {}
    for request in why.requests:
        for part in request:
            sources.setdefault(part.cause, set()).add(part.source)
    for cause, (tokens, usd) in why.totals().items():
        table.add_row(cause, f"{tokens:,}", f"{usd:,.3f}", " + ".join(sorted(sources[cause])))
    return table
