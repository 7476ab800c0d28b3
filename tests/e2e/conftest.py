"""Fixtures of the real-client end-to-end tests (pytest -m e2e; make e2e)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import SHARED, client  # noqa: E402


def shared(prefix: str) -> list[Path]:
    """The real sessions in ../shared/transcripts whose name starts with ``prefix``."""
    if not SHARED.is_dir():
        return []
    return sorted(p for p in SHARED.glob(f"{prefix}*.jsonl") if p.is_file())


def require(name: str) -> Path:
    """The installed CLI ``name``, or skip the test saying why it is missing."""
    path, why = client(name)
    if path is None:
        pytest.skip(why)
    return path


def require_shared() -> None:
    if not SHARED.is_dir():
        pytest.skip(f"{SHARED} is absent (the real transcripts live beside the checkout)")
