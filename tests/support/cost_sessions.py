"""Hand-made Claude Code sessions and Codex rollouts for the cost tests: a few records each."""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

T0 = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)


class Words:
    """A token counter that counts words: exact, readable expectations."""

    name = "words"

    def count(self, text: str) -> int:
        return len(text.split())


def stamp(seconds: float) -> str:
    """An ISO timestamp ``seconds`` after T0, as the clients write it."""
    return (T0 + timedelta(seconds=seconds)).isoformat().replace("+00:00", "Z")


def usage(
    inp: int = 3, read: int = 0, write: int = 0, out: int = 1, hour: int = 0
) -> dict[str, Any]:
    return {
        "input_tokens": inp,
        "cache_creation_input_tokens": write,
        "cache_read_input_tokens": read,
        "cache_creation": {"ephemeral_5m_input_tokens": write - hour, "ephemeral_1h_input_tokens": hour},
        "output_tokens": out,
    }  # fmt: skip


class ClaudeSession:
    """Records of a Claude Code session, chained by uuid as the client writes them."""

    def __init__(self, model: str = "claude-sonnet-4-5-20250929") -> None:
        self.model = model
        self.records: list[dict[str, Any]] = []
        self.last: str | None = None
        self.n = 0

    def _add(self, record: dict[str, Any], parent: str | None = "last") -> str:
        self.n += 1
        uuid = f"u{self.n:04d}"
        record.setdefault("parentUuid", self.last if parent == "last" else parent)
        record.update(uuid=uuid, sessionId="s1")
        record.setdefault("isSidechain", False)
        self.records.append(record)
        self.last = uuid
        return uuid

    def user(self, text: str, at: float, **extra: Any) -> str:
        message = {"role": "user", "content": text}
        return self._add({"type": "user", "message": message, "timestamp": stamp(at), **extra})

    def result(self, tool_id: str, text: str, at: float, parent: str | None = "last") -> str:
        block = {"type": "tool_result", "tool_use_id": tool_id, "content": text}
        message = {"role": "user", "content": [block]}
        record = {"type": "user", "message": message, "timestamp": stamp(at)}
        return self._add(record, parent)

    def response(
        self, mid: str, blocks: list[dict[str, Any]], at: float, use: dict[str, Any], **extra: Any
    ) -> list[str]:
        """One API response split over one record per block; streaming output on all but the last."""
        uuids = []
        for k, block in enumerate(blocks):
            u = dict(use)
            if k < len(blocks) - 1:
                u["output_tokens"] = 1
            message = {"model": self.model, "id": mid, "type": "message", "role": "assistant",
                       "content": [block], "stop_reason": None, "usage": u}  # fmt: skip
            record = {"type": "assistant", "message": message, "requestId": f"req_{mid}",
                      "timestamp": stamp(at + k * 0.5), **extra}  # fmt: skip
            uuids.append(self._add(record))
        return uuids

    def compact(self, summary: str, at: float) -> None:
        self._add({"type": "system", "subtype": "compact_boundary", "timestamp": stamp(at)}, None)
        self.user(summary, at, isCompactSummary=True, isVisibleInTranscriptOnly=True)

    def write(self, path: Path, extra_lines: Iterable[str] = ()) -> Path:
        lines = [json.dumps(r) for r in self.records]
        path.write_text("\n".join([*lines, *extra_lines]) + "\n", encoding="utf-8")
        return path


def text(s: str) -> dict[str, Any]:
    return {"type": "text", "text": s}


def tool_use(tid: str, command: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": tid, "name": "Bash", "input": {"command": command}}


class CodexRollout:
    """Records of a Codex rollout (cli 0.40 order: token_count before the call's items)."""

    def __init__(self, model: str = "gpt-5-codex") -> None:
        self.records: list[dict[str, Any]] = [
            {"timestamp": stamp(0), "type": "session_meta", "payload": {"id": "r1"}},
            {"timestamp": stamp(0), "type": "turn_context", "payload": {"model": model}},
        ]
        self.total = {"input_tokens": 0, "cached_input_tokens": 0, "output_tokens": 0,
                      "reasoning_output_tokens": 0, "total_tokens": 0}  # fmt: skip

    def item(self, payload: dict[str, Any], at: float) -> None:
        self.records.append({"timestamp": stamp(at), "type": "response_item", "payload": payload})

    def user(self, s: str, at: float) -> None:
        content = [{"type": "input_text", "text": s}]
        self.item({"type": "message", "role": "user", "content": content}, at)

    def call(
        self, at: float, inp: int, cached: int, out: int, reasoning: int = 0, repeat: int = 1
    ) -> None:
        last = {"input_tokens": inp, "cached_input_tokens": cached, "output_tokens": out,
                "reasoning_output_tokens": reasoning, "total_tokens": inp + out}  # fmt: skip
        self.total = {k: self.total[k] + last[k] for k in self.total}
        info = {"total_token_usage": dict(self.total), "last_token_usage": last}
        for _ in range(repeat):
            payload = {"type": "token_count", "info": info, "rate_limits": None}
            self.records.append({"timestamp": stamp(at), "type": "event_msg", "payload": payload})

    def reset(self) -> None:
        """A new process resumes the rollout: its cumulative counter starts at zero."""
        self.total = dict.fromkeys(self.total, 0)

    def write(self, path: Path) -> Path:
        path.write_text("\n".join(json.dumps(r) for r in self.records) + "\n", encoding="utf-8")
        return path
