"""reduce_records: the in-memory API a distributed job maps over its partitions.

Deprecated (reduce_row does it: tests/test_front_door.py checks that it warns); while it
ships it keeps doing what it did, which these tests hold.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import pickle
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from ctxcli.api import reduce_file
from ctxcli.core.errors import ConfigError, TranscriptError
from ctxcli.datasets.records import ReducedRecords, reduce_records
from ctxcli.pipeline.config import load_config
from ctxcli.store.manifest import read_manifest
from support.paths import SAMPLE

pytestmark = pytest.mark.filterwarnings(
    "ignore:ctxcli.reduce_records is deprecated:DeprecationWarning"
)

SMALL = {"stages": [{"use": "truncate_tool_output", "max_chars": 500}]}


def _records() -> list[Any]:
    return [json.loads(line) for line in SAMPLE.read_text(encoding="utf-8").splitlines()]


def test_same_result_as_reduce_file(tmp_path: Path) -> None:
    """Records, offloaded texts and stats are what `ctx reduce` writes to disk."""
    config = load_config(None)  # defaults: the conftest's cwd holds no config
    report, data = reduce_file(
        SAMPLE, tmp_path / "out.jsonl", config=config, offload_dir=tmp_path / "off"
    )
    result = reduce_records(_records(), config=config, offload_dir=str(tmp_path / "off"))
    assert result.records == [json.loads(line) for line in data.decode().splitlines()]
    manifest = read_manifest(tmp_path / "off")
    assert manifest is not None
    assert sorted(result.offload) == sorted(manifest["files"])
    for rel, content in result.offload_bytes().items():
        assert (tmp_path / "off" / rel).read_bytes() == content
    assert result.offload_dir == str(tmp_path / "off")
    assert result.report.tokens_before == report.tokens_before
    assert result.report.tokens_after == report.tokens_after
    assert [s.to_dict() for s in result.report.stages] == [s.to_dict() for s in report.stages]
    assert report.tokens_after < report.tokens_before  # the sample really shrinks


def test_touches_no_file_and_reads_no_config() -> None:
    cwd = Path.cwd()
    # A ctx.toml here would break load_config(); reduce_records must not look.
    (cwd / "ctx.toml").write_text("this is = not [valid toml\n", encoding="utf-8")
    cache = Path(os.environ["CTX_CACHE_DIR"])  # the conftest points the count cache here
    result = reduce_records(_records(), offload_dir="blobs")
    assert sorted(p.name for p in cwd.iterdir()) == ["ctx.toml"]
    assert not cache.exists(), "reduce_records wrote the token-count cache"
    assert result.offload
    assert all(path.startswith(("trunc/", "clear/")) for path in result.offload)
    # Named by call id; the result truncation shortened cites its full text.
    assert "[ctx cleared: blobs/clear/call_00]" in json.dumps(result.records)
    assert "[ctx cleared: blobs/trunc/call_01]" in json.dumps(result.records)


def test_input_records_are_not_mutated() -> None:
    records = _records()
    before = json.dumps(records)
    reduce_records(records)
    assert json.dumps(records) == before


def test_config_as_mapping_and_rerun_is_a_no_op() -> None:
    first = reduce_records(_records(), config=SMALL)
    assert [s.stage for s in first.report.stages] == ["truncate_tool_output"]
    assert first.offload and all(p.startswith("trunc/") for p in first.offload)
    again = reduce_records(first.records, config=SMALL)
    assert again.records == first.records
    assert again.offload == {}


def test_invalid_mapping_is_a_config_error() -> None:
    with pytest.raises(ConfigError) as err:
        reduce_records(_records(), config={"stages": [{"use": "truncate_tool_ouput"}]})
    assert str(err.value).startswith(
        "config: stages[1]: unknown stage 'truncate_tool_ouput'; did you mean "
        "'truncate_tool_output'?"
    )


def test_no_records_and_foreign_records_are_transcript_errors() -> None:
    with pytest.raises(TranscriptError, match="<records>: no records"):
        reduce_records([])
    with pytest.raises(TranscriptError, match="part-7:1: unrecognised transcript format"):
        reduce_records([{"hello": 1}], name="part-7")


def test_offload_texts_are_the_removed_texts() -> None:
    records = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "cat", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "line\n" * 400},
        {"role": "assistant", "content": "done"},
    ]
    result = reduce_records(records, config=SMALL, offload_dir="s3-bucket/run-1")
    assert result.offload == {"trunc/c1": "line\n" * 400}
    assert "s3-bucket/run-1/trunc/c1" in result.records[2]["content"]
    assert len(result.records[2]["content"]) <= 500


def _partition(chunk: list[Any]) -> ReducedRecords:
    return reduce_records(chunk, config=SMALL)


def test_usable_as_map_function_in_worker_processes() -> None:
    """Arguments and results pickle, and a spawned worker needs nothing but them."""
    records = _records()
    partitions = [records, records[:6]]
    pickle.dumps(load_config(None))
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=2, mp_context=ctx) as pool:
        results = list(pool.map(_partition, partitions))
    assert [r.records for r in results] == [_partition(p).records for p in partitions]
    assert results[0].report.tokens_after < results[0].report.tokens_before


def test_public_api_is_importable_from_the_package() -> None:
    import ctxcli

    assert ctxcli.reduce_records is reduce_records
    for name in ctxcli.__all__:
        assert getattr(ctxcli, name) is not None, name


def _shared_cases() -> list[Any]:
    from support.paths import corpus, shared_transcripts

    return corpus(shared_transcripts())


@pytest.mark.may_skip(reason="a transcript with a line that is not JSON has no records form")
@pytest.mark.parametrize("path", _shared_cases())
def test_real_transcripts_reduce_the_same_in_memory(path: Path, tmp_path: Path) -> None:
    """Every format: parsed records (or the one JSON document) reduce as the file does."""
    import orjson

    raw = path.read_bytes()
    document = False
    try:
        records = [orjson.loads(line) for line in raw.splitlines() if line.strip()]
    except orjson.JSONDecodeError:
        try:
            records = [orjson.loads(raw)]  # a JSON document (SWE-agent, mini-swe-agent)
            document = True
        except orjson.JSONDecodeError:
            pytest.skip("has a line that is not JSON (see MANIFEST.md); records cannot hold it")
    config = load_config(None)
    _, data = reduce_file(path, tmp_path / "out", config=config, offload_dir=tmp_path / "off")
    result = reduce_records(records, config=config, offload_dir=str(tmp_path / "off"))
    if document:
        expected = [orjson.loads(data)]
    else:
        expected = [orjson.loads(line) for line in data.splitlines() if line.strip()]
    assert result.records == expected
    manifest = read_manifest(tmp_path / "off")
    assert manifest is not None
    assert sorted(result.offload) == sorted(manifest["files"])
