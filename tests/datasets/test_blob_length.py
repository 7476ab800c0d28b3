"""Dataset restore checks a row's declared blob length against the blob (issue 41 item 12).

The ``ctx_restore`` value comes from the dataset, like the cell. A declared length of
2^62 made the blob read raise MemoryError, 2^64-2 OverflowError (exit 123 both), and
2^31 allocated 2 GB before the RestoreError: the read asked for the declared length, not
for what the file holds. Every such row is now a RestoreError, and no more than the
blob's own size (plus one byte) is ever read.
"""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from ctxcli.api.remote import BlobReader, BlobWriter
from ctxcli.core.errors import RestoreError
from ctxcli.datasets.rows import reduce_row, restore_row

TIGHT = {"stages": [{"use": "truncate_tool_output", "max_chars": 500}]}


def _row(root: str | None = None) -> tuple[Any, dict[str, Any], BlobReader]:
    messages = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "run", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "u" * 4000},
    ]
    out = reduce_row(messages, TIGHT)
    root = root or str(Path("blobs").resolve())
    BlobWriter(root).put_many(out.blobs)
    return out.value, json.loads(out.restore), BlobReader(root)


@pytest.mark.parametrize("store", ["local", "memory"])
@pytest.mark.parametrize("length", [2**62, 2**64 - 2, 2**31], ids=["2^62", "2^64-2", "2^31"])
def test_a_declared_length_the_blob_does_not_have_is_a_restore_error(
    length: int, store: str, tmp_path: Path
) -> None:
    # fsspec's memory filesystem takes the route of object storage (a ranged read).
    value, info, blobs = _row(None if store == "local" else f"memory://{tmp_path.name}/blobs")
    script = [op if op[0] != "b" else [op[0], op[1], length, op[3]] for op in info["script"]]
    tampered = json.dumps({**info, "script": script})
    tracemalloc.start()
    try:
        with pytest.raises(RestoreError, match=r"^<row>: blob [0-9a-f]{12}… was altered"):
            restore_row(value, tampered, blobs)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 * 2**20, f"{peak:,} bytes allocated for a blob of a few kB"


def test_the_declared_length_still_restores(tmp_path: Path) -> None:
    value, info, blobs = _row()
    restored = restore_row(value, json.dumps(info), blobs)
    assert restored[2]["content"] == "u" * 4000
