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
``ctx reduce --engine ray`` and ``ctx restore --engine ray`` call: they take a JSONL or
Parquet dataset (a directory, a file or an fsspec URL) file by file, on a pool of
:class:`FileBatch` actors, and write each output under its input's name. JSONL rows stay
text (:mod:`ctxcli.datasets.jsonl`), never read into Arrow's inferred structs, so a
restore gives every file back byte for byte. The files are the unit of work: a dataset
of one file is reduced by one worker.
"""

from __future__ import annotations

import gzip
import os
import secrets
import shutil
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ctxcli.api.remote import (
    BlobReader,
    BlobWriter,
    filesystem,
    read_url,
    store_errors,
    write_url,
)
from ctxcli.core.errors import CtxError, OnInvalid, RestoreError
from ctxcli.core.install import install_command
from ctxcli.core.io import local_path
from ctxcli.datasets.jsonl import FileTotals, reduce_jsonl, restore_jsonl
from ctxcli.datasets.rows import STAT_COLUMNS, RowReducer, columns_of, restore_row
from ctxcli.pipeline.config import Config

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa

__all__ = [
    "DatasetOptions",
    "DatasetSummary",
    "FileBatch",
    "ReduceBatch",
    "RestoreBatch",
    "read_dataset",
    "reduce_dataset",
    "reduce_path",
    "reduce_table",
    "restore_dataset",
    "restore_path",
    "restore_table",
    "to_huggingface",
]

DEFAULT_BATCH_ROWS = 16


def _ray() -> Any:
    try:
        import ray
        import ray.data  # noqa: F401
    except ImportError:
        raise CtxError(
            f"the Ray engine needs Ray Data; install it with {install_command('ray')}."
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


def reduce_table(
    table: pa.Table, reducer: RowReducer, column: str, on_error: str
) -> tuple[pa.Table, dict[str, bytes]]:
    """``table`` with ``column`` reduced and the stats columns set, and the rows' blobs."""
    import pyarrow as pa

    _check_column(table, column)
    values = table.column(column).to_pylist()
    results = reducer.many(values, on_error=on_error)
    out_values, stats, blobs = columns_of(values, results)
    index = table.column_names.index(column)
    table = table.set_column(index, column, _column_array(out_values, table.column(column)))
    types = {"ctx_format": pa.string(), "ctx_restore": pa.string(), "ctx_error": pa.string()}
    for name in STAT_COLUMNS:
        if name in table.column_names:
            table = table.drop_columns([name])
        table = table.append_column(name, pa.array(stats[name], type=types.get(name, pa.int64())))
    return table, blobs


def restore_table(table: pa.Table, fetch: BlobReader, column: str) -> pa.Table:
    """``table`` with ``column`` restored and the stats columns removed."""
    _check_column(table, column)
    if "ctx_restore" not in table.column_names:
        raise RestoreError("the dataset has no ctx_restore column; it was not reduced by ctx.")
    values = table.column(column).to_pylist()
    scripts = table.column("ctx_restore").to_pylist()
    originals = [
        value if script is None else restore_row(value, script, fetch)
        for value, script in zip(values, scripts, strict=True)
    ]
    index = table.column_names.index(column)
    table = table.set_column(index, column, _column_array(originals, table.column(column)))
    return table.drop_columns([c for c in STAT_COLUMNS if c in table.column_names])


class ReduceBatch:
    """The ``map_batches`` actor of :func:`reduce_dataset`: reduces a batch's trajectories.

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
        self.reducer = RowReducer(config, offload_uri, on_invalid=OnInvalid.KEEP)
        self.column = column
        self.on_error = on_error
        self.blobs = BlobWriter(offload_uri, storage_options)

    def __call__(self, batch: pa.Table) -> pa.Table:
        """Reduce one batch of rows; write their blobs before the rows leave the actor."""
        table, blobs = reduce_table(batch, self.reducer, self.column, self.on_error)
        self.blobs.put_many(blobs)  # before the rows that cite them leave the actor
        return table


class RestoreBatch:
    """The ``map_batches`` actor of :func:`restore_dataset`."""

    def __init__(
        self, column: str, offload_uri: str, storage_options: Mapping[str, Any] | None = None
    ) -> None:
        self.column = column
        self.fetch = BlobReader(offload_uri, storage_options)

    def __call__(self, batch: pa.Table) -> pa.Table:
        """Restore the reduced column of one batch of rows."""
        return restore_table(batch, self.fetch, self.column)


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
    import pyarrow as pa

    import datasets

    ray = _ray()
    tables = ray.get(ds.to_arrow_refs())
    return datasets.Dataset(pa.concat_tables(tables, promote_options="default"))


# -- paths and URLs: whole files, named as they were ---------------------------------


@dataclass(frozen=True)
class DatasetOptions:
    """How :func:`reduce_path` and :func:`restore_path` read and write a dataset.

    Attributes:
        offload_uri: where the blobs are (default: ``OUTPUT.offload`` when reducing,
            ``INPUT.offload`` when restoring).
        column: the column holding the trajectories.
        fmt: ``jsonl`` or ``parquet`` for every file (default: from each file's name).
        concurrency: actors at most (default: one per CPU Ray has; never more than files).
        storage_options: fsspec options for every URL.
    """

    offload_uri: str | None = None
    column: str = "messages"
    fmt: str | None = None
    concurrency: int | None = None
    storage_options: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class _FileJob:
    """What each actor of a path run needs; pickled to every one."""

    restore: bool
    config: Config | Mapping[str, Any] | None
    options: DatasetOptions
    offload_uri: str
    target: str
    """The directory outputs go to (a private staging directory for a local output)."""


class FileBatch:
    """The ``map_batches`` actor of the path runs: reduces or restores whole files.

    JSONL files stay text (:mod:`ctxcli.datasets.jsonl`: a restore gives their bytes
    back); Parquet files are tables, reduced as :class:`ReduceBatch` reduces a batch.
    Each output is written under its input's name, relative to the input directory;
    the row is that file's counts.
    """

    def __init__(self, job: _FileJob) -> None:
        self.job = job
        options = job.options
        self.storage = dict(options.storage_options)
        if job.restore:
            self.fetch = BlobReader(job.offload_uri, self.storage)
        else:
            self.reducer = RowReducer(job.config, job.offload_uri, on_invalid=OnInvalid.KEEP)
            self.blobs = BlobWriter(job.offload_uri, self.storage)

    def __call__(self, batch: pa.Table) -> pa.Table:
        """Reduce or restore each file of the batch; one row of counts per file."""
        import pyarrow as pa

        files = zip(batch.column("path").to_pylist(), batch.column("name").to_pylist(), strict=True)
        return pa.Table.from_pylist([self._file(path, name) for path, name in files])

    def _file(self, url: str, name: str) -> dict[str, Any]:
        raw = read_url(url, self.storage)
        fmt = self.job.options.fmt or _format_of(name)
        packed = name.endswith(".gz")
        data = gzip.decompress(raw) if packed else raw
        data, totals = (
            self._restore(data, fmt, name) if self.job.restore else self._reduce(data, fmt, name)
        )
        # mtime 0: the same rows compress to the same bytes on every run.
        _write(
            f"{self.job.target}/{name}",
            gzip.compress(data, mtime=0) if packed else data,
            self.storage,
        )
        return {"name": name, **totals.__dict__}

    def _reduce(self, data: bytes, fmt: str, name: str) -> tuple[bytes, FileTotals]:
        column = self.job.options.column
        if fmt == "jsonl":
            reduced = reduce_jsonl(data, self.reducer, column, name=name)
            self.blobs.put_many(reduced.blobs)  # before the rows that cite them exist
            return reduced.data, reduced.totals
        table, blobs = reduce_table(_read_parquet(data), self.reducer, column, "keep")
        self.blobs.put_many(blobs)
        return _parquet_bytes(table), _table_totals(table)

    def _restore(self, data: bytes, fmt: str, name: str) -> tuple[bytes, FileTotals]:
        column = self.job.options.column
        if fmt == "jsonl":
            original, rows = restore_jsonl(data, self.fetch, column, name=name)
            return original, FileTotals(rows=rows)
        table = restore_table(_read_parquet(data), self.fetch, column)
        return _parquet_bytes(table), FileTotals(rows=table.num_rows)


_JSONL_SUFFIXES = (".jsonl", ".json", ".jsonl.gz", ".json.gz")
_DATA_SUFFIXES = (".parquet", *_JSONL_SUFFIXES)


def _format_of(name: str) -> str:
    return "parquet" if name.endswith(".parquet") else "jsonl"


def _read_parquet(data: bytes) -> pa.Table:
    import pyarrow as pa
    import pyarrow.parquet as pq

    return pq.read_table(pa.BufferReader(data))


def _parquet_bytes(table: pa.Table) -> bytes:
    import pyarrow as pa
    import pyarrow.parquet as pq

    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    return bytes(sink.getvalue())


def _table_totals(table: pa.Table) -> FileTotals:
    errors = table.num_rows - table.column("ctx_error").null_count
    sums = {
        key: sum(v for v in table.column(f"ctx_{key}").to_pylist() if v is not None)
        for key in ("tokens_before", "tokens_after", "bytes_before", "bytes_after")
    }
    return FileTotals(rows=table.num_rows, errors=errors, **sums)


def _write(url: str, data: bytes, storage_options: Mapping[str, Any]) -> None:
    path = local_path(url)
    if path is not None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    write_url(url, data, storage_options)


def _data_files(url: str, storage_options: Mapping[str, Any] | None) -> list[str]:
    fs, path = filesystem(url, storage_options)
    with store_errors(lambda why: CtxError(f"{url}: cannot list ({why})")):
        if not fs.isdir(path):
            return [path]
        return sorted(p for p in fs.find(path) if not Path(p).name.startswith((".", "_")))


def _named_files(url: str, storage_options: Mapping[str, Any] | None) -> list[tuple[str, str]]:
    """Each data file of the dataset at ``url``: its URL and its name relative to ``url``."""
    fs, base = filesystem(url, storage_options)
    files = _data_files(url, storage_options)
    if files == [base]:
        return [(url, Path(base).name)]
    prefix = base.rstrip("/") + "/"
    return [(fs.unstrip_protocol(p), p[len(prefix) :]) for p in files]


def dataset_format(url: str, storage_options: Mapping[str, Any] | None = None) -> str:
    """``parquet`` or ``jsonl``, from the name or the files of a directory."""
    names = _data_files(url, storage_options)
    if any(n.endswith(".parquet") for n in names):
        return "parquet"
    if any(n.endswith(_JSONL_SUFFIXES) for n in names):
        return "jsonl"
    raise CtxError(f"{url}: no .parquet, .jsonl or .json files; pass a dataset directory or file.")


def read_dataset(
    url: str,
    *,
    fmt: str | None = None,
    storage_options: Mapping[str, Any] | None = None,
    min_blocks: int | None = None,
) -> Any:
    """A JSONL or Parquet dataset (a file or directory, local or fsspec URL) for Ray Data.

    Arrow reads JSON rows into one struct type per column: every message gets the
    fields of every other, as nulls. :func:`reduce_path` does not read JSONL this way;
    use this for Parquet, or where values equal as Arrow reads them are enough.
    A dataset of fewer files than ``min_blocks`` is split into ``min_blocks`` blocks,
    so that every worker gets rows.
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


def _arrow_fs(url: str, storage_options: Mapping[str, Any] | None) -> tuple[Any, str]:
    """A pyarrow filesystem for ``url`` (through fsspec) and the path inside it."""
    from pyarrow.fs import FSSpecHandler, PyFileSystem

    fs, path = filesystem(url, storage_options)
    return PyFileSystem(FSSpecHandler(fs)), path


def refuse_existing(url: str, storage_options: Mapping[str, Any] | None = None) -> None:
    """Refuse an output directory or prefix that already holds something."""
    fs, path = filesystem(url, storage_options)
    with store_errors(lambda why: CtxError(f"{url}: cannot list ({why})")):
        if fs.exists(path) and (not fs.isdir(path) or fs.find(path)):
            raise CtxError(f"{url} exists; choose another output directory.")


@contextmanager
def _staged(url: str, storage_options: Mapping[str, Any]) -> Iterator[str]:
    """Where a run writes the files of the dataset at ``url``.

    A local directory is written under a temporary name and renamed into place once
    every file is there; on object storage every file is one object that appears only
    when complete.
    """
    refuse_existing(url, storage_options)
    path = local_path(url)
    if path is None:
        yield url.rstrip("/")
        return
    final = Path(path)
    final.parent.mkdir(parents=True, exist_ok=True)
    staging = final.parent / f".{final.name}.ctx-tmp-{os.getpid()}-{secrets.token_hex(4)}"
    try:
        yield str(staging)
        os.replace(staging, final)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _run_files(input: str, output: str, job: _FileJob) -> list[dict[str, Any]]:
    """Run ``job`` over every file of ``input`` on a pool of actors; each file's counts."""
    storage = job.options.storage_options
    files = _named_files(input, storage)
    if job.options.fmt is None:
        files = [(path, name) for path, name in files if name.endswith(_DATA_SUFFIXES)]
    if not files:
        raise CtxError(
            f"{input}: no .parquet, .jsonl or .json files; pass a dataset directory or file."
        )
    actors = min(job.options.concurrency or _default_actors(), len(files))
    ray = _ray()
    with _staged(output, storage) as target:
        items = [{"path": path, "name": name} for path, name in files]
        counts: list[dict[str, Any]] = (
            ray.data.from_items(items, override_num_blocks=len(items))
            .map_batches(
                FileBatch,
                fn_constructor_args=(replace(job, target=target),),
                batch_format="pyarrow",
                batch_size=1,
                num_cpus=1,
                # A fixed pool: both actors load the tokenizer at once, not the second
                # after the first is busy (nothing else here needs a CPU: no read tasks).
                compute=ray.data.ActorPoolStrategy(size=actors),
            )
            .take_all()
        )
    return counts


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
    files: int = 0

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape of ``--json``."""
        return dict(self.__dict__)


def reduce_path(
    input: str,
    output: str,
    config: Config | Mapping[str, Any] | None = None,
    options: DatasetOptions | None = None,
) -> DatasetSummary:
    """Reduce the dataset at ``input`` into ``output``, file by file, with Ray Data.

    Every file is written under its own name (relative to ``input``) in the same format.
    JSONL rows stay text: the trajectory column is reduced in place and ctx's columns
    are appended to each row, so :func:`restore_path` gives every file back byte for
    byte. The blobs go to ``options.offload_uri`` (default ``OUTPUT.offload``) before
    the file that needs them.
    """
    start = time.perf_counter()
    options = options or DatasetOptions()
    root = options.offload_uri or f"{output.rstrip('/')}.offload"
    job = _FileJob(restore=False, config=config, options=options, offload_uri=root, target="")
    counts = _run_files(input, output, job)
    totals = FileTotals()
    for row in counts:
        totals.add(FileTotals(**{k: v for k, v in row.items() if k != "name"}))
    return DatasetSummary(
        **totals.__dict__,
        seconds=time.perf_counter() - start,
        output=output,
        offload_uri=root,
        files=len(counts),
    )


def restore_path(input: str, output: str, options: DatasetOptions | None = None) -> int:
    """Rebuild the original dataset of a :func:`reduce_path` run; returns the rows restored."""
    options = options or DatasetOptions()
    root = options.offload_uri or f"{input.rstrip('/')}.offload"
    job = _FileJob(restore=True, config=None, options=options, offload_uri=root, target="")
    return sum(int(row["rows"]) for row in _run_files(input, output, job))
