"""How stages name the offload file of a tool result: one rule for every stage.

Eino names them by the tool call id (``{root}/trunc/{id}``, ``{root}/clear/{id}``); a
result without one (a format that has no ids) is named by its place. A long id is cut
to its tail by :func:`ctxcli.core.protocols.call_key`, the rule the Claude Code hook
names its files by too (a hint is read from the prompt cache on every later call).
"""

from __future__ import annotations

from ctxcli.core.model import Block, BlockRef
from ctxcli.core.protocols import call_key

__all__ = ["result_key"]


def result_key(ref: BlockRef, block: Block) -> str:
    """The offload key of the tool result ``block`` at ``ref``: its call id, or its tail."""
    call_id = block.call_id
    if not call_id:
        return f"result-{ref[0]}-{ref[1]}"
    return call_key(call_id)
