"""Make docs/report.png, the README's picture: ``ctx report`` of the bundled Claude Code sample.

The sample is reported with the chain made for it (``--preset claude-code-resume``): the
default chain leaves a session this small as it is.

``make report-png`` runs it. The page is written in a scratch directory (as a reader runs
``ctx report``: the sample copied there, no plugins, no colour, a fixed time zone), opened
in Debian's Chromium through Playwright (the ``browser`` extra, as ``make test-browser``
uses it; Playwright's own browser download is never used), and the top of the page, from
the headline to the first charts, saved as a PNG.

A screenshot is not byte-stable across Chromium or font versions, so no test compares the
committed PNG with a fresh one; tests/report/test_report_browser.py runs this script and
checks the picture it makes has the committed one's size.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "sample_transcripts" / "claude_code_session.jsonl"
PNG = ROOT / "docs" / "report.png"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
PRESET = ("--preset", "claude-code-resume")
WIDTH, HEIGHT = 1200, 1250
"""The picture's size: the page at this width, cut at this height."""


def write_page(work: Path) -> Path:
    """``ctx report`` of the sample, run in ``work``; the page's path."""
    sample = work / SAMPLE.name
    shutil.copyfile(SAMPLE, sample)
    drop = ("CTX_", "XDG_", "CLAUDE_", "CODEX_", "ANTHROPIC_", "OPENAI_", "FORCE_COLOR")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    env.update(
        CTX_NO_PLUGINS="1", NO_COLOR="1", CTX_NO_CACHE="1", TZ="UTC", HOME=str(work / "home")
    )
    page = work / "report.html"
    ctx = [sys.executable, "-m", "ctxcli", "report", sample.name, "-o", page.name, *PRESET]
    subprocess.run(ctx, cwd=work, env=env, check=True, timeout=600)
    return page


def screenshot(page: Path, png: Path) -> None:
    """The top of ``page`` once its charts are drawn, as a PNG at ``png``."""
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        raise SystemExit("chromium is not installed (apt-get install chromium)")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            tab = browser.new_page(viewport={"width": WIDTH, "height": HEIGHT})
            tab.goto(page.as_uri())
            tab.wait_for_function("document.body.dataset.charts === 'drawn'", timeout=30_000)
            tab.screenshot(path=str(png), clip={"x": 0, "y": 0, "width": WIDTH, "height": HEIGHT})
        finally:
            browser.close()


def main() -> int:
    """Write the picture (docs/report.png, or -o PATH)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-o", "--output", type=Path, default=PNG, help="where the PNG goes")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ctx-report-png-") as scratch:
        work = Path(scratch)
        (work / "home").mkdir()
        screenshot(write_page(work), args.output)
    print(f"wrote {args.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
