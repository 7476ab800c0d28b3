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
    input: Annotated[Input | None, typer.Argument(show_default=False)] = None,
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
            console.err_console().print(cost_table(result))
            if why:
                console.err_console().print(why_table(result))


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
    a = result.anchoring
    usd = a.distribution("usd")
    table = Table(
        title=f"{Path(result.name).name}: {len(s.replay.requests)} calls",
        caption=(
            f"client prompt ~{c.overhead_tokens:,} tokens, provider/ours {c.token_ratio:.3f}; "
            f"{a.within}/{len(a.checks)} requests within {a.tolerance:.0%} of their record, "
            f"price error per request median {usd['median']:.1%}, p90 {usd['p90']:.1%}; "
            "'from records': the recorded bill plus the model's price of the change, "
            "± the replay's error on that change" + _horizons(result)
        ),
    )
    for name in (
        "bill",
        "USD",
        "vs replayed",
        "from records",
        "cache read",
        "cache write",
        "busts",
    ):
        table.add_column(name, justify="left" if name == "bill" else "right")
    rows: list[tuple[str, Any, int | None, Any]] = [
        ("as recorded", s.recorded, None, None),
        ("as replayed", s.replay, s.replay.busts, None),
    ]
    for chain in result.chains:
        note = f" ({sum(chain.held_back)} held back)" if any(chain.held_back) else ""
        rows.append((f"with ctx: {chain.name}{note}", chain.replay, chain.busts, chain))
    if result.resume is not None:
        r = result.resume
        rows.append((f"reduce+resume: {r.name} at call {r.resume_at}", r.replay, r.busts, r))
    for alt in result.alternatives:
        rows.append((f"alternative: {alt.name}", alt.replay, alt.busts, alt))
    for label, bill, busts, priced in rows:
        u = bill.usage
        delta = bill.usd / result.replayed_usd - 1 if result.replayed_usd else 0.0
        anchored = ""
        if priced is not None and result.recorded_usd:
            band = priced.band / result.recorded_usd
            versus = priced.anchored_usd / result.recorded_usd - 1
            anchored = f"{priced.anchored_usd:,.3f} {versus:+.1%}±{band:.1%}"
        table.add_row(
            label,
            f"{bill.usd:,.3f}",
            f"{delta:+.1%}",
            anchored,
            f"{u.cache_read:,}",
            f"{u.cache_write:,}",
            "" if busts is None else str(busts),
        )
    return table


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
    from rich.table import Table

    why = result.why()
    table = Table(
        title="Why the cache was written",
        caption=(
            f"{why.diagnosed} requests explained by the file's diagnostics; "
            "the rest inferred from the rebuilt requests"
        ),
    )
    for name in ("cause", "tokens", "USD", "source"):
        table.add_column(name, justify="left" if name in ("cause", "source") else "right")
    sources: dict[str, set[str]] = {}
    for request in why.requests:
        for part in request:
            sources.setdefault(part.cause, set()).add(part.source)
    for cause, (tokens, usd) in why.totals().items():
        table.add_row(cause, f"{tokens:,}", f"{usd:,.3f}", " + ".join(sorted(sources[cause])))
    return table
