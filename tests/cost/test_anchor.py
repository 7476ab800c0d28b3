"""The replay checked request by request, counterfactuals priced from the records, and
every cache write attributed to a cause (``ctx cost --why``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ctxcli.cost.anchor import RequestCheck, anchored_usd, check_requests, recorded_for
from ctxcli.cost.prices import TokenUsage
from ctxcli.cost.replay import replay_session
from ctxcli.cost.session import CostOptions, session_cost
from ctxcli.cost.why import attribute_writes
from support.cost_sessions import ClaudeSession, Words, text, tool_use, usage
from support.paths import need_shared


def test_each_figure_is_checked_against_its_own_record() -> None:
    recorded = TokenUsage(input=10, cache_read=600, cache_write_5m=390)
    replayed = TokenUsage(input=0, cache_read=700, cache_write_5m=250)
    check = RequestCheck("m", recorded, 1.0, replayed, 0.9)
    # Each figure's error is a share of the request's recorded input (1,000 tokens).
    assert check.input_error == pytest.approx(-0.05)
    assert check.read_error == pytest.approx(0.10)
    assert check.write_error == pytest.approx(-0.14)
    assert check.usd_error == pytest.approx(-0.1)
    assert not check.within(0.05)
    assert check.within(0.15)


def session_with_a_pause(tmp_path: Path, **diagnostics: Any) -> Path:
    """Three calls; the third after a ten-minute pause, which the record shows as a miss."""
    s = ClaudeSession()
    s.user("one two three four", at=0)
    s.response("m1", [tool_use("t1", "ls")], at=1, use=usage(write=2_000))
    s.result("t1", "a b c d e", at=2)
    s.response("m2", [text("done")], at=3, use=usage(read=2_000, write=40))
    s.user("and now", at=603)
    s.response("m3", [text("ok")], at=604, use=usage(read=0, write=2_060))
    if diagnostics:
        for record in s.records:
            if record["type"] == "assistant" and record["message"]["id"] == "m3":
                record["message"]["diagnostics"] = diagnostics
    return s.write(tmp_path / "s.jsonl")


def test_a_session_replayed_right_has_no_error_and_its_as_run_path_is_the_record(
    tmp_path: Path,
) -> None:
    path = session_with_a_pause(tmp_path)
    session = replay_session(path, counter=Words())
    anchoring = check_requests(session.recorded.requests, session.replay)
    assert len(anchoring.checks) == 3
    # The fit makes each request's input size exact; what is read and written follows.
    assert anchoring.distribution("input")["max"] == pytest.approx(0, abs=0.01)
    records = recorded_for(session.recorded.requests, session.replay)
    base = session.replay.requests
    # Priced from the records, the as-run path is the recorded bill exactly.
    assert anchored_usd(records, base, base) == pytest.approx(session.recorded_usd)


def test_a_counterfactual_is_the_record_plus_what_the_model_says_it_changes() -> None:
    from ctxcli.cost.recorded import RecordedRequest
    from ctxcli.cost.replay import ReplayedRequest

    def rep(key: str, usd: float) -> ReplayedRequest:
        return ReplayedRequest(key, None, "m", 0, TokenUsage(), usd, 0.0, False)

    rec = RecordedRequest("a", 1, None, "m", TokenUsage(), 2.0, 0.0)
    base = [rep("a", 1.8), rep("b", 0.5)]
    other = [rep("a", 1.3), rep("b", 0.4)]
    # a: recorded 2.0, the model says the change saves 0.5; b has no record: 0.4.
    assert anchored_usd([rec, None], base, other) == pytest.approx(1.5 + 0.4)
    # The model's delta never makes a request cost less than nothing.
    assert anchored_usd([rec], [rep("a", 9.0)], [rep("a", 0.0)]) == 0.0


def test_json_carries_per_request_errors_and_the_anchored_band(tmp_path: Path) -> None:
    cost = session_cost(session_with_a_pause(tmp_path), CostOptions(counter=Words(), resume=None))
    data = cost.to_dict()
    assert data["per_request"]["requests"] == 3
    assert set(data["per_request"]["errors"]) == {"input", "write", "read", "usd"}
    assert {"median", "p90", "max", "mean"} <= set(data["per_request"]["errors"]["write"])
    assert all(r["errors"] is not None for r in data["requests"])
    assert "with_ctx_anchored_usd" in data and "with_ctx_band_usd" in data
    chain = data["chains"][0]
    assert chain["band_usd"] == pytest.approx(
        abs(data["replay_error"]) * abs(chain["anchored_usd"] - data["recorded_usd"]), abs=1e-6
    )


def causes(path: Path) -> list[list[tuple[str, int, str]]]:
    cost = session_cost(path, CostOptions(counter=Words(), resume=None))
    return [[(c.cause, c.tokens, c.source) for c in r.why] for r in cost.requests()]


def test_a_miss_after_a_pause_longer_than_the_ttl_is_inferred_as_expiry(tmp_path: Path) -> None:
    why = causes(session_with_a_pause(tmp_path))
    assert why[0] == [("cold_start", 2_000, "inferred")]
    assert why[1] == [("new_content", 40, "inferred")]
    # m3 rewrites everything m2 sent (2,043 tokens) and writes its new turn.
    assert why[2] == [("ttl_expired", 2_043, "inferred"), ("new_content", 17, "inferred")]


def test_the_recorded_diagnostics_name_the_cause(tmp_path: Path) -> None:
    reason = {"type": "tools_changed", "cache_missed_input_tokens": 1_900}
    why = causes(session_with_a_pause(tmp_path, cache_miss_reason=reason))
    assert why[2] == [("tools", 1_900, "diagnostics"), ("new_content", 160, "diagnostics")]
    # No divergence reported, yet a miss: the cache expired.
    why = causes(session_with_a_pause(tmp_path, cache_miss_reason=None))
    assert why[2][0] == ("ttl_expired", 2_043, "diagnostics")


def test_a_changed_prefix_is_put_on_the_client_or_on_ctx() -> None:
    from ctxcli.cost.sequence import Block, Request, RequestSequence, block_key

    def req(keys: list[str], at: float) -> Request:
        hidden = Block(block_key("hidden"), hidden=True)
        blocks = (hidden, *(Block(block_key(k), text=k) for k in keys))
        return Request(k := "-".join(keys), at, "m", blocks, ((0, "5m"),), messages=(k,))

    seq = RequestSequence("x", "claude_code", "breakpoints",
                          (req(["a", "b"], 0), req(["a", "B", "c"], 10)))  # fmt: skip
    usages = [TokenUsage(cache_write_5m=5_000), TokenUsage(cache_read=1_000, cache_write_5m=4_500)]
    why = attribute_writes(seq, usages)
    assert why.requests[1][0].cause == "prefix_changed:client"
    assert why.requests[1][0].tokens == 4_000
    why = attribute_writes(seq, usages, changed=[False, True])
    assert why.requests[1][0].cause == "prefix_changed:ctx"
    assert why.totals()["prefix_changed:ctx"][0] == 4_000


def with_diagnostics(source: Path, dest: Path) -> tuple[Path, int]:
    """A shared session rewritten in the newer shape: each response's records carry
    ``message.diagnostics`` as Claude Code writes it from about 2.1.260 — a miss reason
    where the response read less than the one before left cached, null elsewhere."""
    out: list[str] = []
    previous = 0
    seen: dict[str, dict[str, Any] | None] = {}
    missed = 0
    for line in source.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            out.append(line)
            continue
        message = record.get("message") if isinstance(record, dict) else None
        use = message.get("usage") if isinstance(message, dict) else None
        if record.get("type") == "assistant" and isinstance(use, dict) and message.get("id"):
            mid = message["id"]
            if mid not in seen:
                read = use.get("cache_read_input_tokens", 0)
                lost = previous - read
                reason = None
                if previous and lost > 1024 and read < previous:
                    reason = {"type": "messages_changed", "cache_missed_input_tokens": lost}
                    missed += 1
                seen[mid] = reason
                previous = (
                    read + use.get("cache_creation_input_tokens", 0) + use.get("input_tokens", 0)
                )
            message["diagnostics"] = {"cache_miss_reason": seen[mid]}
        out.append(json.dumps(record))
    dest.write_text("\n".join(out) + "\n", encoding="utf-8")
    return dest, missed


@pytest.mark.real_data
def test_a_real_session_with_diagnostics_is_attributed_from_them(tmp_path: Path) -> None:
    source = need_shared() / "cc_mclaude_c76e5be5.jsonl"
    path, missed = with_diagnostics(source, tmp_path / "diagnosed.jsonl")
    assert missed >= 4
    plain = session_cost(source, CostOptions(resume=None))
    diagnosed = session_cost(path, CostOptions(resume=None))
    assert plain.why().diagnosed == 0
    why = diagnosed.why()
    assert why.diagnosed >= missed
    totals = why.totals()
    # Without diagnostics, the four turn starts that read only the client's opening are
    # inferred as the client's; with them, the provider says so.
    inferred = plain.why().totals()
    assert inferred["prefix_changed:client"][0] > 300_000
    assert totals["prefix_changed:client"][0] >= inferred["prefix_changed:client"][0]
    sources = {c.source for r in diagnosed.requests() for c in r.why}
    assert "diagnostics" in sources
    # Every write is attributed: the parts add up to what each request wrote.
    for r in diagnosed.requests():
        if r.recorded is not None:
            assert sum(c.tokens for c in r.why) == r.recorded.usage.cache_write


@pytest.mark.real_data
@pytest.mark.parametrize(
    "name", ["cc_spotter_4d5611e5.jsonl", "codex_agentcmd_2025-09-25T08-02-05.jsonl"]
)
def test_real_sessions_report_per_request_errors(name: str) -> None:
    cost = session_cost(need_shared() / name, CostOptions(resume=None))
    anchoring = cost.anchoring
    assert len(anchoring.checks) == len(cost.session.recorded.requests)
    assert anchoring.within > len(anchoring.checks) / 2
    chain = cost.chains[0]
    # The as-run path priced from the records is the recorded bill; ctx's saving is
    # priced by the model, within its band of the model-only figure's saving.
    saving = chain.anchored_usd - cost.recorded_usd
    model_saving = chain.usd - cost.replayed_usd
    assert saving < 0
    assert abs(saving - model_saving) <= abs(model_saving) * 0.2
