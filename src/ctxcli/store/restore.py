"""Rebuild an original transcript from a reduced one and its offload directory.

Every piece is hash-checked: the manifest is validated first, each offloaded file is
checked against the hash the manifest lists, each record of the restore pack against its
op, and the rebuilt bytes against the input's hash. A record kept as a recipe (the bytes
around an offloaded text, the text as a reference to its file; see
:meth:`~ctxcli.store.disk.OffloadStore.add_original`) is rebuilt by escaping the file's
text the way the record held it (:func:`escape_text`).
"""

from __future__ import annotations

import glob
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from ctxcli.core.errors import RestoreError
from ctxcli.core.protocols import sha256, split_units
from ctxcli.store.manifest import (
    MANIFEST,
    PREVIOUS_MANIFEST,
    load_manifest,
    parse_manifest,
    read_manifest,
)

__all__ = ["ASCII", "NESTED", "escape_text", "iter_offloaded", "previous_offload", "restore_bytes"]

ASCII = "ascii"
"""The escaping of a reference written by Python's ``json.dumps`` (``ensure_ascii``);
a reference without a style is escaped the way orjson (and ``json.dumps(ensure_ascii=False)``)
writes a string."""

NESTED = "nested"
"""The escaping of a reference to a JSON string inside a JSON string (Codex keeps a tool's
output as JSON text in a string field): orjson's literal escaped once more, without the
outer quotes."""


def previous_offload(offload_dir: Path, output_sha: str) -> tuple[Path, str] | None:
    """Find the manifest a killed run left for this output, if any.

    Where a killed run left the manifest of this output, if it left one: the previous
    manifest inside the directory (a re-run's) or a replaced directory kept aside.
    """
    candidates = [(offload_dir, PREVIOUS_MANIFEST)] + [
        (old, MANIFEST)
        for old in sorted(offload_dir.parent.glob(f".{glob.escape(offload_dir.name)}.ctx-old-*"))
    ]
    for directory, name in candidates:
        try:
            manifest = parse_manifest(directory / name)
        except (OSError, orjson.JSONDecodeError):
            continue
        output = manifest.get("output") if isinstance(manifest, dict) else None
        if isinstance(output, dict) and output.get("sha256") == output_sha:
            return directory, name
    return None


def restore_bytes(
    reduced: bytes,
    offload_dir: Path,
    *,
    reduced_name: str = "input",
    manifest_name: str = MANIFEST,
) -> bytes:
    """Rebuild the original transcript from a reduced one and its offload directory.

    Raises:
        RestoreError: the directory is not a ctx offload directory, a file is missing
            or altered, or the reduced transcript is not the one it was made with.
    """
    manifest = load_manifest(offload_dir, manifest_name)
    # A file a recipe rebuilds a record from is checked when it is read for that.
    referenced = {
        piece[0]
        for op in manifest["script"]
        if op[0] == "p"
        for piece in op[1]
        if isinstance(piece[0], str)
    }
    files = _OffloadedFiles(offload_dir, manifest["files"])
    for rel in manifest["files"]:
        if rel not in referenced:
            files.read(rel)
    if sha256(reduced) != manifest["output"]["sha256"]:
        previous = previous_offload(offload_dir, sha256(reduced))
        if previous is not None and previous != (offload_dir, manifest_name):
            return restore_bytes(
                reduced, previous[0], reduced_name=reduced_name, manifest_name=previous[1]
            )
        raise RestoreError(
            f"{reduced_name} is not the output this offload directory was made for "
            f"({offload_dir / manifest_name} expects sha256 {manifest['output']['sha256'][:12]}…); "
            "it was edited or belongs to another run."
        )
    pack_path = offload_dir / manifest["pack"]["name"]
    if offload_dir.resolve() not in pack_path.resolve().parents:
        raise RestoreError(f"{offload_dir / manifest_name} is damaged: the pack lies outside it.")
    try:
        pack = pack_path.read_bytes()
    except OSError:
        raise RestoreError(f"{pack_path} is missing; the original cannot be rebuilt.") from None
    units = split_units(reduced) if manifest["units"] == "lines" else [reduced]
    out = bytearray()
    pos = 0
    for op in manifest["script"]:
        if op[0] == "c":
            out += b"".join(units[pos : pos + op[1]])
            pos += op[1]
        elif op[0] == "s":
            pos += op[1]
        elif op[0] == "b":
            _, offset, length, digest = op
            piece = pack[offset : offset + length]
            if sha256(piece) != digest:
                raise RestoreError(
                    f"{pack_path} is altered (record at offset {offset} fails its hash check)."
                )
            out += piece
        else:
            out += _follow_recipe(op, pack, pack_path, files)
    result = bytes(out)
    if sha256(result) != manifest["input"]["sha256"]:
        raise RestoreError(
            f"the rebuilt transcript does not match the original hash in {offload_dir / manifest_name}."
        )
    return result


def _follow_recipe(op: list[Any], pack: bytes, pack_path: Path, files: _OffloadedFiles) -> bytes:
    """The original record a ``["p", ...]`` op describes (see ``OffloadStore.add_original``).

    Each file it names is hash-checked as it is read, then the record itself.
    """
    _, pieces, length, digest = op
    record = bytearray()
    for piece in pieces:
        if isinstance(piece[0], int):
            offset, size = piece
            record += pack[offset : offset + size]
            continue
        rel = piece[0]
        try:
            text = files.read(rel).decode("utf-8")
        except UnicodeDecodeError:  # its hash matched: the manifest lists a non-text file
            raise RestoreError(
                f"{files.manifest} is damaged: a record is rebuilt from {rel}, "
                "which is not UTF-8 text."
            ) from None
        record += escape_text(text, piece[1] if len(piece) > 1 else "")
    if len(record) == length and sha256(memoryview(record)) == digest:
        return bytes(record)
    offsets = [piece[0] for piece in pieces if isinstance(piece[0], int)]
    if not offsets:
        raise RestoreError(
            f"{files.manifest} is damaged: the record rebuilt from "
            f"{', '.join(str(piece[0]) for piece in pieces)} fails its hash check."
        )
    raise RestoreError(
        f"{pack_path} is altered (record at offset {offsets[0]} fails its hash check)."
    )


class _OffloadedFiles:
    """Reads the files a manifest lists, each checked against its hash.

    A file (or its folder) that is a link leading out of the directory is refused.
    Folders are resolved once each, not once per file: resolving every path was most
    of a large restore's time.
    """

    def __init__(self, root: Path, digests: dict[str, str]) -> None:
        self.root = root
        self.manifest = root / MANIFEST
        self.digests = digests
        self._real = os.path.realpath(root)
        self._folders: dict[str, str] = {}

    def read(self, rel: str) -> bytes:
        digest = self.digests.get(rel)
        if digest is None:
            raise RestoreError(
                f"{self.manifest} is damaged: a record is rebuilt from {rel}, "
                "which it does not list."
            )
        path = os.path.join(self.root, rel)
        folder, name = os.path.split(path)
        real = self._folders.get(folder)
        if real is None:
            real = self._folders[folder] = os.path.realpath(folder)
        target = os.path.join(real, name)
        if os.path.islink(target):
            target = os.path.realpath(target)
        if not target.startswith(self._real.rstrip("/") + "/"):
            raise RestoreError(f"{self.manifest} names a file outside the directory: {rel}")
        try:
            with open(target, "rb") as fh:
                data = fh.read()
        except OSError:
            raise RestoreError(f"offloaded file {path} is missing.") from None
        if sha256(data) != digest:
            raise RestoreError(f"offloaded file {path} was altered (sha256 mismatch).")
        return data


def escape_text(text: str, style: str = "") -> bytes:
    """``text`` as a JSON string, quotes included, escaped in ``style``.

    ``""``: as orjson writes it (and Python's ``json.dumps(ensure_ascii=False)``);
    :data:`ASCII`: as Python's ``json.dumps`` writes it; :data:`NESTED`: orjson's
    literal as it sits inside another JSON string.
    """
    if not text.isascii():
        # orjson keeps the UTF-8 of a non-ASCII str it writes inside that str, and the
        # old texts handed to add_original live until the run ends (9 MB of a 100 MB
        # input's peak): a copy takes the cache and goes.
        text = text[:1] + text[1:]
    if style == ASCII:
        return json.dumps(text).encode("ascii")
    if style == NESTED:
        return orjson.dumps(orjson.dumps(text).decode("utf-8"))[1:-1]
    return orjson.dumps(text)


def iter_offloaded(offload_dir: Path) -> Iterator[tuple[str, str]]:
    """Yield (relative path, sha256) of every offloaded text in a directory."""
    manifest = read_manifest(offload_dir) or {}
    yield from manifest.get("files", {}).items()
