"""Checks every format test runs: lossless round trips, byte-exact restore, stable reruns."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ctxcli.api import reduce_file, restore_file
from ctxcli.core.model import Conversation
from ctxcli.core.protocols import sha256
from ctxcli.formats import Document, load
from ctxcli.formats.validate import check_document, validate_bytes
from ctxcli.pipeline.config import Config, build_config
from ctxcli.store.disk import OffloadStore
from ctxcli.store.manifest import Header, InputSide, Side
from ctxcli.store.naming import Preview
from ctxcli.store.restore import restore_bytes

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "formats"
TRUNCATE = build_config(
    {"stages": [{"use": "truncate_tool_output", "max_length": 256}]}, "format tests"
)


def config(*stages: dict[str, Any]) -> Config:
    """A configuration running ``stages`` (cl100k tokens, no file lookup)."""
    return build_config({"stages": [dict(s) for s in stages]}, "format tests")


def problems(raw: bytes, **kw: Any) -> set[tuple[str, str | None]]:
    """The validation problems of ``raw`` as (kind, call id) pairs."""
    return {(p.kind, p.call_id) for p in validate_bytes(raw, **kw)}


def assert_identity(raw: bytes) -> Document:
    """Loading and dumping with no stage gives the input back, copied as one piece."""
    doc = load(raw, "fixture")
    out, script = doc.format.dump(doc, doc.conversation, Preview("offload"))
    assert out == raw
    assert all(op[0] == "c" for op in script.ops)
    return doc


def golden_roundtrip(src: Path, fmt: str, tmp_path: Path, cfg: Config = TRUNCATE) -> bytes:
    """Reduce ``src``; check restore, rerun and validation; return the output bytes."""
    raw = src.read_bytes()
    out_path = tmp_path / "reduced"
    report, out = reduce_file(src, out_path, config=cfg, offload_dir=tmp_path / "off")
    assert report.format == fmt
    manifest = json.loads((tmp_path / "off" / "manifest.json").read_bytes())
    assert manifest["format"] == fmt
    assert restore_file(out_path, offload_dir=tmp_path / "off") == raw
    _, again = reduce_file(out_path, tmp_path / "again", config=cfg, offload_dir=tmp_path / "off2")
    assert again == out, "a second reduce must change nothing"
    assert problems(out) <= problems(raw)
    return out


def dump_and_restore(doc: Document, conv: Conversation, tmp_path: Path) -> bytes:
    """Write ``conv`` through the format with a real offload store; check restore."""
    root = tmp_path / "edit.offload"
    store = OffloadStore(root, str(root))
    out, script = doc.format.dump(doc, conv, store)
    header = Header.new(
        format=doc.format.name,
        units=doc.format.units,
        input=InputSide(name="fixture", sha256=sha256(doc.raw), bytes=len(doc.raw)),
        output=Side(sha256=sha256(out), bytes=len(out)),
    )
    store.commit(header, script.ops)
    assert restore_bytes(out, root) == doc.raw
    reloaded = load(out, "edited", format=doc.format.name)
    assert check_document(reloaded) == [], check_document(reloaded)
    return out


def lines(raw: bytes) -> list[Any]:
    """The parsed JSONL records of ``raw``."""
    return [json.loads(line) for line in raw.splitlines() if line.strip()]
