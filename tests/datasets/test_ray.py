"""Ray Data in local mode (``make test-ray``): reduce and restore datasets of trajectories.

Ray starts once for the module (2 CPUs, no dashboard) and is shut down after it;
``make test-ray`` runs under ``timeout`` so a hung Ray never outlives the run.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from support.cli import invoke
from support.dataset_rows import CONFIG, message_rows, text_rows, write_jsonl

pytestmark = [
    pytest.mark.ray,
    # Ray's own modules warn about Ray's own deprecated settings.
    pytest.mark.filterwarnings("ignore::DeprecationWarning:ray"),
    pytest.mark.filterwarnings("ignore::FutureWarning:ray"),
    pytest.mark.real_data,
]


@pytest.fixture(scope="module", autouse=True)
def local_ray() -> Iterator[None]:
    # Here, not at import: `make test` runs before `make test-ray` installs Ray, and a
    # module skipped at collection counted as a skip of the default suite.
    ray = pytest.importorskip("ray", reason="Ray is not installed (pip install -e '.[ray]')")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    try:
        yield
    finally:
        ray.shutdown()


def by_id(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(rows, key=lambda r: r["id"])


def test_500_rows_reduce_and_restore_byte_identical(tmp_path: Path) -> None:
    import ray.data

    from ctxcli.datasets.ray import reduce_dataset, restore_dataset

    rows = message_rows(500)
    ds = ray.data.from_items(rows)
    off = str(tmp_path / "offload")
    reduced = reduce_dataset(ds, CONFIG, offload_uri=off, concurrency=2).materialize()
    stats = reduced.select_columns(["ctx_tokens_before", "ctx_tokens_after", "ctx_error"])
    got = stats.take_all()
    assert len(got) == 500 and all(r["ctx_error"] is None for r in got)
    assert sum(r["ctx_tokens_after"] for r in got) < 0.8 * sum(r["ctx_tokens_before"] for r in got)
    restored = restore_dataset(reduced, offload_uri=off, concurrency=2).take_all()
    assert by_id(restored) == by_id(ds.take_all())
    assert set(restored[0]) == {"id", "messages"}


def test_text_column_restores_the_files_bytes(tmp_path: Path) -> None:
    import ray.data

    from ctxcli.datasets.ray import reduce_dataset, restore_dataset

    rows = text_rows()
    off = str(tmp_path / "offload")
    reduced = reduce_dataset(
        ray.data.from_items(rows), CONFIG, offload_uri=off, column="trajectory"
    ).materialize()
    formats = {r["ctx_format"] for r in reduced.select_columns(["ctx_format"]).take_all()}
    assert {"json_doc", "claude_code", "codex", "openai_chat"} <= formats
    restored = restore_dataset(reduced, offload_uri=off, column="trajectory").take_all()
    assert by_id(restored) == by_id(rows)


def test_hugging_face_dataset_through_ray(tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets", reason="datasets is not installed")
    from ctxcli.datasets.ray import reduce_dataset, restore_dataset, to_huggingface

    rows = message_rows(30)
    hf = datasets.Dataset.from_list(rows)
    off = str(tmp_path / "offload")
    reduced = reduce_dataset(hf, CONFIG, offload_uri=off).materialize()
    back = to_huggingface(restore_dataset(reduced, offload_uri=off))
    assert isinstance(back, datasets.Dataset)
    assert by_id(back.to_list()) == by_id(hf.to_list())


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_cli_engine_ray_round_trip(fmt: str, tmp_path: Path) -> None:
    rows = message_rows(60)
    src = tmp_path / "in"
    if fmt == "jsonl":
        write_jsonl(rows[:30], src / "part-0.jsonl")
        write_jsonl(rows[30:], src / "part-1.jsonl")
    else:
        import pyarrow as pa
        import pyarrow.parquet as pq

        src.mkdir()
        pq.write_table(pa.Table.from_pylist(rows), src / "part-0.parquet")
    toml = tmp_path / "ctx.toml"
    toml.write_text(
        '[[stages]]\nuse = "truncate_tool_output"\nmax_length = 400\n'
        '[[stages]]\nuse = "clear_tool_results"\nmax_tokens = 3000\n'
    )
    out, back = tmp_path / "out", tmp_path / "back"
    result = invoke(
        ["reduce", "--engine", "ray", str(src), "-o", str(out), "-c", str(toml), "--json"]
    )
    summary = json.loads(result.stdout)
    assert summary["rows"] == 60 and summary["errors"] == 0
    assert summary["tokens_after"] < summary["tokens_before"]
    assert summary["offload_uri"] == f"{out}.offload"
    assert not list(tmp_path.glob(".out.ctx-tmp-*"))
    invoke(
        ["restore", "--engine", "ray", str(out), "-o", str(back), "--offload-dir", f"{out}.offload"]
    )
    import ray.data

    from ctxcli.datasets.ray import read_dataset

    assert by_id(read_dataset(str(back)).take_all()) == by_id(read_dataset(str(src)).take_all())
    again = invoke(["reduce", "--engine", "ray", str(src), "-o", str(out)], code=2)
    assert "exists; choose another output directory" in again.stderr
    assert ray.data  # imported above for read_dataset's dataset


def test_engine_ray_argument_errors(tmp_path: Path) -> None:
    result = invoke(["reduce", "--engine", "spark", "x"], code=2)
    assert result.stderr.strip() == "ctx: error: --engine 'spark' is invalid: use 'local' or 'ray'."
    result = invoke(["reduce", "--engine", "ray", "x"], code=2)
    assert "takes one dataset" in result.stderr


def test_dataset_on_the_loopback_s3_server(s3: Any, tmp_path: Path) -> None:
    """Input, output and offload as s3:// URLs; the workers get the endpoint as options."""
    from ctxcli.api.remote import write_url
    from ctxcli.core.errors import CtxError
    from ctxcli.datasets.ray import DatasetOptions, read_dataset, reduce_path, restore_path

    options = {
        "key": "testing",
        "secret": "testing",
        "client_kwargs": {"endpoint_url": s3.endpoint, "region_name": "us-east-1"},
    }
    bucket = s3.new_bucket()
    rows = message_rows(40)
    write_url(
        f"s3://{bucket}/in/part-0.jsonl",
        "".join(json.dumps(r) + "\n" for r in rows).encode(),
        options,
    )
    summary = reduce_path(
        f"s3://{bucket}/in",
        f"s3://{bucket}/out",
        CONFIG,
        DatasetOptions(offload_uri=f"s3://{bucket}/offload", storage_options=options),
    )
    assert summary.rows == 40 and summary.errors == 0
    assert summary.tokens_after < summary.tokens_before
    assert (
        restore_path(
            f"s3://{bucket}/out",
            f"s3://{bucket}/back",
            DatasetOptions(offload_uri=f"s3://{bucket}/offload", storage_options=options),
        )
        == 40
    )
    with pytest.raises(CtxError, match="exists; choose another output directory"):
        reduce_path(
            f"s3://{bucket}/in", f"s3://{bucket}/out", None, DatasetOptions(storage_options=options)
        )
    back = read_dataset(f"s3://{bucket}/back", storage_options=options).take_all()
    original = read_dataset(f"s3://{bucket}/in", storage_options=options).take_all()
    assert by_id(back) == by_id(original)


def test_jsonl_rows_restore_byte_identical_under_their_names(tmp_path: Path) -> None:
    # Issue 35: 0 of 200 rows came back byte-identical (Arrow's JSON reader gave every
    # message "tool_calls": null, "name": null, ...) and outputs were named 0354Hy…_000000.
    rows = message_rows(200)
    src = tmp_path / "in"
    for k in range(4):
        write_jsonl(rows[50 * k : 50 * (k + 1)], src / f"part-{k}.jsonl")
    toml = tmp_path / "ctx.toml"
    toml.write_text(
        '[[stages]]\nuse = "truncate_tool_output"\nmax_length = 400\n'
        '[[stages]]\nuse = "clear_tool_results"\nmax_tokens = 3000\n'
    )
    out, back = tmp_path / "out", tmp_path / "back"
    reduce = ["reduce", "--engine", "ray", str(src), "-o", str(out), "-c", str(toml), "--json"]
    summary = json.loads(invoke(reduce).stdout)
    assert summary["rows"] == 200 and summary["errors"] == 0
    assert summary["tokens_after"] < summary["tokens_before"]
    names = sorted(p.name for p in src.iterdir())
    assert sorted(p.name for p in out.iterdir()) == names
    invoke(["restore", "--engine", "ray", str(out), "-o", str(back)])
    assert sorted(p.name for p in back.iterdir()) == names
    for name in names:
        assert (back / name).read_bytes() == (src / name).read_bytes()
    assert summary["files"] == 4
