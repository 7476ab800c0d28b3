"""ctx format plugin: a chat log with one ``{"who", "says"}`` object per line.

``{"who": "user" | "agent", "says": "..."}`` is a message; an agent line may carry
``"calls": [{"id", "tool", "args"}]``, answered by ``{"who": "tool", "id", "says"}``.
Fields ctx does not know stay as they are.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ctxcli.formats import Block, Format, Kind, Message, TranscriptError, register_format

ROLES = {"user": "user", "agent": "assistant", "tool": "tool"}


@register_format
class ChatLog(Format):
    """Chat logs of {who, says} lines."""

    name = "chatlog"
    description = "a chat log, one {who, says} object per line"

    def sniff(self, records: Sequence[Any]) -> bool:
        first = records[0] if records else None
        return isinstance(first, dict) and first.get("who") in ROLES and "says" in first

    def to_message(self, data: Any, key: int, line: int, path: str) -> Message | None:
        if not isinstance(data, dict) or data.get("who") not in ROLES:
            raise TranscriptError(
                path, line, 'not a chat log line (expected "who": user, agent or tool)'
            )
        says = data.get("says") if isinstance(data.get("says"), str) else ""
        if data["who"] == "tool":
            call_id = str(data.get("id"))
            result = Block(
                Kind.TOOL_RESULT, says, call_id, data.get("tool"), slot=(("says",), "str")
            )
            return Message("tool", (result,), key)
        blocks = [Block(Kind.TEXT, says, slot=(("says",), "str"))]
        for i, call in enumerate(data.get("calls") or []):
            blocks.append(
                Block(
                    Kind.TOOL_CALL,
                    str(call.get("args", "")),
                    str(call.get("id")),
                    call.get("tool"),
                    slot=(("calls", i, "args"), "str"),
                )
            )
        return Message(ROLES[data["who"]], tuple(blocks), key)

    def new_record(self, message: Message, neighbour: Any) -> Any:
        who = {v: k for k, v in ROLES.items()}.get(message.role, "user")
        return {"who": who, "says": message.text}
