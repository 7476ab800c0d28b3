"""Snapshots of a session file taken before its client rewrites it (a compaction).

Claude Code keeps every record before a compaction in the session file; Codex may rewrite
a rollout when it compacts (openai/codex#45350: earlier messages gone from disk). A
``PreCompact`` hook (``ctx hooks run pre-compact``) calls :func:`take_snapshot` so that
``ctx uncompact`` can bring the conversation from before the compaction back even then.

A snapshot is a private copy (0600 in a 0700 folder of ctx's data directory), keyed by the
client and the session id (a session moved to another folder keeps its snapshots), named
``NNNN-<sha256[:12]>.jsonl``. Taking one is idempotent: a hook that fires several times
for one compaction (Claude Code fires PreCompact two to four times per ``/compact``) finds
the newest snapshot already holds these bytes and copies nothing.
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
from dataclasses import dataclass
from pathlib import Path

from ctxcli.core.protocols import safe_name
from ctxcli.services.dirs import data_dir, private_dir
from ctxcli.services.lock import path_lock
from ctxcli.services.session_files import identify

__all__ = ["SNAPSHOTS", "Snapshot", "snapshots_dir", "snapshots_of", "take_snapshot"]

SNAPSHOTS = "snapshots"
"""The folder of ctx's data directory that holds them."""
_NAME = re.compile(r"^(\d{4,})-([0-9a-f]{12})\.jsonl$")
_CHUNK = 1 << 20
_HEAD = 1 << 20


@dataclass(frozen=True)
class Snapshot:
    """One copy of a session file.

    Attributes:
        path: the copy.
        number: its place among the session's snapshots (1 is the oldest).
        sha12: the first 12 hex digits of its sha256.
        bytes: its size.
    """

    path: Path
    number: int
    sha12: str
    bytes: int


def snapshots_dir(agent: str, session_id: str) -> Path:
    """Where the snapshots of one session are kept."""
    name = "__".join(safe_name(part) for part in session_id.split("/"))
    return data_dir() / SNAPSHOTS / safe_name(agent) / name


def _session_key(path: Path) -> tuple[str, str]:
    with open(path, "rb") as fh:
        head = fh.read(_HEAD)
    return identify(path, head)


def snapshots_of(path: Path) -> list[Snapshot]:
    """The snapshots of the session in ``path``, newest first (none: an empty list).

    Raises:
        CtxError: the file is not a Claude Code session or a Codex rollout.
    """
    try:
        agent, sid = _session_key(path)
    except OSError:
        return []
    return _listed(snapshots_dir(agent, sid))


def _listed(folder: Path) -> list[Snapshot]:
    found: list[Snapshot] = []
    try:
        entries = list(folder.iterdir())
    except OSError:
        return []
    for entry in entries:
        match = _NAME.match(entry.name)
        if match is None or not entry.is_file():
            continue
        found.append(Snapshot(entry, int(match[1]), match[2], entry.stat().st_size))
    return sorted(found, key=lambda s: s.number, reverse=True)


def take_snapshot(path: Path) -> Snapshot:
    """Copy the session file ``path`` as it is now; the snapshot that holds its bytes.

    Nothing is copied if the newest snapshot of the session holds these very bytes.
    The copy is written under a temporary name and renamed, so a snapshot is whole or
    absent.

    Raises:
        CtxError: the file is not a Claude Code session or a Codex rollout.
        OSError: it cannot be read, or the copy cannot be written.
    """
    agent, sid = _session_key(path)
    folder = snapshots_dir(agent, sid)
    with path_lock(folder):
        private_dir(data_dir(), tighten=True)
        private_dir(folder)
        tmp = folder / f".{os.getpid()}-{secrets.token_hex(4)}.tmp"
        try:
            digest, size = _copy(path, tmp)
            existing = _listed(folder)
            if existing and existing[0].sha12 == digest[:12] and existing[0].bytes == size:
                if _same(existing[0].path, digest):
                    return existing[0]
            number = existing[0].number + 1 if existing else 1
            final = folder / f"{number:04d}-{digest[:12]}.jsonl"
            os.replace(tmp, final)
            return Snapshot(final, number, digest[:12], size)
        finally:
            tmp.unlink(missing_ok=True)


def _copy(source: Path, target: Path) -> tuple[str, int]:
    """Copy ``source`` to a new private ``target``; its sha256 and size."""
    hashed = hashlib.sha256()
    size = 0
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with open(source, "rb") as src, os.fdopen(fd, "wb") as dst:
        while chunk := src.read(_CHUNK):
            hashed.update(chunk)
            dst.write(chunk)
            size += len(chunk)
        dst.flush()
        os.fsync(dst.fileno())
    return hashed.hexdigest(), size


def _same(path: Path, digest: str) -> bool:
    hashed = hashlib.sha256()
    try:
        with open(path, "rb") as fh:
            while chunk := fh.read(_CHUNK):
                hashed.update(chunk)
    except OSError:
        return False
    return hashed.hexdigest() == digest
