"""Restore through any number of reductions, and past lines a client appended since.

A file reduced in place twice has two offload directories: the newest turns the file back
into the first reduction's output, the older one turns that into the original. A resumed
session is the reduced output plus the lines the client appended: the reduced part is
restored and the appended lines are carried over. Every step is hash-checked by
:func:`~ctxcli.store.disk.restore_bytes`; a change *inside* a reduced part is refused.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ctxcli.core.errors import RestoreError
from ctxcli.core.protocols import sha256
from ctxcli.store.manifest import read_manifest
from ctxcli.store.restore import restore_bytes

__all__ = ["RestoreStep", "Restored", "match_reduction", "restore_chain"]

MAX_STEPS = 64


@dataclass(frozen=True)
class RestoreStep:
    """One reduction undone."""

    offload_dir: str
    restored_bytes: int
    restored_sha256: str
    appended_bytes: int
    """Bytes appended after the reduced output (a resumed session), carried over as they are."""


@dataclass(frozen=True)
class Restored:
    """The original transcript and the reductions undone to get it, newest first."""

    data: bytes
    steps: tuple[RestoreStep, ...]


def match_reduction(data: bytes, offload_dir: Path) -> tuple[dict[str, Any], int] | None:
    """``(manifest, appended bytes)`` if ``data`` is this directory's output, or it plus lines.

    Only hashes are compared; nothing is rebuilt.
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
    if len(data) == size and sha256(data) == digest:
        return manifest, 0
    if (
        units == "lines"
        and len(data) > size
        and (size == 0 or data[size - 1 : size] == b"\n")
        and sha256(memoryview(data)[:size]) == digest
    ):
        return manifest, len(data) - size
    return None


def restore_chain(
    data: bytes,
    first: Iterable[Path],
    more: Callable[[bytes], Iterable[Path]],
    *,
    name: str = "input",
) -> Restored:
    """Undo the newest reduction of ``data`` found in ``first``, then every older one.

    ``more(content)`` names the directories that may hold the reduction that produced
    ``content`` (the ledger, the previous directories a manifest lists). The first step
    must succeed: if no directory in ``first`` matches, the first one is restored exactly
    so that its error says what is wrong.
    """
    candidates = list(dict.fromkeys(Path(p) for p in first))
    if not candidates:
        raise RestoreError(f"{name}: no offload directory was found for it.")
    steps: list[RestoreStep] = []
    used: set[str] = set()
    current = data
    while len(steps) < MAX_STEPS:
        found = _first_match(current, candidates, used)
        if found is None:
            if not steps:
                # The directory the user named (or the default one) either explains why
                # it cannot restore this file, or restores it through what it kept aside
                # (a run killed between its two renames): hash-checked either way.
                rebuilt = restore_bytes(current, candidates[0], reduced_name=name)
                current = rebuilt
                steps.append(RestoreStep(str(candidates[0]), len(current), sha256(current), 0))
            break
        path, manifest, appended = found
        used.add(str(path.resolve()))
        size = len(current) - appended
        rebuilt = restore_bytes(current[:size], path, reduced_name=name)
        current = rebuilt + current[size:]
        steps.append(RestoreStep(str(path), len(current), sha256(current), appended))
        previous = [Path(p) for p in manifest.get("previous", []) if isinstance(p, str)]
        candidates = list(dict.fromkeys([*previous, *(Path(p) for p in more(current))]))
    return Restored(current, tuple(steps))


def _first_match(
    data: bytes, candidates: list[Path], used: set[str]
) -> tuple[Path, dict[str, Any], int] | None:
    for path in candidates:
        if str(path.resolve()) in used:
            continue
        hit = match_reduction(data, path)
        if hit is not None:
            return path, hit[0], hit[1]
    return None
