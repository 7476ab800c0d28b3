"""An unexpected exception is one line and exit 123; CTX_DEBUG=1 adds the traceback."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ctxcli.core.model import Conversation
from ctxcli.stages import StageContext, StageOptions, StageResult, register, registry
from support.cli import invoke
from support.paths import SAMPLE


class BoomOptions(StageOptions):
    """No options."""


def _boom(conv: Conversation, opts: BoomOptions, ctx: StageContext) -> StageResult:
    """Raise, to stand for a bug in a stage."""
    raise RuntimeError("kaboom")


@pytest.fixture
def boom_config() -> Iterator[None]:
    """Register a failing stage for this test only (other tests list every stage)."""
    import ctxcli.stages as stages

    register("boom_for_test", options=BoomOptions)(_boom)
    assert "boom_for_test" in registry()
    Path("ctx.toml").write_text('[[stages]]\nuse = "boom_for_test"\n')
    yield
    stages.STAGE_REGISTRY.reset()


def test_internal_error_is_one_line_and_123(boom_config: None) -> None:
    result = invoke(["reduce", str(SAMPLE), "-o", "out.jsonl"], code=123)
    # The one line that names a config the command line did not name, then the error.
    lines = [ln for ln in result.stderr.strip().splitlines() if not ln.startswith("ctx: config ")]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("ctx: error: internal error: RuntimeError: kaboom.")
    assert "Traceback" not in result.stderr
    assert not Path("out.jsonl").exists() and not Path("out.jsonl.offload").exists()
    assert not [p for p in Path.cwd().iterdir() if "ctx-tmp" in p.name]


def test_ctx_debug_prints_the_traceback(boom_config: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CTX_DEBUG", "1")
    result = invoke(["stats", str(SAMPLE)], code=123)
    assert "Traceback" in result.stderr and "kaboom" in result.stderr
