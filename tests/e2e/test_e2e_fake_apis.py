"""The fake APIs the tests use reject what the real ones reject (no client needed)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import pytest

from support.fake_api import FakeServer, MessagesAPI, OpenAIAPI, Reply, compactions


def post(api: FakeServer, path: str, body: Any) -> tuple[int, Any, str]:
    req = urllib.request.Request(
        api.base_url + path,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            ctype = resp.headers["Content-Type"]
            raw = resp.read().decode()
            return resp.status, (json.loads(raw) if "json" in ctype else raw), ctype
    except urllib.error.HTTPError as err:
        with err:
            return err.code, json.loads(err.read()), err.headers["Content-Type"]


def use(tid: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": tid, "name": "Bash", "input": {"command": "ls"}}


def result(tid: str) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": tid, "content": "a.py"}


def messages(*turns: tuple[str, Any]) -> dict[str, Any]:
    return {
        "model": "claude-test",
        "max_tokens": 100,
        "messages": [{"role": r, "content": c} for r, c in turns],
    }


ANTHROPIC_BAD = [
    (messages(("assistant", "hi"), ("user", "go")), 'first message must use the "user" role'),
    (
        messages(("user", "go"), ("assistant", [use("t1")]), ("user", "next")),
        "without `tool_result`",
    ),
    (messages(("user", [result("t9")])), "unexpected `tool_use_id`"),
    (messages(("user", [{"type": "text", "text": ""}])), "must be non-empty"),
    (messages(("user", [{"type": "text", "text": " \n"}])), "non-whitespace text"),
    (
        messages(
            ("user", "go"), ("assistant", [{"type": "thinking", "thinking": "hm"}]), ("user", "x")
        ),
        "signature: Field required",
    ),
    (
        messages(
            ("user", "go"),
            ("assistant", [use("t1")]),
            ("user", [result("t1")]),
            ("assistant", [use("t1")]),
            ("user", [result("t1")]),
        ),
        "ids must be unique",
    ),
    (messages(("user", "go"), ("system", [use("t1")])), "can only hold text blocks"),
    (messages(("developer", "go")), "Input should be 'user', 'assistant' or 'system'"),
]


@pytest.mark.parametrize(("body", "message"), ANTHROPIC_BAD)
def test_messages_api_rejects_like_the_real_one(body: dict[str, Any], message: str) -> None:
    with FakeServer(MessagesAPI(), lifetime_s=30) as api:
        status, answer, _ = post(api, "/v1/messages", body)
    assert status == 400
    assert answer["type"] == "error" and answer["error"]["type"] == "invalid_request_error"
    assert message in answer["error"]["message"]
    assert api.requests[0].error == answer["error"]["message"]


def test_messages_api_answers_a_valid_turn_streamed_or_not() -> None:
    # A system message between turns (Claude Code 2.1 sends one) splits no turn.
    body = messages(
        ("user", "go"),
        ("system", [{"type": "text", "text": "# Environment"}]),
        ("assistant", [use("t1")]),
        ("user", [result("t1"), {"type": "text", "text": "ok?"}]),
    )
    with FakeServer(MessagesAPI(), lifetime_s=30) as api:
        status, answer, _ = post(api, "/v1/messages", body)
        assert status == 200 and answer["content"][0]["type"] == "text"
        assert answer["usage"]["input_tokens"] > 0
        status, stream, ctype = post(api, "/v1/messages", {**body, "stream": True})
        assert status == 200 and ctype == "text/event-stream"
        assert stream.index("event: message_start") < stream.index("event: message_stop")
        status, count, _ = post(api, "/v1/messages/count_tokens", body)
        assert status == 200 and count["input_tokens"] > 0
    assert [r.size for r in api.requests][0] == len(json.dumps(body))


def responses(*items: dict[str, Any]) -> dict[str, Any]:
    return {"model": "gpt-test", "store": False, "stream": False, "input": list(items)}


USER = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]}
CALL = {"type": "function_call", "name": "shell", "arguments": "{}", "call_id": "c1"}
OUTPUT = {"type": "function_call_output", "call_id": "c1", "output": "done"}
REASONING = {"type": "reasoning", "summary": [], "encrypted_content": "gAAA"}

RESPONSES_BAD = [
    (responses(USER, OUTPUT), 400, "No tool call found for function call output with call_id c1"),
    (responses(USER, CALL, USER), 400, "No tool output found for function call c1"),
    (
        responses(USER, {**REASONING, "encrypted_content": None, "id": "rs_1"}, CALL, OUTPUT),
        404,
        "Item with id 'rs_1' not found",
    ),
    (responses(USER, REASONING), 400, "without its required following item"),
    (responses({**USER, "content": []}), 400, "empty array"),
]


@pytest.mark.parametrize(("body", "status", "message"), RESPONSES_BAD)
def test_responses_api_rejects_like_the_real_one(
    body: dict[str, Any], status: int, message: str
) -> None:
    with FakeServer(OpenAIAPI(), lifetime_s=30) as api:
        got, answer, _ = post(api, "/v1/responses", body)
    assert got == status
    assert set(answer["error"]) == {"message", "type", "param", "code"}
    assert message in answer["error"]["message"]


def test_responses_api_answers_turns_compactions_and_refuses_websockets() -> None:
    with FakeServer(OpenAIAPI(), lifetime_s=30) as api:
        # A dropped reasoning item is fine: nothing refers to it.
        status, answer, _ = post(api, "/v1/responses", responses(USER, CALL, OUTPUT))
        assert status == 200 and answer["output"][0]["type"] == "message"
        status, stream, _ = post(
            api, "/v1/responses", {**responses(USER, REASONING, CALL, OUTPUT), "stream": True}
        )
        assert status == 200 and "event: response.completed" in stream
        trigger = {"type": "compaction_trigger"}
        status, answer, _ = post(api, "/v1/responses", responses(USER, trigger))
        assert status == 200 and [i["type"] for i in answer["output"]] == ["compaction"]
        req = urllib.request.Request(
            api.base_url + "/v1/responses",
            headers={"Upgrade": "websocket", "Connection": "Upgrade"},
        )
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(req, timeout=10)
        assert err.value.code == 426
        err.value.close()
    assert compactions(api) == 1


def test_a_fake_api_stops_by_itself() -> None:
    api = FakeServer(OpenAIAPI(), lifetime_s=0.2)
    url = api.base_url
    import time

    time.sleep(0.6)
    with pytest.raises(OSError):
        urllib.request.urlopen(url + "/v1/models", timeout=2)


CHAT_CALL = {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
CHAT_BAD = [
    (
        [{"role": "user", "content": "go"}, {"role": "tool", "tool_call_id": "c1", "content": "x"}],
        "must be a response to a preceeding message with 'tool_calls'",
    ),
    (
        [{"role": "user", "content": "go"}, {"role": "assistant", "tool_calls": [CHAT_CALL]}],
        "did not have response messages: c1",
    ),
    ([], "empty array"),
]


@pytest.mark.parametrize(("history", "message"), CHAT_BAD)
def test_chat_completions_rejects_like_the_real_one(history: list[Any], message: str) -> None:
    with FakeServer(OpenAIAPI(), lifetime_s=30) as api:
        status, answer, _ = post(api, "/v1/chat/completions", {"model": "gpt", "messages": history})
    assert status == 400 and message in answer["error"]["message"]


def test_credentials_are_seen_but_never_stored() -> None:
    with FakeServer(MessagesAPI(), lifetime_s=30) as api:
        req = urllib.request.Request(
            api.base_url + "/v1/models", headers={"Authorization": "Bearer sk-ant-oat01-SECRET"}
        )
        with urllib.request.urlopen(req, timeout=10) as resp:
            assert resp.status == 200
    (seen,) = api.requests
    assert seen.credential and seen.headers["authorization"] == "<redacted>"
    assert "SECRET" not in repr(api.requests)


def test_a_stream_can_be_broken_off_midway() -> None:
    chunks = [b"event: a\ndata: {}\n\n", b"event: b\ndata: {}\n\n", b"never sent"]
    with FakeServer(MessagesAPI(), lifetime_s=30) as api:
        api.push(Reply(headers={"content-type": "text/event-stream"}, chunks=chunks, reset_after=2))
        got = b""
        with pytest.raises(OSError):  # the reset reaches the client as an error
            with urllib.request.urlopen(api.base_url + "/v1/messages", timeout=10) as resp:
                while block := resp.read1(65536):
                    got += block
    assert got == b"".join(chunks[:2])
