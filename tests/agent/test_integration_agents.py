"""CtxInputFilter through the real OpenAI Agents SDK ``Runner.run`` and a loopback Responses API."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("agents", reason="openai-agents cannot be installed here")

from agents import (  # noqa: E402
    Agent,
    OpenAIResponsesModel,
    RunConfig,
    Runner,
    function_tool,
    set_tracing_disabled,
)
from openai import AsyncOpenAI  # noqa: E402

from ctxcli.agent.openai_agents import CtxInputFilter  # noqa: E402
from ctxcli.pipeline.config import build_config  # noqa: E402
from support.fake_api import FakeServer, OpenAIAPI  # noqa: E402
from support.fake_api.openai import RESPONSES  # noqa: E402

ROUNDS = 30
BIG_ROUND = 2
BUDGET = 10_000


def file_text(i: int) -> str:
    size = 30_000 if i == BIG_ROUND else 6_000
    return "".join(f"file {i} line {n}: value = {n * i}\n" for n in range(size // 24))[:size]


@function_tool
def read_file(path: str) -> str:
    """Read a file of the project.

    Args:
        path: the file.
    """
    return file_text(int(path.removeprefix("f").removesuffix(".py")))


def call(call_id: str, name: str, args: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {
            "type": "function_call",
            "id": f"fc_{call_id}",
            "call_id": call_id,
            "name": name,
            "arguments": json.dumps(args),
            "status": "completed",
        }
    ]


def script(trunc_path: str) -> list[list[dict[str, Any]]]:
    outputs = []
    for i in range(ROUNDS):
        outputs.append(call(f"call_{i}", "read_file", {"path": f"f{i}.py"}))
        if i == 20:
            outputs.append(call("read_back", "ctx_read", {"path": trunc_path, "limit": 30}))
    final = {
        "type": "message",
        "id": "msg_final",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": "All read.", "annotations": []}],
    }
    return [*outputs, [final]]


@pytest.fixture(autouse=True)
def _no_tracing() -> Iterator[None]:
    set_tracing_disabled(True)
    yield


def output_of(item: dict[str, Any]) -> str:
    out = item.get("output")
    return out if isinstance(out, str) else json.dumps(out)


async def _run(ctx: CtxInputFilter, base_url: str) -> Any:
    """The agent loop against ``base_url``; the client is closed before the loop ends."""
    async with AsyncOpenAI(base_url=base_url, api_key="sk-test", max_retries=0) as client:
        agent = Agent(
            name="reader",
            instructions="Read every file.",
            model=OpenAIResponsesModel(model="fake", openai_client=client),
            tools=[read_file, ctx.read_tool],
        )
        return await Runner.run(
            agent,
            "Read the files.",
            max_turns=100,
            run_config=RunConfig(call_model_input_filter=ctx),
        )


def test_input_filter_through_runner(tmp_path: Path) -> None:
    config = build_config(
        {
            "tokenizer": "approx",
            "stages": [
                {"use": "truncate_tool_output", "max_chars": 10_000},
                {"use": "clear_tool_results", "max_tokens": BUDGET, "keep_rounds": 1},
            ],
        },
        "test",
    )
    ctx = CtxInputFilter(config, offload_dir=tmp_path / "off")
    trunc_path = f"{ctx.offload_dir}/trunc/call_{BIG_ROUND}"
    with FakeServer(OpenAIAPI(outputs=script(trunc_path)), lifetime_s=300) as server:
        result = asyncio.run(_run(ctx, f"{server.base_url}/v1"))
    assert result.final_output == "All read."
    assert server.rejected() == []
    requests = [r.body for r in server.posts(RESPONSES)]
    assert len(requests) == ROUNDS + 2
    sizes = [sum(len(json.dumps(i)) for i in r["input"]) // 4 for r in requests]
    # Every request stays under the budget plus the last round; the run itself does not.
    assert max(sizes) <= BUDGET + 10_000 // 4 + 1_000, sizes
    full = [i for r in result.to_input_list() for i in [r]]
    assert sum(len(json.dumps(i)) for i in full) // 4 > 4 * BUDGET
    for r in requests:
        calls = [i["call_id"] for i in r["input"] if i.get("type") == "function_call"]
        outputs = [i["call_id"] for i in r["input"] if i.get("type") == "function_call_output"]
        assert calls == outputs  # one result per call, in order: no pair split
    # The truncated result names its file; the agent's read of it returns the original.
    hinted = [
        output_of(i)
        for r in requests
        for i in r["input"]
        if i.get("type") == "function_call_output" and i["call_id"] == f"call_{BIG_ROUND}"
    ]
    assert any(trunc_path in h and "ctx_read" in h for h in hinted)
    read_back = next(
        output_of(i)
        for i in full
        if i.get("type") == "function_call_output" and i["call_id"] == "read_back"
    )
    assert read_back.startswith("".join(file_text(BIG_ROUND).splitlines(True)[:30]))
    # Outputs cleared once are sent as the same text afterwards.
    seen: dict[str, str] = {}
    for r in requests:
        for i in r["input"]:
            if i.get("type") == "function_call_output" and "cleared" in output_of(i):
                assert seen.setdefault(i["call_id"], output_of(i)) == output_of(i)
    assert seen
    assert sum(1 for r in ctx.results if r.changed_prefix_at is None) >= len(ctx.results) // 2
