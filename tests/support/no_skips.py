"""In CI nothing skips unless it says why it may: ``CTX_NO_SKIPS=1`` turns a skip into a failure.

A skip hides a lost feature as well as it hides a missing tool: the browser tests skip
without chromium, the e2e tests without the npm clients, the S3 tests without moto. On a
developer's clone that is the friendly thing to do; in CI (``.ci/run`` sets the variable)
it would let a suite pass having run nothing. A test whose skip is legitimate everywhere
(a platform it cannot run on, a property of one input) carries ``@pytest.mark.may_skip``
with the reason, and only its skips stay skips.

``tests/conftest.py`` imports the hook; pytest's ``-p support.no_skips`` loads it alone.
"""

from __future__ import annotations

import os
from collections.abc import Generator
from typing import Any

import pluggy
import pytest

NO_SKIPS = "CTX_NO_SKIPS"
"""Set to 1 (as .ci/run does) and a skip of a test without ``may_skip`` fails it."""


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"may_skip(reason): this test may skip even where {NO_SKIPS}=1 fails every other skip",
    )


def _reason(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple):  # (path, line, "Skipped: why")
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[Any]
) -> Generator[None, pluggy.Result[pytest.TestReport]]:
    outcome = yield
    report = outcome.get_result()
    if (
        report.skipped
        and not hasattr(report, "wasxfail")  # an xfail is reported as a skip; it is no skip
        and os.environ.get(NO_SKIPS, "") not in ("", "0")
        and item.get_closest_marker("may_skip") is None
    ):
        report.outcome = "failed"
        report.longrepr = (
            f"skipped, and {NO_SKIPS}=1 lets nothing skip: {_reason(report)} "
            "(install what it needs, or mark the test may_skip with why it may)"
        )
