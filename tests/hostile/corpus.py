"""Generate the hostile-input corpus: every case, for every line-based format.

Each case is built from a small valid transcript of the format (``transcript()``)
and a mutation, and says what ctx must do with it:

- ``error``: exit 2 with one line ``ctx: error: FILE:LINE: ...`` naming ``line``;
  nothing written.
- ``ok``: exit 0; the output restores to the input byte-for-byte, a rerun changes
  nothing, and ``ctx validate`` finds no problem the input did not have. ``warn`` set
  means a warning line must name the record passed through.

Run ``python -m tests.hostile.corpus DIR`` to write the corpus out for inspection.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

LONG = "\n".join(f"line {i}: value={i * 7} path=/srv/app/mod_{i}.py" for i in range(300))
HOSTILE_IDS = [
    "../../etc/x",
    "/etc/passwd",
    "a\x00b",
    "x" * 10_000,
    "dup",
    "dup",
    "C:\\\\Windows\\x",
]


@dataclass(frozen=True)
class Case:
    """One hostile input and what ctx must do with it."""

    name: str
    data: bytes
    expect: str  # "ok" | "error" | "either"
    line: int | None = None
    warn: bool = False
    on_invalid: str = "error"


def _cc_envelope(kind: str, uuid: str, parent: str | None) -> dict[str, Any]:
    return {
        "parentUuid": parent,
        "isSidechain": False,
        "userType": "external",
        "cwd": "/home/u/proj",
        "sessionId": "s-1",
        "version": "2.1.39",
        "gitBranch": "main",
        "type": kind,
        "uuid": uuid,
        "timestamp": "2026-01-01T00:00:00.000Z",
    }


def _records(fmt: str, ids: list[str], result_text: str) -> list[dict[str, Any]]:
    """A small valid transcript: a request, one call per id, their results, an answer."""
    if fmt == "openai_chat":
        recs: list[dict[str, Any]] = [{"role": "user", "content": "check the logs"}]
        for i, cid in enumerate(ids):
            recs.append(
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": cid,
                            "type": "function",
                            "function": {
                                "name": "run",
                                "arguments": json.dumps({"cmd": f"cat {i}"}),
                            },
                        }
                    ],
                }
            )
            recs.append({"role": "tool", "tool_call_id": cid, "content": result_text})
        recs.append({"role": "assistant", "content": "done"})
        return recs
    if fmt == "anthropic":
        recs = [{"role": "user", "content": "check the logs"}]
        for i, cid in enumerate(ids):
            recs.append(
                {
                    "role": "assistant",
                    "content": [
                        {"type": "tool_use", "id": cid, "name": "run", "input": {"cmd": f"cat {i}"}}
                    ],
                }
            )
            recs.append(
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": cid, "content": result_text}
                    ],
                }
            )
        recs.append({"role": "assistant", "content": [{"type": "text", "text": "done"}]})
        return recs
    if fmt == "claude_code":
        recs = [
            {
                **_cc_envelope("user", "u0", None),
                "message": {"role": "user", "content": "check the logs"},
            }
        ]
        parent = "u0"
        for i, cid in enumerate(ids):
            a, r = f"a{i}", f"r{i}"
            recs.append(
                {
                    **_cc_envelope("assistant", a, parent),
                    "message": {
                        "model": "claude",
                        "id": f"msg_{i}",
                        "type": "message",
                        "role": "assistant",
                        "content": [
                            {
                                "type": "tool_use",
                                "id": cid,
                                "name": "Bash",
                                "input": {"command": f"cat {i}"},
                            }
                        ],
                        "stop_reason": "tool_use",
                        "stop_sequence": None,
                        "usage": {},
                    },
                }
            )
            recs.append(
                {
                    **_cc_envelope("user", r, a),
                    "message": {
                        "role": "user",
                        "content": [
                            {
                                "type": "tool_result",
                                "tool_use_id": cid,
                                "content": result_text,
                                "is_error": False,
                            }
                        ],
                    },
                    "toolUseResult": {"stdout": result_text, "stderr": ""},
                    "sourceToolAssistantUUID": a,
                }
            )
            parent = r
        recs.append(
            {
                **_cc_envelope("assistant", "z", parent),
                "message": {
                    "model": "claude",
                    "id": "msg_z",
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "text", "text": "done"}],
                    "stop_reason": "end_turn",
                    "stop_sequence": None,
                    "usage": {},
                },
            }
        )
        return recs
    if fmt == "codex":

        def item(payload: dict[str, Any]) -> dict[str, Any]:
            return {
                "timestamp": "2026-01-01T00:00:00.000Z",
                "type": "response_item",
                "payload": payload,
            }

        recs = [
            {
                "timestamp": "2026-01-01T00:00:00.000Z",
                "type": "session_meta",
                "payload": {
                    "id": "s",
                    "cwd": "/p",
                    "originator": "codex_cli_rs",
                    "cli_version": "0.1",
                },
            },
            item(
                {
                    "type": "message",
                    "role": "user",
                    "content": [{"type": "input_text", "text": "check the logs"}],
                }
            ),
        ]
        for i, cid in enumerate(ids):
            recs.append(
                item(
                    {
                        "type": "function_call",
                        "name": "shell",
                        "arguments": json.dumps({"command": ["cat", str(i)]}),
                        "call_id": cid,
                    }
                )
            )
            recs.append(
                item({"type": "function_call_output", "call_id": cid, "output": result_text})
            )
        recs.append(
            item(
                {
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": "done"}],
                }
            )
        )
        return recs
    if fmt == "langchain":
        recs = [{"type": "human", "data": {"content": "check the logs", "type": "human"}}]
        for i, cid in enumerate(ids):
            recs.append(
                {
                    "type": "ai",
                    "data": {
                        "content": "",
                        "type": "ai",
                        "tool_calls": [
                            {
                                "name": "run",
                                "args": {"cmd": f"cat {i}"},
                                "id": cid,
                                "type": "tool_call",
                            }
                        ],
                    },
                }
            )
            recs.append(
                {
                    "type": "tool",
                    "data": {
                        "content": result_text,
                        "type": "tool",
                        "tool_call_id": cid,
                        "name": "run",
                    },
                }
            )
        recs.append({"type": "ai", "data": {"content": "done", "type": "ai"}})
        return recs
    raise ValueError(fmt)


LINE_FORMATS = ("openai_chat", "anthropic", "claude_code", "codex", "langchain")


def _jsonl(recs: list[dict[str, Any]], eol: str = "\n") -> bytes:
    return "".join(json.dumps(r, ensure_ascii=False) + eol for r in recs).encode(
        "utf-8", "surrogatepass"
    )


def cases(fmt: str) -> Iterator[Case]:
    """Every hostile case for one line-based format."""
    recs = _records(fmt, ["call_1", "call_2"], LONG)
    base = _jsonl(recs)
    lines = base.splitlines(keepends=True)
    n = len(lines)

    yield Case("valid", base, "ok")
    yield Case("not_json_line", b"".join(lines[:2] + [b"{oops\n"] + lines[2:]), "error", 3)
    yield Case(
        "not_json_line_kept",
        b"".join(lines[:2] + [b"{oops\n"] + lines[2:]),
        "ok",
        warn=True,
        on_invalid="keep",
    )
    first = next(i for i, line in enumerate(lines) if b"check the logs" in line)
    bad = lines[:first] + [lines[first].replace(b"check", b"ch\xffck")] + lines[first + 1 :]
    yield Case("invalid_utf8", b"".join(bad), "error", first + 1)
    yield Case("bom", b"\xef\xbb\xbf" + base, "ok")
    yield Case("crlf", _jsonl(recs, "\r\n"), "ok")
    yield Case("no_final_newline", base.rstrip(b"\n"), "ok")
    yield Case("truncated_last_line", base + lines[-1][: len(lines[-1]) // 2], "error", n + 1)
    yield Case("empty", b"", "error", None)
    yield Case("blank_lines", b"\n".join(lines[:2]) + b"\n   \n" + b"".join(lines[2:]), "ok")
    yield Case(
        "deep_nesting",
        b"".join(lines[:2]) + b"[" * 100_000 + b"]" * 100_000 + b"\n" + b"".join(lines[2:]),
        "error",
        3,
    )
    # A record that is not an object: an error naming it, or (for formats that pass
    # unknown records through, like Claude Code) a pass-through; never a crash.
    yield Case(
        "wrong_shape", b"".join(lines[:2]) + b'"just a string"\n' + b"".join(lines[2:]), "either", 3
    )
    yield Case("ids_hostile", _jsonl(_records(fmt, HOSTILE_IDS, LONG)), "ok")
    yield Case("nul_and_control", _jsonl(_records(fmt, ["c\x00\x01"], LONG + "\x00\x1b[31m")), "ok")
    yield Case(
        "endoftext", _jsonl(_records(fmt, ["call_1"], LONG + "<|endoftext|><|im_start|>")), "ok"
    )
    orphan = _records(fmt, ["call_1", "call_2"], LONG)
    no_call = [r for i, r in enumerate(orphan) if i != 1]  # drop the first call
    yield Case("result_without_call", _jsonl(no_call), "ok")
    no_result = [r for i, r in enumerate(orphan) if i != 2]  # drop the first result
    yield Case("call_without_result", _jsonl(no_result), "ok")
    yield Case("duplicate_records", base + b"".join(lines[1:3]), "ok")
    big = lines[1].replace(b"{", b'{"n": 123456789012345678901234567890, ', 1)
    yield Case("big_integer", b"".join([lines[0], big, *lines[2:]]), "ok")
    yield Case("lone_surrogate", base.replace(b"check the logs", b"check \\ud800 logs", 1), "ok")
    if fmt != "openai_chat":
        other = _jsonl(_records("openai_chat", ["call_9"], "x"))
        yield Case("mixed_formats", base + other, "either", n + 1)


def write_corpus(root: Path) -> None:
    """Write every case to ``root/<format>/<case>.jsonl``."""
    for fmt in LINE_FORMATS:
        for case in cases(fmt):
            target = root / fmt / f"{case.name}.jsonl"
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(case.data)


if __name__ == "__main__":
    write_corpus(Path(sys.argv[1] if len(sys.argv) > 1 else "hostile-corpus"))
