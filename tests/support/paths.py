"""Where the tests find things: the checkout, its fixtures and the real transcripts beside it.

The real transcripts in ``../shared/transcripts`` are third-party files that must not be
copied into the repository, so a clone may not have them. Every test that reads them goes
through :func:`need_shared`: the ``real_data`` marker (conftest's hook), the ``shared``
fixture and the :func:`corpus` placeholder all call it. Without the corpus the test skips
with one line, or fails when CTX_REQUIRE_SHARED=1 (CI), so it never skips silently.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
# The real transcripts beside the checkout (CTX_SHARED_TRANSCRIPTS points elsewhere: the tests
# of the guard use it to stand for a clone without them).
SHARED = Path(os.environ.get("CTX_SHARED_TRANSCRIPTS") or REPO.parent / "shared" / "transcripts")
TESTS = REPO / "tests"
FIXTURES = TESTS / "fixtures"
CASES = TESTS / "cases"
"""The golden cases (``tests/stages/test_cases.py``): ``<stage>/<case>/``."""
SNAPSHOTS = TESTS / "snapshots"
SAMPLE = REPO / "sample_transcripts" / "openai_chat_support.jsonl"
"""The bundled sample transcript most tests reduce."""


def load_script(name: str) -> Any:
    """The module ``scripts/<name>.py`` (the docs generators), loaded once by its name."""
    import importlib.util
    import sys

    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


REQUIRE_SHARED = "CTX_REQUIRE_SHARED"
"""Set to 1 (as .ci/run does) and a test that needs the real transcripts fails without them."""


def need_shared() -> Path:
    """``../shared/transcripts``; skip the test without it (fail under CTX_REQUIRE_SHARED=1)."""
    if SHARED.is_dir():
        return SHARED
    if os.environ.get(REQUIRE_SHARED, "") not in ("", "0"):
        pytest.fail(
            f"{SHARED} is missing and {REQUIRE_SHARED}=1: this test needs it", pytrace=False
        )
    pytest.skip(f"needs the real transcripts in {SHARED} (absent in this clone)")


def shared_transcripts() -> list[Path]:
    """The real transcripts in ../shared/transcripts (empty when absent)."""
    if not SHARED.is_dir():
        return []
    return sorted(p for p in SHARED.iterdir() if p.is_file() and p.suffix != ".md")


def corpus(paths: Sequence[Path], what: str = "a transcript") -> list[Any]:
    """Parameters over real transcripts, never an empty list (pytest would collect nothing).

    Without ../shared the one placeholder skips (fails under CTX_REQUIRE_SHARED=1); with it,
    an empty ``paths`` fails, naming ``what`` was looked for.
    """
    if paths:
        return [pytest.param(p, id=p.name, marks=pytest.mark.real_data) for p in paths]
    return [no_corpus(what)]


def no_corpus(what: str, arity: int = 1) -> Any:
    """The parameter set that stands for an empty corpus (``arity`` values, all None)."""
    marks = pytest.mark.real_data(none_match=what)
    return pytest.param(*([None] * arity), id="no-real-transcripts", marks=marks)
