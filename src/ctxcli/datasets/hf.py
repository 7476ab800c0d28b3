"""Reduce Hugging Face ``datasets.Dataset``s of trajectories (``pip install 'ctx-lossless[hf]'``).

The same row-level reduction as :mod:`ctxcli.datasets.ray`, run by
``Dataset.map(batched=True)`` (``num_proc`` processes; each builds its reducer, and so
its tokenizer, once): the trajectory column is reduced, the stats columns
(:data:`ctxcli.datasets.rows.STAT_COLUMNS`) are added, and the blobs are stored under
``offload_uri`` (a directory or an fsspec URL) before the batch is returned. No hub
access is needed: build a dataset with ``Dataset.from_generator`` or
``Dataset.from_parquet`` and write it with ``to_parquet``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ctxcli.api.remote import BlobReader, BlobWriter
from ctxcli.core.errors import CtxError, OnInvalid, RestoreError
from ctxcli.datasets.rows import STAT_COLUMNS, RowReducer, columns_of, restore_row
from ctxcli.pipeline.config import Config

__all__ = ["reduce_hf", "restore_hf"]


class _Reduce:
    """The batched map function; pickles with its configuration only."""

    def __init__(
        self,
        config: Config | Mapping[str, Any] | None,
        column: str,
        offload_uri: str,
        storage_options: Mapping[str, Any] | None,
    ) -> None:
        self.config, self.column, self.offload_uri = config, column, offload_uri
        self.storage_options = dict(storage_options or {})
        self._reducer: RowReducer | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_reducer": None}

    def __call__(self, batch: dict[str, list[Any]]) -> dict[str, list[Any]]:
        if self._reducer is None:
            self._reducer = RowReducer(self.config, self.offload_uri, on_invalid=OnInvalid.KEEP)
        results = self._reducer.many(batch[self.column], on_error="keep")
        cells, columns, blobs = columns_of(batch[self.column], results)
        BlobWriter(self.offload_uri, self.storage_options).put_many(blobs)
        return {self.column: cells, **columns}


class _Restore:
    def __init__(
        self, column: str, offload_uri: str, storage_options: Mapping[str, Any] | None
    ) -> None:
        self.column, self.offload_uri = column, offload_uri
        self.storage_options = dict(storage_options or {})

    def __call__(self, batch: dict[str, list[Any]], indices: list[int]) -> dict[str, list[Any]]:
        fetch = BlobReader(self.offload_uri, self.storage_options)
        rows = zip(batch[self.column], batch["ctx_restore"], indices, strict=True)
        return {
            self.column: [
                value if script is None else restore_row(value, script, fetch, name=f"row {i}")
                for value, script, i in rows
            ]
        }


def _check(ds: Any, column: str) -> None:
    if column not in ds.column_names:
        raise CtxError(
            f"the dataset has no column {column!r} (it has {', '.join(ds.column_names)}); "
            "name the column that holds the trajectories."
        )


def reduce_hf(
    ds: Any,
    config: Config | Mapping[str, Any] | None = None,
    *,
    offload_uri: str,
    column: str = "messages",
    batch_size: int = 16,
    num_proc: int | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> Any:
    """``ds`` with ``column`` reduced and the stats columns added; blobs stored.

    Example::

        from datasets import Dataset
        from ctxcli.datasets.hf import reduce_hf

        ds = Dataset.from_parquet("trajectories.parquet")
        reduce_hf(ds, offload_uri="offload/").to_parquet("reduced.parquet")
    """
    _check(ds, column)
    fn = _Reduce(config, column, offload_uri, storage_options)
    return ds.map(
        fn, batched=True, batch_size=batch_size, num_proc=num_proc, load_from_cache_file=False
    )


def restore_hf(
    ds: Any,
    *,
    offload_uri: str,
    column: str = "messages",
    batch_size: int = 16,
    num_proc: int | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> Any:
    """The original dataset back from a reduced one and its blobs (stats columns removed)."""
    _check(ds, column)
    if "ctx_restore" not in ds.column_names:
        raise RestoreError("the dataset has no ctx_restore column; it was not reduced by ctx.")
    fn = _Restore(column, offload_uri, storage_options)
    restored = ds.map(
        fn,
        batched=True,
        with_indices=True,
        batch_size=batch_size,
        num_proc=num_proc,
        load_from_cache_file=False,
    )
    return restored.remove_columns([c for c in STAT_COLUMNS if c in restored.column_names])
