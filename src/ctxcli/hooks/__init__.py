"""Claude Code and Codex hooks: ctx at the source of a tool output, without a proxy.

``ctx hooks install claude`` writes ctx's hooks into a Claude Code settings file
(:mod:`ctxcli.hooks.settings`); Claude Code then runs ``ctx hooks run post-tool-use``
after each tool call (:mod:`ctxcli.hooks.post_tool_use`: a long output goes to the
offload directory and the model gets a preview and the path, in the tool's own output
shape) and ``ctx hooks run pre-compact`` before it compacts (:mod:`ctxcli.hooks.pre_compact`:
a snapshot of the session file). :mod:`ctxcli.hooks.runner` is what the hook command calls:
it never fails a tool call.
"""

from __future__ import annotations

__all__: list[str] = []
