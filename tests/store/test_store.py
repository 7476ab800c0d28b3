"""The store package: its pieces, its manifest model and its locks."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from ctxcli.core.protocols import sha256
from ctxcli.pipeline.compose import reduce_bytes
from ctxcli.pipeline.config import build_config
from ctxcli.store.manifest import Header, InputSide, Manifest, Side
from ctxcli.store.memory import BlobStore
from support.paths import SAMPLE

_NO_FCNTL = """
import sys
sys.modules["fcntl"] = None  # as on Windows: `import fcntl` fails
import ctxcli.api as api
from ctxcli.services.lock import path_lock
with path_lock(sys.argv[1]) as held:
    assert held.locked is False, "no lock where the platform has none"
report, _ = api.reduce_file(sys.argv[1], "out.jsonl")
assert api.restore_file("out.jsonl") == open(sys.argv[1], "rb").read()
print(report.tokens_after < report.tokens_before)
"""


def test_the_library_imports_and_runs_without_fcntl() -> None:
    run = subprocess.run(
        [sys.executable, "-c", _NO_FCNTL, str(SAMPLE)], capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout == "True\n"


def test_a_written_header_is_a_valid_manifest() -> None:
    zero, one = "0" * 64, "1" * 64
    header = Header.new(
        format="claude_code",
        units="lines",
        kind="doctor",
        input=InputSide(name="s.jsonl", sha256=zero, bytes=10),
        output=Side(sha256=one, bytes=8),
        previous=["/a/b.offload"],
    )
    doc = header.document([["c", 1]], {"trunc/x": one}, {"name": "originals.bin", "bytes": 0})
    assert list(doc) == [
        *["tool", "version", "ctx_version", "format", "units", "kind", "input", "output"],
        *["script", "previous", "files", "pack"],
    ]
    assert list(doc["input"]) == ["name", "sha256", "bytes"]
    Manifest.model_validate(orjson.loads(orjson.dumps(doc)))


def test_a_bad_header_fails_when_written_not_when_read() -> None:
    with pytest.raises(ValueError, match="sha256"):
        Header.new(
            format="openai_chat",
            units="lines",
            input=InputSide(name="x", sha256="not a hash", bytes=1),
            output=Side(sha256="0" * 64, bytes=1),
        )


def test_one_memory_store_for_records_and_rows() -> None:
    by_hash = BlobStore("blobs")
    by_name = BlobStore("blobs", cite="name")
    text = "line\n" * 100
    digest = sha256(text.encode())
    assert by_hash.put("trunc", "c1", text) == f"blobs/{digest[:2]}/{digest}"
    assert by_name.put("trunc", "c1", text) == "blobs/trunc/c1"
    assert by_hash.blobs == by_name.blobs == {digest: text.encode()}
    assert by_name.texts() == {"trunc/c1": text}
    # A reduction keeps its texts in that store, by the names the disk store gives.
    small = build_config({"stages": [{"use": "truncate_tool_output", "max_chars": 500}]}, "t")
    store = BlobStore(str(Path("off")), cite="name")
    reduce_bytes(SAMPLE.read_bytes(), config=small, offload=store)
    assert store.texts() and all(rel.startswith("trunc/") for rel in store.texts())
