"""Hugging Face datasets in and out (built locally: no hub access)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from support.dataset_rows import CONFIG, message_rows, text_rows

datasets = pytest.importorskip(
    "datasets", reason="datasets is not installed (pip install -e '.[hf]')"
)
pytestmark = [
    pytest.mark.slow,
    pytest.mark.real_data,
]


def test_500_rows_reduce_and_restore_byte_identical(tmp_path: Path) -> None:
    from ctxcli.datasets.hf import reduce_hf, restore_hf

    rows = message_rows(500)
    ds = datasets.Dataset.from_generator(lambda: iter(rows), cache_dir=str(tmp_path / "hf"))
    off = tmp_path / "offload"
    reduced = reduce_hf(ds, CONFIG, offload_uri=str(off))
    assert reduced.num_rows == 500
    before, after = sum(reduced["ctx_tokens_before"]), sum(reduced["ctx_tokens_after"])
    assert after < before * 0.8 and set(reduced["ctx_format"]) == {"openai_chat"}
    assert reduced["ctx_error"] == [None] * 500
    # Through Parquet, as a job would keep it.
    reduced.to_parquet(str(tmp_path / "reduced.parquet"))
    again = datasets.Dataset.from_parquet(
        str(tmp_path / "reduced.parquet"), cache_dir=str(tmp_path / "hf2")
    )
    restored = restore_hf(again, offload_uri=str(off))
    assert restored.column_names == ["id", "messages"]
    assert restored.to_list() == ds.to_list()
    # Content addressing: the 500 rows share their outputs, far fewer blobs than rows.
    blobs = [p for p in off.rglob("*") if p.is_file()]
    assert 0 < len(blobs) < 500


def test_text_column_of_real_files_restores_their_bytes(tmp_path: Path) -> None:
    from ctxcli.datasets.hf import reduce_hf, restore_hf

    rows = text_rows()
    ds = datasets.Dataset.from_list(rows)
    off = tmp_path / "offload"
    reduced = reduce_hf(ds, CONFIG, offload_uri=str(off), column="trajectory")
    formats = set(reduced["ctx_format"])
    assert {"json_doc", "claude_code", "codex", "openai_chat"} <= formats
    assert all(
        a < b for a, b in zip(reduced["ctx_bytes_after"], reduced["ctx_bytes_before"], strict=True)
    )
    restored = restore_hf(reduced, offload_uri=str(off), column="trajectory")
    assert [r["trajectory"] for r in restored] == [r["trajectory"] for r in rows]


def test_bad_rows_are_kept_with_their_error(tmp_path: Path) -> None:
    from ctxcli.datasets.hf import reduce_hf, restore_hf

    ds = datasets.Dataset.from_list([{"messages": "not json\n"}, {"messages": "{}\n"}])
    reduced = reduce_hf(ds, CONFIG, offload_uri=str(tmp_path / "off"))
    assert reduced["messages"] == ["not json\n", "{}\n"]
    assert all(e and "<row" in e for e in reduced["ctx_error"])
    assert restore_hf(reduced, offload_uri=str(tmp_path / "off")).to_list() == ds.to_list()


def test_missing_column_is_one_line_error(tmp_path: Path) -> None:
    from ctxcli.core.errors import CtxError
    from ctxcli.datasets.hf import reduce_hf

    ds = datasets.Dataset.from_list([{"text": "x"}])
    with pytest.raises(CtxError, match="no column 'messages' \\(it has text\\)"):
        reduce_hf(ds, offload_uri=str(tmp_path))


def test_a_tampered_restore_column_names_its_row(tmp_path: Path) -> None:
    # Issue 34 item 11: ['c'] ops, None ops, a script that is a number... raised
    # IndexError/TypeError out of Dataset.map; each is a RestoreError naming the row.
    from ctxcli.core.errors import RestoreError
    from ctxcli.datasets.hf import reduce_hf, restore_hf

    ds = datasets.Dataset.from_list(message_rows(6))
    off = str(tmp_path / "off")
    reduced = reduce_hf(ds, CONFIG, offload_uri=off)
    restores = list(reduced["ctx_restore"])
    for script in ([["c"]], [None], 5, [["b", 0, 4, "../" * 10 + "dev/zero"]]):
        info = json.loads(restores[4])
        info["script"] = script
        tampered = reduced.remove_columns("ctx_restore").add_column(
            "ctx_restore", [*restores[:4], json.dumps(info), restores[5]]
        )
        with pytest.raises(RestoreError, match="^row 4: the ctx_restore value is not one ctx"):
            restore_hf(tampered, offload_uri=off)
