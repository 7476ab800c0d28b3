"""The report's cost timeline: each request's bill as the session ran and with ctx live.

One call to :func:`ctxcli.cost.session_cost` with the report's chain: the recorded bill
of each API response (as run), and the same requests as a live reducer running the
chain would have sent them (``ctx proxy``, ``Reducer``), priced by the prompt-cache
model; busts (requests whose cached prefix collapsed) are marked on both. Only a Claude
Code session or a Codex rollout records a bill: for any other transcript there is no
timeline (None).
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ctxcli.core.errors import TranscriptError
from ctxcli.cost.counterfactual import Chain
from ctxcli.cost.session import CostOptions, RequestCost, session_cost
from ctxcli.pipeline.config import Config
from ctxcli.report.charts import _alt, _spec

__all__ = ["CostRow", "CostTimeline", "cost_section", "cost_spec", "cost_timeline"]


@dataclass(frozen=True)
class CostRow:
    """One request: what it cost as run and with ctx, in US dollars.

    Attributes:
        n: the request's number (0-based, in the order sent).
        as_run_usd: the recorded bill of the response (the replayed one when the file
            records none for it).
        with_ctx_usd: the same request sent by the live reducer, priced by the model.
        bust_as_run: the cached prefix collapsed on this request as the session ran
            (by the cache model's replay).
        bust_with_ctx: it collapsed with ctx in the loop.
        held_back: the reducer's prefix policy held back a change (it did not pay yet).
        miss: why the request rewrote what was sent before, as run (``ctx cost --why``:
            the cause of its largest miss, ``:inferred`` when the file records no
            diagnostics for it), or None.
    """

    n: int
    as_run_usd: float
    with_ctx_usd: float
    bust_as_run: bool
    bust_with_ctx: bool
    held_back: bool
    miss: str | None = None

    @classmethod
    def of(cls, request: RequestCost) -> CostRow:
        """Make the page's row of one request's cost."""
        recorded = request.recorded.usd if request.recorded is not None else None
        as_run = recorded if recorded is not None else request.replayed.usd
        return cls(
            n=request.index,
            as_run_usd=as_run or 0.0,
            with_ctx_usd=request.with_ctx.usd or 0.0,
            bust_as_run=request.replayed.bust,
            bust_with_ctx=request.with_ctx.bust,
            held_back=request.held_back,
            miss=_miss(request),
        )


def _miss(request: RequestCost) -> str | None:
    misses = [c for c in request.why if c.cause != "new_content"]
    if not misses:
        return None
    top = max(misses, key=lambda c: c.tokens)
    return top.cause if top.source == "diagnostics" else f"{top.cause}:inferred"


@dataclass(frozen=True)
class CostTimeline:
    """A session's bill request by request, as run and with ``chain`` live."""

    chain: str
    recorded_usd: float
    replayed_usd: float
    with_ctx_usd: float
    rows: tuple[CostRow, ...]

    @property
    def busts_as_run(self) -> int:
        """Count the requests that paid a cache miss as run."""
        return sum(r.bust_as_run for r in self.rows)

    @property
    def busts_with_ctx(self) -> int:
        """Count the requests that paid a cache miss with ctx live."""
        return sum(r.bust_with_ctx for r in self.rows)

    def chart_rows(self) -> list[dict[str, Any]]:
        """Cumulative dollars after each request, one row per request and series."""
        out: list[dict[str, Any]] = []
        totals = {"as run": 0.0, f"with ctx ({self.chain})": 0.0}
        for row in self.rows:
            for series, usd, bust in (
                ("as run", row.as_run_usd, row.bust_as_run),
                (f"with ctx ({self.chain})", row.with_ctx_usd, row.bust_with_ctx),
            ):
                totals[series] += usd
                out.append(
                    {
                        "request": row.n + 1,
                        "series": series,
                        "usd": round(usd, 6),
                        "total_usd": round(totals[series], 6),
                        "bust": bust,
                        "miss": row.miss if series == "as run" else None,
                    }
                )
        return out


def cost_timeline(source: str | Path, config: Config, chain: str) -> CostTimeline | None:
    """Build the cost timeline of a session file with ``config``'s chain live.

    The cost timeline of the session file ``source`` with ``config``'s chain live
    (named ``chain`` on the page); None when the file records no bill (not a Claude Code
    session or Codex rollout).
    """
    try:
        cost = session_cost(source, CostOptions(chains=(Chain(chain, config),), resume=None))
    except TranscriptError:
        return None
    rows = tuple(CostRow.of(r) for r in cost.requests())
    if not rows:
        return None
    return CostTimeline(chain, cost.recorded_usd, cost.replayed_usd, cost.with_ctx_usd, rows)


def cost_spec(timeline: CostTimeline) -> dict[str, Any]:
    """Dollars so far after each request, as run and with ctx; busts as red points."""
    alt = _alt()
    base = alt.Chart(alt.Data(values=timeline.chart_rows()))
    x = alt.X("request:Q", title="request", scale=alt.Scale(nice=False))
    y = alt.Y("total_usd:Q", title="US dollars so far")
    colour = alt.Color("series:N", title=None, scale=alt.Scale(range=["#7a8290", "#2f6fb3"]))
    tooltip = [
        "request:Q",
        "series:N",
        alt.Tooltip("usd:Q", format="$.4f", title="this request"),
        alt.Tooltip("total_usd:Q", format="$.2f", title="so far"),
        "bust:N",
    ]
    lines = base.mark_line(interpolate="step-after").encode(x=x, y=y, color=colour, tooltip=tooltip)
    busts = (
        base.transform_filter("datum.bust")
        .mark_point(shape="triangle-down", size=70, filled=True, color="#c0392b")
        .encode(x=x, y=y, tooltip=tooltip)
    )
    # The band under the lines: why each request rewrote the cache as run.
    why = (
        base.transform_filter("datum.miss != null")
        .mark_tick(thickness=3, size=14)
        .encode(
            x=x,
            y=alt.value(248),
            color=alt.Color("miss:N", title="cache rewritten: why"),
            tooltip=["request:Q", alt.Tooltip("miss:N", title="why"), "usd:Q"],
        )
    )
    chart = alt.layer(lines, busts, why).resolve_scale(color="independent")
    return _spec(chart.properties(width="container", height=240))


def cost_section(timeline: CostTimeline | None) -> str:
    """The page's section for the timeline (empty without one)."""
    if timeline is None:
        return ""
    t = timeline
    saved = abs(t.replayed_usd - t.with_ctx_usd)
    chain = html.escape(t.chain)
    facts = (
        f'<p class="cost" data-recorded-usd="{t.recorded_usd:.6f}" '
        f'data-with-ctx-usd="{t.with_ctx_usd:.6f}" data-requests="{len(t.rows)}">'
        f"Recorded <b>${t.recorded_usd:,.2f}</b>, replayed ${t.replayed_usd:,.2f} "
        f"({t.busts_as_run} busts); with ctx (<code>{chain}</code>, live) "
        f"<b>${t.with_ctx_usd:,.2f}</b> ({t.busts_with_ctx} busts), ${saved:,.2f} "
        f"{'less' if t.with_ctx_usd <= t.replayed_usd else 'more'} than the replay.</p>"
    )
    lead = (
        "Each request's bill added up, as the session ran (the usage the file records) and "
        "as a live reducer running this page's chain would have sent it (<code>ctx proxy"
        "</code>, <code>Reducer</code>), priced by <code>ctx cost</code>'s prompt-cache "
        "model. Red triangles: busts, requests whose cached prefix collapsed. The band "
        "below: why a request rewrote what was sent before (from the file's cache "
        "diagnostics, or inferred)."
    )
    return (
        '<section id="cost"><h2>What each request cost, as run and with ctx</h2>'
        f'<p class="lead">{lead}</p>{facts}<div class="chart" id="chart-cost"></div></section>'
    )
