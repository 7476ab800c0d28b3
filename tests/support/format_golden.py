"""Checks every format test runs: lossless round trips, byte-exact restore, stable reruns.

The checks themselves are public (:mod:`ctxcli.testing`, for format plugin authors); this
module gives them the names and defaults the format tests use.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ctxcli.formats.validate import validate_bytes
from ctxcli.pipeline.config import Config, build_config
from ctxcli.testing import assert_dump_restores as dump_and_restore
from ctxcli.testing import assert_format_identity as assert_identity
from ctxcli.testing import assert_roundtrip

__all__ = [
    "FIXTURES",
    "TRUNCATE",
    "assert_identity",
    "config",
    "dump_and_restore",
    "golden_roundtrip",
    "lines",
    "problems",
]

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "formats"
TRUNCATE = build_config(
    {"stages": [{"use": "truncate_tool_output", "max_chars": 256}]}, "format tests"
)


def config(*stages: dict[str, Any]) -> Config:
    """A configuration running ``stages`` (cl100k tokens, no file lookup)."""
    return build_config({"stages": [dict(s) for s in stages]}, "format tests")


def problems(raw: bytes, **kw: Any) -> set[tuple[str, str | None]]:
    """The validation problems of ``raw`` as (kind, call id) pairs."""
    return {(p.kind, p.call_id) for p in validate_bytes(raw, **kw)}


def golden_roundtrip(src: Path, fmt: str, tmp_path: Path, cfg: Config = TRUNCATE) -> bytes:
    """Reduce ``src`` as ``fmt``; check restore, rerun and validation; return the output."""
    return assert_roundtrip(src, cfg, format=fmt, workdir=tmp_path)


def lines(raw: bytes) -> list[Any]:
    """The parsed JSONL records of ``raw``."""
    return [json.loads(line) for line in raw.splitlines() if line.strip()]
