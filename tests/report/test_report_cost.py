"""ctx report's cost timeline: each request's bill as run and with the report's chain live.

The numbers are ``ctx cost``'s (one :func:`ctxcli.cost.session_cost` call): the page must
add up to them. A transcript that records no bill gets no section.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from test_report import session

from ctxcli.cost.counterfactual import Chain
from ctxcli.cost.session import CostOptions, session_cost
from ctxcli.pipeline.config import load_config
from ctxcli.report import cost_timeline, write_html
from support.cli import invoke
from support.paths import SHARED

SUBAGENT = SHARED / "cc_spotter_4d5611e5_subagent_a2898e3.jsonl"
needs_subagent = pytest.mark.real_data  # the corpus guard: skip in a clone, fail in CI


def _payload(page: str) -> dict[str, object]:
    found = re.search(r'<script type="application/json" id="ctx-data">(.*?)</script>', page, re.S)
    assert found is not None
    data: dict[str, object] = json.loads(found.group(1))
    return data


@needs_subagent
def test_the_timeline_is_ctx_costs_bill_request_by_request() -> None:
    config = load_config(preset="live")
    timeline = cost_timeline(SUBAGENT, config, "live")
    assert timeline is not None
    cost = session_cost(SUBAGENT, CostOptions(chains=(Chain("live", config),), resume=None))
    requests = cost.requests()
    assert len(timeline.rows) == len(requests) > 0
    assert sum(r.with_ctx_usd for r in timeline.rows) == pytest.approx(cost.with_ctx_usd)
    assert timeline.with_ctx_usd == pytest.approx(cost.with_ctx_usd)
    assert timeline.recorded_usd == pytest.approx(cost.recorded_usd)
    # Every response of this session is recorded: as run is the recorded bill.
    assert all(r.recorded is not None for r in requests)
    assert sum(r.as_run_usd for r in timeline.rows) == pytest.approx(cost.recorded_usd)
    assert timeline.busts_with_ctx == cost.chains[0].busts
    assert timeline.busts_as_run == cost.session.replay.busts
    # The chart's cumulative series end at the totals.
    last = {row["series"]: row["total_usd"] for row in timeline.chart_rows()}
    assert last["as run"] == pytest.approx(cost.recorded_usd, abs=1e-5)
    assert last["with ctx (live)"] == pytest.approx(cost.with_ctx_usd, abs=1e-5)


@needs_subagent
def test_the_report_page_embeds_the_cost_section(tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    invoke(["report", str(SUBAGENT), "-o", str(out), "--preset", "live"])
    page = out.read_text(encoding="utf-8")
    assert '<section id="cost">' in page and 'id="chart-cost"' in page
    spec = _payload(page)["specs"]
    assert isinstance(spec, dict) and "cost" in spec
    values = spec["cost"]["data"]["values"] if "data" in spec["cost"] else None
    values = values or next(iter(spec["cost"]["datasets"].values()))
    assert {v["series"] for v in values} == {"as run", "with ctx (live)"}
    recorded = float(re.search(r'data-recorded-usd="([0-9.]+)"', page).group(1))  # type: ignore[union-attr]
    assert recorded == pytest.approx(session_cost(SUBAGENT).recorded_usd, abs=1e-6)
    # --no-cost leaves it out.
    invoke(["report", str(SUBAGENT), "-o", str(out), "--no-cost"])
    assert 'id="chart-cost"' not in out.read_text(encoding="utf-8")


def test_a_transcript_without_a_bill_gets_no_cost_section(tmp_path: Path) -> None:
    src = tmp_path / "chat.jsonl"
    src.write_bytes(session())
    assert cost_timeline(src, load_config(), "defaults") is None
    _, page = write_html(str(src), tmp_path / "report.html")
    assert b'id="chart-cost"' not in page and b'<section id="cost">' not in page


@pytest.mark.real_data
def test_the_band_says_why_each_rewrite_happened() -> None:
    path = SHARED / "cc_mclaude_c76e5be5.jsonl"
    timeline = cost_timeline(path, load_config(preset="live"), "live")
    assert timeline is not None
    misses = {r.n: r.miss for r in timeline.rows if r.miss is not None}
    # The four turn starts that re-read only the client's opening, and the long pause.
    assert sum(m == "prefix_changed:client:inferred" for m in misses.values()) >= 4
    assert "ttl_expired:inferred" in misses.values()
    rows = [r for r in timeline.chart_rows() if r["miss"] is not None]
    assert {r["series"] for r in rows} == {"as run"}
