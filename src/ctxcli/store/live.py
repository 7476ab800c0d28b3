"""An offload store that lives as long as a conversation: files the agent can read back.

The file commands stage everything and rename one directory into place at the end;
a running agent cannot wait for an end. :class:`LiveOffload` writes each removed text
at once into ``<root>/<area>/<safe id>`` (the Eino layout the stages cite), a local
directory or any fsspec URL (``s3://bucket/run``, ``memory://x``).

Several reducers may share one directory (the proxy runs one per conversation, and
Claude Code's parallel subagents send theirs at once), so a name is *created
exclusively*, never overwritten: a local file is written in full under a temporary
name and hard-linked into place (``link`` fails if the name exists), a URL is opened
in fsspec's exclusive mode (``"xb"``). Whoever finds a name taken reads what it holds:
the same text is reused (content addressing: a hint citing it reads exactly its
text), another text sends the writer to ``<safe id>-<sha256[:10]>``, created the same
way. So two conversations with the same call id and different texts get two files.
Texts are removed text from private transcripts: directories are created 0700 and
files 0600.
"""

from __future__ import annotations

import errno
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ctxcli.core.errors import OffloadError
from ctxcli.core.io import local_path
from ctxcli.core.protocols import safe_name, sha256
from ctxcli.services.dirs import private_dir
from ctxcli.store.naming import agent_text, check_area, name_candidates

__all__ = ["LiveOffload"]

_MAX_TRIES = 64
"""Names tried for one text before giving up (each taken by another text)."""


class LiveOffload:
    """Writes offloaded texts as they come, into a directory or an fsspec URL.

    Args:
        location: a local directory (made absolute, so hints name a path any tool
            can open) or an fsspec URL (needs ``pip install fsspec``).
    """

    def __init__(self, location: str | os.PathLike[str]) -> None:
        text = os.fspath(location)
        self._fs: Any = None
        local = local_path(text)
        if local is None:
            try:
                import fsspec
            except ImportError:
                raise OffloadError(
                    f"offload location {text} is a URL; install fsspec (pip install fsspec) "
                    "or choose a local directory."
                ) from None
            self._fs, _ = fsspec.core.url_to_fs(text)
            self.root = text.rstrip("/")
        else:
            self.root = str(Path(local).expanduser().resolve())
        # (area, name) -> digest of what this store holds there, so a repeated put
        # costs a dict lookup, not a read of the file.
        self._known: dict[tuple[str, str], str] = {}
        self.written: list[str] = []
        """Paths or URLs written since the last :meth:`take_written`."""

    # -- the Offload protocol the stages use ------------------------------------------

    def put(self, area: str, key: str, text: str) -> str:
        """Store ``text`` under ``area``/``key``; return the path or URL to cite.

        Names and bytes follow the one naming policy of every store
        (:mod:`ctxcli.store.naming`): a lone surrogate is written as U+FFFD, so the
        file is UTF-8 any reader opens.
        """
        check_area(area)
        data = agent_text(text)
        digest = sha256(data)
        for tries, name in enumerate(name_candidates(key, digest)):
            if self._holds(area, name, data, digest):
                return self._cite(area, name)
            if tries >= _MAX_TRIES:
                break
        raise OffloadError(
            f"{self._cite(area, safe_name(key))} and its hashed variants hold other texts; "
            "choose another offload directory."
        )

    def _holds(self, area: str, name: str, data: bytes, digest: str) -> bool:
        """True if ``area/name`` holds ``data``: found there, or created there now."""
        owner = self._known.get((area, name)) or self._digest_on_disk(area, name)
        if owner is None:
            if self._create(area, name, data):
                owner = digest
                self.written.append(self._cite(area, name))
            else:  # another writer created it first: see what it holds
                owner = self._digest_on_disk(area, name)
        if owner is not None:
            self._known[(area, name)] = owner
        return owner == digest

    def path_for(self, area: str, key: str) -> str:
        """The path :meth:`put` would cite for ``key`` (when nothing else holds it)."""
        return self._cite(area, safe_name(key))

    def add_original(self, raw: bytes | memoryview, texts: Iterable[str] = ()) -> list[Any]:
        """Originals are the caller's messages, kept by the caller: nothing to pack."""
        return ["b", 0, len(raw), ""]

    # -- bookkeeping ------------------------------------------------------------------

    def take_written(self) -> list[str]:
        """The paths written since the last call, and forget them."""
        written, self.written = self.written, []
        return written

    def read(self, path: str) -> str:
        """The text stored at ``path`` (as cited in a hint), for a read tool.

        Raises:
            OffloadError: ``path`` is outside this store or cannot be read.
        """
        rel = self._relative(path)
        try:
            if self._fs is not None:
                data: bytes = self._fs.cat_file(f"{self.root}/{rel}")
            else:
                data = Path(self.root, rel).read_bytes()
        except (OSError, FileNotFoundError):
            raise OffloadError(f"{path}: no such offloaded file.") from None
        return data.decode("utf-8", "surrogatepass")

    def read_window(
        self, path: str, offset_lines: int = 0, limit_lines: int = 200, max_chars: int = 20_000
    ) -> str:
        """Lines ``offset_lines`` .. ``offset_lines + limit_lines`` of an offloaded file.

        What a read tool returns to the agent: the lines themselves and, when the
        file goes on (or ``max_chars`` cut the window short), a last line saying
        which offset to ask for next.

        Raises:
            OffloadError: ``path`` is outside this store or cannot be read.
        """
        lines = self.read(path).splitlines(keepends=True)
        start = max(0, offset_lines)
        end = min(len(lines), start + max(1, limit_lines))
        window: list[str] = []
        size = 0
        for i in range(start, end):
            if window and size + len(lines[i]) > max_chars:
                end = i
                break
            window.append(lines[i][:max_chars])
            size += len(window[-1])
        text = "".join(window)
        if end < len(lines):
            if not text.endswith("\n"):
                text += "\n"
            text += (
                f"[ctx: lines {start}-{end - 1} of {len(lines)} shown; read on with offset={end}]"
            )
        return text

    def _relative(self, path: str) -> str:
        prefix = self.root + "/"
        rel = path[len(prefix) :] if path.startswith(prefix) else path
        parts = rel.split("/")
        if len(parts) != 2 or any(p in ("", ".", "..") or p.startswith(".") for p in parts):
            raise OffloadError(f"{path} is not a file of the offload store {self.root}.")
        return rel

    def _cite(self, area: str, name: str) -> str:
        return f"{self.root}/{area}/{name}"

    def _digest_on_disk(self, area: str, name: str) -> str | None:
        target = self._cite(area, name)
        try:
            if self._fs is not None:
                if not self._fs.exists(target):
                    return None
                return sha256(self._fs.cat_file(target))
            return sha256(Path(target).read_bytes())
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise OffloadError(f"cannot read {target} ({exc.strerror or exc}).") from None

    def _create(self, area: str, name: str, data: bytes) -> bool:
        """Create ``area/name`` holding ``data``; False if the name exists already."""
        target = self._cite(area, name)
        try:
            if self._fs is not None:
                self._fs.makedirs(f"{self.root}/{area}", exist_ok=True)
                with self._fs.open(target, "xb") as fh:
                    fh.write(data)
                return True
            return _create_local(private_dir(Path(self.root, area)), name, data)
        except FileExistsError:
            return False
        except OSError as exc:
            raise OffloadError(
                f"cannot write {target} ({exc.strerror or exc}); choose another offload directory."
            ) from None


def _create_local(folder: Path, name: str, data: bytes) -> bool:
    """Write ``folder/name`` (0600) unless it exists; a reader never sees part of it.

    The text goes to a temporary file first (``mkstemp`` makes it 0600) and is
    hard-linked to its name, which fails if the name exists. On a file system without
    hard links the name is created exclusively and written in place (a reader racing
    the write may then see part of it, and a writer finding part of a text takes the
    hashed name: still never another conversation's text).
    """
    fd, tmp = tempfile.mkstemp(prefix=f".{name[:40]}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        try:
            os.link(tmp, folder / name)
        except FileExistsError:
            return False
        except OSError as exc:
            if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EXDEV, errno.EMLINK):
                raise
            return _create_in_place(folder / name, data)
        return True
    finally:
        os.unlink(tmp)


def _create_in_place(target: Path, data: bytes) -> bool:
    try:
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return False
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    return True
