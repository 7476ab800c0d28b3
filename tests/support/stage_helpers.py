"""Helpers shared by the stage unit tests: run one stage directly, load a fixture."""

from __future__ import annotations

from pathlib import Path

from ctxcli.core.model import Conversation
from ctxcli.formats import load
from ctxcli.testing import StageRun, run_stage

SYNAPTIC = Path(__file__).resolve().parents[1] / "fixtures" / "synaptic"


def run(stage: str, conv: Conversation, **options: object) -> StageRun:
    """:func:`ctxcli.testing.run_stage` with approx counting; its hints cite ``off/``."""
    return run_stage(stage, conv, offload_root="off", **options)


def fixture(name: str, root: Path = SYNAPTIC) -> Conversation:
    """The conversation of a fixture file."""
    path = root / name
    return load(path.read_bytes(), str(path)).conversation
