"""The manual's Benchmarks page is what the last recorded runs printed, never typed."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from support.paths import REPO, load_script


@pytest.fixture
def recorder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    module = load_script("record_bench")
    monkeypatch.setattr(module, "RECORDS", tmp_path / "bench")
    monkeypatch.setattr(module, "PAGE", tmp_path / "benchmarks.md")
    return module


def test_the_page_is_what_the_records_make() -> None:
    assert load_script("record_bench").main(["--check"]) == 0


def test_make_bench_and_make_eval_record_every_benchmark() -> None:
    makefile = (REPO / "Makefile").read_text()
    module = load_script("record_bench")
    for bench in module.BENCHES:
        target = re.search(rf"^{bench.target}:.*\n((?:\t.*\n)+)", makefile, re.M)
        assert target, bench.target
        assert f"$(RECORD) {bench.name} -- " in target.group(1), bench.name
    assert "benchmarks.md" in (REPO / "mkdocs.yml").read_text()


def test_a_run_is_kept_and_the_page_written_again(recorder: Any) -> None:
    code = recorder.main(["eval", "--", sys.executable, "-c", "print('saved 42%')"])
    assert code == 0
    assert (recorder.RECORDS / "eval.txt").read_text() == "saved 42%\n"
    meta = json.loads((recorder.RECORDS / "eval.json").read_text())
    assert meta["command"].startswith("python -c ")
    page = recorder.PAGE.read_text()
    assert "```text\nsaved 42%\n```" in page
    assert "Not recorded in this checkout yet: run `make bench`." in page


def test_a_failed_run_keeps_the_last_record(recorder: Any) -> None:
    assert recorder.main(["eval", "--", sys.executable, "-c", "print('first')"]) == 0
    failing = [sys.executable, "-c", "print('half'); raise SystemExit(3)"]
    assert recorder.main(["eval", "--", *failing]) == 3
    assert (recorder.RECORDS / "eval.txt").read_text() == "first\n"
    assert "first" in recorder.PAGE.read_text()


def test_the_page_names_the_bench_variables_of_the_run(
    recorder: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BENCH_MB", "100")
    assert recorder.main(["bench", "--", sys.executable, "-c", "print(1)"]) == 0
    assert "`BENCH_MB=100 python -c print(1)`" in recorder.PAGE.read_text()
