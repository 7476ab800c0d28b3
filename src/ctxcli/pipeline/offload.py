"""Where removed text goes: the offload directory, its manifest, and restore.

Layout of an offload directory::

    manifest.json        what was reduced, hashes of every file, the restore script
    originals.bin        the original bytes of every record a stage changed or dropped
    trunc/<safe id>      texts removed by truncate_tool_output (Eino layout)
    clear/<safe id>      texts removed by clear_tool_results (Eino layout)
    <stage>/<safe id>    texts removed by any other stage

The agent reads the per-text files; ``ctx restore`` uses the manifest and
``originals.bin`` to rebuild the input byte-for-byte and checks every hash first.
Everything is written into a private staging directory that is renamed into place
only when complete, so a crash never leaves a half-written offload directory.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from ctxcli.core.errors import OffloadError, Remedy, RestoreError
from ctxcli.core.restore import (
    encode_text,
    safe_name,
    sha256,
    split_units,
)

MANIFEST = "manifest.json"
PACK = "originals.bin"
MANIFEST_VERSION = 1


@dataclass
class _Names:
    """Assigns collision-free names per area; identical texts share one file."""

    root: str
    taken: dict[tuple[str, str], str] = field(default_factory=dict)
    count: int = 0

    def assign(self, area: str, key: str, digest: str) -> tuple[str, bool]:
        if not re.fullmatch(r"[a-z][a-z0-9_]*", area):
            raise OffloadError(f"invalid offload area {area!r}")
        base = safe_name(key)
        name = base
        owner = self.taken.get((area, name))
        if owner == digest:
            return f"{area}/{name}", False
        if owner is not None:
            # Same id, other text: real transcripts reuse call ids.
            name = f"{base}-{digest[:10]}"
            if self.taken.get((area, name)) == digest:
                return f"{area}/{name}", False
        self.taken[(area, name)] = digest
        self.count += 1
        return f"{area}/{name}", True

    def display(self, rel: str) -> str:
        return f"{self.root}/{rel}" if self.root else rel


class DryRunOffload:
    """Names files exactly like the real store but writes nothing (``ctx stats``)."""

    def __init__(self, root: str) -> None:
        self.root = root.rstrip("/") or "."
        self._names = _Names(self.root)
        self.files: dict[str, str] = {}

    def put(self, area: str, key: str, text: str) -> str:
        data = encode_text(text)
        digest = sha256(data)
        rel, _new = self._names.assign(area, key, digest)
        self.files[rel] = digest
        return self._names.display(rel)

    def path_for(self, area: str, key: str) -> str:
        return self._names.display(f"{area}/{safe_name(key)}")

    def add_original(self, raw: bytes | memoryview) -> list[Any]:
        """A dry run keeps nothing; the op has the real shape with an empty hash."""
        return ["b", 0, len(raw), ""]

    @property
    def count(self) -> int:
        """Number of distinct files that would be written."""
        return self._names.count


class OffloadStore(DryRunOffload):
    """Writes offloaded texts into a private staging directory, then commits it.

    Args:
        path: the final offload directory.
        root: how hints cite the directory (usually ``path`` as the user gave it).
        force: replace a directory that holds something else.
    """

    def __init__(self, path: Path, root: str, *, force: bool = False) -> None:
        super().__init__(root)
        self.path = path
        self.force = force
        check_offload_target(path, force=force)
        parent = path.parent
        parent.mkdir(parents=True, exist_ok=True)
        _remove_stale_staging(parent, path.name)
        self.staging = parent / f".{path.name}.ctx-tmp-{os.getpid()}-{secrets.token_hex(4)}"
        self.staging.mkdir(mode=0o700)
        self._staging_real = os.path.realpath(self.staging)
        self._areas: set[str] = set()
        self._pack = _open_private(self.staging / PACK)
        self._pack_size = 0

    def put(self, area: str, key: str, text: str) -> str:
        data = encode_text(text)
        digest = sha256(data)
        rel, new = self._names.assign(area, key, digest)
        if new:
            # rel is "<area>/<safe name>" and neither part can hold "/" or start with
            # ".", so a lexical check is enough; resolving both paths on every put was
            # a quarter of the time of a large reduce. The staging directory is ours
            # (0700) and files are opened O_EXCL, so no symlink can redirect a write.
            target = os.path.normpath(os.path.join(self._staging_real, rel))
            area_dir = os.path.dirname(target)
            if os.path.dirname(area_dir) != self._staging_real:
                raise OffloadError(f"refusing to write outside the offload directory: {rel}")
            if area_dir not in self._areas:
                os.makedirs(area_dir, mode=0o700, exist_ok=True)
                self._areas.add(area_dir)
            with _open_private(Path(target)) as fh:
                fh.write(data)
        self.files[rel] = digest
        return self._names.display(rel)

    def add_original(self, raw: bytes | memoryview) -> list[Any]:
        """Append an original record to the pack; return its restore op."""
        offset = self._pack_size
        self._pack.write(raw)
        self._pack_size += len(raw)
        return ["b", offset, len(raw), sha256(raw)]

    def commit(self, manifest: dict[str, Any]) -> None:
        """Write the manifest and move the staging directory into place.

        The pack and the manifest (all ``ctx restore`` needs to rebuild the original
        bytes) are fsynced before the rename, and the parent directory after it, so an
        ``--in-place`` run that replaced the input cannot outlive its original on disk.
        """
        self._pack.flush()
        os.fsync(self._pack.fileno())
        self._pack.close()
        manifest["files"] = dict(sorted(self.files.items()))
        manifest["pack"] = {"name": PACK, "bytes": self._pack_size}
        with _open_private(self.staging / MANIFEST) as fh:
            fh.write(orjson.dumps(manifest) + b"\n")
            fh.flush()
            os.fsync(fh.fileno())
        _fsync_dir(self.staging)
        old: Path | None = None
        if self.path.exists() or self.path.is_symlink():
            check_offload_target(self.path, force=self.force, input_sha=manifest["input"]["sha256"])
            old = self.path.parent / f".{self.path.name}.ctx-old-{secrets.token_hex(4)}"
            os.rename(self.path, old)
        os.rename(self.staging, self.path)
        _fsync_dir(self.path.parent)
        if old is not None:
            if old.is_dir() and not old.is_symlink():
                shutil.rmtree(old, ignore_errors=True)
            else:
                old.unlink(missing_ok=True)

    def abort(self) -> None:
        """Remove the staging directory (after an error or Ctrl-C)."""
        try:
            self._pack.close()
        except OSError:
            pass
        shutil.rmtree(self.staging, ignore_errors=True)


def _fsync_dir(path: Path) -> None:
    """Make a directory's entries durable (renames, new files); best effort."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _remove_stale_staging(parent: Path, name: str) -> None:
    """Remove staging directories left by a killed run (their process is gone)."""
    for leftover in parent.glob(f".{name}.ctx-tmp-*"):
        try:
            pid = int(leftover.name.rsplit("-", 2)[-2])
        except ValueError:
            continue
        if pid == os.getpid() or _pid_alive(pid):
            continue
        shutil.rmtree(leftover, ignore_errors=True)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _open_private(path: Path) -> Any:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    return os.fdopen(fd, "wb")


def read_manifest(path: Path) -> dict[str, Any] | None:
    """The manifest of an offload directory, or None if it is not one."""
    try:
        data = orjson.loads((path / MANIFEST).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    if not isinstance(data, dict) or data.get("tool") != "ctx":
        return None
    return data


def check_offload_target(path: Path, *, force: bool, input_sha: str | None = None) -> None:
    """Refuse to replace a directory that is not this transcript's offload directory."""
    if not (path.exists() or path.is_symlink()) or force:
        return
    if path.is_symlink() or not path.is_dir():
        raise OffloadError(f"{path} exists and is not a directory", remedy=Remedy.OTHER_OFFLOAD_DIR)
    if not any(path.iterdir()):
        return
    manifest = read_manifest(path)
    if manifest is None:
        raise OffloadError(
            f"{path} exists and is not a ctx offload directory", remedy=Remedy.OTHER_OFFLOAD_DIR
        )
    if input_sha is not None and manifest.get("input", {}).get("sha256") != input_sha:
        raise OffloadError(
            f"{path} holds the offload of another transcript "
            f"({manifest.get('input', {}).get('name', '?')})",
            remedy=Remedy.OTHER_OFFLOAD_DIR,
        )


def restore_bytes(reduced: bytes, offload_dir: Path, *, reduced_name: str = "input") -> bytes:
    """Rebuild the original transcript from a reduced one and its offload directory.

    Raises:
        RestoreError: the directory is not a ctx offload directory, a file is missing
            or altered, or the reduced transcript is not the one it was made with.
    """
    manifest = read_manifest(offload_dir)
    if manifest is None:
        raise RestoreError(
            f"{offload_dir} is not a ctx offload directory (no valid {MANIFEST})",
            remedy=Remedy.NAME_OFFLOAD_DIR,
        )
    for rel, digest in manifest.get("files", {}).items():
        _check_file(offload_dir, rel, digest)
    if sha256(reduced) != manifest["output"]["sha256"]:
        raise RestoreError(
            f"{reduced_name} is not the output this offload directory was made for "
            f"({offload_dir / MANIFEST} expects sha256 {manifest['output']['sha256'][:12]}…); "
            "it was edited or belongs to another run."
        )
    pack_path = offload_dir / manifest["pack"]["name"]
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
        else:
            _, offset, length, digest = op
            piece = pack[offset : offset + length]
            if sha256(piece) != digest:
                raise RestoreError(
                    f"{pack_path} is altered (record at offset {offset} fails its hash check)."
                )
            out += piece
    result = bytes(out)
    if sha256(result) != manifest["input"]["sha256"]:
        raise RestoreError(
            f"the rebuilt transcript does not match the original hash in {offload_dir / MANIFEST}."
        )
    return result


def _check_file(root: Path, rel: str, digest: str) -> None:
    target = (root / rel).resolve()
    if root.resolve() not in target.parents:
        raise RestoreError(f"{root / MANIFEST} names a file outside the directory: {rel}")
    try:
        data = target.read_bytes()
    except OSError:
        raise RestoreError(f"offloaded file {root / rel} is missing.") from None
    if sha256(data) != digest:
        raise RestoreError(f"offloaded file {root / rel} was altered (sha256 mismatch).")


def iter_offloaded(offload_dir: Path) -> Iterator[tuple[str, str]]:
    """Yield (relative path, sha256) of every offloaded text in a directory."""
    manifest = read_manifest(offload_dir) or {}
    yield from manifest.get("files", {}).items()
