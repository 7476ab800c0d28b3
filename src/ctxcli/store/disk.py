"""Where removed text goes on disk: the offload directory, staged and committed whole.

Layout of an offload directory::

    manifest.json        what was reduced, hashes of every file, the restore script
                         (:mod:`ctxcli.store.manifest`)
    originals.bin        the original bytes of every record a stage changed or dropped,
                         less the texts that are in one of the files below
    trunc/<safe id>      texts removed by truncate_tool_output (Eino layout)
    clear/<safe id>      texts removed by clear_tool_results (Eino layout)
    <stage>/<safe id>    texts removed by any other stage

The agent reads the per-text files; ``ctx restore`` uses the manifest, ``originals.bin``
and those files to rebuild the input byte-for-byte and checks every hash first
(:mod:`ctxcli.store.restore`). A changed record whose original holds an offloaded text
as a JSON string is kept as a recipe: the bytes around the string in the pack, the
string as a reference to its file (see :meth:`OffloadStore.add_original`), so the pack
does not hold every removed text twice. Everything is written into a private staging
directory that is renamed into place only when complete, so a crash never leaves a
half-written offload directory. An incremental re-run adds to the previous run's
directory instead (see :meth:`OffloadStore.adopt`): its new files move in beside the
old ones, the pack is written under the other of two names, and the manifest is
replaced last, the previous one kept as ``manifest.prev.json`` until the new output is
in place.
"""

from __future__ import annotations

import glob
import hashlib
import mmap
import os
import secrets
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ctxcli.core.errors import OffloadError, Remedy
from ctxcli.core.io import RELEASE_BYTES, release
from ctxcli.core.protocols import sha256
from ctxcli.services.lock import pid_alive
from ctxcli.store.manifest import (
    MANIFEST,
    OTHER_PACK,
    PACK,
    PREVIOUS_MANIFEST,
    Header,
    read_manifest,
    write_json,
)
from ctxcli.store.naming import NamingPolicy, agent_text
from ctxcli.store.restore import ASCII, NESTED, escape_text

__all__ = [
    "OffloadStore",
    "RecordTaken",
    "check_offload_location",
    "check_offload_target",
    "holds_records",
    "discard",
    "fsync_dir",
    "remove_stale",
]

MIN_REF_CHARS = 64
"""Shorter texts are kept literally in the pack: a reference would save next to nothing."""


class OffloadStore(NamingPolicy):
    """Writes offloaded texts into a private staging directory, then commits it.

    Args:
        path: the final offload directory.
        root: how hints cite the directory (usually ``path`` as the user gave it).
        same_output: a record already at ``path`` may be replaced only by one with the
            same output (output to stdout: the output it restores is not ours to replace).
    """

    def __init__(self, path: Path, root: str, *, same_output: bool = False) -> None:
        super().__init__(root)
        self.path = path
        self.same_output = same_output
        check_offload_target(path)
        parent = path.parent
        # Directories made here are removed again by abort() if they stay empty.
        self._made = [p for p in (parent, *parent.parents) if not p.exists()]
        parent.mkdir(parents=True, exist_ok=True)
        remove_stale(parent, path.name, "tmp")
        self._areas: set[str] = set()
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
        self.staging = parent / f".{path.name}.ctx-tmp-{os.getpid()}-{secrets.token_hex(4)}"
        # Last, and named before it exists: whatever happens from its creation on (an
        # interrupt too), a store that failed to start leaves no staging directory.
        try:
            self.staging.mkdir(mode=0o700)
            self._pack = _open_private(self.staging / PACK)
            self._staging_real = os.path.realpath(self.staging)
        except BaseException as exc:
            shutil.rmtree(self.staging, ignore_errors=True)
            if isinstance(exc, OSError):
                exc.filename = str(path)  # name the directory the user asked for
            raise

    def put(self, area: str, key: str, text: str) -> str:
        """Stage ``text`` under ``area``/``key``; return the path a hint cites."""
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

    def commit(
        self, header: Header, script: list[Any], rerun: dict[str, Any] | None = None
    ) -> None:
        """Write the manifest and move the staging directory into place.

        The manifest is ``header`` with the restore ``script``, the re-run state
        ``rerun`` (see :mod:`ctxcli.pipeline.rerun`), the files and the pack.

        The pack and the manifest (all ``ctx restore`` needs to rebuild the original
        bytes) are fsynced before the rename, and the parent directory after it, so an
        ``--in-place`` run that replaced the input cannot outlive its original on disk.
        A directory this replaces is kept aside until :meth:`finish`: the output it
        belongs to is still in place until the new output's rename, and a run killed
        in between leaves it restorable (:func:`~ctxcli.store.restore.restore_bytes` finds it).
        """
        self._texts.clear()
        self._pack.flush()
        os.fsync(self._pack.fileno())
        self._pack.close()
        pack_name = PACK
        if self._adopted is not None and self._adopted[1] == PACK:
            pack_name = OTHER_PACK  # the previous output's restore still reads its pack
        pack = {"name": pack_name, "bytes": self._pack_size}
        manifest = header.document(script, dict(sorted(self.files.items())), pack, rerun)
        with _open_private(self.staging / MANIFEST) as fh:
            write_json(fh, manifest)
            fh.write(b"\n")
            fh.flush()
            os.fsync(fh.fileno())
        fsync_dir(self.staging)
        if self._adopted is not None:
            self._commit_into(self.path, *self._adopted)
            return
        if self.path.exists() or self.path.is_symlink():
            self.check_replaceable(header)
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
        fsync_dir(self.path.parent)

    def check_replaceable(self, header: Header) -> None:
        """Refuse now what :meth:`commit` would refuse: a record it may not replace.

        Raises:
            RecordTaken: the directory holds another transcript's record, or (with
                ``same_output``) another output's.
        """
        if self._adopted is None:
            check_offload_target(
                self.path,
                input_sha=header.input.sha256,
                grown_from=self.grown_from,
                output_sha=header.output.sha256 if self.same_output else None,
            )

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
            fsync_dir(target)
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
        fsync_dir(live)

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

    def revert(self) -> None:
        """Undo :meth:`commit` before its output replaced anything.

        Undo :meth:`commit` before its output replaced anything (an in-place run whose
        file changed meanwhile): the directory is again what it was before the run.
        """
        if self._replaced is not None:
            self.abort()  # a re-run's: the previous manifest goes back
            return
        discard(self.path)
        old, self.old = self.old, None
        if old is not None:
            os.rename(old, self.path)
        self.abort()

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


def discard(directory: Path) -> None:
    """Remove a directory so that a kill midway never leaves it half there.

    It is first renamed to a temporary name (atomic); what a kill leaves of it is then
    swept by a later run like any other leftover of a run that is gone.
    """
    trash = directory.parent / f".{directory.name}.ctx-tmp-{os.getpid()}-{secrets.token_hex(4)}"
    try:
        os.rename(directory, trash)
    except FileNotFoundError:
        return
    shutil.rmtree(trash, ignore_errors=True)


def fsync_dir(path: Path) -> None:
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


def remove_stale(parent: Path, name: str | None, kind: str = "tmp") -> None:
    """Remove ``.NAME.ctx-KIND-<pid>-<hex>`` entries left by runs that are gone.

    ``tmp`` entries are staging directories and temporary output files of a killed
    run; ``old`` entries are replaced offload directories kept until their output was
    replaced (swept only once a later run has replaced that output). ``name`` None
    sweeps the leftovers of every name in ``parent``.
    """
    pattern = "*" if name is None else glob.escape(name)
    try:
        leftovers = list(parent.glob(f".{pattern}.ctx-{kind}-*"))
    except OSError:
        return
    for leftover in leftovers:
        try:
            pid = int(leftover.name.rsplit("-", 2)[-2])
        except ValueError:
            continue
        if pid == os.getpid() or pid_alive(pid):
            continue
        if leftover.is_dir() and not leftover.is_symlink():
            shutil.rmtree(leftover, ignore_errors=True)
        else:
            try:
                leftover.unlink()
            except OSError:
                pass


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


def _occurrences(body: bytes, literal: bytes, ref: list[Any]) -> list[tuple[int, int, list[Any]]]:
    hits: list[tuple[int, int, list[Any]]] = []
    start = body.find(literal)
    while start >= 0:
        hits.append((start, start + len(literal), list(ref)))
        start = body.find(literal, start + len(literal))
    return hits


class RecordTaken(OffloadError):
    """The directory holds a record this run may not replace.

    Another run's, or another output's: the run's own record must go elsewhere.
    """


def check_offload_target(
    path: Path,
    *,
    input_sha: str | None = None,
    grown_from: str | None = None,
    output_sha: str | None = None,
) -> None:
    """Refuse to replace anything but an empty directory or a record this run may replace.

    Nothing replaces a file or a directory ctx did not write. With ``input_sha`` (at
    commit), a record is replaced only by a run of the same transcript: ``input_sha``, or
    ``grown_from``, the sha256 of a start of the input (the transcript before it grew);
    with ``output_sha`` too, only by a run with the same output. Which records a run may
    take at all is chosen before it runs (:mod:`ctxcli.store.change`); a refusal here
    means another run took the directory meanwhile.

    Raises:
        OffloadError: the directory is a file, a link, or not ctx's;
            :class:`RecordTaken`: it holds a record this run may not replace.
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
    if input_sha is None:
        return
    if holds_records(path):
        raise RecordTaken(f"{path} holds the records of other reductions inside it")
    recorded = manifest.get("input")
    recorded = recorded if isinstance(recorded, dict) else {}
    if recorded.get("sha256") not in (input_sha, grown_from):
        raise RecordTaken(
            f"{path} holds the record of another transcript ({recorded.get('name', '?')})",
            remedy=Remedy.OTHER_OFFLOAD_DIR,
        )
    output = manifest.get("output")
    if output_sha is not None and (
        not isinstance(output, dict) or output.get("sha256") != output_sha
    ):
        raise RecordTaken(f"{path} holds the record of another reduction of this transcript")


def holds_records(path: Path) -> bool:
    """True if a directory below ``path`` is an offload directory of its own.

    A batch given ``--offload-dir D`` writes ``D/<name>`` for each input; a single run
    into ``D`` must never replace them with it.
    """
    for folder, dirs, files in os.walk(path):
        if folder != os.fspath(path) and MANIFEST in files:
            if read_manifest(Path(folder)) is not None:
                return True
        dirs[:] = [d for d in dirs if not d.startswith(".")]
    return False


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
