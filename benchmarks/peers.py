"""The peers ctx is measured against, run on the same input and token counter.

* LangChain's ``ClearToolUsesEdit`` (``langchain`` extra): ctx's conversation is turned
  into LangChain messages (an assistant response split over several records becomes
  one ``AIMessage``, each tool result one ``ToolMessage``, in order), the edit runs,
  and the tool outputs are read back.
* cozempic's prescriptions (``cozempic``, MIT): run on a Claude Code file exactly as
  ``cozempic treat`` does (load, run the prescription, serialise each line), without
  touching any session directory.

* reasonblocks' head+tail (``TokenSavingMiddleware`` at its defaults: 1,800-char
  threshold, first 900 and last 700 characters, recent tool messages kept) on the
  same LangChain messages.
* headroom-ai's ``compress`` at its defaults, on the conversation as OpenAI chat
  messages (run offline: no model download, no telemetry).

Used by ``benchmarks/eval.py`` (``make eval``) and by tests/stages/test_peer_parity.py. A
peer that is not installed raises ImportError; callers report it, never fake it.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ctxcli.core.model import Block, Conversation, Kind, visible_texts
from ctxcli.formats import load

Count = Callable[[str], int]


def tool_outputs(conv: Conversation) -> list[str]:
    """Texts of every tool result, oldest first."""
    return [b.text for _ref, b in conv.iter_blocks(Kind.TOOL_RESULT)]


def resume_tokens(raw: bytes, name: str, count: Count) -> int:
    """Model-visible tokens a ``claude --resume`` of a Claude Code file sends."""
    conv = load(raw, name).conversation
    return sum(count(t) for m in conv.resumed_messages() for t in visible_texts(m))


def cozempic_output(path: Path, prescription: str) -> bytes:
    """The bytes ``cozempic treat --rx <prescription>`` would write for ``path``."""
    import cozempic.strategies  # noqa: F401  (registers the strategies)
    from cozempic.executor import run_prescription
    from cozempic.registry import PRESCRIPTIONS
    from cozempic.session import _jsonl_line, load_messages

    messages = load_messages(path)
    with contextlib.redirect_stderr(io.StringIO()):  # its progress notes
        out, _results = run_prescription(messages, PRESCRIPTIONS[prescription], {})
    text = "".join(_jsonl_line(msg) + "\n" for _line, msg, _size in out)
    return text.encode("utf-8", "surrogateescape")


def langchain_messages(conv: Conversation) -> list[Any]:
    """``conv`` as LangChain messages (responses merged, one ToolMessage per result)."""
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

    out: list[Any] = []
    last_group: str | None = None
    for i, msg in enumerate(conv.messages):
        texts = "\n".join(b.text for b in msg.blocks if b.kind is Kind.TEXT)
        if msg.role == "assistant":
            calls = [
                {
                    "id": b.call_id or f"call-{i}-{j}",
                    "name": b.name or "tool",
                    "args": _args(b.text),
                }
                for j, b in enumerate(msg.blocks)
                if b.kind is Kind.TOOL_CALL
            ]
            if out and msg.group is not None and msg.group == last_group:
                prev = out[-1]
                content = "\n".join(t for t in (prev.content, texts) if t)
                out[-1] = AIMessage(content, tool_calls=[*prev.tool_calls, *calls], id=prev.id)
            else:
                out.append(AIMessage(texts, tool_calls=calls, id=str(i)))
            last_group = msg.group
            continue
        last_group = None
        for j, b in enumerate(msg.blocks):
            if b.kind is Kind.TOOL_RESULT:
                out.append(ToolMessage(b.text, tool_call_id=b.call_id or "", id=f"{i}-{j}"))
        if texts:
            cls = SystemMessage if msg.role in ("system", "developer") else HumanMessage
            out.append(cls(texts, id=str(i)))
    return out


def _args(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text or "{}")
    except ValueError:
        return {"input": text}
    return value if isinstance(value, dict) else {"input": value}


def _text_of(message: Any) -> str:
    return _content(message.content)


def langchain_clear(
    conv: Conversation, count: Count, *, trigger: int, keep: int, clear_at_least: int = 0
) -> list[str]:
    """Tool outputs after LangChain's ClearToolUsesEdit ran on ``conv``."""
    from langchain.agents.middleware.context_editing import ClearToolUsesEdit

    def count_messages(messages: list[Any]) -> int:
        n = 0
        for m in messages:
            n += count(_text_of(m))
            for call in getattr(m, "tool_calls", None) or []:
                n += count(call["name"]) + count(json.dumps(call["args"]))
        return n

    messages = langchain_messages(conv)
    edit = ClearToolUsesEdit(trigger=trigger, keep=keep, clear_at_least=clear_at_least)
    edit.apply(messages, count_tokens=count_messages)
    return [_text_of(m) for m in messages if m.type == "tool"]


def with_tool_outputs(conv: Conversation, outputs: list[str]) -> Conversation:
    """``conv`` with its tool results' texts replaced, in order, by ``outputs``."""
    refs = [ref for ref, _b in conv.iter_blocks(Kind.TOOL_RESULT)]
    if len(refs) != len(outputs):
        raise ValueError(f"{len(outputs)} tool outputs for {len(refs)} tool results")
    messages = list(conv.messages)
    for (mi, bi), text in zip(refs, outputs, strict=True):
        blocks: list[Block] = list(messages[mi].blocks)
        blocks[bi] = blocks[bi].with_text(text)
        messages[mi] = messages[mi].with_blocks(blocks)
    return conv.with_messages(messages)


def langchain_clear_conv(
    conv: Conversation, count: Count, *, trigger: int, keep: int
) -> Conversation:
    """``conv`` after LangChain's ClearToolUsesEdit."""
    return with_tool_outputs(conv, langchain_clear(conv, count, trigger=trigger, keep=keep))


def reasonblocks_head_tail(conv: Conversation) -> Conversation:
    """``conv`` after reasonblocks' head+tail compression at its defaults."""
    from reasonblocks.token_saving import TokenSavingMiddleware

    messages = langchain_messages(conv)
    middleware = TokenSavingMiddleware(enable_early_exit=False)
    # _compress is the step before_model runs; it returns the replaced ToolMessages.
    replaced = {m.id: m for m in middleware._compress(messages)}
    outputs = [_text_of(replaced.get(m.id, m)) for m in messages if m.type == "tool"]
    return with_tool_outputs(conv, outputs)


def headroom_compress(conv: Conversation) -> tuple[Conversation, list[str]]:
    """``conv`` after headroom-ai's ``compress`` at its defaults; and the transforms it ran.

    Only the tool outputs are read back (headroom skips user messages by default).
    """
    os.environ.setdefault("HEADROOM_TELEMETRY_DISABLED", "1")
    os.environ.setdefault("HEADROOM_UPDATE_CHECK", "0")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from headroom import compress
    from langchain_core.messages import convert_to_openai_messages

    logging.getLogger("headroom").setLevel(logging.ERROR)
    messages = convert_to_openai_messages(langchain_messages(conv))
    with contextlib.redirect_stderr(io.StringIO()):
        result = compress(messages)
    outputs = [_content(m.get("content")) for m in result.messages if m.get("role") == "tool"]
    return with_tool_outputs(conv, outputs), list(result.transforms_applied)


def _content(content: Any) -> str:
    """The text of a message's content: a string, or a list of parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""
