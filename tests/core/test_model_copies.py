"""Block.with_text and Message.with_blocks copy every field (as dataclasses.replace does)."""

from __future__ import annotations

from dataclasses import fields, replace

from ctxcli.core.model import Block, Kind, Message


def test_with_text_copies_every_other_field() -> None:
    block = Block(Kind.TOOL_RESULT, "old", call_id="c1", name="grep", is_error=True, slot=(1, 2))
    new = block.with_text("new")
    assert new == replace(block, text="new")
    # A field added later must be copied too: every field but text is set above to a
    # value other than its default, so a forgotten one shows up here.
    for f in fields(Block):
        if f.name != "text":
            assert getattr(new, f.name) == getattr(block, f.name) != f.default, f.name


def test_with_blocks_copies_every_other_field() -> None:
    msg = Message("assistant", (Block(Kind.TEXT, "a"),), key=7, group="g")
    blocks = [Block(Kind.TEXT, "b")]
    new = msg.with_blocks(blocks)
    assert new == replace(msg, blocks=tuple(blocks))
    assert isinstance(new.blocks, tuple)
    for f in fields(Message):
        if f.name not in ("blocks", "role"):
            assert getattr(new, f.name) == getattr(msg, f.name) != f.default, f.name
