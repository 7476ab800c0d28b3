"""What the Claude Code hook cut: one note per offloaded output, to verify and put it back.

The hook (``ctx hooks``) writes a long tool output to ``<root>/trunc/<name>`` through a
:class:`~ctxcli.store.live.LiveOffload` and answers the client with a preview in its
place. Beside the text it records a note, ``<root>/cuts/<name>.json`` (same store, same
rules: created exclusively, 0600): the tool call, where in the tool's output object the
text was (``at``), whether that field was a list of lines, and the sha256 of the original
text and of the preview the client got. :func:`original_for` reads the note of a file a
hint cites, checks that the preview in the session is the one the hook answered and that
the file still holds the bytes it wrote, and gives the original value back.

The file holds what an agent can read (a lone surrogate becomes U+FFFD, see
:func:`~ctxcli.store.naming.agent_text`); when that is not the original's exact text, the
note carries the original itself, so nothing is lost.
"""

from __future__ import annotations

import glob
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ctxcli.core.errors import RestoreError
from ctxcli.core.protocols import safe_name, sha256
from ctxcli.services.dirs import data_dir
from ctxcli.store.live import LiveOffload
from ctxcli.store.naming import agent_text

__all__ = ["CUTS", "Cut", "exact_bytes", "is_hook_file", "note_cut", "original_for"]

CUTS = "cuts"
"""The area of the hook's offload directory that holds the notes."""
_VERSION = 1


def exact_bytes(text: str) -> bytes:
    """The bytes a note's digests are taken of (a lone surrogate kept as it is)."""
    return text.encode("utf-8", "surrogatepass")


@dataclass(frozen=True)
class Cut:
    """One text the hook replaced, as its note records it.

    Attributes:
        tool_use_id: the tool call whose output it was.
        tool: the tool's name.
        at: where the text sat in the tool's output object (keys and list indexes; empty
            for an output that is a string itself).
        lines: the field was a list of lines (``Glob``'s ``filenames``), joined by a line
            break in the file.
        file: the offloaded file, as the hint cites it.
        original_sha256: sha256 of the original text.
        replacement_sha256: sha256 of the preview the client got instead.
    """

    tool_use_id: str
    tool: str
    at: tuple[str | int, ...]
    lines: bool
    file: str
    original_sha256: str
    replacement_sha256: str


def note_cut(store: LiveOffload, cut: Cut, original: str) -> str:
    """Record ``cut`` beside its file; return the note's path.

    Raises:
        OffloadError: the note cannot be written.
    """
    data: dict[str, Any] = {
        "version": _VERSION,
        "tool_use_id": cut.tool_use_id,
        "tool": cut.tool,
        "at": list(cut.at),
        "lines": cut.lines,
        "file": cut.file,
        "original_sha256": cut.original_sha256,
        "replacement_sha256": cut.replacement_sha256,
    }
    if agent_text(original) != exact_bytes(original):
        data["original"] = original  # escaped by json: the file could not hold it exactly
    return store.put(CUTS, f"{os.path.basename(cut.file)}.json", json.dumps(data))


def is_hook_file(cited: str) -> bool:
    """True if ``cited`` lies where the hook offloads: a folder with notes, or ctx's own.

    ``<data>/hooks/<session>/trunc/<name>`` is the hook's without a note too (a ctx before
    the notes wrote it): never taken for another hint and left in place unsaid.
    """
    root = Path(cited).parent.parent
    return root.joinpath(CUTS).is_dir() or root.parent == data_dir() / "hooks"


def _notes(cited: str) -> list[dict[str, Any]]:
    """The notes naming ``cited`` (its name, or a hashed variant a collision gave it)."""
    folder = Path(cited).parent.parent / CUTS
    base = safe_name(f"{os.path.basename(cited)}.json")
    found = []
    for path in sorted(folder.glob(f"{glob.escape(base)}*")):
        try:
            note = json.loads(path.read_bytes())
        except (OSError, ValueError):
            continue
        if isinstance(note, dict) and note.get("file") == cited:
            found.append(note)
    return found


def original_for(
    cited: str, replacement: str, at: tuple[str | int, ...], lines: bool
) -> str | None:
    """The original text the hook replaced by ``replacement``, read from ``cited``.

    ``at`` and ``lines`` say where the session holds ``replacement`` (see :class:`Cut`):
    they must be where the hook cut it.

    None if ``cited`` is no file the hook noted (another ctx hint, e.g. an agent's
    ``cat`` of a reduced file: not the hook's to put back).

    Raises:
        RestoreError: the note says the hook cut it but the preview was edited, or the
            file is missing or no longer holds what the hook wrote.
    """
    notes = _notes(cited)
    if not notes:
        if is_hook_file(cited):
            raise RestoreError(
                f"{cited}: the hook's note of this offloaded output is missing, so it cannot "
                "be verified; put the offload directory back as the hook left it "
                "(nothing was restored)"
            )
        return None
    digest = sha256(exact_bytes(replacement))
    note = next((n for n in notes if n.get("replacement_sha256") == digest), None)
    if note is None:
        raise RestoreError(
            f"{cited}: the session's preview of this output is not the one the hook wrote "
            "(it was edited); it cannot be put back safely (nothing was restored)"
        )
    if note.get("at") != list(at) or note.get("lines") is not lines:
        raise RestoreError(
            f"{cited}: the session holds this output's preview elsewhere than the hook cut "
            f"it ({list(at)} instead of {note.get('at')}); it cannot be put back safely "
            "(nothing was restored)"
        )
    kept = note.get("original")
    if isinstance(kept, str):
        text = kept
    else:
        try:
            text = Path(cited).read_bytes().decode("utf-8", "surrogatepass")
        except FileNotFoundError:
            raise RestoreError(
                f"{cited}: the offloaded output of tool call {note.get('tool_use_id')} is "
                "missing; put the file back (from a copy of ctx's data directory) and run "
                "restore again (nothing was restored)"
            ) from None
        except (OSError, UnicodeDecodeError) as exc:
            raise RestoreError(f"{cited}: cannot read the offloaded output ({exc})") from None
    if sha256(exact_bytes(text)) != note.get("original_sha256"):
        raise RestoreError(
            f"{cited}: the offloaded output of tool call {note.get('tool_use_id')} was changed "
            "since the hook wrote it (its sha256 no longer matches the hook's note); put the "
            "original file back and run restore again (nothing was restored)"
        )
    return text
