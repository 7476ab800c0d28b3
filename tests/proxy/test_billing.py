"""ctx proxy on the bill's instrument: the agent's prefix policy, the breakpoint it adds, the
dollars ``/stats`` reports.

Every test drives the real proxy over HTTP (uvicorn, httpx) in front of the loopback fake
Messages API, which refuses what the real API refuses (more than four breakpoints among
them). The proxy's clock is the test's, so the prompt cache's TTLs are deterministic.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from test_proxy import CC, SYSTEM, Agent

from ctxcli.agent.reducer import Reducer, ReducerResult
from ctxcli.cost.blocks import body_request
from ctxcli.cost.cache import CachePolicy, PromptCache
from ctxcli.cost.prices import load_price_table
from ctxcli.cost.replay import Sizer, price_request
from ctxcli.proxy.engine import ProxyCore, ProxySettings, prefix_policy
from ctxcli.proxy.server import ProxyServer
from ctxcli.proxy.shapes import MAX_BREAKPOINTS, strip_cache_control
from ctxcli.services.tokens.engines import load_engine
from support.fake_api import FakeServer, MessagesAPI

HEADERS = {"x-api-key": "sk-test", "anthropic-version": "2023-06-01"}
STEP_SECONDS = 20.0
"""Seconds between two requests of a run: well inside the 5-minute cache."""


def count_breakpoints(body: dict[str, Any]) -> int:
    """``cache_control`` blocks anywhere in a request, the way the API counts them."""
    found = sum(1 for t in body.get("tools") or [] if "cache_control" in t)
    system = body.get("system")
    found += sum(1 for s in system if "cache_control" in s) if isinstance(system, list) else 0
    for msg in body["messages"]:
        content = msg["content"] if isinstance(msg["content"], list) else []
        found += sum(1 for part in content if "cache_control" in part)
    return found


@dataclass
class Run:
    """One conversation through the proxy, next to a reducer run by hand on the same calls."""

    core: ProxyCore
    upstream: FakeServer
    server: ProxyServer
    reference: Reducer
    clock: list[float] = field(default_factory=lambda: [1_000.0])
    sent: list[dict[str, Any]] = field(default_factory=list)
    bodies: list[dict[str, Any]] = field(default_factory=list)
    expected: list[ReducerResult] = field(default_factory=list)

    def post(self, body: dict[str, Any]) -> httpx.Response:
        self.clock[0] += STEP_SECONDS
        reply = httpx.post(f"{self.server.url}/v1/messages", json=body, headers=HEADERS, timeout=60)
        assert reply.status_code == 200, reply.text
        self.bodies.append(body)
        self.sent.append(self.upstream.requests[-1].body)
        plain = strip_cache_control(body["messages"])
        result = self.reference.reduce(plain, system=body["system"], at=self.clock[0])
        self.expected.append(result)
        return reply


@pytest.fixture
def run(tmp_path: Path) -> Iterator[Run]:
    clock = [1_000.0]
    with FakeServer(MessagesAPI(), lifetime_s=300) as upstream:
        settings = ProxySettings(upstream=upstream.base_url, offload_dir=str(tmp_path / "p" / "o"))
        core = ProxyCore(settings, clock=lambda: clock[0])
        # Same chain, same policy, an offload directory whose path has the same length.
        reference = Reducer(
            preset=settings.preset,
            offload_dir=tmp_path / "r" / "o",
            api="anthropic",
            read_tool="Read",
            prefix_policy=prefix_policy("anthropic", settings.clear_at_least),
        )
        with ProxyServer(core) as server:
            yield Run(core, upstream, server, reference, clock)


def play(run: Run, agent: Agent, sizes: list[int]) -> None:
    """One request per tool round; round ``i`` reads a file of ``sizes[i]`` lines."""
    for lines in sizes:
        run.post(agent.body())
        agent.lines = lines
        agent.step()
    run.post(agent.body())


# Small results first (a cut saves little, the bust of the rewrite costs more), then large
# ones (the cut pays at once).
SIZES = [6] * 10 + [400] * 4


def test_the_proxy_holds_back_and_makes_changes_as_the_prefix_policy_says(run: Run) -> None:
    play(run, Agent(), SIZES)
    records = run.core.records
    assert [r.held_back for r in records] == [e.held_back for e in run.expected]
    for sent, expected in zip(run.sent, run.expected, strict=True):
        assert strip_cache_control(sent["messages"]) == _same_dir(expected.messages)
    # Both happen: a change worth less than the bust it causes waits, one that pays is made.
    assert any(r.held_back for r in records), "no change was held back"
    assert any(r.accepted_cut for r in records), "no change to the sent prefix was made"
    stats = run.core.stats()
    assert stats["held_back"] == sum(r.held_back for r in records) > 0


def _same_dir(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The reference reducer's messages with its offload directory named as the proxy's."""
    text = json.dumps(messages).replace("/r/o/", "/p/o/")
    out: list[dict[str, Any]] = json.loads(text)
    return out


def test_the_proxy_marks_the_reducers_breakpoint_and_never_a_fifth(run: Run) -> None:
    play(run, Agent(), [300] * 6)
    marked = 0
    for sent, expected, record in zip(run.sent, run.expected, run.core.records, strict=True):
        assert count_breakpoints(sent) <= MAX_BREAKPOINTS
        mark = expected.cache_breakpoint
        if mark is None:
            continue
        content = sent["messages"][mark]["content"]
        assert any("cache_control" in part for part in content), f"no breakpoint on {mark}"
        marked += record.marked
    assert marked >= 4
    # A client that already uses all four: the proxy adds none, the API accepts the request.
    tools = [{"name": "Read", "input_schema": {}}]
    system = [*SYSTEM, {"type": "text", "text": "More rules.", "cache_control": CC}]
    agent = Agent(tools=tools)
    for _ in range(5):
        agent.step()
    body = {**agent.body(), "system": system}
    body["messages"][1]["content"][-1]["cache_control"] = CC
    assert count_breakpoints(body) == MAX_BREAKPOINTS
    run.post(body)
    assert count_breakpoints(run.sent[-1]) == MAX_BREAKPOINTS
    assert run.core.records[-1].marked is False


def test_the_fake_api_refuses_a_fifth_breakpoint_like_the_real_one(run: Run) -> None:
    agent = Agent()
    for _ in range(4):
        agent.step()
    body = agent.body()
    for msg in body["messages"][:3]:
        msg["content"][-1]["cache_control"] = CC
    assert count_breakpoints(body) == 5
    reply = httpx.post(
        f"{run.upstream.base_url}/v1/messages", json=body, headers=HEADERS, timeout=30
    )
    assert reply.status_code == 400
    assert "A maximum of 4 blocks with cache_control may be provided" in reply.text


def test_stats_dollars_are_the_prompt_cache_pricing_of_the_same_requests(run: Run) -> None:
    play(run, Agent(), [300] * 8)
    _, count = load_engine("cl100k")
    table = load_price_table()
    bills = {}
    for name, bodies in (("with_proxy", run.sent), ("without_proxy", run.bodies)):
        cache = PromptCache(CachePolicy.anthropic())
        usd = 0.0
        at = 1_000.0
        for body in bodies:
            at += STEP_SECONDS
            priced = price_request(
                cache, body_request(body, "anthropic", at=at), Sizer(count), table
            )
            assert priced.usd is not None
            usd += priced.usd
        bills[name] = usd
    stats = httpx.get(f"{run.server.url}/stats", timeout=30).json()["by_api"]["anthropic"]
    assert stats["with_proxy"]["usd"] == pytest.approx(bills["with_proxy"], abs=1e-6)
    assert stats["without_proxy"]["usd"] == pytest.approx(bills["without_proxy"], abs=1e-6)
    assert stats["usd_saved"] == pytest.approx(
        bills["without_proxy"] - bills["with_proxy"], abs=2e-6
    )
    assert bills["with_proxy"] < bills["without_proxy"]
