"""A request cut into the blocks prompt caching sees: one rule for ``ctx cost`` and the proxy.

A request is cut in the order the provider hashes it: tool definitions, the system prompt,
then the history: each content item of an Anthropic message, each OpenAI Chat Completions
message, each OpenAI Responses input item. Each block is a :class:`~ctxcli.cost.sequence.
Block`: a key (two blocks with one key are the same bytes to the provider; ``cache_control``
is left out, it moves from request to request) and what its tokens are counted on:

- a text: the text the model reads (a string content and a bare text block are one block);
- an image: :data:`~ctxcli.core.model.IMAGE_TOKENS`, whatever its bytes (a tool result's or
  a message's images too, beside their text);
- a tool call: its name and arguments; a tool result: its text; thinking: its text;
- a tool definition: its JSON; a system prompt: its text;
- anything else: its JSON.

The session replays build the message blocks from a file (:mod:`ctxcli.cost._claude_code`,
:mod:`ctxcli.cost._codex`); the proxy builds the whole request from the body it forwards
(:func:`body_request`), so ``/stats`` prices a request as ``ctx cost`` does.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import orjson

from ctxcli.agent.reducer import Api
from ctxcli.cost._jsonl import iter_dicts
from ctxcli.cost.cache import TTL
from ctxcli.cost.sequence import Block, Request, block_key

__all__ = [
    "BlockMemo",
    "body_request",
    "chat_block",
    "content_block",
    "content_items",
    "reasoning_key",
    "response_blocks",
    "response_item_block",
    "tool_block",
    "without_cache_control",
]

BlockMemo = dict[int, tuple[Any, Block]]
"""id(content object) -> (the object, its block); the object is held so its id stays its."""

_IMAGE_TYPES = frozenset({"image", "image_url", "input_image"})
_CONTROL = b'"cache_control"'
_RESPONSES = "codex"  # the key prefix of a Responses item (Codex rollouts first used it)


def without_cache_control(value: Any) -> Any:
    """``value`` with every ``cache_control`` field left out (a copy; it moves between requests)."""
    if isinstance(value, dict):
        return {k: without_cache_control(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [without_cache_control(v) for v in value]
    return value


def _canonical(value: Any) -> tuple[Any, bytes]:
    """``value`` without ``cache_control`` and its sorted JSON bytes."""
    raw = orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    if _CONTROL in raw:
        value = without_cache_control(value)
        raw = orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    return value, raw


def _images(items: Any) -> int:
    return sum(1 for item in iter_dicts(items) if item.get("type") in _IMAGE_TYPES)


def content_items(content: Any) -> list[Any]:
    """The content items of an Anthropic message: a non-empty string is one, a list its objects."""
    if isinstance(content, str):
        return [content] if content else []
    return list(iter_dicts(content))


def content_block(role: str, item: Any) -> Block:
    """The block of one content item of a ``role`` message (Anthropic).

    A string and a bare text block are one block (the same bytes to the API); an image is
    its fixed size; any other block is the text the model reads of it, and its images.
    """
    if isinstance(item, str):
        return Block(block_key(role, "text", item), item)
    item, raw = _canonical(item)
    if item.keys() == {"type", "text"} and item["type"] == "text":
        return Block(block_key(role, "text", str(item["text"])), str(item["text"]))
    if item.get("type") == "image":
        return Block(block_key(role, raw), images=1)
    images = _images(item.get("content")) if item.get("type") == "tool_result" else 0
    return Block(block_key(role, raw), _content_text(item, raw), images=images)


def _content_text(block: dict[str, Any], raw: bytes) -> str:
    """The text the model reads for one content block."""
    kind = block.get("type")
    if kind == "text":
        return str(block.get("text", ""))
    if kind == "thinking":
        return str(block.get("thinking", ""))
    if kind == "tool_use":
        call = orjson.dumps(block.get("input")).decode()
        return f"{block.get('id', '')}\n{block.get('name', '')}\n{call}"
    if kind == "tool_result":
        content = block.get("content")
        if not isinstance(content, str):
            content = "\n".join(str(b["text"]) for b in iter_dicts(content) if "text" in b)
        return f"{block.get('tool_use_id', '')}\n{content}"
    return raw.decode("utf-8", "replace")


def tool_block(tool: Any) -> Block:
    """The block of one tool definition: its JSON is what the model reads of it."""
    _, raw = _canonical(tool)
    return Block(block_key("tool", raw), raw.decode("utf-8", "replace"))


def response_item_block(payload: Any) -> Block:
    """The block of one Responses input item that is no reasoning item.

    Its text as the model reads it, and its images.
    """
    data, raw = _canonical(payload)
    data = data if isinstance(data, dict) else {}
    images = _images(data.get("content")) if _kind(data) == "message" else 0
    return Block(block_key(_RESPONSES, raw), _response_text(data, raw), images=images)


def reasoning_key(payload: Any) -> bytes:
    """The key of a Responses reasoning item (its size comes from elsewhere: it is encrypted)."""
    return block_key(_RESPONSES, _canonical(payload)[1])


def _kind(payload: Mapping[str, Any]) -> Any:
    """An item's type; a bare ``{"role", "content"}`` is a message (the API reads it so)."""
    return payload.get("type", "message" if "role" in payload else None)


def _response_text(payload: dict[str, Any], raw: bytes) -> str:
    """The text the model reads for one response item."""
    kind = _kind(payload)
    if kind == "message":
        content = payload.get("content")
        if isinstance(content, str):
            return content
        return "\n".join(str(c["text"]) for c in iter_dicts(content) if "text" in c)
    if kind == "function_call":
        return f"{payload.get('name', '')}\n{payload.get('arguments', '')}"
    if kind == "custom_tool_call":
        return f"{payload.get('name', '')}\n{payload.get('input', '')}"
    if kind in ("function_call_output", "custom_tool_call_output"):
        output = payload.get("output")
        if isinstance(output, str):
            return output
        return orjson.dumps(output).decode()
    return raw.decode("utf-8", "replace")


def _is_user(payload: Any) -> bool:
    return (
        isinstance(payload, dict) and payload.get("role") == "user" and _kind(payload) == "message"
    )


def response_blocks(
    items: Sequence[Any], sizes: Mapping[bytes, Block], memo: BlockMemo
) -> list[Block]:
    """The blocks of the Responses input ``items`` as the API bills them.

    Each item, except the reasoning items before the last user message (the API drops them)
    and those of unknown size (``sizes``: by :func:`reasoning_key`). ``memo`` keeps the block
    of each item object seen (the same objects come back request after request).
    """
    last_user = max((k for k, it in enumerate(items) if _is_user(it)), default=-1)
    blocks = []
    for k, payload in enumerate(items):
        if isinstance(payload, dict) and payload.get("type") == "reasoning":
            block = sizes.get(reasoning_key(payload)) if k >= last_user else None
        else:
            hit = memo.get(id(payload))
            if hit is None or hit[0] is not payload:
                hit = memo[id(payload)] = (payload, response_item_block(payload))
            block = hit[1]
        if block is not None:
            blocks.append(block)
    return blocks


def chat_block(message: Any) -> Block:
    """The block of one Chat Completions message: its text, tool calls and images."""
    data, raw = _canonical(message)
    data = data if isinstance(data, dict) else {}
    content = data.get("content")
    parts = [content] if isinstance(content, str) else []
    parts += [str(p["text"]) for p in iter_dicts(content) if "text" in p]
    for call in iter_dicts(data.get("tool_calls")):
        function = call.get("function")
        function = function if isinstance(function, dict) else {}
        parts.append(f"{function.get('name', '')}\n{function.get('arguments', '')}")
    role = str(data.get("role", ""))
    return Block(block_key("chat", role, raw), "\n".join(parts), images=_images(content))


class _Cut:
    """Blocks in order, and the breakpoints of those whose source carries ``cache_control``."""

    def __init__(self) -> None:
        self.blocks: list[Block] = []
        self.marks: list[tuple[int, TTL]] = []

    def add(self, block: Block, source: Any = None) -> None:
        control = source.get("cache_control") if isinstance(source, dict) else None
        if control is not None:
            ttl: TTL = "1h" if isinstance(control, dict) and control.get("ttl") == "1h" else "5m"
            self.marks.append((len(self.blocks), ttl))
        self.blocks.append(block)


def body_request(body: Mapping[str, Any], api: Api, *, at: float | None = None) -> Request:
    """The request an API body sends, cut into blocks: tools, system, history.

    ``api`` is the body's shape: ``anthropic`` (Messages: its ``cache_control`` breakpoints
    are the request's), ``openai_chat`` or ``openai_responses`` (automatic caching: no
    breakpoints). Responses reasoning items are encrypted and of unknown size here: they
    are left out, as :func:`response_blocks` leaves them without a size.
    """
    cut = _Cut()
    for tool in _list(body.get("tools")):
        cut.add(tool_block(tool), tool)
    if api == "anthropic":
        _anthropic(cut, body)
    elif api == "openai_responses":
        instructions = body.get("instructions")
        if isinstance(instructions, str) and instructions:
            cut.add(content_block("system", instructions))
        history = body.get("input")
        items = [{"role": "user", "content": history}] if isinstance(history, str) else history
        for block in response_blocks(items if isinstance(items, list) else [], {}, {}):
            cut.add(block)
    else:
        for message in _list(body.get("messages")):
            cut.add(chat_block(message))
    model = body.get("model")
    return Request(
        key="",
        at=at,
        model=model if isinstance(model, str) else None,
        blocks=tuple(cut.blocks),
        breakpoints=tuple(cut.marks) if api == "anthropic" else (),
    )


def _anthropic(cut: _Cut, body: Mapping[str, Any]) -> None:
    system = body.get("system")
    if isinstance(system, str):
        for item in content_items(system):
            cut.add(content_block("system", item))
    else:
        for item in iter_dicts(system):
            cut.add(content_block("system", item), item)
    for message in _list(body.get("messages")):
        for role, item in _message_items(message):
            cut.add(content_block(role, item), item)


def _message_items(message: Any) -> Iterator[tuple[str, Any]]:
    if not isinstance(message, dict):
        yield "", message if isinstance(message, str) else orjson.dumps(message).decode()
        return
    role = str(message.get("role", ""))
    for item in content_items(message.get("content")):
        yield role, item


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []
