"""One price for one request: the proxy's ``/stats`` and ``ctx cost`` agree, images included.

The requests a Claude Code session records (rebuilt by :func:`ctxcli.cost.replay.
build_requests`, as ``ctx cost`` rebuilds them) are sent through the real proxy over HTTP,
in front of the loopback fake Messages API, with the client's system prompt and
breakpoints, at the recorded times (the proxy's clock is the test's); the proxy changes
nothing (a reducer that returns the messages it is given). ``/stats`` then reports their
input bill. The same requests priced by :func:`ctxcli.cost.replay.price_requests` (what
:func:`ctxcli.cost.session.session_cost` prices with), with the system prompt as the
client's hidden prompt, must give the same dollars.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest

from ctxcli.core.model import IMAGE_TOKENS
from ctxcli.cost._claude_code import message_blocks
from ctxcli.cost.blocks import body_request
from ctxcli.cost.prices import load_price_table
from ctxcli.cost.replay import Calibration, Sizer, build_requests, price_requests
from ctxcli.cost.sequence import Block, Request, RequestSequence
from ctxcli.proxy.engine import ProxyCore, ProxySettings
from ctxcli.proxy.server import ProxyServer
from ctxcli.proxy.shapes import Api
from ctxcli.services.tokens.by_name import get_counter
from support.cost_sessions import ClaudeSession, stamp, text, tool_use, usage
from support.fake_api import FakeServer, MessagesAPI
from support.paths import need_shared

HEADERS = {"x-api-key": "sk-test", "anthropic-version": "2023-06-01"}
MODEL = "claude-sonnet-4-5-20250929"
SYSTEM = "You are Claude Code, a coding agent. Follow the rules below.\n" + "Rule: be exact. " * 400
"""The client's system prompt: the hidden block of a rebuilt request, sent for real here."""


class _Unchanged:
    """A reducer that sends every history as the client wrote it."""

    offloaded: tuple[str, ...] = ()
    reused = 0
    changed_prefix_at = None
    held_back = False
    cache_breakpoint = None

    def reduce(self, messages: Any, *, system: Any = None, at: float | None = None) -> Any:
        self.messages = list(messages)
        return self


def _control(ttl: str) -> dict[str, str]:
    return {"type": "ephemeral", "ttl": "1h"} if ttl == "1h" else {"type": "ephemeral"}


def request_body(request: Request) -> dict[str, Any]:
    """The Messages API body of a rebuilt request: its blocks and breakpoints, in JSON.

    Block 0 is the client's hidden prompt (here: :data:`SYSTEM`), then one block per content
    item of each message; a string content is sent as the one text block it stands for.
    """
    messages = copy.deepcopy(list(request.messages))
    places: list[dict[str, Any]] = []
    for message in messages:
        content = message["content"]
        if isinstance(content, str):
            content = message["content"] = [{"type": "text", "text": content}] if content else []
        places.extend(item for item in content if isinstance(item, dict))
    system: dict[str, Any] = {"type": "text", "text": SYSTEM}
    for index, ttl in request.breakpoints:
        target = system if index == 0 else places[index - 1]
        target["cache_control"] = _control(ttl)
    return {"model": request.model, "max_tokens": 16, "system": [system], "messages": messages}


def stats_dollars(
    sequence: RequestSequence, tmp_path: Path, *, refused_ok: bool = False
) -> dict[str, float]:
    """``/stats``'s input bill of ``sequence`` sent through the real proxy, by side.

    The proxy bills a request before it forwards it: ``refused_ok`` lets the fake API refuse
    a rebuilt request the real one would refuse too (a file's malformed line lost a result).
    """
    now = [0.0]
    with FakeServer(MessagesAPI(), lifetime_s=600) as upstream:
        settings = ProxySettings(upstream=upstream.base_url, offload_dir=str(tmp_path / "proxy"))
        core = ProxyCore(settings, clock=lambda: now[0], make_reducer=lambda api: _Unchanged())
        with ProxyServer(core) as server, httpx.Client(base_url=server.url, timeout=120) as http:
            for request in sequence.requests:
                assert request.at is not None
                now[0] = request.at
                reply = http.post("/v1/messages", json=request_body(request), headers=HEADERS)
                assert reply.status_code == 200 or refused_ok, reply.text
            bills = http.get("/stats").json()["by_api"]["anthropic"]
    assert bills["without_proxy"]["requests"] == len(sequence.requests)
    return {side: bills[side]["usd"] for side in ("with_proxy", "without_proxy")}


def cost_dollars(sequence: RequestSequence) -> float:
    """The input bill of ``sequence`` as ``ctx cost`` prices it, the system prompt hidden."""
    counter = get_counter("cl100k")
    calibration = Calibration(overhead_tokens=counter.count(SYSTEM), token_ratio=1.0)
    inputs = replace(
        sequence, requests=tuple(replace(r, output_tokens=0) for r in sequence.requests)
    )
    replay = price_requests(
        inputs, counter=counter, calibration=calibration, prices=load_price_table()
    )
    return replay.usd


def assert_one_price(sequence: RequestSequence, tmp_path: Path) -> float:
    expected = cost_dollars(sequence)
    stats = stats_dollars(sequence, tmp_path)
    assert stats["without_proxy"] == pytest.approx(expected, rel=1e-6, abs=2e-6)
    assert stats["with_proxy"] == pytest.approx(expected, rel=1e-6, abs=2e-6)
    return expected


def image(kilobytes: int = 30) -> dict[str, Any]:
    """A base64 image block of about ``kilobytes`` of data (deterministic bytes)."""
    raw = b"".join(hashlib.sha256(str(i).encode()).digest() for i in range(kilobytes * 32))
    source = {"type": "base64", "media_type": "image/png", "data": base64.b64encode(raw).decode()}
    return {"type": "image", "source": source}


def session_with_an_image(path: Path) -> Path:
    """A Claude Code session: a screenshot with the first prompt, then tool rounds on files,
    a pause that lets the cache expire, and more rounds."""
    s = ClaudeSession()
    first = {
        "type": "user",
        "message": {"role": "user", "content": [text("What is wrong here?"), image()]},
    }
    s._add({**first, "timestamp": stamp(0)})
    at = 5.0
    for n in range(8):
        tid = f"toolu_{n}"
        s.response(
            f"msg_{n}",
            [text(f"Reading part {n}."), tool_use(tid, f"cat part{n}.py")],
            at,
            usage(write=2000),
        )
        lines = "\n".join(
            f"def part_{n}_{k}(x):\n    return x * {k}  # hello world" for k in range(120)
        )
        at += 360.0 if n == 4 else 20.0
        s.result(tid, lines, at)
        at += 5.0
    s.response("msg_end", [text("Found it.")], at, usage(read=2000))
    return s.write(path)


def test_stats_and_ctx_cost_price_a_session_with_an_image_the_same(tmp_path: Path) -> None:
    sequence = build_requests(session_with_an_image(tmp_path / "s.jsonl"))
    assert len(sequence.requests) == 9
    assert any(
        isinstance(item, dict) and item.get("type") == "image"
        for item in _items(sequence.requests[0].messages)
    )
    assert assert_one_price(sequence, tmp_path) > 0


def _items(messages: Sequence[Any]) -> list[Any]:
    return [item for m in messages if isinstance(m["content"], list) for item in m["content"]]


@pytest.mark.real_data
def test_stats_and_ctx_cost_price_a_real_claude_code_session_the_same(tmp_path: Path) -> None:
    sequence = build_requests(need_shared() / "cc_spotter_4d5611e5_subagent_a2898e3.jsonl")
    assert len(sequence.requests) == 12
    assert assert_one_price(sequence, tmp_path) > 0


# -- the block rule, request shape by request shape ------------------------------------------


def _core(tmp_path: Path) -> ProxyCore:
    settings = ProxySettings(offload_dir=str(tmp_path / "proxy"))
    return ProxyCore(settings, clock=lambda: 0.0, make_reducer=lambda api: _Unchanged())


def _tokens_in(core: ProxyCore, api: Api, body: dict[str, Any]) -> int:
    record = core.prepare(api, json.dumps(body).encode()).record
    assert record is not None
    return record.tokens_in


def test_a_text_block_is_its_text_and_an_image_its_fixed_size_on_both_meters(
    tmp_path: Path,
) -> None:
    count = get_counter("cl100k").count
    hello = {"type": "text", "text": "hello world"}
    content = [hello, image()]
    body = {"model": MODEL, "max_tokens": 8, "messages": [{"role": "user", "content": content}]}
    # What ctx cost counts for these blocks, as a session file holds them...
    hidden = Block(b"client prompt", hidden=True)
    replayed, _ = message_blocks(hidden, body["messages"], 1, "5m")
    sizer = Sizer(count)
    assert [sizer(b) for b in replayed[1:]] == [count("hello world"), IMAGE_TOKENS] == [2, 1600]
    # ...is what the proxy counts for them in a request body: same keys, same sizes.
    request = body_request(body, "anthropic")
    assert [b.key for b in request.blocks] == [b.key for b in replayed[1:]]
    assert _tokens_in(_core(tmp_path), "anthropic", body) == 2 + IMAGE_TOKENS
    # A breakpoint does not change a block's identity (it moves from request to request).
    marked = copy.deepcopy(body)
    marked["messages"][0]["content"][0]["cache_control"] = {"type": "ephemeral"}
    assert body_request(marked, "anthropic").blocks == request.blocks
    assert body_request(marked, "anthropic").breakpoints == ((0, "5m"),)


def test_images_in_a_tool_result_and_in_openai_messages_count_as_images(tmp_path: Path) -> None:
    count = get_counter("cl100k").count
    core = _core(tmp_path)
    use = {"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": "a.png"}}
    result = {"type": "tool_result", "tool_use_id": "t1", "content": [image(), hello_text()]}
    anthropic = {
        "model": MODEL,
        "max_tokens": 8,
        "messages": [
            {"role": "user", "content": "Look."},
            {"role": "assistant", "content": [use]},
            {"role": "user", "content": [result]},
        ],
    }
    read = count('t1\nRead\n{"file_path":"a.png"}')  # the call's id is sent too
    expected = count("Look.") + read + count("t1\nhello world") + IMAGE_TOKENS
    assert _tokens_in(core, "anthropic", anthropic) == expected
    url = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
    call = {"id": "c1", "type": "function", "function": {"name": "Read", "arguments": "{}"}}
    chat = {
        "model": "gpt-5",
        "messages": [
            {"role": "user", "content": [hello_text(), url]},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": "hello world"},
        ],
    }
    chat_tokens = 2 * count("hello world") + IMAGE_TOKENS + count("Read\n{}")
    assert _tokens_in(core, "openai_chat", chat) == chat_tokens
    picture = {"type": "input_image", "image_url": "data:image/png;base64,AAAA"}
    responses = {
        "model": "gpt-5",
        "instructions": "Be brief.",
        "input": [
            {"role": "user", "content": [{"type": "input_text", "text": "hello world"}, picture]},
            {"type": "reasoning", "id": "rs_1", "encrypted_content": "x" * 4000, "summary": []},
            {"type": "function_call", "call_id": "c1", "name": "Read", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "hello world"},
        ],
    }
    responses_tokens = count("Be brief.") + 2 * count("hello world") + IMAGE_TOKENS
    assert _tokens_in(core, "openai_responses", responses) == responses_tokens + count("Read\n{}")


def hello_text() -> dict[str, Any]:
    return {"type": "text", "text": "hello world"}
