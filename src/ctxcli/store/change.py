"""Record a change on disk: one transaction for every route that writes a transcript.

Every write ctx makes of a transcript is the same sequence, whichever route made it — a
reduction into a file or to stdout, a reduction in place, a repair (``ctx doctor --fix``),
a restore in place:

1. **stage**: removed text goes into a private staging directory
   (:class:`~ctxcli.store.disk.OffloadStore`), the output into a temporary file beside
   its destination (:class:`~ctxcli.store.inplace.Staged`);
2. **lock**: the directories of the pair are locked while it is committed, so racing runs
   never cross their pairs (in place, the file's own lock is held from the read on);
3. **compare**: in place, the file is compared with what was read; lines appended since
   are carried over after the output, any other change undoes the commit
   (:meth:`~ctxcli.store.inplace.InPlace.settle`);
4. **rename**: the record (the offload directory, manifest last) first, then the output,
   so an output never exists without what restores it;
5. **index**: the record is remembered by its output's hash (:mod:`ctxcli.store.index`),
   and records a restore used up are forgotten and discarded.

An error or an interrupt at any step aborts: what was staged goes, and a record committed
whose output did not replace anything is taken back. Callers say *what* to write (a
:class:`Transaction` and its :meth:`~Transaction.commit`); none of them assembles the
steps.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, BinaryIO

from ctxcli.core.errors import OffloadError, Remedy
from ctxcli.core.io import Input, hash_input
from ctxcli.services.lock import commit_lock
from ctxcli.store import history
from ctxcli.store.disk import OffloadStore, check_offload_target, holds_records, remove_stale
from ctxcli.store.index import HEAD_BYTES, ReductionIndex, head_digest, remember
from ctxcli.store.inplace import InPlace, Staged
from ctxcli.store.manifest import Header, manifest_for_rerun

__all__ = [
    "Claim",
    "Committed",
    "Record",
    "Transaction",
    "claim_beside_output",
    "claim_in_place",
    "free_sibling",
    "holder",
]


@dataclass(frozen=True)
class Record:
    """Where a change's record goes: its offload directory and how hints cite it.

    Attributes:
        path: the offload directory (made whole at commit, by one rename).
        cite: the directory as hints name it (an absolute path, or a URL uploaded to).
        grown_from: sha256 of a start of the input: a record of that transcript is this
            one's before it grew, and may be replaced.
        same_output: a record already there is replaced only by one with the same output
            (output to stdout, whose earlier outputs are not this run's to replace).
    """

    path: Path
    cite: str
    grown_from: str | None = None
    same_output: bool = False


@dataclass(frozen=True)
class Committed:
    """What a commit wrote.

    Attributes:
        record: the record's directory (None: the change records nothing).
        written: the output's size, without the bytes carried over.
        carried: bytes after the output, carried over from the file (in place).
    """

    record: Path | None
    written: int
    carried: int = 0


class Transaction:
    """One change recorded on disk; a context manager (see the module docstring).

    Entering opens the record's store (:attr:`store`, what stages write removed text
    to) and, with ``stream``, the staged output (:attr:`out`, written as it is made).
    :meth:`commit` finishes the change; :meth:`cancel` drops it (nothing to change).
    Leaving without either, or with an exception, aborts: nothing stays behind.

    Args:
        record: where the record goes; None for a change that records nothing (a
            restore in place, which uses records up instead).
        file: the output file; None for stdout or in place.
        change: the in-place transaction of the file the output replaces.
        write: for stdout, receives the output under the lock, before the record is
            committed (a reader that fails leaves no orphan record).
        stream: open the staged output on entering, to be written as it is made.
        log: receives a note when the index cannot be written.
    """

    def __init__(
        self,
        record: Record | None,
        *,
        file: Path | None = None,
        change: InPlace | None = None,
        write: Callable[[bytes], None] | None = None,
        stream: bool = False,
        log: Callable[[str], None] | None = None,
    ) -> None:
        self.record = record
        self.change = change
        self.target = change.target if change is not None else file
        self.write = write
        self.stream = stream and self.target is not None
        self.log = log
        self.store: OffloadStore | None = None
        self.staged: Staged | None = None
        self._open = False

    def __enter__(self) -> Transaction:
        self._open = True
        try:
            if self.record is not None:
                self.store = self._new_store()
            if self.stream:
                self.staged = self._stage()
                self.staged.open()
        except BaseException as exc:
            self._abort(exc)
            raise
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._open:
            self._abort(exc)

    @property
    def out(self) -> BinaryIO | None:
        """The staged output's file, when the output is written as it is made."""
        return self.staged.fh if self.staged is not None else None

    def restart(self) -> OffloadStore:
        """Drop what was staged and start the record anew (a run in full after a re-run).

        Raises:
            ValueError: the transaction records nothing.
        """
        if self.store is None:
            raise ValueError("this change records nothing")
        self.store.abort()
        self.store = self._new_store()
        if self.staged is not None and self.staged.fh is not None:
            self.staged.fh.seek(0)
            self.staged.fh.truncate()
        return self.store

    def adopt(self, manifest: dict[str, Any], pack_bytes: int) -> None:
        """Build on the record already at the record's path (an incremental re-run).

        See :meth:`~ctxcli.store.disk.OffloadStore.adopt`.
        """
        if self.store is None:
            raise ValueError("this change records nothing")
        self.store.adopt(manifest, pack_bytes)

    def commit(
        self,
        header: Header | None = None,
        script: list[Any] | None = None,
        rerun: dict[str, Any] | None = None,
        *,
        output: bytes = b"",
        used: Iterable[Path] = (),
        input_head: str | None = None,
    ) -> Committed:
        """Write the record (``header`` with ``script``), then the output; remember it.

        ``output`` is the new bytes unless they were streamed to :attr:`out`. ``used``
        are records this change used up (a restore in place): once the file is replaced
        they are forgotten by the index and discarded, but for those another reduction
        was made from (its output restores through them). ``input_head`` is the
        :func:`~ctxcli.store.index.head_digest` of the input, for the index.

        Raises:
            ChangedError: in place, the file changed other than by lines appended; it
                is left as it was, and so is every record.
        """
        if (self.store is None) != (header is None):
            raise ValueError("a header is committed exactly when the change has a record")
        staged = self.staged
        carried = 0
        head = self._head(output)
        if self.change is not None:
            staged = self._staged_with(output)
            carried = self._commit_in_place(self.change, staged, header, script, rerun)
        else:
            paths = [p for p in (self._record_path(), self.target) if p is not None]
            with commit_lock(*paths):
                if self.store is not None and header is not None:
                    # Before anything is written (stdout cannot be taken back).
                    self.store.check_replaceable(header)
                if self.target is not None:
                    staged = self._staged_with(output)
                    staged.close()
                elif self.write is not None:
                    self.write(output)
                self._commit_record(header, script, rerun)
                if staged is not None:
                    try:
                        staged.replace()
                    except BaseException:
                        self._take_back()
                        raise
                if self.store is not None:
                    self.store.finish()
        self._open = False
        written = header.output.bytes if header is not None else len(output)
        done = Committed(self._record_path(), written, carried)
        if header is not None and done.record is not None:
            where = str(self.target.resolve()) if self.target is not None else ""
            remember(header, done.record, where, self.log, head=head, input_head=input_head)
        _use_up(list(used))
        return done

    def _head(self, output: bytes) -> str:
        """The index's key for the output's first line (read back when it was streamed)."""
        if self.staged is not None and self.staged.fh is not None:
            self.staged.fh.flush()
            with open(self.staged.tmp, "rb") as fh:
                return head_digest(fh.read(HEAD_BYTES))
        return head_digest(output)

    def cancel(self) -> None:
        """Change nothing: drop the staged record and output."""
        self._abort(None)

    # -- the steps ----------------------------------------------------------------------

    def _new_store(self) -> OffloadStore:
        assert self.record is not None
        store = OffloadStore(
            self.record.path, self.record.cite, same_output=self.record.same_output
        )
        store.grown_from = self.record.grown_from
        return store

    def _record_path(self) -> Path | None:
        return self.store.path if self.store is not None else None

    def _stage(self) -> Staged:
        if self.change is not None:
            return self.change.stage()
        assert self.target is not None
        return Staged(self.target)

    def _staged_with(self, output: bytes) -> Staged:
        """The staged output: the streamed one, or a new one holding ``output``."""
        if self.staged is None:
            self.staged = self._stage()
            self.staged.open().write(output)
        return self.staged

    def _commit_record(
        self, header: Header | None, script: list[Any] | None, rerun: dict[str, Any] | None
    ) -> None:
        if self.store is not None and header is not None:
            self.store.commit(header, script or [], rerun)

    def _commit_in_place(
        self,
        change: InPlace,
        staged: Staged,
        header: Header | None,
        script: list[Any] | None,
        rerun: dict[str, Any] | None,
    ) -> int:
        """Record, settle, replace.

        A kill at any moment leaves the old file, or the new one with its record. If the
        file changed meanwhile other than by appending, the record is taken back too.
        """
        staged.close()
        self._commit_record(header, script, rerun)
        try:
            carried = change.settle(staged)
        except BaseException:
            self._take_back()
            raise
        change.replace(staged)
        if self.store is not None:
            self.store.finish()
        return carried

    def _take_back(self) -> None:
        """Undo a committed record whose output replaced nothing."""
        store, self.store = self.store, None
        if store is not None:
            store.revert()

    def _abort(self, exc: BaseException | None) -> None:
        self._open = False
        store, self.store = self.store, None
        if store is not None:
            store.abort()
        staged, self.staged = self.staged, None
        if staged is not None:
            staged.discard()
        if isinstance(exc, OSError):
            _name_for_user(exc, self.target, self.record)


def _use_up(used: list[Path]) -> None:
    """Forget and discard records a restore in place used up, but those still needed.

    A record is still needed when a reduction was made from its output (the input of
    that reduction is the output, or starts with it: lines appended since): that
    reduction's output restores through it. What killed runs left beside the records
    (staging directories of changes never committed) is swept too: a restore is the
    next run in that folder as much as a reduction is.
    """
    for folder in {p.parent for p in used}:
        remove_stale(folder, None, "tmp")
    if not used:
        return
    index = ReductionIndex()
    names = {str(p.resolve()) for p in used}
    spent = [p for p in used if not _restored_through(index, str(p.resolve()), names)]
    index.forget([str(p.resolve()) for p in spent])
    for record in spent:
        history.discard(record)


def _restored_through(index: ReductionIndex, record: str, used: set[str]) -> bool:
    """True if a reduction other than ``used`` ones was made from ``record``'s output."""
    for entry in index.find(offload_dir=record):
        heirs = index.find(input_sha256=entry.output_sha256, input_head=entry.output_head)
        if any(h.offload_dir not in used for h in heirs):
            return True
    return False


def _name_for_user(exc: OSError, target: Path | None, record: Record | None) -> None:
    """An error about a temporary name names the file or directory the user asked for."""
    hidden = exc.filename is None or ".ctx-tmp-" in os.fspath(exc.filename)
    if hidden:
        named = target if target is not None else (record.path if record is not None else None)
        if named is not None:
            exc.filename = str(named)
            exc.filename2 = None


# -- which directory a new record may take ----------------------------------------------


def free_sibling(base: Path) -> Path:
    """The first ``base.N`` (N >= 2) that does not exist."""
    n = 2
    while (sibling := base.with_name(f"{base.name}.{n}")).exists() or sibling.is_symlink():
        n += 1
    return sibling


def holder(base: Path) -> dict[str, Any] | None:
    """The manifest of the record at ``base``; None if the directory is free (absent or empty).

    A record whose manifest a re-run could not trust (damaged, or naming paths outside
    the directory) is returned as ``{}``: it is kept like another transcript's.

    Raises:
        OffloadError: ``base`` is a file, a link, or a directory ctx did not write.
    """
    check_offload_target(base)
    if not (base.exists() and any(base.iterdir())):
        return None
    return manifest_for_rerun(base) or {}


@dataclass(frozen=True)
class Claim:
    """The directory a new record takes.

    Attributes:
        path: the directory (the one asked for, or a ``.N`` beside it).
        grown_from: sha256 of the input of the record it replaces, a start of this
            run's input (the same transcript before it grew), if it replaces one.
        why: why it is not the directory asked for.
    """

    path: Path
    grown_from: str | None = None
    why: str | None = None


def claim_beside_output(base: Path, data: Input, output: Path | None, *, force: bool) -> Claim:
    """The directory a reduction of ``data`` into ``output`` (None: stdout) records in.

    A record at ``base`` is replaced only by a run of the same transcript (or it grown),
    and only if no other file restores through it: for a file output, the index must
    know no other output of it still in place; for stdout, the run's output must be the
    same as the record's (checked at commit: see :attr:`Record.same_output`). A record
    of this transcript that another output still needs stays, and the new one goes
    beside it (``base.N``); so does, with ``force``, another transcript's.

    Raises:
        OffloadError: ``base`` holds another transcript's record and ``force`` is off.
    """
    manifest = holder(base)
    if manifest is None:
        return Claim(base)
    if holds_records(base):
        return Claim(free_sibling(base), why=f"{base} holds the records of other reductions")
    grown = _same_transcript(manifest, data)
    if grown is None:
        if force:
            return Claim(free_sibling(base), why=f"{base} holds another transcript's record")
        raise OffloadError(
            f"{base} holds the offload of another transcript "
            f"({_field(manifest, 'input', 'name') or 'a damaged record'})",
            remedy=Remedy.OTHER_OFFLOAD_DIR,
        )
    if output is not None:
        other = _output_elsewhere(manifest, base, output)
        if other is not None:
            return Claim(free_sibling(base), why=f"{base} is the record {other} restores from")
    return Claim(base, grown_from=grown)


def claim_in_place(base: Path, path: Path, own: bool, *, force: bool) -> Claim:
    """The directory an in-place change of ``path`` records in.

    A record of this file's own history (``own``: the file is its output, or it names
    this file as its input) is never replaced: the change goes beside it, ``base.N``,
    as every later change of the file does. Another transcript's record stays too.

    Raises:
        OffloadError: ``base`` holds another transcript's record and ``force`` is off.
    """
    manifest = holder(base)
    if manifest is None:
        return Claim(base)
    if holds_records(base):
        return Claim(free_sibling(base), why=f"{base} holds the records of other reductions")
    named = _field(manifest, "input", "name")
    if own or (named is not None and os.path.realpath(named) == os.path.realpath(path)):
        return Claim(free_sibling(base), why=f"{base} holds this file's earlier reduction")
    if force:
        return Claim(free_sibling(base), why=f"{base} holds another transcript's record")
    raise OffloadError(
        f"{base} holds the offload of another transcript ({named or 'a damaged record'})",
        remedy=Remedy.OTHER_OFFLOAD_DIR,
    )


def _same_transcript(manifest: dict[str, Any], data: Input) -> str | None:
    """The record's input sha256 if ``data`` is that input or starts with it, else None."""
    digest = _field(manifest, "input", "sha256")
    size = manifest.get("input", {}).get("bytes") if digest else None
    if not isinstance(size, int) or not 0 <= size <= len(data):
        return None
    hashed = hash_input(hashlib.sha256(), data, 0, size).hexdigest()
    return digest if hashed == digest else None


def _output_elsewhere(manifest: dict[str, Any], base: Path, output: Path) -> str | None:
    """Another file the record at ``base`` still restores (the index knows where it wrote).

    A record written beside standard output restores a file ctx never saw named: it may
    be anywhere, so it is one. So is a reduction made from the record's output (a chain
    of outputs restores through every record in it).
    """
    digest = _field(manifest, "output", "sha256")
    if digest is None:
        return None
    here = os.path.realpath(base)
    mine = os.path.realpath(output)
    index = ReductionIndex()
    for made in index.find(input_sha256=digest):
        # A reduction made from this record's output restores through it, wherever that
        # output is now: the record stays while that reduction's own record does.
        if made.offload_dir != here and Path(made.offload_dir).is_dir():
            return f"the reduction recorded in {made.offload_dir}"
    for entry in index.find(output_sha256=digest):
        if entry.offload_dir != here or entry.path == mine:
            continue
        if not entry.path:
            return "an output written to standard output"
        if history.match_reduction_at(Path(entry.path), base):
            return entry.path
    return None


def _field(manifest: dict[str, Any], side: str, key: str) -> str | None:
    part = manifest.get(side)
    value = part.get(key) if isinstance(part, dict) else None
    return value if isinstance(value, str) else None
