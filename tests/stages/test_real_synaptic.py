"""keep_last, strip_tool_calls, strip_and_truncate and summarize on the real transcripts.

Every file in ../shared/transcripts that ctx can read (the list grows as formats
land), for n in 1, 2, 5, 20: the output has no pairing problem the input did not
have, ``restore`` rebuilds the input byte for byte, and a rerun changes nothing.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from ctxcli.api import RunOptions, reduce_bytes, reduce_file, restore_file
from ctxcli.formats import Document, load
from ctxcli.formats.validate import check_document
from ctxcli.pipeline.config import build_config
from support.paths import corpus, shared_transcripts

SIZES = (1, 2, 5, 20)
STAGES: dict[str, Any] = {
    "keep_last": lambda n: [{"use": "keep_last", "keep_messages": n}],
    # n doubles as the number of protected rounds, so all four runs differ.
    "strip_tool_calls": lambda n: [{"use": "strip_tool_calls", "keep_last_rounds": n % 20}],
    "strip_and_truncate": lambda n: [{"use": "strip_and_truncate", "keep_messages": n}],
    "summarize": lambda n: [{"use": "summarize", "trigger": "always", "keep_messages": n}],
}
FILES = shared_transcripts()

pytestmark = pytest.mark.real_data


def _load(raw: bytes, name: str) -> Document:
    return load(raw, name, on_invalid="keep")


def _problems(doc: Document) -> Counter[tuple[str, str | None]]:
    # Lines move when records are dropped: compare what is wrong, not where.
    return Counter((p.kind, p.call_id) for p in check_document(doc))


@pytest.mark.slow
@pytest.mark.parametrize("stage", sorted(STAGES))
@pytest.mark.parametrize("path", corpus(FILES))
def test_real_transcript(path: Path, stage: str, tmp_path: Path) -> None:
    raw = path.read_bytes()
    # Every shared transcript loads today; one that stops loading is a failure.
    before = _problems(_load(raw, path.name))
    for n in SIZES:
        config = build_config({"tokenizer": "approx", "stages": STAGES[stage](n)}, stage)
        off = tmp_path / f"off-{n}"
        report, out = reduce_file(
            path, config=config, offload_dir=off, options=RunOptions(on_invalid="keep")
        )
        where = f"{path.name} {stage} n={n}"
        assert restore_file("out", offload_dir=off, raw=out) == raw, where
        new = _problems(_load(out, "out")) - before
        assert new == Counter(), f"{where}: new problems {sorted(new)}"
        again = reduce_bytes(out, config=config, path="out", options=RunOptions(on_invalid="keep"))
        assert again.output == out, f"{where}: a rerun changed the output"
        assert report.tokens_after <= report.tokens_before, where
