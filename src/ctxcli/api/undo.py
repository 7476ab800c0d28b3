"""Undo: the original of a reduced file, through every reduction and change recorded.

Where a reduction or change of a file can be recorded is :mod:`ctxcli.store.history`'s
business; this module picks the records of one file (or of stdin) and, in place, replaces
the file under one :class:`~ctxcli.store.inplace.InPlace` transaction.
"""

from __future__ import annotations

import os
from pathlib import Path

from ctxcli.api.local import STDIO, per_input_dirs
from ctxcli.api.location import stdout_root
from ctxcli.core.errors import CtxError
from ctxcli.core.protocols import sha256
from ctxcli.formats.hooked import has_hook_cuts, put_back
from ctxcli.pipeline.config import load_config
from ctxcli.services.session_files import is_session_path
from ctxcli.store import history
from ctxcli.store.change import Transaction
from ctxcli.store.history import Restored, RestoreStep
from ctxcli.store.hook_notes import original_for
from ctxcli.store.inplace import InPlace

__all__ = ["original_of", "restore_in_place"]


def original_of(data: bytes, name: str, offload_dir: str | Path | None) -> Restored:
    """Undo every reduction of ``data`` (the bytes of ``name``), then the hook's cuts.

    Reductions and changes are undone through their records (:mod:`ctxcli.store.history`);
    what is left is a session as its client wrote it, where the Claude Code hook may have
    replaced long tool outputs by previews: each is put back from the file its hint
    cites, verified against the hook's note (:func:`ctxcli.formats.hooked.put_back`).

    Raises:
        RestoreError: nothing is recorded and nothing was cut, or something is missing,
            altered or does not belong together.
    """
    cut = has_hook_cuts(data)
    restored = _recorded(data, name, offload_dir, unrecorded_ok=cut)
    if not has_hook_cuts(restored.data):
        # (A reduction may have taken the hook's hints out of ``data``: what it undid
        # is looked at, not the file.)
        return restored if restored.steps or not cut else _recorded(data, name, offload_dir)
    roots: list[str] = []

    def original(cited: str, preview: str, at: tuple[str | int, ...], lines: bool) -> str | None:
        text = original_for(cited, preview, at, lines)
        if text is not None:
            roots.append(str(Path(cited).parent.parent))
        return text

    rebuilt, count = put_back(restored.data, original, name)
    if not count:
        return restored if restored.steps else _recorded(data, name, offload_dir)
    # Undone last (the hook cut before any reduction was made): the last step, whose
    # bytes are the original's.
    step = RestoreStep(roots[0], len(rebuilt), sha256(rebuilt), 0)
    return Restored(rebuilt, (*restored.steps, step))


def _recorded(
    data: bytes, name: str, offload_dir: str | Path | None, *, unrecorded_ok: bool = False
) -> Restored:
    """Undo every reduction of ``data`` that a record explains."""
    if offload_dir is not None:
        first = [*history.siblings(str(offload_dir)), *per_input_dirs(Path(offload_dir))]
        return history.restore_chain(
            data,
            first,
            lambda content: history.index_dirs(content, None),
            name=name,
            unrecorded_ok=unrecorded_ok,
        )
    if name == STDIO:
        root = Path(stdout_root(load_config()))
        first = [
            *per_input_dirs(root),
            *history.siblings(str(root)),
            *history.index_dirs(data, None),
        ]
        if not first and not unrecorded_ok:
            raise CtxError("restoring from stdin needs the offload directory to be named.")
        return history.restore_chain(
            data,
            first,
            lambda content: history.index_dirs(content, None),
            name=name,
            unrecorded_ok=unrecorded_ok,
        )
    path = Path(name)
    real = os.path.realpath(path)
    legacy = history.legacy_changes(path, data)
    changes = [*history.changes(path)[::-1], *legacy[::-1]]
    # A file found by the first line of a recorded output is that output with lines
    # appended (a resumed session), wherever the file has moved since.
    first = [
        *changes,
        *history.siblings(f"{name}.offload"),
        *history.index_dirs(data, real, grown=True),
    ]
    own = [*(p for p in legacy if history.owns(path, p)), *history.own_changes(path)]
    return history.restore_chain(
        data,
        first,
        lambda content: [*changes, *history.index_dirs(content, real, grown=True)],
        name=name,
        own=own,
        unrecorded_ok=unrecorded_ok,
    )


def restore_in_place(path: Path, offload_dir: str | Path | None, live: int | None) -> Restored:
    """Replace ``path`` by its original; discard the records of it that were used up."""
    if not (is_session_path(path) or history.changes(path)):
        live = None  # a plain file is not a client's: nothing to be in use by
    with InPlace(path, live_seconds=live, lines=False) as change:
        restored = original_of(change.raw_bytes, str(path), offload_dir)
        if not restored.steps:
            return restored  # nothing to undo: the file is left as it is
        used = [Path(s.offload_dir) for s in restored.steps]
        beside = {p.resolve() for p in history.siblings(f"{path}.offload")}
        spent: list[Path] = []
        crossed = False  # past a record beside the file: what follows may be its input's
        for p in used:
            if history.owns(path, p):
                spent.append(p)
            elif p.resolve() in beside:
                spent.append(p)
                crossed = True
            elif not crossed and history.left_behind(p):
                # A moved session's own change, left at its old path: used up by the
                # session's restore, not by one of an output made from the session.
                spent.append(p)
        with Transaction(None, change=change) as tx:
            tx.commit(output=restored.data, used=spent)
        history.mark_restored(path)  # what is left (others restore through it) is not its
        history.prune(path)
    return restored
