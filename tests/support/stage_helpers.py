"""Helpers shared by the stage unit tests: run one stage directly, load a fixture."""

from __future__ import annotations

from pathlib import Path

from ctxcli.core.model import Conversation
from ctxcli.formats import load
from ctxcli.services.counters import get_counter
from ctxcli.stages import StageContext, TokenLedger, get_stage
from ctxcli.stages.base import StageResult
from ctxcli.store.naming import Preview

SYNAPTIC = Path(__file__).resolve().parents[1] / "fixtures" / "synaptic"


def run(stage: str, conv: Conversation, **options: object) -> StageResult:
    """Call a stage function directly, with approx counting and a dry-run offload."""
    spec = get_stage(stage)
    ctx = StageContext(TokenLedger(get_counter("approx")), Preview("off"))
    return spec.fn(conv, spec.options(**options), ctx)


def fixture(name: str, root: Path = SYNAPTIC) -> Conversation:
    """The conversation of a fixture file."""
    path = root / name
    return load(path.read_bytes(), str(path)).conversation
