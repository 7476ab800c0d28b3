"""Rebuild what each model call of a Codex rollout sent, from its response items.

A call's input is every ``response_item`` before it (``ghost_snapshot`` items are git
snapshots the model never sees), after the client's instructions and tools, which are
a hidden block. Its outputs (reasoning, function and custom tool calls, assistant
messages) are the run of model items next to its ``token_count`` event: after it in
cli 0.40 (the event comes first), before it in other versions.

Reasoning items are encrypted; each is as large as the reasoning tokens recorded for
the call that made it. The Responses API drops the reasoning items that come before
the last user message, so a new user turn sends none of the earlier ones (the shared
rollouts fit this within 1%: 09-24 is 16% off when they are kept).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ctxcli.cost._calls import Call
from ctxcli.cost._jsonl import seconds
from ctxcli.cost.blocks import BlockMemo, reasoning_key, response_blocks
from ctxcli.cost.sequence import Block, Request, block_key

Records = Sequence[tuple[int, dict[str, Any]]]

MODEL_ITEMS = {
    "reasoning",
    "function_call",
    "custom_tool_call",
    "local_shell_call",
    "web_search_call",
}
HIDDEN = Block(block_key("codex:client prompt"), hidden=True)


@dataclass(slots=True)
class _Item:
    """A response item: its block (reasoning: made when its call is known), and roles."""

    payload: dict[str, Any]
    block: Block | None
    from_model: bool
    user_turn: bool
    owner: int | None = None  # the call that produced it


def codex_requests(records: Records, calls: Sequence[Call]) -> list[Request]:
    """The requests of ``calls``, each with the response items before it."""
    at_record = {c.index: n for n, c in enumerate(calls)}
    items: list[_Item] = []
    requests: list[Request] = []
    open_call: int | None = None  # a call whose outputs may follow
    sent: float | None = None  # when the last input item was logged
    sizes: dict[bytes, Block] = {}  # reasoning items whose call is known, by key
    memo: BlockMemo = {}
    for i, (_, record) in enumerate(records):
        kind = record.get("type")
        payload = record.get("payload")
        if not isinstance(payload, dict):
            continue
        if kind == "compacted":
            items = [_item({"type": "message", "role": "user", "content": payload.get("message")})]
            open_call = None
        elif kind == "response_item" and payload.get("type") != "ghost_snapshot":
            item = _item(payload)
            if item.from_model:
                item.owner = open_call
            else:
                open_call = None
                sent = seconds(record.get("timestamp"))
            items.append(item)
        elif i in at_record:
            n = at_record[i]
            for item in reversed(items):  # outputs logged before their token_count
                if not item.from_model or item.owner is not None:
                    break
                item.owner = n
            _size_reasoning(items, calls, sizes)
            payloads = tuple(it.payload for it in items if it.owner != n)
            requests.append(_request(calls[n], payloads, item_blocks(payloads, sizes, memo), sent))
            open_call = n
    return requests


def item_blocks(
    items: Sequence[Any], sizes: Mapping[bytes, Block], memo: BlockMemo
) -> tuple[Block, ...]:
    """Build the cache blocks of a Responses input as the API bills them.

    The client's hidden prompt, then :func:`~ctxcli.cost.blocks.response_blocks`.
    """
    return (HIDDEN, *response_blocks(items, sizes, memo))


def _size_reasoning(items: list[_Item], calls: Sequence[Call], sizes: dict[bytes, Block]) -> None:
    """Size the reasoning items whose call is known (once each)."""
    for item in items:
        if (
            item.payload.get("type") == "reasoning"
            and item.owner is not None
            and item.block is None
        ):
            item.block = _reasoning_block(item, items, calls)
            sizes[item.block.key] = item.block


def _request(
    call: Call, items: tuple[Any, ...], blocks: tuple[Block, ...], sent: float | None
) -> Request:
    return Request(
        key=call.key,
        at=sent if sent is not None else call.at,  # the call starts once its input is in
        model=call.model,
        blocks=blocks,
        output_tokens=call.usage.output,
        recorded=call.usage,
        messages=items,
    )


def _reasoning_block(item: _Item, items: list[_Item], calls: Sequence[Call]) -> Block:
    """A reasoning item, sized by its call's reasoning tokens (shared by its items)."""
    owner = item.owner if item.owner is not None else -1
    siblings = sum(1 for it in items if it.owner == owner and it.payload.get("type") == "reasoning")
    tokens = calls[owner].reasoning_tokens // max(siblings, 1)
    return Block(reasoning_key(item.payload), tokens=tokens)


def _item(payload: dict[str, Any]) -> _Item:
    kind = payload.get("type")
    role = payload.get("role")
    from_model = kind in MODEL_ITEMS or (kind == "message" and role == "assistant")
    return _Item(payload, None, from_model, kind == "message" and role == "user")
