"""The manifest of an offload directory: one model to write it and to check it on read.

``manifest.json`` says what was reduced (format, units, the input's name, hash and size,
the output's hash and size), how to rebuild the input (the restore script), which files
the directory holds (with their hashes) and where the restore pack is. A run describes
itself with a :class:`Header`; the store adds the script, the files and the pack when it
commits (:meth:`Header.document`), and :class:`Manifest` (the header plus those three)
checks every manifest before a restore trusts it.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Annotated, Any, BinaryIO, Literal

import orjson
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictInt,
    StrictStr,
    ValidationError,
)

from ctxcli._version import __version__
from ctxcli.core.errors import Remedy, RestoreError

__all__ = [
    "MANIFEST",
    "MANIFEST_VERSION",
    "OTHER_PACK",
    "PACK",
    "PREVIOUS_MANIFEST",
    "Header",
    "InputSide",
    "Manifest",
    "Side",
    "load_manifest",
    "manifest_for_rerun",
    "read_manifest",
    "write_json",
]

MANIFEST = "manifest.json"
PACK = "originals.bin"
OTHER_PACK = "originals.1.bin"
"""The pack's name in a re-run of a directory whose pack is :data:`PACK` (and back)."""
PREVIOUS_MANIFEST = "manifest.prev.json"
"""A re-run's previous manifest, kept until the new output has replaced the old one."""
MANIFEST_VERSION = 1


def _confined(rel: str) -> str:
    """A path inside the offload directory: relative, no ``..``, no empty part."""
    # split, not PurePosixPath: as strict about "..", and a manifest lists thousands.
    if not rel or rel.startswith("/") or "\\" in rel or "\0" in rel or ".." in rel.split("/"):
        raise ValueError(f"{rel!r} is not a path inside the offload directory")
    return rel


_Rel = Annotated[StrictStr, AfterValidator(_confined)]
_Sha = Annotated[StrictStr, Field(pattern=r"^[0-9a-f]{64}$")]
_Count = Annotated[StrictInt, Field(ge=0)]
_Piece = tuple[_Count, _Count] | tuple[_Rel] | tuple[_Rel, Literal["ascii", "nested"]]
_Step = (
    tuple[Literal["c"], _Count]
    | tuple[Literal["s"], _Count]
    | tuple[Literal["b"], _Count, _Count, _Sha]
    | tuple[Literal["p"], list[_Piece], _Count, _Sha]
)


class Side(BaseModel):
    """The output of a run: its sha256 and size."""

    model_config = ConfigDict(extra="allow", defer_build=True)
    sha256: _Sha
    bytes: _Count


class InputSide(BaseModel):
    """The input of a run: how it was named, its sha256 and size."""

    model_config = ConfigDict(extra="allow", defer_build=True)
    name: StrictStr
    sha256: _Sha
    bytes: _Count


class _Pack(BaseModel):
    model_config = ConfigDict(extra="allow", defer_build=True)
    name: _Rel
    bytes: _Count


class Header(BaseModel):
    """What a run says about itself: everything in a manifest but what the store adds.

    Build one with :meth:`new`; the store writes it with the restore script, the files
    and the pack (:meth:`document`). ``kind`` names a change that is not a reduction
    (``"doctor"``); ``previous`` lists the offload directories of the reductions the
    input came from (an in-place run over a ctx output).
    """

    model_config = ConfigDict(extra="allow", defer_build=True)
    tool: Literal["ctx"]
    version: Literal[1]
    ctx_version: StrictStr | None = None
    format: StrictStr
    units: Literal["lines", "document"]
    kind: StrictStr | None = None
    input: InputSide
    output: Side
    previous: list[StrictStr] | None = None

    @classmethod
    def new(
        cls,
        *,
        format: str,
        units: str,
        input: InputSide,
        output: Side,
        kind: str | None = None,
        previous: list[str] | None = None,
    ) -> Header:
        """The header of a run of this ctx (validated: a bad value fails here, not on read)."""
        return cls.model_validate(
            {
                "tool": "ctx",
                "version": MANIFEST_VERSION,
                "ctx_version": __version__,
                "format": format,
                "units": units,
                "kind": kind,
                "input": input,
                "output": output,
                "previous": previous or None,
            }
        )

    def document(
        self,
        script: list[Any],
        files: dict[str, str],
        pack: dict[str, Any],
        rerun: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """The manifest as written: this header, the script, ``rerun``, the files, the pack.

        The key order is the one every ctx of this version wrote (a manifest's bytes
        are pinned), and ``script`` is written as it is, not copied through the model.
        """
        doc: dict[str, Any] = {"tool": self.tool, "version": self.version}
        if self.ctx_version is not None:
            doc["ctx_version"] = self.ctx_version
        doc["format"] = self.format
        doc["units"] = self.units
        if self.kind is not None:
            doc["kind"] = self.kind
        doc["input"] = self.input.model_dump(include={"name", "sha256", "bytes"})
        doc["output"] = self.output.model_dump(include={"sha256", "bytes"})
        doc["script"] = script
        if self.previous:
            doc["previous"] = list(self.previous)
        if rerun is not None:
            doc["rerun"] = rerun
        doc["files"] = files
        doc["pack"] = pack
        return doc


class Manifest(Header):
    """The schema of ``manifest.json``, checked once before anything trusts it.

    Unknown keys are allowed (a newer ctx of the same version may add some); every
    path it names must stay inside the offload directory.
    """

    script: list[_Step]
    files: dict[_Rel, _Sha]
    pack: _Pack


_PARSED: dict[str, tuple[tuple[int, int, int], Any]] = {}
"""The last manifest parsed, by path, with the (inode, size, mtime) it had: a re-run
reads its previous manifest (megabytes for a large session) three times."""


def parse_manifest(file: Path) -> Any:
    """``file`` parsed as JSON, from :data:`_PARSED` while it is unchanged.

    Raises:
        OSError, orjson.JSONDecodeError: as reading and parsing would.
    """
    with open(file, "rb") as fh:
        st = os.fstat(fh.fileno())
        stamp = (st.st_ino, st.st_size, st.st_mtime_ns)
        hit = _PARSED.get(str(file))
        if hit is not None and hit[0] == stamp:
            return hit[1]
        data = orjson.loads(fh.read())
    _PARSED.clear()
    _PARSED[str(file)] = (stamp, data)
    return data


def read_manifest(path: Path) -> dict[str, Any] | None:
    """The manifest of an offload directory, or None if it is not one."""
    try:
        data = parse_manifest(path / MANIFEST)
    except (OSError, orjson.JSONDecodeError):
        return None
    if not isinstance(data, dict) or data.get("tool") != "ctx":
        return None
    return dict(data)


def manifest_for_rerun(path: Path) -> dict[str, Any] | None:
    """The manifest of an offload directory, checked as far as a re-run relies on it.

    :func:`load_manifest` validates every op and file (a second of a 1 GB session's
    re-run); a re-run reads only the input and output sides, the pack's name and the
    files' names, which are checked here (names stay inside the directory), and copies
    the kept records' ops, which ``ctx restore`` validates when it reads them.
    """
    manifest = read_manifest(path)
    if manifest is None:
        return None
    try:
        sides = [manifest["input"], manifest["output"]]
        if not all(
            isinstance(side.get("bytes"), int) and isinstance(side.get("sha256"), str)
            for side in sides
        ):
            return None
        files = manifest["files"]
        if not (
            isinstance(manifest["format"], str)
            and isinstance(manifest["script"], list)
            and isinstance(files, dict)
            and _plain(manifest["pack"]["name"])
        ):
            return None
        for rel, digest in files.items():
            area, _, name = rel.partition("/")
            if not (_AREA.fullmatch(area) and _plain(name) and isinstance(digest, str)):
                return None
    except (KeyError, TypeError, AttributeError):
        return None
    return manifest


_AREA = re.compile(r"[a-z][a-z0-9_]*")


def _plain(name: Any) -> bool:
    """A file name that stays in its directory: no separator, no NUL, no leading dot."""
    return (
        isinstance(name, str)
        and bool(name)
        and not name.startswith(".")
        and "/" not in name
        and "\\" not in name
        and "\0" not in name
    )


def load_manifest(path: Path, name: str = MANIFEST) -> dict[str, Any]:
    """The manifest of an offload directory, validated against :class:`Manifest`.

    ``name`` is :data:`PREVIOUS_MANIFEST` for the one a re-run replaced.

    Raises:
        RestoreError: there is no manifest, or it is damaged (names the first problem).
    """
    file = path / name
    try:
        data = parse_manifest(file)
    except FileNotFoundError:
        raise RestoreError(
            f"{path} is not a ctx offload directory (no {MANIFEST})",
            remedy=Remedy.NAME_OFFLOAD_DIR,
        ) from None
    except IsADirectoryError:
        raise RestoreError(f"{file} is damaged: it is a directory.") from None
    except orjson.JSONDecodeError as exc:
        raise RestoreError(f"{file} is damaged: not JSON ({exc}).") from None
    try:
        Manifest.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        # Union members show up in the location as type names: keep the real path.
        where = ".".join(str(p) for p in err["loc"] if "[" not in str(p)) or "the top level"
        raise RestoreError(f"{file} is damaged: {where}: {err['msg']}.") from None
    return dict(data)


JSON_CHUNK = 4096
"""Items of a long list :func:`write_json` serialises at once."""


def write_json(fh: BinaryIO, value: Any, depth: int = 0) -> None:
    """Write ``orjson.dumps(value)`` to ``fh`` in pieces, never as one bytes object.

    A manifest is mostly a few long lists (the restore script; a re-run's records): a
    1 GB Claude Code session's is 94 MB of JSON, which, made whole at commit, was the
    run's peak. Objects down to ``depth`` 2 are written member by member and long
    lists :data:`JSON_CHUNK` items at a time; the bytes are orjson's exactly.

    Raises:
        TypeError: as ``orjson.dumps`` would (a key that is not a string, too).
    """
    if depth < 3 and type(value) is dict:
        fh.write(b"{")
        for i, (key, item) in enumerate(value.items()):
            if type(key) is not str:
                raise TypeError(f"a JSON object key must be a string, not {key!r}")
            fh.write(b"," if i else b"")
            fh.write(orjson.dumps(key))
            fh.write(b":")
            write_json(fh, item, depth + 1)
        fh.write(b"}")
    elif type(value) is list and len(value) > JSON_CHUNK:
        fh.write(b"[")
        for start in range(0, len(value), JSON_CHUNK):
            fh.write(b"," if start else b"")
            fh.write(memoryview(orjson.dumps(value[start : start + JSON_CHUNK]))[1:-1])
        fh.write(b"]")
    else:
        fh.write(orjson.dumps(value))
