"""Build the same abstract conversation in every line-based format (for property tests).

An abstract conversation is a list of turns:

- ``("user", text)``
- ``("assistant", text_or_None, [(call_id, tool_name, args_dict), ...])``
- ``("results", [(call_id, text, is_error), ...])``  answering earlier calls
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

Turn = tuple[Any, ...]


def _cc(kind: str, uuid: str, parent: str | None, **fields: Any) -> dict[str, Any]:
    return {
        "parentUuid": parent,
        "isSidechain": False,
        "userType": "external",
        "cwd": "/home/u/p",
        "sessionId": "sess",
        "version": "2.1.39",
        "gitBranch": "main",
        "type": kind,
        "uuid": uuid,
        "timestamp": "2026-01-01T00:00:00.000Z",
        **fields,
    }


def build(fmt: str, turns: list[Turn]) -> list[dict[str, Any]]:
    """The records of ``turns`` in format ``fmt``."""
    out: list[dict[str, Any]] = []
    if fmt == "openai_chat":
        for t in turns:
            if t[0] == "user":
                out.append({"role": "user", "content": t[1]})
            elif t[0] == "assistant":
                msg: dict[str, Any] = {"role": "assistant", "content": t[1]}
                if t[2]:
                    msg["tool_calls"] = [
                        {
                            "id": c,
                            "type": "function",
                            "function": {"name": n, "arguments": json.dumps(a)},
                        }
                        for c, n, a in t[2]
                    ]
                out.append(msg)
            else:
                out.extend({"role": "tool", "tool_call_id": c, "content": x} for c, x, _e in t[1])
        return out
    if fmt == "anthropic":
        for t in turns:
            if t[0] == "user":
                out.append({"role": "user", "content": t[1]})
            elif t[0] == "assistant":
                blocks: list[dict[str, Any]] = [{"type": "text", "text": t[1]}] if t[1] else []
                blocks += [{"type": "tool_use", "id": c, "name": n, "input": a} for c, n, a in t[2]]
                out.append(
                    {"role": "assistant", "content": blocks or [{"type": "text", "text": "ok"}]}
                )
            else:
                out.append(
                    {
                        "role": "user",
                        "content": [
                            {"type": "tool_result", "tool_use_id": c, "content": x, "is_error": e}
                            for c, x, e in t[1]
                        ],
                    }
                )
        return out
    if fmt == "claude_code":
        parent: str | None = None
        n = 0
        for i, t in enumerate(turns):
            if t[0] == "user":
                n += 1
                out.append(_cc("user", f"u{n}", parent, message={"role": "user", "content": t[1]}))
                parent = f"u{n}"
            elif t[0] == "assistant":
                blocks = [{"type": "text", "text": t[1]}] if t[1] else []
                blocks += [
                    {"type": "tool_use", "id": c, "name": nm, "input": a} for c, nm, a in t[2]
                ]
                for b in blocks or [{"type": "text", "text": "ok"}]:
                    n += 1
                    out.append(
                        _cc(
                            "assistant",
                            f"a{n}",
                            parent,
                            message={
                                "model": "m",
                                "id": f"msg_{i}",
                                "type": "message",
                                "role": "assistant",
                                "content": [b],
                                "stop_reason": None,
                                "stop_sequence": None,
                                "usage": {"output_tokens": 1},
                            },
                            requestId=f"req_{i}",
                        )
                    )
                    parent = f"a{n}"
            else:
                for c, x, e in t[1]:
                    n += 1
                    out.append(
                        _cc(
                            "user",
                            f"r{n}",
                            parent,
                            message={
                                "role": "user",
                                "content": [
                                    {
                                        "type": "tool_result",
                                        "tool_use_id": c,
                                        "content": x,
                                        "is_error": e,
                                    }
                                ],
                            },
                            toolUseResult={"stdout": x, "stderr": "", "interrupted": False},
                        )
                    )
                    parent = f"r{n}"
                    n += 1
                    out.append(
                        _cc(
                            "progress",
                            f"p{n}",
                            parent,
                            data={"type": "bash_progress", "output": x[:50], "fullOutput": x},
                            toolUseID=c,
                            parentToolUseID=c,
                        )
                    )
        return out
    if fmt == "codex":

        def item(p: dict[str, Any]) -> dict[str, Any]:
            return {"timestamp": "2026-01-01T00:00:00Z", "type": "response_item", "payload": p}

        out.append(
            {
                "timestamp": "2026-01-01T00:00:00Z",
                "type": "session_meta",
                "payload": {"id": "s", "cwd": "/p", "originator": "codex_cli_rs"},
            }
        )
        for t in turns:
            if t[0] == "user":
                out.append(
                    item(
                        {
                            "type": "message",
                            "role": "user",
                            "content": [{"type": "input_text", "text": t[1]}],
                        }
                    )
                )
            elif t[0] == "assistant":
                if t[1]:
                    out.append(
                        item(
                            {
                                "type": "message",
                                "role": "assistant",
                                "content": [{"type": "output_text", "text": t[1]}],
                            }
                        )
                    )
                for c, nm, a in t[2]:
                    out.append(
                        item(
                            {
                                "type": "function_call",
                                "name": nm,
                                "arguments": json.dumps(a),
                                "call_id": c,
                            }
                        )
                    )
            else:
                for c, x, _e in t[1]:
                    out.append(item({"type": "function_call_output", "call_id": c, "output": x}))
        return out
    if fmt == "langchain":
        for t in turns:
            if t[0] == "user":
                out.append({"type": "human", "data": {"content": t[1], "type": "human"}})
            elif t[0] == "assistant":
                out.append(
                    {
                        "type": "ai",
                        "data": {
                            "content": t[1] or "",
                            "type": "ai",
                            "tool_calls": [
                                {"name": nm, "args": a, "id": c, "type": "tool_call"}
                                for c, nm, a in t[2]
                            ],
                        },
                    }
                )
            else:
                out.extend(
                    {"type": "tool", "data": {"content": x, "type": "tool", "tool_call_id": c}}
                    for c, x, _e in t[1]
                )
        return out
    if fmt == "openhands":
        return _openhands(turns)
    raise ValueError(fmt)


def _openhands(turns: list[Turn]) -> list[dict[str, Any]]:
    """OpenHands events: a call is an action with ``tool_call_metadata`` (the text said
    with a response rides on its first call as ``args.thought``), a result the
    observation of the same ``tool_call_id``."""
    out: list[dict[str, Any]] = []
    names: dict[str, str] = {}

    def event(**fields: Any) -> None:
        out.append({"id": len(out), "timestamp": "2025-05-01T10:00:00", **fields})

    event(source="agent", action="system", args={"content": "You are OpenHands.", "tools": []})
    for i, t in enumerate(turns):
        if t[0] == "user":
            event(source="user", action="message", args={"content": t[1], "image_urls": None})
        elif t[0] == "assistant":
            if not t[2]:
                event(source="agent", action="message", args={"content": t[1] or "ok"})
            for j, (c, nm, a) in enumerate(t[2]):
                names[c] = nm
                meta = {"function_name": nm, "tool_call_id": c, "model_response": {"id": f"r{i}"},
                        "total_calls_in_response": len(t[2])}  # fmt: skip
                thought = t[1] if j == 0 and t[1] else ""
                event(source="agent", action="run", args={**a, "thought": thought},
                      tool_call_metadata=meta)  # fmt: skip
        else:
            for c, x, e in t[1]:
                meta = {"function_name": names.get(c, "run"), "tool_call_id": c}
                event(source="agent", observation="error" if e else "run", content=x,
                      cause=None, extras={}, tool_call_metadata=meta)  # fmt: skip
    return out


FORMATS = ("openai_chat", "anthropic", "claude_code", "codex", "langchain", "openhands")


def to_jsonl(records: list[dict[str, Any]]) -> bytes:
    """One compact JSON object per line, UTF-8."""
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records).encode()


def tool_session(tag: str, size: int = 2000) -> bytes:
    """An openai_chat transcript with one tool result of about ``size`` bytes."""
    turns: list[Turn] = [
        ("user", f"look {tag}"),
        ("assistant", None, [(f"call_{tag}", "grep", {"q": tag})]),
        ("results", [(f"call_{tag}", f"{tag} line\n" * (size // 8), False)]),
        ("assistant", "done", []),
    ]
    return to_jsonl(build("openai_chat", turns))


def write_sessions(root: Path, count: int, size: int, step: int = 500) -> list[Path]:
    """``count`` different transcripts ``root/in<i>.jsonl`` (see :func:`tool_session`)."""
    paths = []
    for i in range(count):
        path = root / f"in{i}.jsonl"
        path.write_bytes(tool_session(f"s{i}", size + step * i))
        paths.append(path)
    return paths
