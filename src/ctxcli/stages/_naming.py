"""How stages name the offload file of a tool result: one rule for every stage.

Eino names them by the tool call id (``{root}/trunc/{id}``, ``{root}/clear/{id}``); a
result without one (a format that has no ids) is named by its place. The store makes
the name safe (``core.protocols.safe_name``) and gives a reused id a name of its own.
"""

from __future__ import annotations

from ctxcli.core.model import Block, BlockRef

__all__ = ["result_key"]


def result_key(ref: BlockRef, block: Block) -> str:
    """The offload key of the tool result ``block`` at ``ref``: its call id."""
    return block.call_id or f"result-{ref[0]}-{ref[1]}"
