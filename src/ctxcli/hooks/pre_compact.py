"""Claude Code's and Codex's ``PreCompact``: a snapshot of the session file before it.

Both clients send the session file's path as ``transcript_path``. The snapshot is
:func:`ctxcli.store.snapshots.take_snapshot`'s: idempotent (Claude Code fires PreCompact
two to four times per ``/compact``; the newest snapshot already holding these bytes is
reused), private, and whole or absent. The hook never blocks the compaction: it answers
nothing and the caller (:mod:`ctxcli.hooks.runner`) turns any error into one logged line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ctxcli.core.errors import CtxError
from ctxcli.store.snapshots import Snapshot, take_snapshot

__all__ = ["snapshot_before_compaction"]


def snapshot_before_compaction(payload: dict[str, Any]) -> Snapshot:
    """Snapshot the session file the payload names.

    Raises:
        CtxError: the payload names no session file, or it is not a session.
        OSError: it cannot be read, or the copy cannot be written.
    """
    path = payload.get("transcript_path")
    if not isinstance(path, str) or not path:
        raise CtxError("the PreCompact payload names no transcript_path")
    return take_snapshot(Path(path))
