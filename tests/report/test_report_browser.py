"""ctx report pages opened as a person would: Debian's Chromium, headless, via Playwright.

Each page must load without a console error, draw its four charts, and show the
numbers ``ctx stats --json`` (with ``--by-tool``) prints. A screenshot of each goes
to build/. ``make test-browser`` installs Chromium (apt-get) and Playwright (pip);
without them these tests skip and say which is missing.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_report import session

from ctxcli.pipeline.config import load_config
from support.cli import invoke
from support.paths import REPO, SHARED, corpus, shared_transcripts

pytestmark = pytest.mark.browser

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
BUILD = REPO / "build"


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    sync_api = pytest.importorskip(
        "playwright.sync_api",
        reason="playwright is not installed here (make test-browser installs the browser extra)",
    )
    if not Path(CHROMIUM).exists():
        pytest.skip("Debian's chromium is not installed here (make test-browser apt-gets it)")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


def check_page(browser: Any, page_path: Path, source: Path, extra: list[str]) -> dict[str, Any]:
    """Open ``page_path``; assert it is clean, drawn, and agrees with ``ctx stats --json``."""
    stats = json.loads(invoke(["stats", str(source), "--json", "--by-tool", *extra]).stdout)[
        "files"
    ][0]  # the file's report (one --json shape for one file or many)
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    problems: list[str] = []
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(str(e)))
    page.on(
        "request",
        lambda r: problems.append(f"fetched {r.url}") if not r.url.startswith("file:") else None,
    )
    try:
        page.goto(page_path.as_uri())
        page.wait_for_function("document.body.dataset.charts === 'drawn'", timeout=20_000)
        assert problems == []
        marks = page.evaluate(
            """() => Object.fromEntries([...document.querySelectorAll('.chart')].map(c => {
                 const svg = c.querySelector('svg');
                 const box = svg ? svg.getBoundingClientRect() : {width: 0, height: 0};
                 // Vega draws data marks inside groups of role "mark" (axes are role-axis*).
                 return [c.id, {marks: svg ? svg.querySelectorAll('.role-mark > *').length : 0,
                                steps: c.dataset.steps, width: box.width, height: box.height}];
               }))"""
        )
        charts = {"chart-timeline", "chart-tools", "chart-stages", "chart-monitors"}
        # A Claude Code session or Codex rollout also gets the cost timeline.
        assert set(marks) - {"chart-cost"} == charts
        for name, m in marks.items():
            assert m["width"] > 200 and m["height"] > 40, (name, m)
            if name == "chart-monitors" and m["steps"] == "0":
                continue  # a session without tool calls has no monitor line
            assert m["marks"] >= 2, (name, m)

        def value(cid: str) -> int:
            return int(page.get_attribute(f"#{cid}", "data-value"))

        assert value("tokens-before") == stats["tokens_before"]
        assert value("tokens-after") == stats["tokens_after"]
        assert value("messages") == stats["messages"]
        assert value("bytes-before") == stats["bytes_before"]
        assert value("bytes-after") == stats["bytes_after"]
        if stats["resume_tokens_before"] is not None:
            assert value("resume-tokens-before") == stats["resume_tokens_before"]
            assert value("resume-tokens-after") == stats["resume_tokens_after"]
        stages = page.evaluate(
            """() => [...document.querySelectorAll('#table-stages tr[data-stage]')].map(r => ({
                 stage: r.dataset.stage, changed: +r.dataset.changed,
                 offloaded: +r.dataset.offloaded, tokens_before: +r.dataset.tokensBefore,
                 tokens_after: +r.dataset.tokensAfter}))"""
        )
        assert stages == [
            {k: s[k] for k in ("stage", "changed", "offloaded", "tokens_before", "tokens_after")}
            for s in stats["stages"]
        ]
        tools = page.evaluate(
            """() => [...document.querySelectorAll('#table-tools tr[data-tool]')].map(r => ({
                 name: r.dataset.tool, calls: +r.dataset.calls,
                 tokens_before: +r.dataset.tokensBefore, tokens_after: +r.dataset.tokensAfter}))"""
        )
        assert tools == [
            {k: t[k] for k in ("name", "calls", "tokens_before", "tokens_after")}
            for t in stats["by_tool"]
        ]
        monitors = page.evaluate(
            """() => Object.fromEntries([...document.querySelectorAll('#table-monitors tr[data-monitor]')]
                 .map(r => [r.dataset.monitor, +r.dataset.score]))"""
        )
        assert monitors == stats["monitors"]
        # The conversation list pages through every message.
        info = page.inner_text("#page-info")
        assert f"({stats['messages']:,} messages)" in info
        assert page.locator("#table-messages tbody tr").count() == min(100, stats["messages"])
        BUILD.mkdir(exist_ok=True)
        page.screenshot(path=str(BUILD / f"report-{source.name}.png"), full_page=True)
        return stats
    finally:
        page.close()


@pytest.mark.real_data
def test_the_cost_timeline_renders_in_chromium(browser: Any, tmp_path: Path) -> None:
    path = SHARED / "cc_spotter_4d5611e5_subagent_a2898e3.jsonl"
    out = tmp_path / "report.html"
    invoke(["report", str(path), "-o", str(out)])
    check_page(browser, out, path, [])
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    try:
        page.goto(out.as_uri())
        page.wait_for_function("document.body.dataset.charts === 'drawn'", timeout=20_000)
        drawn = page.evaluate(
            """() => { const svg = document.querySelector('#chart-cost svg');
                 const box = svg.getBoundingClientRect();
                 return {lines: svg.querySelectorAll('.role-mark path').length,
                         width: box.width, height: box.height,
                         text: document.querySelector('#cost').innerText}; }"""
        )
        assert drawn["width"] > 200 and drawn["height"] > 40, drawn
        assert drawn["lines"] >= 2, drawn  # as run, with ctx
        assert "Recorded $0.45" in drawn["text"] and "with ctx" in drawn["text"]
    finally:
        page.close()


def test_report_of_a_reduced_session_in_chromium(browser: Any, tmp_path: Path) -> None:
    src = tmp_path / "session.jsonl"
    src.write_bytes(session())
    out = tmp_path / "report.html"
    invoke(["report", str(src), "-o", str(out)])
    stats = check_page(browser, out, src, [])
    assert stats["tokens_after"] < stats["tokens_before"]


def test_a_long_session_is_binned_and_says_so(browser: Any, tmp_path: Path) -> None:
    src = tmp_path / "long.jsonl"
    src.write_bytes(session(rounds=700, lines=3))  # 1,403 messages: more than 1,200 bars
    out = tmp_path / "report.html"
    invoke(["report", str(src), "-o", str(out)])
    check_page(browser, out, src, [])
    page = out.read_text(encoding="utf-8")
    assert "bars of 2 consecutive messages each" in page and "not 1,403 single messages" in page


@pytest.mark.parametrize("path", corpus(shared_transcripts()))
def test_report_of_real_transcripts_in_chromium(browser: Any, tmp_path: Path, path: Path) -> None:
    out = tmp_path / "report.html"
    # One of them has a line that is not JSON: ctx stats needs --on-invalid keep as well.
    invoke(["report", str(path), "-o", str(out), "--on-invalid", "keep"])
    check_page(browser, out, path, ["--on-invalid", "keep"])


@pytest.mark.real_data
def test_report_with_the_resume_preset_in_chromium(browser: Any, tmp_path: Path) -> None:
    # Seven stages, whole messages dropped before the compaction: still the same numbers.
    path = SHARED / "cc_spotter_4d5611e5.jsonl"
    out = tmp_path / "report.html"
    flags = ["--preset", "claude-code-resume"]
    invoke(["report", str(path), "-o", str(out), *flags])
    stats = check_page(browser, out, path, flags)
    assert len(stats["stages"]) == len(load_config(preset="claude-code-resume").stages)


def test_the_readme_picture_is_drawn_by_its_script(browser: Any, tmp_path: Path) -> None:
    """scripts/report_png.py (make report-png) draws the README's picture from the sample.

    Not compared byte for byte with the committed docs/report.png (Chromium and fonts
    change pixels): the same size, and a PNG.
    """
    import struct
    import subprocess
    import sys

    png = tmp_path / "report.png"
    script = REPO / "scripts" / "report_png.py"
    subprocess.run([sys.executable, str(script), "-o", str(png)], check=True, timeout=600)

    def size(path: Path) -> tuple[int, int]:
        head = path.read_bytes()[:24]
        assert head[:8] == b"\x89PNG\r\n\x1a\n", path
        width, height = struct.unpack(">II", head[16:24])
        return width, height

    assert size(png) == size(REPO / "docs" / "report.png") == (1200, 1250)
