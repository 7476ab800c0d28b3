"""Where a run records what it removes: one rule for every route.

A reduction's record (its offload directory) goes, in this order of choice:

- where the caller names it (``Destination.offload_dir``), else where the ``offload_dir``
  setting says — the flag and the setting mean the same on every route;
- for a client's session changed in place, a change directory in ctx's data directory;
- beside a file output, ``OUT.offload``; beside a file changed in place, ``FILE.offload``;
- for output to stdout, ``./ctx-offload/<input hash>-<chain hash>``: two reductions of one
  input with two chains never share a directory, and the same one run twice does.

A directory that already holds a record keeps it unless the new run replaces the output
that record restores (the same transcript reduced into the same file again): a record of
the file's own history goes beside it (``D.2``), as does, when forced, another
transcript's (see :mod:`ctxcli.store.change`). :func:`locate` is called by ``reduce``
(which takes the directory) and ``stats`` (which names the one ``reduce`` would take:
hints cite it).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from ctxcli.api.destination import Destination
from ctxcli.api.local import cited_root, digest
from ctxcli.core.errors import OffloadError
from ctxcli.core.io import Input, is_url
from ctxcli.core.protocols import sha256
from ctxcli.pipeline.config import Config
from ctxcli.services.session_files import is_session_path
from ctxcli.store import history
from ctxcli.store.change import claim_beside_output, claim_in_place

__all__ = ["STDOUT_ROOT", "Location", "chain_digest", "locate", "stdout_root"]

STDOUT_ROOT = "ctx-offload"
"""Where output to stdout records, one directory per input and chain."""


@dataclass(frozen=True)
class Location:
    """Where a run records its change, and what it builds on.

    Attributes:
        root: the offload directory (a local path as given, or a URL).
        previous: in place, the records whose output the file is (it is a ctx output).
        session: in place, the file is a client's session, recorded in ctx's data
            directory.
        moved: why the record does not go where it was asked to (it goes beside it).
        grown_from: the input sha256 of the record this run replaces (the same
            transcript, before it grew), if it replaces one.
    """

    root: str
    previous: list[str] = field(default_factory=list)
    session: bool = False
    moved: str | None = None
    grown_from: str | None = None

    @property
    def cited(self) -> str:
        """The directory as hints cite it."""
        return self.root if is_url(self.root) else cited_root(self.root)


def chain_digest(config: Config) -> str:
    """A short hash of what a run does (settings but the offload directory, and stages)."""
    described = orjson.dumps(
        {
            "settings": config.settings.model_dump(mode="json", exclude={"offload_dir"}),
            "stages": [[sc.use, sc.options.model_dump(mode="json")] for sc in config.stages],
        },
        option=orjson.OPT_SORT_KEYS,
    )
    return sha256(described)[:8]


def stdout_root(config: Config) -> str:
    """The folder output to stdout records under (the setting, else :data:`STDOUT_ROOT`)."""
    return config.settings.offload_dir or STDOUT_ROOT


def locate(
    source: str,
    dest: Destination,
    config: Config,
    data: Input,
    *,
    allocate: bool = False,
    force: bool = False,
) -> Location:
    """Where a run of ``source`` (holding ``data``) into ``dest`` records its change.

    ``allocate`` takes the directory (a session's next change directory is made, under
    the file's lock); without it the directory is only named, as a preview cites it,
    and nothing on disk is a reason to fail.

    Raises:
        OffloadError: (``allocate`` only) the directory holds another transcript's
            record and ``force`` is off, or is not ctx's.
    """
    if dest.cite_as is not None:
        return Location(dest.offload_dir or dest.cite_as)
    explicit = dest.offload_dir or config.settings.offload_dir
    if dest.in_place:
        return _in_place(Path(source), explicit, data, allocate=allocate, force=force)
    out = dest.output
    if explicit is not None:
        base = explicit
    elif out is not None:
        base = f"{out}.offload"
    else:
        base = f"{STDOUT_ROOT}/{digest(data)[:12]}-{chain_digest(config)}"
    if is_url(base) or (out is not None and is_url(out)):
        return Location(base)
    try:
        output = None if out is None else Path(out)
        claim = claim_beside_output(Path(base), data, output, force=force)
    except OffloadError:
        if allocate:
            raise
        return Location(base)
    root = base if claim.why is None else str(claim.path)
    return Location(root, moved=claim.why, grown_from=claim.grown_from)


def _in_place(
    path: Path, explicit: str | None, data: Input, *, allocate: bool, force: bool
) -> Location:
    if explicit is None and is_session_path(path):
        change = history.new_change if allocate else history.next_change
        known = history.changes(path)[::-1]
        previous = _matching(data, path, known)
        return Location(str(change(path, "reduce")), previous, session=True)
    base = explicit or f"{path}.offload"
    previous = _matching(data, path, history.siblings(base))
    try:
        claim = claim_in_place(Path(base), path, bool(previous), force=force)
    except OffloadError:
        if allocate:
            raise
        return Location(base, previous)
    root = base if claim.why is None else str(claim.path)
    return Location(root, previous, moved=claim.why)


def _matching(data: Input, path: Path, known: list[Path]) -> list[str]:
    """The records (of ``known``, then the index's) whose output ``data`` is."""
    known = known + history.index_dirs(data, os.path.realpath(path), grown=True)
    return [str(p.resolve()) for p in known if history.match_reduction(data, p)]
