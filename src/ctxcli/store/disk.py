"""Where removed text goes: the offload directory, its manifest, and restore.

Layout of an offload directory::

    manifest.json        what was reduced, hashes of every file, the restore script
    originals.bin        the original bytes of every record a stage changed or dropped,
                         less the texts that are in one of the files below
    trunc/<safe id>      texts removed by truncate_tool_output (Eino layout)
    clear/<safe id>      texts removed by clear_tool_results (Eino layout)
    <stage>/<safe id>    texts removed by any other stage

The agent reads the per-text files; ``ctx restore`` uses the manifest, ``originals.bin``
and those files to rebuild the input byte-for-byte and checks every hash first. A changed
record whose original holds an offloaded text as a JSON string is kept as a recipe: the
bytes around the string in the pack, the string as a reference to its file (see
:meth:`OffloadStore.add_original`), so the pack does not hold every removed text twice.
Everything is written into a private staging directory that is renamed into place
only when complete, so a crash never leaves a half-written offload directory. An
incremental re-run adds to the previous run's directory instead (see
:meth:`OffloadStore.adopt`): its new files move in beside the old ones, the pack is
written under the other of two names, and the manifest is replaced last, the previous
one kept as ``manifest.prev.json`` until the new output is in place.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import mmap
import os
import re
import secrets
import shutil
from collections.abc import Iterable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, BinaryIO, Literal

import orjson
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictInt,
    StrictStr,
    ValidationError,
)

from ctxcli.core.errors import OffloadError, Remedy, RestoreError
from ctxcli.core.io import RELEASE_BYTES, release
from ctxcli.core.protocols import (
    safe_name,
    sha256,
    split_units,
)

MANIFEST = "manifest.json"
PACK = "originals.bin"
OTHER_PACK = "originals.1.bin"
"""The pack's name in a re-run of a directory whose pack is :data:`PACK` (and back)."""
PREVIOUS_MANIFEST = "manifest.prev.json"
"""A re-run's previous manifest, kept until the new output has replaced the old one."""
MANIFEST_VERSION = 1

MIN_REF_CHARS = 64
"""Shorter texts are kept literally in the pack: a reference would save next to nothing."""

ASCII = "ascii"
"""The escaping of a reference written by Python's ``json.dumps`` (``ensure_ascii``);
a reference without a style is escaped the way orjson (and ``json.dumps(ensure_ascii=False)``)
writes a string."""

NESTED = "nested"
"""The escaping of a reference to a JSON string inside a JSON string (Codex keeps a tool's
output as JSON text in a string field): orjson's literal escaped once more, without the
outer quotes."""


def agent_text(text: str) -> bytes:
    """The UTF-8 bytes of an offloaded text for the agent to read.

    A lone surrogate (a valid ``\\ud800`` escape in JSON) has no UTF-8 form: it
    becomes U+FFFD so strict readers can open the file. The restore pack keeps the
    exact original bytes, so nothing is lost.
    """
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        # Through UTF-16: a stray surrogate becomes one U+FFFD, a split pair its character.
        fixed = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
        return fixed.encode("utf-8")


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
            # Same id, other text: real transcripts reuse call ids. A crafted id may
            # already hold the suffixed name too: count up until a name is free.
            name = f"{base}-{digest[:10]}"
            n = 1
            while (held := self.taken.get((area, name))) is not None:
                if held == digest:
                    return f"{area}/{name}", False
                n += 1
                name = f"{base}-{digest[:10]}-{n}"
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
        data = agent_text(text)
        digest = sha256(data)
        rel, _new = self._names.assign(area, key, digest)
        self.files[rel] = digest
        return self._names.display(rel)

    def path_for(self, area: str, key: str) -> str:
        return self._names.display(f"{area}/{safe_name(key)}")

    def add_original(self, raw: bytes | memoryview, texts: Iterable[str] = ()) -> list[Any]:
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
        # Directories made here are removed again by abort() if they stay empty.
        self._made = [p for p in (parent, *parent.parents) if not p.exists()]
        parent.mkdir(parents=True, exist_ok=True)
        remove_stale(parent, path.name, "tmp")
        self.staging = parent / f".{path.name}.ctx-tmp-{os.getpid()}-{secrets.token_hex(4)}"
        try:
            self.staging.mkdir(mode=0o700)
        except OSError as exc:
            exc.filename = str(path)  # name the directory the user asked for
            raise
        self._staging_real = os.path.realpath(self.staging)
        self._areas: set[str] = set()
        self._pack = _open_private(self.staging / PACK)
        self._pack_size = 0
        # sha256 of an offloaded text's UTF-8 -> the file holding exactly those bytes,
        # for the recipes of add_original. Digests, not the texts: a text a stage wrote
        # (a truncation preview that clear_tool_results offloads again) would stay alive
        # until commit (270 MB at 1 GB of input), and a lazily loaded text is a new str
        # at every read. Dropped at commit.
        self._texts: dict[str, str] = {}
        self.old: Path | None = None
        self._adopted: tuple[tuple[int, int, int], str] | None = None
        """A re-run adding to :attr:`path`: its manifest's (inode, size, mtime), its pack."""
        self._replaced: tuple[Path, Path | None] | None = None
        """After an in-place commit: the previous manifest and pack, until :meth:`finish`."""
        self.grown_from: str | None = None
        """sha256 of a start of the input whose offload this one may replace."""

    def put(self, area: str, key: str, text: str) -> str:
        try:
            data = text.encode("utf-8")
            exact = True
        except UnicodeEncodeError:  # a lone surrogate: the file holds U+FFFD instead
            data, exact = agent_text(text), False
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
            _write_private(target, data)
        self.files[rel] = digest
        if exact and len(text) >= MIN_REF_CHARS:
            self._texts.setdefault(digest, rel)
        return self._names.display(rel)

    def adopt(self, manifest: dict[str, Any], pack_bytes: int) -> None:
        """Add to the previous run's directory at :attr:`path` (an incremental re-run).

        Nothing of it is copied or linked: its files are never changed once written, so
        they are taken as this run's under their names (the same text put again under
        the same key writes nothing), new files go to staging as in any run, and
        :meth:`commit` moves them in. The first ``pack_bytes`` of its pack (the
        originals of the kept records) are copied to the start of this run's pack.

        Raises:
            OSError: a file is missing, or OffloadError: one changed after the
                manifest was written, or the directory is a link (the caller runs in
                full instead, replacing the directory).
        """
        # The manifest was validated (load_manifest): every name stays inside.
        source = os.fspath(self.path)
        if os.path.islink(source):
            raise OffloadError(f"{source} is a link: a re-run replaces it whole")
        # Written after every file it lists: a file changed since (an agent edited
        # it) is not taken on trust; the caller then runs in full, writing it anew.
        st = os.stat(os.path.join(source, MANIFEST))
        written = st.st_mtime_ns
        taken, files = self._names.taken, self.files
        fds: dict[str, int] = {}
        try:
            for rel, digest in manifest["files"].items():
                area, name = rel.split("/", 1)
                fd = fds.get(area)
                if fd is None:
                    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
                    fd = fds[area] = os.open(os.path.join(source, area), flags)
                if os.stat(name, dir_fd=fd, follow_symlinks=False).st_mtime_ns > written:
                    raise OffloadError(f"{source}/{rel} changed after its run")
                taken[(area, name)] = digest
                files[rel] = digest
        finally:
            for fd in fds.values():
                os.close(fd)
        pack_name = manifest["pack"]["name"]
        if pack_bytes:
            with open(self.path / pack_name, "rb") as pack:
                self._pack.flush()
                copied = 0
                while copied < pack_bytes:
                    n = os.copy_file_range(pack.fileno(), self._pack.fileno(), pack_bytes - copied)
                    if n == 0:
                        raise OffloadError(f"{self.path / pack_name} is truncated")
                    copied += n
            self._pack_size = pack_bytes
        self._adopted = ((st.st_ino, st.st_size, st.st_mtime_ns), pack_name)

    def add_original(self, raw: bytes | memoryview, texts: Iterable[str] = ()) -> list[Any]:
        """Keep an original record for restore; return its restore op.

        ``texts`` are texts the record held (a format passes the old block texts of a
        record it changed or dropped). Each one this store wrote to a file and that
        sits in ``raw`` as a JSON string, escaped exactly as orjson or Python's
        ``json.dumps`` would escape the file's text, is not copied to the pack: the op
        is then a recipe ``["p", pieces, length, sha256]`` whose pieces are
        ``[offset, length]`` (bytes from the pack), ``[rel]`` (the file's text as
        orjson escapes it, quotes included), ``[rel, "ascii"]`` (as ``json.dumps``
        does) or ``[rel, "nested"]`` (orjson's literal inside a JSON string, see
        :data:`NESTED`). Otherwise, and always without ``texts``, the op is ``["b", offset,
        length, sha256]``: the bytes are in the pack. Ops name only pack offsets and
        file paths, so a later run may copy them together with the pack and files.
        """
        spans = self._spans(raw, texts) if self._texts else []
        if not spans:
            return ["b", *self._append_whole(raw)]
        view = memoryview(raw)
        pieces: list[list[Any]] = []
        pos = 0
        for start, end, ref in spans:
            if start > pos:
                pieces.append([self._append(view[pos:start]), start - pos])
            pieces.append(ref)
            pos = end
        if pos < len(view):
            pieces.append([self._append(view[pos:]), len(view) - pos])
        return ["p", pieces, len(view), sha256(raw)]

    def _append_whole(self, raw: bytes | memoryview) -> tuple[int, int, str]:
        """Write ``raw`` to the pack: its offset, length and sha256.

        In slices: a whole collection file kept for restore is mapped, and each
        slice's pages are given back once written and hashed.
        """
        offset, digest = self._pack_size, hashlib.sha256()
        view = memoryview(raw)
        for start in range(0, len(view), RELEASE_BYTES):
            chunk = view[start : start + RELEASE_BYTES]
            self._pack.write(chunk)
            digest.update(chunk)
            if isinstance(view.obj, mmap.mmap):
                release(view.obj, start + len(chunk))
        self._pack_size += len(view)
        return offset, len(view), digest.hexdigest()

    def _append(self, data: bytes | memoryview) -> int:
        """Write ``data`` to the pack; its offset there."""
        offset = self._pack_size
        self._pack.write(data)
        self._pack_size += len(data)
        return offset

    def _spans(
        self, raw: bytes | memoryview, texts: Iterable[str]
    ) -> list[tuple[int, int, list[Any]]]:
        """Where offloaded ``texts`` sit in ``raw`` as JSON strings: sorted, disjoint."""
        body: bytes | None = None
        found: list[tuple[int, int, list[Any]]] = []
        for text in texts:
            if len(text) < MIN_REF_CHARS:
                continue
            try:
                rel = self._texts.get(sha256(text.encode("utf-8")))
            except UnicodeEncodeError:  # a lone surrogate: its file holds U+FFFD
                continue
            if rel is None:
                continue
            if body is None:
                body = raw if isinstance(raw, bytes) else bytes(raw)
            hits = _occurrences(body, escape_text(text), [rel])
            if not hits and (not text.isascii() or "\x7f" in text):
                hits = _occurrences(body, escape_text(text, ASCII), [rel, ASCII])
            if not hits:
                hits = _occurrences(body, escape_text(text, NESTED), [rel, NESTED])
            found += hits
        found.sort(key=lambda hit: hit[0])
        disjoint: list[tuple[int, int, list[Any]]] = []
        end = 0
        for hit in found:
            if hit[0] >= end:  # one text inside another, or listed twice: keep the first
                disjoint.append(hit)
                end = hit[1]
        return disjoint

    def commit(self, manifest: dict[str, Any]) -> None:
        """Write the manifest and move the staging directory into place.

        The pack and the manifest (all ``ctx restore`` needs to rebuild the original
        bytes) are fsynced before the rename, and the parent directory after it, so an
        ``--in-place`` run that replaced the input cannot outlive its original on disk.
        A directory this replaces is kept aside until :meth:`finish`: the output it
        belongs to is still in place until the new output's rename, and a run killed
        in between leaves it restorable (:func:`restore_bytes` finds it).
        """
        self._texts.clear()
        self._pack.flush()
        os.fsync(self._pack.fileno())
        self._pack.close()
        manifest["files"] = dict(sorted(self.files.items()))
        pack_name = PACK
        if self._adopted is not None and self._adopted[1] == PACK:
            pack_name = OTHER_PACK  # the previous output's restore still reads its pack
        manifest["pack"] = {"name": pack_name, "bytes": self._pack_size}
        with _open_private(self.staging / MANIFEST) as fh:
            write_json(fh, manifest)
            fh.write(b"\n")
            fh.flush()
            os.fsync(fh.fileno())
        _fsync_dir(self.staging)
        if self._adopted is not None:
            self._commit_into(self.path, *self._adopted)
            return
        if self.path.exists() or self.path.is_symlink():
            check_offload_target(
                self.path,
                force=self.force,
                input_sha=manifest["input"]["sha256"],
                grown_from=self.grown_from,
            )
            old = (
                self.path.parent / f".{self.path.name}.ctx-old-{os.getpid()}-{secrets.token_hex(4)}"
            )
            os.rename(self.path, old)
            self.old = old
        try:
            os.rename(self.staging, self.path)
        except BaseException:
            if self.old is not None:  # put the previous directory back: its output needs it
                os.rename(self.old, self.path)
                self.old = None
            raise
        _fsync_dir(self.path.parent)

    def _commit_into(self, live: Path, stamp: tuple[int, int, int], old_pack: str) -> None:
        """Commit a re-run into the directory it adopted: new files, pack, then manifest.

        Until the manifest is replaced, the directory is the previous run's (plus files
        nothing cites); after it, the previous manifest and pack stay until
        :meth:`finish`, so the previous output restores until it is replaced.
        """
        st = os.stat(live / MANIFEST)
        if (st.st_ino, st.st_size, st.st_mtime_ns) != stamp:
            raise OffloadError(
                f"{live} changed while this run went on (another run of ctx?); run again."
            )
        with os.scandir(self.staging) as entries:
            areas = [e.name for e in entries if e.is_dir(follow_symlinks=False)]
        for area in areas:
            target = live / area
            if target.is_symlink():  # adopt opened it without following: changed since
                raise OffloadError(f"{target} is a link; run again.")
            target.mkdir(mode=0o700, exist_ok=True)
            with os.scandir(self.staging / area) as entries:
                for entry in entries:  # a name no file of the manifest has
                    os.rename(entry.path, target / entry.name)
            _fsync_dir(target)
        new_pack = OTHER_PACK if old_pack == PACK else PACK
        os.replace(self.staging / PACK, live / new_pack)
        previous = live / PREVIOUS_MANIFEST
        previous.unlink(missing_ok=True)  # a killed run's: the output is this manifest's
        try:
            os.link(live / MANIFEST, previous)
        except OSError:  # a file system without hard links
            shutil.copyfile(live / MANIFEST, previous)
            with open(previous, "rb") as fh:
                os.fsync(fh.fileno())
        self._replaced = (previous, None if old_pack == new_pack else live / old_pack)
        os.replace(self.staging / MANIFEST, live / MANIFEST)
        _fsync_dir(live)

    def finish(self) -> None:
        """Remove what :meth:`commit` replaced, once its output is replaced too."""
        replaced, self._replaced = self._replaced, None
        if replaced is not None:
            previous, old_pack = replaced
            previous.unlink(missing_ok=True)
            if old_pack is not None:
                old_pack.unlink(missing_ok=True)
            shutil.rmtree(self.staging, ignore_errors=True)
        old, self.old = self.old, None
        if old is not None:
            if old.is_dir() and not old.is_symlink():
                shutil.rmtree(old, ignore_errors=True)
            else:
                old.unlink(missing_ok=True)
        remove_stale(self.path.parent, self.path.name, "old")

    def abort(self) -> None:
        """Remove the staging directory (after an error or Ctrl-C).

        After an in-place commit whose output was not replaced, the previous manifest
        goes back: the directory is again the previous output's.
        """
        replaced, self._replaced = self._replaced, None
        if replaced is not None:
            try:
                os.replace(replaced[0], self.path / MANIFEST)
            except OSError:
                pass  # restore still finds manifest.prev.json
        self._texts.clear()
        try:
            self._pack.close()
        except OSError:
            pass
        shutil.rmtree(self.staging, ignore_errors=True)
        for made in self._made:  # nearest first
            try:
                made.rmdir()
            except OSError:
                break


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


def remove_stale(parent: Path, name: str, kind: str = "tmp") -> None:
    """Remove ``.NAME.ctx-KIND-<pid>-<hex>`` entries left by runs that are gone.

    ``tmp`` entries are staging directories and temporary output files of a killed
    run; ``old`` entries are replaced offload directories kept until their output was
    replaced (swept only once a later run has replaced that output).
    """
    try:
        leftovers = list(parent.glob(f".{glob_escape(name)}.ctx-{kind}-*"))
    except OSError:
        return
    for leftover in leftovers:
        try:
            pid = int(leftover.name.rsplit("-", 2)[-2])
        except ValueError:
            continue
        if pid == os.getpid() or _pid_alive(pid):
            continue
        if leftover.is_dir() and not leftover.is_symlink():
            shutil.rmtree(leftover, ignore_errors=True)
        else:
            try:
                leftover.unlink()
            except OSError:
                pass


def glob_escape(name: str) -> str:
    """``name`` with glob wildcards quoted."""
    return re.sub(r"([*?\[])", r"[\1]", name)


@contextmanager
def commit_lock(*paths: Path) -> Iterator[None]:
    """Hold an exclusive lock on the directories holding ``paths`` while a pair is committed.

    Two runs writing the same output or offload directory would otherwise interleave
    their renames and pair an output with the other run's offload. The lock is a
    ``flock`` on the parent directory itself, so no lock file is left behind; a
    directory that cannot be opened is not locked (writing into it fails anyway).
    """
    dirs = sorted({os.path.realpath(p.parent) for p in paths})
    with ExitStack() as stack:
        for d in dirs:
            try:
                fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
            except OSError:
                continue
            stack.callback(os.close, fd)
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


JSON_CHUNK = 4096
"""Items of a long list :func:`write_json` serialises at once."""


def write_json(fh: BinaryIO, value: Any, depth: int = 0) -> None:
    """Write ``orjson.dumps(value)`` to ``fh`` in pieces, never as one bytes object.

    A manifest is mostly a few long lists (the restore script; a re-run's records): a
    1 GB Claude Code session's is 94 MB of JSON, which, made whole at commit, was the
    run's peak. Objects down to ``depth`` 2 are written member by member and long
    lists :data:`JSON_CHUNK` items at a time; the bytes are orjson's exactly.

    Raises:
        TypeError: as ``orjson.dumps`` would (a key that is not a string, too).
    """
    if depth < 3 and type(value) is dict:
        fh.write(b"{")
        for i, (key, item) in enumerate(value.items()):
            if type(key) is not str:
                raise TypeError(f"a JSON object key must be a string, not {key!r}")
            fh.write(b"," if i else b"")
            fh.write(orjson.dumps(key))
            fh.write(b":")
            write_json(fh, item, depth + 1)
        fh.write(b"}")
    elif type(value) is list and len(value) > JSON_CHUNK:
        fh.write(b"[")
        for start in range(0, len(value), JSON_CHUNK):
            fh.write(b"," if start else b"")
            fh.write(memoryview(orjson.dumps(value[start : start + JSON_CHUNK]))[1:-1])
        fh.write(b"]")
    else:
        fh.write(orjson.dumps(value))


def _open_private(path: Path) -> Any:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    return os.fdopen(fd, "wb")


def _write_private(path: str, data: bytes) -> None:
    """Create ``path`` (never an existing one) holding ``data``, readable by us only.

    Plain ``os.write``: a buffered file object costs an ioctl, an lseek and an fstat
    per file, and there are thousands of offloaded texts.
    """
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)


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


def _occurrences(body: bytes, literal: bytes, ref: list[Any]) -> list[tuple[int, int, list[Any]]]:
    hits: list[tuple[int, int, list[Any]]] = []
    start = body.find(literal)
    while start >= 0:
        hits.append((start, start + len(literal), list(ref)))
        start = body.find(literal, start + len(literal))
    return hits


def _confined(rel: str) -> str:
    """A path inside the offload directory: relative, no ``..``, no empty part."""
    # split, not PurePosixPath: as strict about "..", and a manifest lists thousands.
    if not rel or rel.startswith("/") or "\\" in rel or "\0" in rel or ".." in rel.split("/"):
        raise ValueError(f"{rel!r} is not a path inside the offload directory")
    return rel


_Rel = Annotated[StrictStr, AfterValidator(_confined)]
_Sha = Annotated[StrictStr, Field(pattern=r"^[0-9a-f]{64}$")]
_Count = Annotated[StrictInt, Field(ge=0)]
_Piece = tuple[_Count, _Count] | tuple[_Rel] | tuple[_Rel, Literal["ascii", "nested"]]
_Step = (
    tuple[Literal["c"], _Count]
    | tuple[Literal["s"], _Count]
    | tuple[Literal["b"], _Count, _Count, _Sha]
    | tuple[Literal["p"], list[_Piece], _Count, _Sha]
)


class _Side(BaseModel):
    model_config = ConfigDict(extra="allow", defer_build=True)
    sha256: _Sha
    bytes: _Count


class _Input(_Side):
    name: StrictStr


class _Pack(BaseModel):
    model_config = ConfigDict(extra="allow", defer_build=True)
    name: _Rel
    bytes: _Count


class Manifest(BaseModel):
    """The schema of ``manifest.json``, checked once before anything trusts it.

    Unknown keys are allowed (a newer ctx of the same version may add some); every
    path it names must stay inside the offload directory.
    """

    model_config = ConfigDict(extra="allow", defer_build=True)
    tool: Literal["ctx"]
    version: Literal[1]
    format: StrictStr
    units: Literal["lines", "document"]
    input: _Input
    output: _Side
    script: list[_Step]
    files: dict[_Rel, _Sha]
    pack: _Pack


_PARSED: dict[str, tuple[tuple[int, int, int], Any]] = {}
"""The last manifest parsed, by path, with the (inode, size, mtime) it had: a re-run
reads its previous manifest (megabytes for a large session) three times."""


def _parse_manifest(file: Path) -> Any:
    """``file`` parsed as JSON, from :data:`_PARSED` while it is unchanged.

    Raises:
        OSError, orjson.JSONDecodeError: as reading and parsing would.
    """
    with open(file, "rb") as fh:
        st = os.fstat(fh.fileno())
        stamp = (st.st_ino, st.st_size, st.st_mtime_ns)
        hit = _PARSED.get(str(file))
        if hit is not None and hit[0] == stamp:
            return hit[1]
        data = orjson.loads(fh.read())
    _PARSED.clear()
    _PARSED[str(file)] = (stamp, data)
    return data


def read_manifest(path: Path) -> dict[str, Any] | None:
    """The manifest of an offload directory, or None if it is not one."""
    try:
        data = _parse_manifest(path / MANIFEST)
    except (OSError, orjson.JSONDecodeError):
        return None
    if not isinstance(data, dict) or data.get("tool") != "ctx":
        return None
    return dict(data)


def manifest_for_rerun(path: Path) -> dict[str, Any] | None:
    """The manifest of an offload directory, checked as far as a re-run relies on it.

    :func:`load_manifest` validates every op and file (a second of a 1 GB session's
    re-run); a re-run reads only the input and output sides, the pack's name and the
    files' names, which are checked here (names stay inside the directory), and copies
    the kept records' ops, which ``ctx restore`` validates when it reads them.
    """
    manifest = read_manifest(path)
    if manifest is None:
        return None
    try:
        sides = [manifest["input"], manifest["output"]]
        if not all(
            isinstance(side.get("bytes"), int) and isinstance(side.get("sha256"), str)
            for side in sides
        ):
            return None
        files = manifest["files"]
        if not (
            isinstance(manifest["format"], str)
            and isinstance(manifest["script"], list)
            and isinstance(files, dict)
            and _plain(manifest["pack"]["name"])
        ):
            return None
        for rel, digest in files.items():
            area, _, name = rel.partition("/")
            if not (_AREA.fullmatch(area) and _plain(name) and isinstance(digest, str)):
                return None
    except (KeyError, TypeError, AttributeError):
        return None
    return manifest


_AREA = re.compile(r"[a-z][a-z0-9_]*")


def _plain(name: Any) -> bool:
    """A file name that stays in its directory: no separator, no NUL, no leading dot."""
    return (
        isinstance(name, str)
        and bool(name)
        and not name.startswith(".")
        and "/" not in name
        and "\\" not in name
        and "\0" not in name
    )


def load_manifest(path: Path, name: str = MANIFEST) -> dict[str, Any]:
    """The manifest of an offload directory, validated against :class:`Manifest`.

    ``name`` is :data:`PREVIOUS_MANIFEST` for the one a re-run replaced.

    Raises:
        RestoreError: there is no manifest, or it is damaged (names the first problem).
    """
    file = path / name
    try:
        data = _parse_manifest(file)
    except FileNotFoundError:
        raise RestoreError(
            f"{path} is not a ctx offload directory (no {MANIFEST})",
            remedy=Remedy.NAME_OFFLOAD_DIR,
        ) from None
    except IsADirectoryError:
        raise RestoreError(f"{file} is damaged: it is a directory.") from None
    except orjson.JSONDecodeError as exc:
        raise RestoreError(f"{file} is damaged: not JSON ({exc}).") from None
    try:
        Manifest.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        # Union members show up in the location as type names: keep the real path.
        where = ".".join(str(p) for p in err["loc"] if "[" not in str(p)) or "the top level"
        raise RestoreError(f"{file} is damaged: {where}: {err['msg']}.") from None
    return dict(data)


def check_offload_target(
    path: Path, *, force: bool, input_sha: str | None = None, grown_from: str | None = None
) -> None:
    """Refuse to replace anything but an empty directory or a ctx offload directory.

    ``force`` allows replacing the offload directory of another transcript; nothing
    allows replacing a file or a directory ctx did not write. ``grown_from`` is the
    sha256 of a start of the input (checked by the caller): the offload of that
    transcript is this one's before it grew, and may be replaced.
    """
    if not (path.exists() or path.is_symlink()):
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
    if force or input_sha is None:
        return
    recorded = manifest.get("input")
    recorded = recorded if isinstance(recorded, dict) else {}
    if recorded.get("sha256") not in (input_sha, grown_from):
        raise OffloadError(
            f"{path} holds the offload of another transcript ({recorded.get('name', '?')})",
            remedy=Remedy.OTHER_OFFLOAD_DIR,
        )


def check_offload_location(path: Path, *, keep: list[Path]) -> None:
    """Refuse an offload directory that is, holds or sits inside a path it must not touch.

    ``keep`` are the input and the output: the offload directory may not be either,
    contain either (it is replaced as a whole) or lie inside the output. Nor may it
    be, or contain, the working or home directory.

    Raises:
        OffloadError: naming the path the offload directory would clobber.
    """
    real = os.path.realpath(path)
    if real == os.path.dirname(real):
        raise OffloadError(f"{path} is the root directory; choose another offload directory.")
    for what, other in (("working", Path.cwd()), ("home", Path.home())):
        if _within(os.path.realpath(other), real):
            raise OffloadError(
                f"{path} is or holds the {what} directory; choose another offload directory."
            )
    for other in keep:
        other_real = os.path.realpath(other)
        if _within(other_real, real) or _within(real, other_real) or _same(path, other):
            raise OffloadError(
                f"{path} would replace {other}: the offload directory may not be, hold or "
                "lie inside the input or the output; choose another offload directory."
            )


def _within(inner: str, outer: str) -> bool:
    """True if the real path ``inner`` is ``outer`` or lies under it."""
    return inner == outer or inner.startswith(outer.rstrip("/") + "/")


def _same(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def previous_offload(offload_dir: Path, output_sha: str) -> tuple[Path, str] | None:
    """Where a killed run left the manifest of this output, if it left one: the previous
    manifest inside the directory (a re-run's) or a replaced directory kept aside."""
    candidates = [(offload_dir, PREVIOUS_MANIFEST)] + [
        (old, MANIFEST)
        for old in sorted(offload_dir.parent.glob(f".{glob_escape(offload_dir.name)}.ctx-old-*"))
    ]
    for directory, name in candidates:
        try:
            manifest = _parse_manifest(directory / name)
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


def iter_offloaded(offload_dir: Path) -> Iterator[tuple[str, str]]:
    """Yield (relative path, sha256) of every offloaded text in a directory."""
    manifest = read_manifest(offload_dir) or {}
    yield from manifest.get("files", {}).items()
