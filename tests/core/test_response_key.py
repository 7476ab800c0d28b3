"""Each API response once, by one key: ``core.usage.response_key``.

``ctx cost`` (``cost._calls``) and the spent column of ``ctx sessions`` (which prices what
``cost._calls`` counts) ask one function which response an assistant record belongs to. A
record without ``requestId`` belongs to the response its ``message.id`` names; a record
without a message id is a response of its own. Usage trackers (ccusage) dedupe only records
that carry both ids and count the others every time: ``core.usage.tracker_key``, that key
without the ``requestId`` a record lacks, is what the usage stubs a reduction leaves and
``update_usage`` follow, so the trackers' reports stay what they were.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import astuple
from functools import reduce
from operator import add
from pathlib import Path
from typing import Any

import pytest

from ctxcli.api import reduce_file, restore_file
from ctxcli.core.usage import is_usage_stub, response_key, tracker_key
from ctxcli.cost._calls import SYNTHETIC_MODEL
from ctxcli.cost.prices import TokenUsage, load_price_table
from ctxcli.cost.recorded import recorded_cost
from ctxcli.formats.clients import read_client_file
from ctxcli.pipeline.config import build_config
from ctxcli.sessions.listing import recorded_usage, recorded_usd
from support.cost_sessions import ClaudeSession, text, usage
from support.paths import FIXTURES, need_shared


def api_responses(records: Iterable[dict[str, Any]]) -> list[tuple[str, str] | None]:
    """The response of each assistant record with usage that is an API response, in order."""
    keys: list[tuple[str, str] | None] = []
    for record in records:
        message = record.get("message")
        if record.get("type") != "assistant" or not isinstance(message, dict):
            continue
        if "usage" not in message or record.get("isApiErrorMessage"):
            continue
        if message.get("model") != SYNTHETIC_MODEL:
            keys.append(response_key(record))
    return keys


def distinct(keys: list[tuple[str, str] | None]) -> int:
    """Responses among ``keys``: each key once, each record without a key on its own."""
    return len({k for k in keys if k is not None}) + keys.count(None)


def without_request_ids(lines: Iterable[str]) -> list[str]:
    """The file's lines as an older client wrote them: no ``requestId`` anywhere."""
    out = []
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            out.append(line)  # a malformed line stays what it is
            continue
        if isinstance(record, dict):
            record.pop("requestId", None)
        out.append(json.dumps(record))
    return out


def test_one_key_with_and_without_request_ids(tmp_path: Path) -> None:
    s = ClaudeSession()
    s.user("Start.", 0)
    s.response("msg_a", [text("one"), text("two")], 1, usage(inp=10, write=2000, out=7))
    s.response("msg_b", [text("three"), text("four")], 3, usage(inp=20, read=2000, out=9))
    s.response("msg_c", [text("five")], 5, usage(inp=30, read=2000, out=11))
    for record in s.records:
        if record.get("message", {}).get("id") == "msg_b":
            del record["requestId"]  # an older client's response, over two records
        if record.get("message", {}).get("id") == "msg_c":
            del record["message"]["id"]
            del record["requestId"]
    keys = api_responses(s.records)
    assert keys == [("msg_a", "req_msg_a")] * 2 + [("msg_b", "")] * 2 + [None]
    bill = recorded_cost(s.write(tmp_path / "s.jsonl"))
    assert len(bill.requests) == distinct(keys) == 3
    assert [r.usage.output for r in bill.requests] == [7, 9, 11]
    assert bill.usage == TokenUsage(input=60, cache_read=4000, cache_write_5m=2000, output=27)


@pytest.mark.real_data
def test_ctx_sessions_and_ctx_cost_count_a_real_session_the_same(tmp_path: Path) -> None:
    original = need_shared() / "cc_mclaude_c76e5be5.jsonl"
    older = tmp_path / "older.jsonl"
    older.write_text("\n".join(without_request_ids(original.read_text().splitlines())) + "\n")
    table = load_price_table()
    figures = []
    for path in (original, older):
        records = []
        for line in path.read_text().splitlines():
            try:
                records.append(json.loads(line))
            except ValueError:
                continue  # line 859: owner redaction broke its JSON
        bill = recorded_cost(path, prices=table)  # what ctx cost reports as recorded
        spent = recorded_usage(
            read_client_file(path.read_bytes(), str(path))
        )  # what ctx sessions caches and prices
        spent_usage = reduce(add, (TokenUsage(*tokens) for tokens in spent.values()))
        assert len(bill.requests) == distinct(api_responses(records))
        assert spent_usage == bill.usage
        assert recorded_usd(spent, table) == pytest.approx(bill.usd)
        figures.append((len(bill.requests), astuple(bill.usage), round(bill.usd, 6)))
    # The requestIds add nothing: the same responses, tokens and dollars without them.
    assert figures[0] == figures[1]
    assert figures[0][0] == 320


def test_a_reduction_keeps_what_trackers_count_and_ctx_cost_the_same_responses(
    tmp_path: Path,
) -> None:
    """Stubs follow the trackers' key; the bill of the result has the same responses."""
    session = FIXTURES / "claude_code_resume" / "session.jsonl"
    older = tmp_path / "older.jsonl"
    older.write_text("\n".join(without_request_ids(session.read_text().splitlines())) + "\n")
    config = build_config({"stages": [{"use": "drop_before_compaction"}]}, "test")
    stubs = []
    for path in (session, older):
        out = tmp_path / f"{path.stem}.out.jsonl"
        _, data = reduce_file(path, out, config=config)
        assert restore_file(out) == path.read_bytes()
        records = [json.loads(line) for line in data.splitlines()]
        stubs.append([r["message"]["id"] for r in records if is_usage_stub(r)])
        assert len(recorded_cost(out).requests) == len(recorded_cost(path).requests) == 7
    responses = ["msg_01", "msg_02", "msg_03", "msg_04", "msg_05"]
    assert stubs[0] == responses
    # Without requestIds a tracker counts every record: each keeps its usage.
    assert stubs[1] == ["msg_01", "msg_01", "msg_02", "msg_02", "msg_03", "msg_04", "msg_05"]
    record = json.loads(without_request_ids([session.read_text().splitlines()[2]])[0])
    assert response_key(record) == ("msg_01", "") and tracker_key(record) is None
