"""Reduce datasets of trajectories with Ray Data (``pip install 'ctx-lossless[ray]'``).

:func:`reduce_dataset` maps :class:`ReduceBatch`, an actor class, over a
``ray.data.Dataset`` with ``map_batches``: each actor builds one
:class:`~ctxcli.datasets.rows.RowReducer` (the tokenizer is loaded once per worker), reduces the
trajectory column of every row, stores the removed texts and original units as
content-addressed blobs under ``offload_uri`` (before the rows leave the actor, so a
reduced row never exists without its blobs), and adds the stats columns
(:data:`ctxcli.datasets.rows.STAT_COLUMNS`). :func:`restore_dataset` rebuilds the original
column from them.

Ray runs wherever ``ray.init()`` connects: a local instance by default, a cluster when
``RAY_ADDRESS`` is set. :func:`reduce_path`/:func:`restore_path` are what
``ctx reduce --engine ray`` and ``ctx restore --engine ray`` call: they read JSONL or
Parquet from a directory, a file or an fsspec URL and write the same format.
"""

from __future__ import annotations

import os
import secrets
import shutil
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ctxcli.api.remote import BlobReader, BlobWriter, filesystem, is_url
from ctxcli.core.errors import CtxError, RestoreError
from ctxcli.datasets.rows import STAT_COLUMNS, RowReducer, columns_of, restore_row
from ctxcli.pipeline.config import Config

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa
    import ray.data

__all__ = [
    "DatasetSummary",
    "ReduceBatch",
    "RestoreBatch",
    "read_dataset",
    "reduce_dataset",
    "reduce_path",
    "restore_dataset",
    "restore_path",
    "to_huggingface",
    "write_dataset",
]

DEFAULT_BATCH_ROWS = 16


def _ray() -> Any:
    try:
        import ray
        import ray.data  # noqa: F401
    except ImportError:
        raise CtxError(
            "the Ray engine needs Ray Data; install it with pip install 'ctx-lossless[ray]'."
        ) from None
    return ray


def _column_array(values: list[Any], like: pa.ChunkedArray) -> pa.Array:
    import pyarrow as pa

    try:
        return pa.array(values, type=like.type)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
        # A reduced message gained or lost a field: let Arrow infer the new type.
        return pa.array(values)


def _check_column(batch: pa.Table, column: str) -> None:
    if column not in batch.column_names:
        raise CtxError(
            f"the dataset has no column {column!r} (it has {', '.join(batch.column_names)}); "
            "name the column that holds the trajectories."
        )


class ReduceBatch:
    """The ``map_batches`` actor: reduces the trajectory column of a batch of rows.

    Args:
        config: the picklable configuration every row is reduced with.
        column: the column holding the trajectories (text, message lists or objects).
        offload_uri: where blobs go (a local directory or an fsspec URL).
        storage_options: fsspec options for ``offload_uri``.
        on_error: ``"keep"`` passes a row ctx cannot read through unchanged with its
            error in ``ctx_error``; ``"raise"`` fails the job.
    """

    def __init__(
        self,
        config: Config | Mapping[str, Any] | None,
        column: str,
        offload_uri: str,
        storage_options: Mapping[str, Any] | None = None,
        on_error: str = "keep",
    ) -> None:
        self.reducer = RowReducer(config, offload_uri, on_invalid="keep")
        self.column = column
        self.on_error = on_error
        self.blobs = BlobWriter(offload_uri, storage_options)

    def __call__(self, batch: pa.Table) -> pa.Table:
        import pyarrow as pa

        _check_column(batch, self.column)
        values = batch.column(self.column).to_pylist()
        results = self.reducer.many(values, on_error=self.on_error)
        out_values, stats, blobs = columns_of(values, results)
        self.blobs.put_many(blobs)
        index = batch.column_names.index(self.column)
        table = batch.set_column(
            index, self.column, _column_array(out_values, batch.column(self.column))
        )
        types = {
            "ctx_format": pa.string(),
            "ctx_restore": pa.string(),
            "ctx_error": pa.string(),
        }
        for name in STAT_COLUMNS:
            if name in table.column_names:
                table = table.drop_columns([name])
            table = table.append_column(
                name, pa.array(stats[name], type=types.get(name, pa.int64()))
            )
        return table


class RestoreBatch:
    """The ``map_batches`` actor of :func:`restore_dataset`."""

    def __init__(
        self, column: str, offload_uri: str, storage_options: Mapping[str, Any] | None = None
    ) -> None:
        self.column = column
        self.fetch = BlobReader(offload_uri, storage_options)

    def __call__(self, batch: pa.Table) -> pa.Table:
        _check_column(batch, self.column)
        if "ctx_restore" not in batch.column_names:
            raise RestoreError("the dataset has no ctx_restore column; it was not reduced by ctx.")
        values = batch.column(self.column).to_pylist()
        scripts = batch.column("ctx_restore").to_pylist()
        originals = [
            value if script is None else restore_row(value, script, self.fetch)
            for value, script in zip(values, scripts, strict=True)
        ]
        index = batch.column_names.index(self.column)
        table = batch.set_column(
            index, self.column, _column_array(originals, batch.column(self.column))
        )
        return table.drop_columns([c for c in STAT_COLUMNS if c in table.column_names])


def _pool(concurrency: int | None) -> dict[str, Any]:
    """Up to ``concurrency`` actors (default: one per CPU), starting from one.

    Not a fixed pool: actors holding every CPU from the start would leave none for
    the read and write tasks, and the job would wait forever.
    """
    actors = concurrency or _default_actors()
    return {"compute": _ray().data.ActorPoolStrategy(min_size=1, max_size=actors)}


def _as_ray(ds: Any) -> Any:
    """A Ray dataset; a Hugging Face ``datasets.Dataset`` is converted."""
    ray = _ray()
    if type(ds).__module__.startswith("datasets."):
        return ray.data.from_huggingface(ds)
    return ds


def reduce_dataset(
    ds: Any,
    config: Config | Mapping[str, Any] | None = None,
    *,
    offload_uri: str,
    column: str = "messages",
    concurrency: int | None = None,
    batch_size: int = DEFAULT_BATCH_ROWS,
    storage_options: Mapping[str, Any] | None = None,
    on_error: str = "keep",
) -> Any:
    """The dataset with ``column`` reduced, the stats columns added, blobs stored.

    ``ds`` may also be a Hugging Face ``datasets.Dataset`` (converted with
    ``ray.data.from_huggingface``; :func:`to_huggingface` converts the result back).
    Lazy like every Ray Data transform: the work (and the blob writes) happen when the
    result is consumed (``write_parquet``, ``take``, ``materialize``).
    ``concurrency`` is the number of actors (default: as many as Ray allows).

    Example::

        import ray
        from ctxcli.datasets.ray import reduce_dataset

        ds = ray.data.read_parquet("s3://bucket/trajectories/")
        out = reduce_dataset(ds, {"preset": "eino"}, offload_uri="s3://bucket/offload")
        out.write_parquet("s3://bucket/reduced/")
    """
    return _as_ray(ds).map_batches(
        ReduceBatch,
        fn_constructor_kwargs={
            "config": config,
            "column": column,
            "offload_uri": offload_uri,
            "storage_options": dict(storage_options or {}),
            "on_error": on_error,
        },
        batch_format="pyarrow",
        batch_size=batch_size,
        num_cpus=1,
        **_pool(concurrency),
    )


def restore_dataset(
    ds: Any,
    *,
    offload_uri: str,
    column: str = "messages",
    concurrency: int | None = None,
    batch_size: int = DEFAULT_BATCH_ROWS,
    storage_options: Mapping[str, Any] | None = None,
) -> Any:
    """The original dataset back from a reduced one and its blobs (stats columns removed)."""
    return _as_ray(ds).map_batches(
        RestoreBatch,
        fn_constructor_kwargs={
            "column": column,
            "offload_uri": offload_uri,
            "storage_options": dict(storage_options or {}),
        },
        batch_format="pyarrow",
        batch_size=batch_size,
        num_cpus=1,
        **_pool(concurrency),
    )


def _default_actors() -> int:
    ray = _ray()
    if not ray.is_initialized():
        return max(1, os.cpu_count() or 1)
    return max(1, int(ray.available_resources().get("CPU", 1)))


def to_huggingface(ds: Any) -> Any:
    """A Ray dataset as a Hugging Face ``datasets.Dataset`` (in memory, no hub)."""
    import datasets
    import pyarrow as pa

    ray = _ray()
    tables = ray.get(ds.to_arrow_refs())
    return datasets.Dataset(pa.concat_tables(tables, promote_options="default"))


# -- paths and URLs ------------------------------------------------------------------


def _arrow_fs(url: str, storage_options: Mapping[str, Any] | None) -> tuple[Any, str]:
    """A pyarrow filesystem for ``url`` (through fsspec) and the path inside it."""
    from pyarrow.fs import FSSpecHandler, PyFileSystem

    fs, path = filesystem(url, storage_options)
    return PyFileSystem(FSSpecHandler(fs)), path


def _data_files(url: str, storage_options: Mapping[str, Any] | None) -> list[str]:
    fs, path = filesystem(url, storage_options)
    if not fs.isdir(path):
        return [path]
    return [p for p in fs.find(path) if not Path(p).name.startswith((".", "_"))]


def dataset_format(url: str, storage_options: Mapping[str, Any] | None = None) -> str:
    """``parquet`` or ``jsonl``, from the name or the files of a directory."""
    names = _data_files(url, storage_options)
    if any(n.endswith(".parquet") for n in names):
        return "parquet"
    if any(n.endswith((".jsonl", ".json", ".jsonl.gz", ".json.gz")) for n in names):
        return "jsonl"
    raise CtxError(f"{url}: no .parquet, .jsonl or .json files; pass a dataset directory or file.")


def read_dataset(
    url: str,
    *,
    fmt: str | None = None,
    storage_options: Mapping[str, Any] | None = None,
    min_blocks: int | None = None,
) -> Any:
    """A JSONL or Parquet dataset (a file or directory, local or fsspec URL).

    Ray hands work to actors block by block, and a file is read as one block: a dataset
    of fewer files than ``min_blocks`` is split into ``min_blocks`` blocks so that every
    worker gets rows.
    """
    ray = _ray()
    fmt = fmt or dataset_format(url, storage_options)
    blocks: dict[str, Any] = {}
    if min_blocks and len(_data_files(url, storage_options)) < min_blocks:
        blocks = {"override_num_blocks": min_blocks}
    fs, path = _arrow_fs(url, storage_options)
    if fmt == "parquet":
        return ray.data.read_parquet(path, filesystem=fs, **blocks)
    return ray.data.read_json(path, filesystem=fs, **blocks)


def refuse_existing(url: str, storage_options: Mapping[str, Any] | None = None) -> None:
    """Refuse an output directory or prefix that already holds something."""
    fs, path = filesystem(url, storage_options)
    if fs.exists(path) and (not fs.isdir(path) or fs.find(path)):
        raise CtxError(f"{url} exists; choose another output directory.")


def write_dataset(
    ds: ray.data.Dataset,
    url: str,
    *,
    fmt: str,
    storage_options: Mapping[str, Any] | None = None,
) -> None:
    """Write ``ds`` as a directory of Parquet or JSONL files.

    A local directory is written under a temporary name and renamed into place; on
    object storage every file is one object that appears only when complete.
    """
    fs, path = _arrow_fs(url, storage_options)
    local = not is_url(url) or url.startswith("file://")
    target = path
    refuse_existing(url, storage_options)
    if local:
        final = Path(path)
        final.parent.mkdir(parents=True, exist_ok=True)
        target = str(final.parent / f".{final.name}.ctx-tmp-{os.getpid()}-{secrets.token_hex(4)}")
    try:
        if fmt == "parquet":
            ds.write_parquet(target, filesystem=fs)
        else:
            ds.write_json(target, filesystem=fs)
        if local:
            os.replace(target, path)
    except BaseException:
        if local:
            shutil.rmtree(target, ignore_errors=True)
        raise


@dataclass
class DatasetSummary:
    """What a dataset run did (``ctx reduce --engine ray`` prints it)."""

    rows: int
    errors: int
    tokens_before: int
    tokens_after: int
    bytes_before: int
    bytes_after: int
    seconds: float
    output: str
    offload_uri: str

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape of ``--json``."""
        return dict(self.__dict__)


def reduce_path(
    input: str,
    output: str,
    config: Config | Mapping[str, Any] | None = None,
    *,
    offload_uri: str | None = None,
    column: str = "messages",
    fmt: str | None = None,
    concurrency: int | None = None,
    batch_size: int = DEFAULT_BATCH_ROWS,
    storage_options: Mapping[str, Any] | None = None,
) -> DatasetSummary:
    """Read a dataset, reduce it with Ray Data, write it (same format) and its blobs."""
    start = time.perf_counter()
    refuse_existing(output, storage_options)
    fmt = fmt or dataset_format(input, storage_options)
    root = offload_uri or f"{output.rstrip('/')}.offload"
    actors = concurrency or _default_actors()
    ds = read_dataset(input, fmt=fmt, storage_options=storage_options, min_blocks=4 * actors)
    reduced = reduce_dataset(
        ds,
        config,
        offload_uri=root,
        column=column,
        concurrency=actors,
        batch_size=batch_size,
        storage_options=storage_options,
    ).materialize()
    write_dataset(reduced, output, fmt=fmt, storage_options=storage_options)
    names = [f"ctx_{k}" for k in ("tokens_before", "tokens_after", "bytes_before", "bytes_after")]
    totals = dict.fromkeys(names, 0)
    rows = errors = 0
    for batch in reduced.select_columns([*names, "ctx_error"]).iter_batches(batch_format="pyarrow"):
        rows += batch.num_rows
        errors += batch.num_rows - batch.column("ctx_error").null_count
        for name in names:
            totals[name] += sum(v for v in batch.column(name).to_pylist() if v is not None)
    return DatasetSummary(
        rows=rows,
        errors=errors,
        tokens_before=totals["ctx_tokens_before"],
        tokens_after=totals["ctx_tokens_after"],
        bytes_before=totals["ctx_bytes_before"],
        bytes_after=totals["ctx_bytes_after"],
        seconds=time.perf_counter() - start,
        output=output,
        offload_uri=root,
    )


def restore_path(
    input: str,
    output: str,
    *,
    offload_uri: str | None = None,
    column: str = "messages",
    fmt: str | None = None,
    concurrency: int | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> int:
    """Rebuild the original dataset from a reduced one; returns the number of rows."""
    refuse_existing(output, storage_options)
    fmt = fmt or dataset_format(input, storage_options)
    root = offload_uri or f"{input.rstrip('/')}.offload"
    ds = read_dataset(input, fmt=fmt, storage_options=storage_options)
    restored = restore_dataset(
        ds,
        offload_uri=root,
        column=column,
        concurrency=concurrency,
        storage_options=storage_options,
    ).materialize()
    write_dataset(restored, output, fmt=fmt, storage_options=storage_options)
    return int(restored.count())
