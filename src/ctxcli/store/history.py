"""How to get the original back: where the reductions of a file are recorded, and one peel loop.

Every reduction or change ctx makes is recorded as an offload directory (a manifest, the
restore pack, the removed texts), in one of these places, all kinds of one history:

- beside the output: ``FILE.offload``, and ``FILE.offload.N`` for later in-place runs;
- a file's *change directories*, for what was changed where a client reads it (a session
  reduced in place, a repair by ``ctx doctor --fix``): ``<data>/changes/<file key>/NNNN-kind``,
  keyed by the file's resolved path, so two copies of one session never share records
  (:func:`changes_dir`); the previous layout, ``<data>/offload/<agent>/<session id>/NNNN-kind``,
  is still read (:func:`legacy_changes`);
- the reduction index (:class:`~ctxcli.store.index.ReductionIndex`): every reduction made on
  this machine by output hash and path, which finds the record of a moved or copied output.

:func:`restore_chain` undoes the newest reduction whose output the file is (or is with
lines appended: a resumed session), then the one that made *that*, and so on. Every step is
hash-checked by :func:`~ctxcli.store.restore.restore_bytes`; a change *inside* a reduced
part is refused.
"""

from __future__ import annotations

import glob
import hashlib
import os
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ctxcli.core.errors import CtxError, Remedy, RestoreError
from ctxcli.core.io import Input, hash_input
from ctxcli.core.protocols import safe_name, sha256
from ctxcli.services.dirs import data_dir, private_dir
from ctxcli.services.session_files import identify
from ctxcli.store.disk import discard, remove_stale
from ctxcli.store.index import ReductionIndex, head_digest
from ctxcli.store.inplace import write_atomic
from ctxcli.store.manifest import read_manifest
from ctxcli.store.restore import restore_bytes

__all__ = [
    "RestoreStep",
    "Restored",
    "changes",
    "changes_dir",
    "discard",
    "index_dirs",
    "left_behind",
    "legacy_changes",
    "match_reduction",
    "mark_restored",
    "match_reduction_at",
    "new_change",
    "own_changes",
    "owns",
    "prune",
    "restore_chain",
    "siblings",
]

MAX_STEPS = 256
CHANGES = "changes"
LEGACY = "offload"
"""The folder of ctx's data directory that held session changes before :data:`CHANGES`."""
_CHANGE = re.compile(r"^(\d{4,})-([a-z]+)$")
_RESTORED = "restored"
"""The file of a change folder naming the last change a restore in place left behind."""


@dataclass(frozen=True)
class RestoreStep:
    """One reduction undone."""

    offload_dir: str
    restored_bytes: int
    restored_sha256: str
    appended_bytes: int
    """Bytes after the reduced output (lines a client appended), carried over as they are."""


@dataclass(frozen=True)
class Restored:
    """The original transcript and the reductions undone to get it, newest first."""

    data: bytes
    steps: tuple[RestoreStep, ...]


def changes_dir(path: Path) -> Path:
    """Where the in-place changes of the file ``path`` are recorded.

    Keyed by the resolved path (a link leads to the file it names): its name, for a
    reader, and a hash of the whole path, so two files of one name never meet.
    """
    real = os.path.realpath(path)
    key = f"{safe_name(os.path.basename(real))}-{sha256(os.fsencode(real))[:16]}"
    return data_dir() / CHANGES / key


def changes(path: Path) -> list[Path]:
    """The change directories of ``path``, oldest first."""
    return _numbered(changes_dir(path))


def own_changes(path: Path) -> list[Path]:
    """The changes of ``path`` on its present line, oldest first (see :func:`mark_restored`).

    Those after its last restore in place: a restore in place makes the file an original
    again, and a change it kept because another output restores through it is no longer
    one of the file's own.
    """
    found = changes(path)
    try:
        last = int((changes_dir(path) / _RESTORED).read_text("ascii"))
    except (OSError, ValueError):
        return found
    return [p for p in found if int(p.name.split("-")[0]) > last]


def mark_restored(path: Path) -> None:
    """Note that ``path`` was restored in place: the changes left are off its line.

    Call it under the file's lock, after the restored file is in place.
    """
    found = changes(path)
    if found:
        number = found[-1].name.split("-")[0]
        write_atomic(changes_dir(path) / _RESTORED, number.encode("ascii"), mode=0o600)


def _numbered(folder: Path) -> list[Path]:
    try:
        found = [p for p in folder.iterdir() if _CHANGE.match(p.name) and p.is_dir()]
    except OSError:
        return []
    return sorted(found, key=lambda p: int(p.name.split("-")[0]))


def next_change(path: Path, kind: str) -> Path:
    """The name the next change directory of ``path`` gets; nothing is made.

    What a preview cites (``ctx stats --in-place``); :func:`new_change` takes it.
    """
    existing = _numbered(changes_dir(path))
    last = int(existing[-1].name.split("-")[0]) if existing else 0
    return changes_dir(path) / f"{last + 1:04d}-{kind}"


def new_change(path: Path, kind: str) -> Path:
    """The next change directory of ``path`` (its folder is made; the store makes the rest).

    Call it under the file's lock (:func:`~ctxcli.services.lock.path_lock`): two runs that
    numbered their change alike would lose one.
    """
    # Removed text lives here: ctx's data directory and every folder under it are 0700
    # (an older ctx created the data directory 0755: tightened).
    private_dir(data_dir(), tighten=True)
    folder = private_dir(changes_dir(path))
    remove_stale(folder, None, "tmp")  # what a killed run or discard left
    return next_change(path, kind)


def legacy_changes(path: Path, raw: bytes) -> list[Path]:
    """Change directories of the previous layout that may belong to ``path``, oldest first.

    They were keyed by the session id (a copy outside the clients' directories had a
    hash of its path added), so copies of one session shared them: the peel loop uses
    one only where the file is its output, and only one that names this file is
    ever discarded (:func:`owns`).
    """
    root = data_dir() / LEGACY
    if not root.is_dir():
        return []
    try:
        agent, sid = identify(path, raw)
    except CtxError:
        return []
    name = "__".join(safe_name(part) for part in sid.split("/"))
    found: list[Path] = []
    for folder in sorted((root / agent).glob(f"{glob.escape(name)}*")):
        if folder.name == name or folder.name.startswith(f"{name}-"):
            found += _numbered(folder)
    return found


def owns(path: Path, record: Path) -> bool:
    """True if ``record`` is a change directory of ``path`` (used up by a restore in place)."""
    if record.parent == changes_dir(path):
        return True
    if record.parent.parent.parent != data_dir() / LEGACY:
        return False
    manifest = read_manifest(record) or {}
    named = manifest.get("input", {}).get("name")
    return isinstance(named, str) and os.path.realpath(named) == os.path.realpath(path)


def left_behind(record: Path) -> bool:
    """True if ``record`` is a change directory whose file no longer needs it.

    A session moved to another project (a renamed folder; Codex archives rollouts)
    keeps its records under the old path's key: once a restore of the moved file used
    one up, it is discarded if the old path holds nothing that restores through it.
    """
    if record.parent.parent != data_dir() / CHANGES:
        return False
    manifest = read_manifest(record) or {}
    named = (
        manifest.get("input", {}).get("name") if isinstance(manifest.get("input"), dict) else None
    )
    if not isinstance(named, str):
        return False
    try:
        data = Path(named).read_bytes()
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return match_reduction(data, record) is None


def siblings(root: str) -> list[Path]:
    """``root`` and the ``root.N`` directories later in-place reductions made, newest first."""
    base = Path(root)
    numbered = []
    for path in base.parent.glob(f"{glob.escape(base.name)}.*"):
        suffix = path.name[len(base.name) + 1 :]
        if suffix.isdigit() and path.is_dir():
            numbered.append((int(suffix), path))
    return [p for _, p in sorted(numbered, reverse=True)] + [base]


def index_dirs(
    data: Input, path: str | None, index: ReductionIndex | None = None, *, grown: bool = False
) -> list[Path]:
    """Directories the reduction index knows for this content, or that wrote to ``path``.

    ``grown`` adds those whose output starts ``data`` as it starts (its first line):
    a reduced file its client appended to, moved or not. An in-place change records
    them as what it builds on, so the restore of the file undoes them in turn.
    """
    head = head_digest(data) if grown and data else None
    entries = (index or ReductionIndex()).find(
        output_sha256=_sha256(data), path=path, output_head=head
    )
    return list(dict.fromkeys(Path(e.offload_dir) for e in entries))


def prune(path: Path) -> None:
    """Remove the change folder of ``path`` once no change of it is left."""
    try:
        if not changes(path):
            (changes_dir(path) / _RESTORED).unlink(missing_ok=True)
        changes_dir(path).rmdir()
    except OSError:
        pass  # missing, or still holding changes (or a note of a run in progress)


def match_reduction(data: Input, offload_dir: Path) -> tuple[dict[str, Any], int] | None:
    """``(manifest, appended bytes)`` if ``data`` is this directory's output, or it plus lines.

    Only hashes are compared; nothing is rebuilt. ``data`` that starts with the
    record's own input (a change that dropped a torn last line: its input is its output
    plus that line) was made from that input, or restored to it: it is never the
    record's output with lines appended, and undoing the record again would add what
    the record took out a second time.
    """
    manifest = read_manifest(offload_dir)
    if manifest is None:
        return None
    try:
        size = int(manifest["output"]["bytes"])
        digest = manifest["output"]["sha256"]
        units = manifest.get("units")
    except (KeyError, TypeError, ValueError):
        return None
    if len(data) == size and _sha256(data) == digest:
        return manifest, 0
    if (
        units == "lines"
        and len(data) > size
        and (size == 0 or data[size - 1 : size] == b"\n")
        and _sha256(data, size) == digest
        and not _starts_with_input(data, manifest)
    ):
        return manifest, len(data) - size
    return None


def _reached(data: bytes, record: Path) -> bool:
    """True if ``data`` starts with the input of ``record`` (see :func:`match_reduction`)."""
    manifest = read_manifest(record)
    return manifest is not None and _starts_with_input(data, manifest)


def _starts_with_input(data: Input, manifest: dict[str, Any]) -> bool:
    """True if ``data`` starts with the input of a record that changed something."""
    source, made = manifest.get("input"), manifest.get("output")
    if not isinstance(source, dict) or not isinstance(made, dict):
        return False
    size, digest = source.get("bytes"), source.get("sha256")
    if not isinstance(size, int) or not isinstance(digest, str) or size > len(data):
        return False
    if size == made.get("bytes") and digest == made.get("sha256"):
        return False  # a record that changed nothing: undoing it changes nothing either
    return _sha256(data, size) == digest


def _sha256(data: Input, end: int | None = None) -> str:
    """Hex SHA-256 of ``data[:end]``; a map's pages are given back as it is hashed."""
    return hash_input(hashlib.sha256(), data, 0, end).hexdigest()


def match_reduction_at(path: Path, offload_dir: Path) -> bool:
    """True if the file at ``path`` is exactly the output recorded in ``offload_dir``.

    Sizes are compared first; the file is hashed only when they agree.
    """
    manifest = read_manifest(offload_dir)
    try:
        size = int(manifest["output"]["bytes"]) if manifest else -1
        digest = manifest["output"]["sha256"] if manifest else None
    except (KeyError, TypeError, ValueError):
        return False
    try:
        if os.path.getsize(path) != size:
            return False
        hashed = hashlib.sha256()
        with open(path, "rb") as fh:
            while chunk := fh.read(1 << 20):
                hashed.update(chunk)
    except OSError:
        return False
    return hashed.hexdigest() == digest


def restore_chain(
    data: bytes,
    first: Iterable[Path],
    more: Callable[[bytes], Iterable[Path]],
    *,
    name: str = "input",
    own: Sequence[Path] = (),
    unrecorded_ok: bool = False,
) -> Restored:
    """Undo the newest reduction of ``data`` found in ``first``, then every older one.

    ``more(content)`` names the directories that may hold the reduction that produced
    ``content`` (the index, the file's change directories); the previous directories
    a manifest lists are tried first. ``own`` are the file's change directories,
    oldest first: they tell, when nothing matches, whether the file is as the newest
    of them found it (a change that never replaced the file) or was edited.
    ``unrecorded_ok``: a file no record explains comes back as it is, with no step (the
    caller has another way to undo it: the hook's cuts), instead of an error.
    """
    candidates = list(dict.fromkeys(Path(p) for p in first))
    steps: list[RestoreStep] = []
    used: set[str] = set()
    states = {sha256(data)}
    current = data
    wanted: list[Path] = []  # the records the last one undone says made its input
    while len(steps) < MAX_STEPS:
        found = _first_match(current, candidates, used)
        if found is None:
            if not steps:
                return _unmatched(current, candidates, own, name, unrecorded_ok)
            # A record the last step was made from whose own input ``current`` already
            # is (a repair's output plus the torn line it dropped, carried by the run
            # over it): its original is reached; undoing it would add that line twice.
            wanted = [p for p in wanted if not _reached(current, p)]
            break
        path, manifest, appended = found
        used.add(str(path.resolve()))
        size = len(current) - appended
        rebuilt = restore_bytes(current[:size], path, reduced_name=name)
        current = rebuilt + current[size:]
        states.add(sha256(rebuilt))
        steps.append(RestoreStep(str(path), len(current), sha256(current), appended))
        wanted = [Path(p) for p in manifest.get("previous") or [] if isinstance(p, str)]
        candidates = list(dict.fromkeys([*wanted, *(Path(p) for p in more(current))]))
    _check_complete(name, steps, wanted, own, used, states)
    return Restored(current, tuple(steps))


def _check_complete(
    name: str,
    steps: list[RestoreStep],
    wanted: list[Path],
    own: Sequence[Path],
    used: set[str],
    states: set[str],
) -> None:
    """Refuse a chain that stops before the original (see :func:`restore_chain`).

    Two gaps are seen: the last record undone names the records that made its input
    and none of them is there to undo; or a change of the file itself was never
    reached (a change directory in the middle is missing, or was damaged). A change
    that started from a state the chain passed through never replaced the file (a run
    stopped in between), one made from another file (``uncompact -o``) is reached only
    through the reduction that names it, and the changes of a file whose chain uses
    none of them are of what the file held before it was written over: no gaps.

    Raises:
        RestoreError: naming the gap; nothing is restored or discarded.
    """
    if wanted:
        missing = ", ".join(str(p) for p in wanted)
        raise RestoreError(
            f"{name}: the chain of changes stops before the original: {steps[-1].offload_dir} "
            f"was made from the output of {missing}, which is missing or no longer matches; "
            "nothing was restored"
        )
    reached = [str(record.resolve()) in used for record in own]
    if not any(reached):
        # The file is on none of its own changes' lines: it was written over since (a
        # reduction to stdout, a restore), and they belong to what was there before.
        return
    manifests = [read_manifest(record) or {} for record in own]
    # The newest change the chain undid that wrote the file whole from another one
    # (``uncompact -o``): what the file held before it, and its changes, are gone.
    start = max(
        (i for i, m in enumerate(manifests) if reached[i] and _made_from_another_file(m, name)),
        default=0,
    )
    for record, manifest, done in zip(own[start:], manifests[start:], reached[start:], strict=True):
        if done:
            continue
        started = (
            manifest.get("input", {}).get("sha256")
            if isinstance(manifest.get("input"), dict)
            else None
        )
        if started in states:
            continue  # it never replaced the file: nothing of it to undo
        if _made_from_another_file(manifest, name):
            continue  # an output's record, written over since: the chain's links cover it
        raise RestoreError(
            f"{name}: the chain of changes stops before the original: {record} is a change of "
            f"this file it does not reach (a change before it is missing or damaged); "
            "nothing was restored"
        )


def _made_from_another_file(manifest: dict[str, Any], name: str) -> bool:
    """True if the record made the file from another one (``ctx uncompact -o``), not in place.

    Such a record is a link of the chain only through the reduction made from its
    output, which names it (``previous``): when the chain does not reach it, the file
    was written over since (another output, a restore), and it is no gap.
    """
    source = manifest.get("input")
    named = source.get("name") if isinstance(source, dict) else None
    if not isinstance(named, str) or not os.path.isabs(named):
        return False  # an older record: taken for a change of the file itself
    return os.path.realpath(named) != os.path.realpath(name)


def _unmatched(
    data: bytes, candidates: list[Path], own: Sequence[Path], name: str, unrecorded_ok: bool
) -> Restored:
    """What a file that is no recorded output is: unchanged, edited, or never reduced."""
    if own:
        digest = sha256(data)
        for record in own:
            manifest = read_manifest(record)
            if manifest is None:
                raise RestoreError(
                    f"{record} is damaged (no valid manifest); restore cannot go on."
                )
            if manifest.get("input", {}).get("sha256") == digest:
                # The file is what this change started from: it never replaced the file
                # (a run stopped in between), or the file was restored already.
                return Restored(data, ())
        raise RestoreError(
            f"{name} was changed inside what ctx wrote (it is not the output of {own[-1]}, "
            "nor that output with lines appended); it cannot be restored safely."
        )
    if candidates and candidates[0].exists():
        # The directory the user named (or the default one) either explains why it
        # cannot restore this file, or restores it through what it kept aside (a run
        # killed between its two renames): hash-checked either way.
        rebuilt = restore_bytes(data, candidates[0], reduced_name=name)
        step = RestoreStep(str(candidates[0]), len(rebuilt), sha256(rebuilt), 0)
        return Restored(rebuilt, (step,))
    if unrecorded_ok:
        return Restored(data, ())
    where = candidates[0] if candidates else "ctx's index"
    raise RestoreError(
        f"{name}: nothing to restore: no reduction or change of it is recorded ({where} "
        "does not exist and no recorded output matches it)",
        remedy=Remedy.NAME_OFFLOAD_DIR,
    )


def _first_match(
    data: bytes, candidates: list[Path], used: set[str]
) -> tuple[Path, dict[str, Any], int] | None:
    """Return the first record that made ``data`` (its output, then lines appended)."""
    for path in candidates:
        if str(path.resolve()) in used:
            continue
        hit = match_reduction(data, path)
        if hit is not None:
            return path, hit[0], hit[1]
    return None
