"""An offload store that lives as long as a conversation: files the agent can read back.

The file commands stage everything and rename one directory into place at the end;
a running agent cannot wait for an end. :class:`LiveOffload` writes each removed text
at once, atomically, into ``<root>/<area>/<safe id>`` (the Eino layout the stages
cite), a local directory or any fsspec URL (``s3://bucket/run``, ``memory://x``).
A file already holding the same text is reused; another conversation's text under
the same id gets a content-hash suffix instead of being overwritten, so several
reducers may share one directory.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ctxcli.core.errors import OffloadError
from ctxcli.core.protocols import encode_text, safe_name, sha256

__all__ = ["LiveOffload", "is_url"]


def is_url(location: str) -> bool:
    """True if ``location`` is an fsspec URL (``proto://...``) rather than a local path."""
    return "://" in location and not location.startswith("file://")


class LiveOffload:
    """Writes offloaded texts as they come, into a directory or an fsspec URL.

    Args:
        location: a local directory (made absolute, so hints name a path any tool
            can open) or an fsspec URL (needs ``pip install fsspec``).
    """

    def __init__(self, location: str | os.PathLike[str]) -> None:
        text = os.fspath(location)
        self._fs: Any = None
        if is_url(text):
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
            text = text.removeprefix("file://")
            self.root = str(Path(text).expanduser().resolve())
        # (area, name) -> digest of what this store holds there, so a repeated put
        # costs a dict lookup, not a read of the file.
        self._known: dict[tuple[str, str], str] = {}
        self.written: list[str] = []
        """Paths or URLs written since the last :meth:`take_written`."""

    # -- the Offload protocol the stages use ------------------------------------------

    def put(self, area: str, key: str, text: str) -> str:
        """Store ``text`` under ``area``/``key``; return the path or URL to cite."""
        if not area.isidentifier() or not area.islower():
            raise OffloadError(f"invalid offload area {area!r}")
        data = encode_text(text)
        digest = sha256(data)
        base = safe_name(key)
        for name in (base, f"{base}-{digest[:10]}"):
            owner = self._known.get((area, name))
            if owner is None:
                owner = self._digest_on_disk(area, name)
            if owner == digest:
                self._known[(area, name)] = digest
                return self._cite(area, name)
            if owner is None:
                self._write(area, name, data)
                self._known[(area, name)] = digest
                return self._cite(area, name)
        raise OffloadError(
            f"{self._cite(area, base)} and its hashed variant hold other texts; "
            "choose another offload directory."
        )

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

    def _write(self, area: str, name: str, data: bytes) -> None:
        target = self._cite(area, name)
        try:
            if self._fs is not None:
                self._fs.makedirs(f"{self.root}/{area}", exist_ok=True)
                self._fs.pipe_file(target, data)
            else:
                folder = Path(self.root, area)
                folder.mkdir(parents=True, exist_ok=True)
                tmp = folder / f".{name}.tmp-{os.getpid()}-{secrets.token_hex(4)}"
                with open(tmp, "wb") as fh:
                    fh.write(data)
                os.replace(tmp, target)
        except OSError as exc:
            raise OffloadError(
                f"cannot write {target} ({exc.strerror or exc}); choose another offload directory."
            ) from None
        self.written.append(target)
