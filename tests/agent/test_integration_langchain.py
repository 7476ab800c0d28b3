"""CtxMiddleware through a real LangChain v1 ``create_agent`` loop with a scripted fake model."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langchain", reason="langchain cannot be installed here")

from langchain.agents import create_agent  # noqa: E402
from langchain.agents.middleware import ClearToolUsesEdit, ContextEditingMiddleware  # noqa: E402
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel  # noqa: E402
from langchain_core.messages import (  # noqa: E402
    AIMessage,
    BaseMessage,
    HumanMessage,
    ToolMessage,
)
from langchain_core.messages.utils import count_tokens_approximately  # noqa: E402
from langchain_core.tools import tool  # noqa: E402

from ctxcli.agent.langchain_middleware import CtxMiddleware  # noqa: E402
from ctxcli.pipeline.config import build_config  # noqa: E402

ROUNDS = 40
BIG_ROUND = 3  # this round's result is longer than max_length: truncated, offloaded
BUDGET = 12_000  # clear_tool_results' max_tokens in the test's chain


def file_text(i: int) -> str:
    size = 30_000 if i == BIG_ROUND else 6_000
    return "".join(f"file {i} line {n}: value = {n * i}\n" for n in range(size // 24))[:size]


@tool
def read_file(path: str) -> str:
    """Read a file of the project."""
    return file_text(int(path.removeprefix("f").removesuffix(".py")))


class RecordingModel(GenericFakeChatModel):
    """The fake chat model, plus the tool binding create_agent needs and a request log."""

    requests: list[list[BaseMessage]] = []

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self.requests.append(list(messages))
        return super()._generate(messages, *args, **kwargs)


def script(trunc_path: str) -> Iterator[AIMessage]:
    """A long tool-heavy run: one read per turn, one read-back of an offloaded result."""
    for i in range(ROUNDS):
        yield AIMessage(
            "", tool_calls=[{"name": "read_file", "args": {"path": f"f{i}.py"}, "id": f"call_{i}"}]
        )
        if i == 30:
            yield AIMessage(
                "",
                tool_calls=[
                    {
                        "name": "ctx_read",
                        "args": {"path": trunc_path, "offset": 0, "limit": 40},
                        "id": "read_back",
                    }
                ],
            )
    yield AIMessage("All files read.")


def run(middleware: Any, trunc_path: str) -> tuple[list[list[BaseMessage]], dict[str, Any]]:
    model = RecordingModel(messages=script(trunc_path), requests=[])
    agent = create_agent(model, [read_file], middleware=[middleware], system_prompt="Agent.")
    state = agent.invoke({"messages": [HumanMessage("Read every file.")]}, {"recursion_limit": 500})
    return model.requests, state


def assert_pairs(messages: Sequence[BaseMessage]) -> None:
    open_calls: set[str] = set()
    for m in messages:
        if isinstance(m, AIMessage):
            assert not open_calls, "a call was left without its result"
            open_calls = {c["id"] for c in m.tool_calls if c.get("id")}
        elif isinstance(m, ToolMessage):
            assert m.tool_call_id in open_calls, f"result {m.tool_call_id} without its call"
            open_calls.discard(m.tool_call_id)
    assert not open_calls


def chain() -> Any:
    return build_config(
        {
            "tokenizer": "approx",
            "stages": [
                {"use": "truncate_tool_output", "max_chars": 12_000},
                {"use": "clear_tool_results", "max_tokens": BUDGET, "keep_rounds": 1},
            ],
        },
        "test",
    )


def test_ctx_middleware_in_a_real_agent_loop(tmp_path: Path) -> None:
    middleware = CtxMiddleware(chain(), offload_dir=tmp_path / "off")
    trunc_path = f"{middleware.offload_dir}/trunc/call_{BIG_ROUND}"
    requests, state = run(middleware, trunc_path)
    assert len(requests) == ROUNDS + 2
    # The graph state keeps the full history: only requests are reduced.
    full = state["messages"]
    assert full[2 + 2 * BIG_ROUND].content == file_text(BIG_ROUND)
    sizes = [count_tokens_approximately(r) for r in requests]
    unreduced = count_tokens_approximately(full)
    # Every request stays under the budget plus the protected last round (one result).
    assert max(sizes) <= BUDGET + 12_000 // 4 + 200, sizes
    assert unreduced > 5 * BUDGET
    for request in requests:
        assert_pairs(request)
    # The agent read the truncated result back, from the file the hint named.
    read_back = next(
        m for m in full if isinstance(m, ToolMessage) and m.tool_call_id == "read_back"
    )
    assert read_back.content.startswith("".join(file_text(BIG_ROUND).splitlines(True)[:40]))
    assert "read on with offset=40" in read_back.content
    hinted = [
        m.content
        for r in requests
        for m in r
        if isinstance(m, ToolMessage) and m.tool_call_id == f"call_{BIG_ROUND}"
    ]
    assert any(trunc_path in h and "ctx_read" in h for h in hinted)
    # A result cleared once is sent as the same text in every later request.
    seen: dict[str, str] = {}
    for request in requests:
        for m in request:
            if isinstance(m, ToolMessage) and "cleared" in str(m.content):
                assert seen.setdefault(m.tool_call_id, str(m.content)) == m.content
    # Most requests extend the previous one unchanged (provider prompt cache kept).
    kept = sum(1 for r in middleware.results if r.changed_prefix_at is None)
    assert kept >= len(middleware.results) // 2, [r.changed_prefix_at for r in middleware.results]


def test_compared_with_langchains_clear_tool_uses(tmp_path: Path) -> None:
    """Same run, LangChain's ClearToolUsesEdit at the same trigger: pairs kept by both,
    but its placeholder cannot be read back and it rewrites the prefix more often."""
    ctx = CtxMiddleware(chain(), offload_dir=tmp_path / "off")
    trunc_path = f"{ctx.offload_dir}/trunc/call_{BIG_ROUND}"
    ctx_requests, _ = run(ctx, trunc_path)
    lc = ContextEditingMiddleware(edits=[ClearToolUsesEdit(trigger=BUDGET, keep=1)])
    lc_requests, _ = run(lc, trunc_path)
    for request in lc_requests:
        assert_pairs(request)

    def stable(requests: list[list[BaseMessage]]) -> int:
        """Requests whose predecessor is an unchanged prefix of them."""
        return sum(
            1
            for a, b in zip(requests, requests[1:], strict=False)
            if [m.content for m in b[: len(a)]] == [m.content for m in a]
        )

    def billed(requests: list[list[BaseMessage]]) -> float:
        """Input cost in base-price tokens with prompt caching (read 0.1x, write 1.25x)."""
        cost, previous = 0.0, []
        for r in requests:
            same = 0
            while same < min(len(r), len(previous)) and r[same].content == previous[same].content:
                same += 1
            cached = count_tokens_approximately(r[:same]) if same else 0
            cost += 0.1 * cached + 1.25 * (count_tokens_approximately(r) - cached)
            previous = r
        return cost

    print(
        f"cache-priced input cost: ctx {billed(ctx_requests):.0f}, ClearToolUsesEdit {billed(lc_requests):.0f}"
    )
    ctx_sent = sum(count_tokens_approximately(r) for r in ctx_requests)
    lc_sent = sum(count_tokens_approximately(r) for r in lc_requests)
    print(f"tokens sent over the run: ctx {ctx_sent}, ClearToolUsesEdit {lc_sent}")
    print(
        f"cache-stable requests: ctx {stable(ctx_requests)}, ClearToolUsesEdit {stable(lc_requests)}"
    )
    # LangChain's cleared results say "[cleared]" and nothing more; ctx's name a file.
    assert any(isinstance(m, ToolMessage) and m.content == "[cleared]" for m in lc_requests[-1])
    cleared = [
        m.content
        for m in ctx_requests[-1]
        if isinstance(m, ToolMessage) and "[ctx cleared" in str(m.content)
    ]
    assert cleared and all(ctx.offload_dir in c for c in cleared)
    # Both keep the requests near the same budget ...
    limit = BUDGET + 12_000 // 4 + 200
    assert max(count_tokens_approximately(r) for r in ctx_requests) <= limit
    assert max(count_tokens_approximately(r) for r in lc_requests) <= limit
    # ... but ctx keeps more requests cache-stable: it never rewrites what it sent.
    assert stable(ctx_requests) >= stable(lc_requests)


def test_conversations_without_a_thread_keep_their_own_memory(tmp_path: Path) -> None:
    from langchain.agents.middleware.types import ModelRequest

    middleware = CtxMiddleware(chain(), offload_dir=tmp_path / "off")
    model = RecordingModel(messages=iter(()), requests=[])

    def history(task: str, rounds: int) -> list[BaseMessage]:
        msgs: list[BaseMessage] = [HumanMessage(task)]
        for i in range(rounds):
            call = {"name": "read_file", "args": {"path": f"f{i}.py"}, "id": f"{task}_{i}"}
            msgs += [
                AIMessage("", tool_calls=[call]),
                ToolMessage(file_text(i), tool_call_id=call["id"]),
            ]
        return msgs

    a, b = history("task a", 12), history("task b", 12)
    middleware.reduce_request(ModelRequest(model=model, messages=a[:-2]))
    middleware.reduce_request(ModelRequest(model=model, messages=b[:-2]))
    reduced = middleware.reduce_request(ModelRequest(model=model, messages=a))
    assert middleware.results[-1].reused == len(a) - 2
    assert_pairs(reduced.messages)
    assert reduced.messages[-1] is a[-1]  # unchanged messages are the caller's own objects
