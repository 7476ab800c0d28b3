"""A Claude Code session as the client writes it with ctx's hook, and the same without.

Built with :class:`~support.cost_sessions.ClaudeSession` (usage recorded on every
response) around two long Bash outputs; with the hook, each output is what
:func:`~ctxcli.hooks.post_tool_use.respond` answered, recorded in ``toolUseResult`` and
in the message, as Claude Code 2.1.331 records a Bash result (the message is the
``stdout``).
"""

from __future__ import annotations

from pathlib import Path

from ctxcli.hooks.post_tool_use import Limits, offload_root, respond
from support.cost_sessions import ClaudeSession, text, tool_use, usage

LONG = {
    "toolu_01": "".join(f"2026-01-01 INFO step {i}: compiled module_{i}.c\n" for i in range(400)),
    "toolu_02": "".join(f"tests/test_{i}.py::test_case PASSED\n" for i in range(300)),
}


def hooked_session(folder: Path, *, hooks: bool, max_chars: int = 2000) -> Path:
    """Write the session (with or without the hook) to ``folder/<kind>.jsonl``."""
    limits = Limits(max_chars=max_chars)
    s = ClaudeSession()
    s.user("Look at the build.", 0)
    at = 1.0
    for n, (call, output) in enumerate(LONG.items()):
        s.response(f"m{n}", [tool_use(call, f"cat file{n}")], at, usage(read=2000 * n, write=2000))
        response = {"stdout": output.rstrip("\n"), "stderr": "", "interrupted": False,
                    "isImage": False, "noOutputExpected": False}  # fmt: skip
        if hooks:
            payload = {"session_id": "s1", "cwd": str(folder), "tool_name": "Bash",
                       "tool_use_id": call, "tool_input": {"command": f"cat file{n}"},
                       "tool_response": response}  # fmt: skip
            reply = respond(payload, limits, offload_root(payload, limits))
            assert reply is not None
            response = reply["hookSpecificOutput"]["updatedToolOutput"]
        s.result(call, response["stdout"], at + 1)
        s.records[-1]["toolUseResult"] = response
        at += 2
    s.response("m9", [text("Done.")], at, usage(read=6000, write=500, out=5))
    return s.write(folder / ("hooked.jsonl" if hooks else "direct.jsonl"))
