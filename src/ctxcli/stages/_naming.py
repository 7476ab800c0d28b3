"""How stages name the offload file of a tool result: one rule for every stage.

Eino names them by the tool call id (``{root}/trunc/{id}``, ``{root}/clear/{id}``); a
result without one (a format that has no ids) is named by its place. A long id is
cut to its last :data:`TAIL` characters: a cleared result's hint is read from the
prompt cache on every later call, and a full Claude Code id (``toolu_01`` and 22
random characters) costs about 15 tokens where its tail costs 5. The tail is as
stable as the id (a later request names the same file, so the sent prefix never
changes) and random enough to be unique in a session; the store gives a reused name
with another text a name of its own (``core.protocols.safe_name``).
"""

from __future__ import annotations

from ctxcli.core.model import Block, BlockRef

__all__ = ["TAIL", "result_key"]

TAIL = 8
"""Characters of a long call id a file name keeps (the random end of the id)."""
_LONG = 12
"""Ids longer than this are cut to their tail; shorter ones (``call_1``) stay whole."""


def result_key(ref: BlockRef, block: Block) -> str:
    """The offload key of the tool result ``block`` at ``ref``: its call id, or its tail."""
    call_id = block.call_id
    if not call_id:
        return f"result-{ref[0]}-{ref[1]}"
    return call_id[-TAIL:] if len(call_id) > _LONG else call_id
