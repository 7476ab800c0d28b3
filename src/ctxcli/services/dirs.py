"""Where ctx keeps its own files: one resolver for the cache and data directories.

``platformdirs`` gives each platform's convention (``$XDG_CACHE_HOME/ctx`` or
``~/.cache/ctx`` and ``$XDG_DATA_HOME/ctx`` or ``~/.local/share/ctx`` on Linux);
``$CTX_CACHE_DIR`` and ``$CTX_DATA_DIR`` override them. Both hold text taken from
private transcripts, so :func:`private_dir` creates them (and what ctx creates under
them) readable by their owner only.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import platformdirs

__all__ = ["cache_dir", "data_dir", "private_dir"]

APP = "ctx"


def cache_dir() -> Path:
    """Return ctx's cache directory, absolute (``$CTX_CACHE_DIR`` wins); not created."""
    explicit = os.environ.get("CTX_CACHE_DIR")
    path = Path(explicit) if explicit else platformdirs.user_cache_path(APP, appauthor=False)
    return Path(os.path.abspath(path.expanduser()))


def data_dir() -> Path:
    """Return ctx's data directory, absolute (``$CTX_DATA_DIR`` wins); not created.

    What must outlive a cache lives here: the index of reductions and the change records
    of sessions reduced in place, whose paths the hints in those sessions cite.
    """
    explicit = os.environ.get("CTX_DATA_DIR")
    path = Path(explicit) if explicit else platformdirs.user_data_path(APP, appauthor=False)
    return Path(os.path.abspath(path.expanduser()))


def private_dir(path: Path, *, tighten: bool = False) -> Path:
    """``path`` created if missing (with its parents), readable by its owner only.

    ``tighten``: a directory that exists with wider permissions is made 0700 too (for
    ctx's own directories, which an older ctx created 0755; never for one a user named).
    """
    for missing in reversed([p for p in (path, *path.parents) if not p.exists()]):
        missing.mkdir(mode=0o700, exist_ok=True)
    if tighten and os.name == "posix" and stat.S_IMODE(path.stat().st_mode) & 0o077:
        os.chmod(path, 0o700)
    return path
