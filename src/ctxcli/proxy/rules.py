"""What the model APIs refuse in a request, in their own words: one rule set.

The proxy checks a reduced request before it sends it (a reduction the API would refuse
goes out as the client wrote it instead), and the tests' fake APIs answer with the same
rules, so the two cannot drift apart. Each rule is one the real API enforces, worded as
its error says it:

- Anthropic Messages: a first message that is not the user's, roles other than user,
  assistant and system (Claude Code 2.1 sends system messages between turns; they hold
  text only and do not split a turn), empty content (but for a final assistant turn),
  empty or whitespace-only text, a thinking block without its signature, ``tool_use``
  without its ``tool_result`` in the next turn and the reverse (consecutive turns of one
  role are merged first, as the API does), duplicate tool ids, more than four
  ``cache_control`` breakpoints, a breakpoint on a thinking block;
- OpenAI Chat Completions: a ``tool`` message that answers no ``tool_calls``, calls left
  without their answers, empty message lists, unknown roles;
- OpenAI Responses: ``function_call``/``function_call_output`` (and custom tool) pairs,
  reasoning items that stand for nothing (an id without ``encrypted_content`` under
  ``store: false``, or nothing after them), empty content, a compaction item without its
  ``encrypted_content``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ctxcli.proxy.shapes import MAX_BREAKPOINTS, Api

__all__ = ["Rejection", "check_chat", "check_messages", "check_responses", "rejection"]


class Rejection(Exception):
    """What the API answers instead of a completion: status, message, parameter."""

    def __init__(self, message: str, status: int = 400, param: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.param = param


def rejection(api: Api, body: Any) -> Rejection | None:
    """What ``api`` would refuse in ``body`` (None: nothing)."""
    try:
        _CHECKS[api](body)
    except Rejection as exc:
        return exc
    return None


# ---------------------------------------------------------------- Anthropic Messages


def _blocks(content: Any) -> list[Any]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return content if isinstance(content, list) else []


def _merge_turns(messages: list[Any]) -> list[tuple[str, list[Any], int]]:
    """Consecutive messages of one role, as the API combines them: (role, blocks, first index)."""
    turns: list[tuple[str, list[Any], int]] = []
    for i, msg in enumerate(messages):
        role = msg.get("role")
        if role == "system":
            continue  # between turns, not a turn of its own
        blocks = _blocks(msg.get("content"))
        if turns and turns[-1][0] == role:
            turns[-1][1].extend(blocks)
        else:
            turns.append((role, list(blocks), i))
    return turns


def check_messages(body: Any) -> None:
    """Raise :class:`Rejection` for what the Messages API refuses in ``body``."""
    if not isinstance(body, dict):
        raise Rejection("Request body must be a JSON object")
    if not isinstance(body.get("model"), str):
        raise Rejection("model: Field required")
    if not isinstance(body.get("max_tokens"), int):
        raise Rejection("max_tokens: Field required")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise Rejection("messages: at least one message is required")
    for i, msg in enumerate(messages):
        _check_message(msg, i, last=i == len(messages) - 1)
    if messages[0]["role"] != "user":
        raise Rejection('messages: first message must use the "user" role')
    _check_pairs(_merge_turns(messages))
    _check_final(messages[-1])
    _check_breakpoints(body)


def _check_message(msg: Any, i: int, *, last: bool) -> None:
    if not isinstance(msg, dict):
        raise Rejection(f"messages.{i}: Input should be a valid dictionary")
    if msg.get("role") not in ("user", "assistant", "system"):
        raise Rejection(f"messages.{i}.role: Input should be 'user', 'assistant' or 'system'")
    content = msg.get("content")
    if msg["role"] == "system" and any(
        isinstance(b, dict) and b.get("type") != "text" for b in _blocks(content)
    ):
        raise Rejection(f"messages.{i}: `system` messages can only hold text blocks")
    if not _blocks(content) and not (last and msg["role"] == "assistant"):
        raise Rejection(
            f"messages.{i}: all messages must have non-empty content except for the "
            "optional final assistant message"
        )
    for j, block in enumerate(_blocks(content)):
        _check_block(block, f"messages.{i}.content.{j}")


def _ids(blocks: list[Any], kind: str, key: str) -> list[Any]:
    return [b.get(key) for b in blocks if isinstance(b, dict) and b.get("type") == kind]


def _check_pairs(turns: list[tuple[str, list[Any], int]]) -> None:
    """Every ``tool_use`` answered in the next turn, every ``tool_result`` asked for."""
    seen: set[str] = set()
    for t, (role, blocks, index) in enumerate(turns):
        uses = _ids(blocks, "tool_use", "id")
        results = _ids(blocks, "tool_result", "tool_use_id")
        if role == "assistant":
            if results:
                raise Rejection(
                    f"messages.{index}: `tool_result` blocks can only be in `user` messages"
                )
            if seen & set(uses) or len(set(uses)) < len(uses):
                raise Rejection(f"messages.{index}: `tool_use` ids must be unique")
            seen.update(uses)
            if t + 1 < len(turns):
                answered = set(_ids(turns[t + 1][1], "tool_result", "tool_use_id"))
                missing = [u for u in uses if u not in answered]
                if missing:
                    raise Rejection(
                        f"messages.{index}: `tool_use` ids were found without `tool_result` "
                        f"blocks immediately after: {', '.join(missing)}. Each `tool_use` "
                        "block must have a corresponding `tool_result` block in the next message."
                    )
            continue
        if uses:
            raise Rejection(
                f"messages.{index}: `tool_use` blocks can only be in `assistant` messages"
            )
        called = set(_ids(turns[t - 1][1], "tool_use", "id")) if t > 0 else set()
        stray = [r for r in results if r not in called]
        if stray:
            raise Rejection(
                f"messages.{index}.content.0: unexpected `tool_use_id` found in `tool_result` "
                f"blocks: {stray[0]}. Each `tool_result` block must have a corresponding "
                "`tool_use` block in the previous message."
            )


def _check_final(last: dict[str, Any]) -> None:
    if last["role"] != "assistant":
        return
    tail = _blocks(last.get("content"))
    if tail and tail[-1].get("type") == "text":
        text = tail[-1].get("text", "")
        if text != text.rstrip():
            raise Rejection("messages: final assistant content cannot end with trailing whitespace")


_OTHER_BLOCKS = ("image", "document", "search_result", "server_tool_use", "web_search_tool_result")


def _check_block(block: Any, where: str) -> None:
    if not isinstance(block, dict) or not isinstance(block.get("type"), str):
        raise Rejection(f"{where}: Input should be a valid dictionary with a type")
    kind = block["type"]
    required = {
        "thinking": ("thinking", "signature"),
        "redacted_thinking": ("data",),
        "tool_use": ("id", "name"),
        "tool_result": ("tool_use_id",),
    }
    for name in required.get(kind, ()):
        if not isinstance(block.get(name), str) or (name == "signature" and not block[name]):
            raise Rejection(f"{where}.{kind}.{name}: Field required")
    if kind == "text":
        _check_text(block, where)
    elif kind == "tool_use" and not isinstance(block.get("input"), dict):
        raise Rejection(f"{where}.tool_use.input: Input should be a valid dictionary")
    elif kind == "tool_result" and isinstance(block.get("content"), list):
        for k, part in enumerate(block["content"]):
            _check_block(part, f"{where}.tool_result.content.{k}")
    elif kind not in (*required, "text", *_OTHER_BLOCKS):
        raise Rejection(
            f"{where}: Input tag '{kind}' found using 'type' does not match any of the expected tags"
        )


def _check_text(block: dict[str, Any], where: str) -> None:
    text = block.get("text")
    if not isinstance(text, str):
        raise Rejection(f"{where}.text: Field required")
    if text == "":
        raise Rejection("messages: text content blocks must be non-empty")
    if not text.strip():
        raise Rejection("messages: text content blocks must contain non-whitespace text")


def _check_breakpoints(body: dict[str, Any]) -> None:
    """At most four ``cache_control`` breakpoints, none on a thinking block."""
    system = body.get("system")
    found = [t for t in body.get("tools") or [] if isinstance(t, dict) and "cache_control" in t]
    found += (
        [s for s in system if isinstance(s, dict) and "cache_control" in s]
        if isinstance(system, list)
        else []
    )
    for i, msg in enumerate(body["messages"]):
        for j, part in enumerate(_blocks(msg.get("content"))):
            if isinstance(part, dict) and "cache_control" in part:
                if part.get("type") in ("thinking", "redacted_thinking"):
                    raise Rejection(
                        f"messages.{i}.content.{j}.{part['type']}.cache_control: "
                        "Extra inputs are not permitted"
                    )
                found.append(part)
    if len(found) > MAX_BREAKPOINTS:
        raise Rejection(
            f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. "
            f"Found {len(found)}."
        )


# ---------------------------------------------------------------- OpenAI Chat Completions

_CHAT_ROLES = ("system", "developer", "user", "assistant", "tool", "function")


def check_chat(body: Any) -> None:
    """Raise :class:`Rejection` for what Chat Completions refuses in ``body``."""
    if not isinstance(body, dict):
        raise Rejection("Invalid body: expected a JSON object")
    if not isinstance(body.get("model"), str):
        raise Rejection("Missing required parameter: 'model'.", param="model")
    messages = body.get("messages")
    if not isinstance(messages, list):
        raise Rejection("Missing required parameter: 'messages'.", param="messages")
    if not messages:
        raise Rejection(
            "Invalid 'messages': empty array. Expected an array with minimum length 1, but got "
            "an empty array instead.",
            param="messages",
        )
    pending: list[str] = []
    for i, msg in enumerate(messages):
        role = msg.get("role") if isinstance(msg, dict) else None
        if role not in _CHAT_ROLES:
            raise Rejection(
                f"Invalid value: '{role}'. Supported values are: 'system', 'assistant', 'user', "
                "'function', 'tool', and 'developer'.",
                param=f"messages[{i}].role",
            )
        pending = _chat_turn(msg, i, pending)
    if pending:
        _unanswered(pending, len(messages) - 1)


def _chat_turn(msg: dict[str, Any], i: int, pending: list[str]) -> list[str]:
    """The tool calls still unanswered after message ``i``."""
    if msg["role"] == "tool":
        if msg.get("tool_call_id") not in pending:
            raise Rejection(
                "Invalid parameter: messages with role 'tool' must be a response to a preceeding "
                "message with 'tool_calls'.",
                param=f"messages.[{i}].role",
            )
        return [c for c in pending if c != msg.get("tool_call_id")]
    if pending:
        _unanswered(pending, i)
    calls = msg.get("tool_calls") if msg["role"] == "assistant" else None
    return [str(c.get("id")) for c in calls if isinstance(c, dict)] if calls else []


def _unanswered(pending: list[str], i: int) -> None:
    raise Rejection(
        "An assistant message with 'tool_calls' must be followed by tool messages responding "
        "to each 'tool_call_id'. The following tool_call_ids did not have response messages: "
        f"{', '.join(pending)}",
        param=f"messages.[{i}].role",
    )


# ---------------------------------------------------------------- OpenAI Responses

CALL_TYPES = {
    "function_call": "function",
    "custom_tool_call": "custom tool",
    "local_shell_call": "local shell",
}
OUTPUT_TYPES = {"function_call_output": "function", "custom_tool_call_output": "custom tool"}
_ROLES = ("user", "assistant", "system", "developer")


def check_responses(body: Any) -> None:
    """Raise :class:`Rejection` for what the Responses API refuses in ``body``."""
    if not isinstance(body, dict):
        raise Rejection("Invalid body: expected a JSON object", param=None)
    if not isinstance(body.get("model"), str):
        raise Rejection("Missing required parameter: 'model'.", param="model")
    items = body.get("input")
    if isinstance(items, str):
        return
    if not isinstance(items, list):
        raise Rejection("Missing required parameter: 'input'.", param="input")
    calls: dict[str, int] = {}
    answered: set[str] = set()
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise Rejection(
                f"Invalid type for 'input[{i}]': expected an object.", param=f"input[{i}]"
            )
        kind = item.get("type", "message")
        if kind in CALL_TYPES:
            calls[_call_id(item, i)] = i
        elif kind in OUTPUT_TYPES:
            if item.get("call_id") not in calls:
                raise Rejection(
                    f"No tool call found for {OUTPUT_TYPES[kind]} call output with call_id "
                    f"{item.get('call_id')}.",
                    param="input",
                )
            answered.add(str(item.get("call_id")))
        else:
            _ITEM_CHECKS.get(kind, _no_check)(items, i, body.get("store") is False)
    for cid, i in calls.items():
        if cid not in answered and items[i].get("type") != "local_shell_call":
            raise Rejection(f"No tool output found for function call {cid}.", param="input")


def _call_id(item: dict[str, Any], i: int) -> str:
    cid = item.get("call_id")
    if not isinstance(cid, str):
        raise Rejection(
            f"Missing required parameter: 'input[{i}].call_id'.", param=f"input[{i}].call_id"
        )
    return cid


def _no_check(items: list[Any], i: int, stateless: bool) -> None:
    """Items the rules say nothing about."""


def _check_message_item(items: list[Any], i: int, stateless: bool) -> None:
    item = items[i]
    if isinstance(item.get("content"), list) and not item["content"]:
        raise Rejection(
            f"Invalid 'input[{i}].content': empty array. Expected an array with minimum length "
            "1, but got an empty array instead.",
            param=f"input[{i}].content",
        )
    if item.get("role") not in _ROLES:
        raise Rejection(
            f"Invalid value: '{item.get('role')}'. Supported values are: 'assistant', 'system', "
            "'developer', and 'user'.",
            param=f"input[{i}].role",
        )


def _check_reasoning(items: list[Any], i: int, stateless: bool) -> None:
    rid = items[i].get("id")
    if stateless and not items[i].get("encrypted_content") and isinstance(rid, str):
        raise Rejection(
            f"Item with id '{rid}' not found. Items are not persisted when `store` is set to "
            "false. Try again with `store` set to true, or remove this item from your input.",
            status=404,
            param="input",
        )
    if i + 1 >= len(items) or not isinstance(items[i + 1], dict):
        raise Rejection(
            f"Item '{rid or f'input[{i}]'}' of type 'reasoning' was provided without its "
            "required following item.",
            param="input",
        )


def _check_compaction(items: list[Any], i: int, stateless: bool) -> None:
    if not isinstance(items[i].get("encrypted_content"), str):
        raise Rejection(
            f"Missing required parameter: 'input[{i}].encrypted_content'.",
            param=f"input[{i}].encrypted_content",
        )


_ITEM_CHECKS: dict[str, Callable[[list[Any], int, bool], None]] = {
    "message": _check_message_item,
    "reasoning": _check_reasoning,
    "compaction": _check_compaction,
}

_CHECKS: dict[Api, Callable[[Any], None]] = {
    "anthropic": check_messages,
    "openai_chat": check_chat,
    "openai_responses": check_responses,
}
