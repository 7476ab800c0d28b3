"""Change a session file where the client reads it, and undo every change in one step.

Each in-place change (a reduction, a doctor repair) is recorded as a numbered *layer*
in the session's state directory, ``$XDG_DATA_HOME/ctx/offload/<agent>/<session id>/``
(default ``~/.local/share/ctx/...``; ``$CTX_DATA_DIR`` overrides): a place neither client
reads or cleans up, and whose absolute paths the hints cite so the resumed agent can open
the offloaded texts. A layer is an ordinary offload directory (manifest, restore pack,
texts), committed before the session file is replaced, so a kill at any moment leaves
either the old file (the layer is then ignored) or the new one with its layer.
:func:`restore_session` peels the layers off newest first and gives the original back,
plus any lines the client appended after the last change.
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from ctxcli import api
from ctxcli.core.errors import CtxError, RestoreError
from ctxcli.core.protocols import safe_name, sha256
from ctxcli.pipeline.config import Config
from ctxcli.pipeline.results import Report
from ctxcli.services.dirs import data_dir
from ctxcli.services.tokens import CountOptions
from ctxcli.sessions.discover import CLAUDE, CODEX, INDEX, is_session_path
from ctxcli.sessions.doctor import DEFAULT_MAX_LINE_BYTES, Repair, plan_fixes, sniff_agent
from ctxcli.store.disk import OffloadStore
from ctxcli.store.history import match_reduction
from ctxcli.store.lock import pid_alive
from ctxcli.store.manifest import Header, InputSide, Side, read_manifest
from ctxcli.store.restore import restore_bytes

DEFAULT_LIVE_SECONDS = 60
_LAYER = re.compile(r"^(\d{4,})-([a-z]+)$")
_TMP_PID = re.compile(r"\.ctx-tmp-(\d+)-[0-9a-f]+$")


class LiveSessionError(CtxError):
    """The session looks in use by its client; changing it now could lose its writes."""


@dataclass
class Change:
    """What an in-place change did."""

    path: Path
    layer: Path | None
    bytes_before: int
    bytes_after: int
    report: Report | None = None
    repair: Repair | None = None
    notes: list[str] = field(default_factory=list)


@dataclass
class Restored:
    """What :func:`restore_session` rebuilt."""

    data: bytes
    layers: list[Path]
    appended_bytes: int
    sha256: str


def data_home() -> Path:
    """ctx's data directory (the ledger's), absolute: hints cite paths under it."""
    return data_dir().expanduser().resolve()


def identify(path: Path, raw: bytes | None = None) -> tuple[str, str]:
    """The agent and session id of a session file.

    Raises:
        CtxError: the file is neither a Claude Code session nor a Codex rollout.
    """
    head = raw[: 1 << 20] if raw is not None else _head(path)
    datas: list[Any] = []
    for line in head.split(b"\n")[:200]:
        try:
            datas.append(orjson.loads(line))
        except orjson.JSONDecodeError:
            datas.append(None)
    agent = sniff_agent(datas)
    if agent == CLAUDE:
        parts = path.parts
        if path.stem.startswith("agent-"):
            parent = path.parent.parent.name if path.parent.name == "subagents" else None
            sid = next(
                (d["sessionId"] for d in datas if isinstance(d, dict) and "sessionId" in d),
                parent,
            )
            return agent, f"{sid or parts[-2]}/{path.stem}"
        sid = next(
            (
                d["sessionId"]
                for d in datas
                if isinstance(d, dict) and isinstance(d.get("sessionId"), str)
            ),
            path.stem,
        )
        return agent, sid
    if agent == CODEX:
        for d in datas:
            if isinstance(d, dict) and d.get("type") == "session_meta":
                payload = d.get("payload")
                if isinstance(payload, dict) and isinstance(payload.get("id"), str):
                    return agent, payload["id"]
        return agent, path.stem
    raise CtxError(
        f"{path}: not a Claude Code session or a Codex rollout; "
        "only agent sessions can be changed in place this way."
    )


def _head(path: Path) -> bytes:
    try:
        with open(path, "rb") as fh:
            return fh.read(1 << 20)
    except FileNotFoundError:
        raise CtxError(f"{path}: no such file") from None
    except OSError as exc:
        raise CtxError(f"{path}: cannot read ({exc.strerror})") from None


def state_dir(path: Path, raw: bytes | None = None) -> Path:
    """Where the layers of a session file live.

    A file under the clients' session directories gets ``<agent>/<session id>``; a copy
    elsewhere also gets a hash of its path, so two copies never share their layers.
    """
    agent, sid = identify(path, raw)
    name = "__".join(safe_name(part) for part in sid.split("/"))
    if not is_session_path(path):
        digest = hashlib.sha256(os.fsencode(path.resolve())).hexdigest()[:10]
        name = f"{name}-{digest}"
    return data_home() / "offload" / agent / name


def layers(state: Path) -> list[Path]:
    """The recorded layers of a state directory, oldest first."""
    if not state.is_dir():
        return []
    found = [p for p in state.iterdir() if _LAYER.match(p.name) and p.is_dir()]
    return sorted(found, key=lambda p: int(p.name.split("-")[0]))


def _next_layer(state: Path, kind: str) -> Path:
    state.mkdir(parents=True, exist_ok=True, mode=0o700)
    _sweep(state)
    _sweep(state.parent)
    existing = layers(state)
    last = int(existing[-1].name.split("-")[0]) if existing else 0
    return state / f"{last + 1:04d}-{kind}"


def _discard(directory: Path) -> None:
    """Remove a directory so that a kill midway never leaves it half there.

    It is first renamed to a temporary name (atomic); what a kill leaves of it is
    then swept by a later run like any other leftover.
    """
    trash = directory.parent / f".{directory.name}.ctx-tmp-{os.getpid()}-{secrets.token_hex(4)}"
    os.rename(directory, trash)
    shutil.rmtree(trash, ignore_errors=True)


def _sweep(directory: Path) -> None:
    """Remove temporary files and staging directories of runs that were killed."""
    for leftover in directory.glob(".*.ctx-tmp-*"):
        match = _TMP_PID.search(leftover.name)
        if match is None or int(match.group(1)) == os.getpid() or pid_alive(int(match.group(1))):
            continue
        if leftover.is_dir() and not leftover.is_symlink():
            shutil.rmtree(leftover, ignore_errors=True)
        else:
            leftover.unlink(missing_ok=True)


def liveness(path: Path, seconds: int = DEFAULT_LIVE_SECONDS) -> str | None:
    """Why the session looks in use (recently written, or open in a process), or None.

    A file whose last writer was ctx itself (it is the output of its newest layer)
    is not taken as in use for being recent: a repair followed by a reduction is fine.
    """
    try:
        age = time.time() - path.stat().st_mtime
    except OSError:
        return None
    if age < seconds and not _written_by_ctx(path):
        return f"it was modified {max(age, 0):.0f}s ago, less than {seconds}s"
    pid = _opened_by(path)
    if pid is not None:
        return f"process {pid} has it open"
    return None


def _written_by_ctx(path: Path) -> bool:
    try:
        raw = path.read_bytes()
        found = layers(state_dir(path, raw))
    except (OSError, CtxError):
        return False
    manifest = read_manifest(found[-1]) if found else None
    return manifest is not None and manifest["output"]["sha256"] == sha256(raw)


def _opened_by(path: Path) -> int | None:
    """A process other than this one holding ``path`` open (Linux ``/proc``)."""
    proc = Path("/proc")
    if not proc.is_dir():
        return None
    target = str(path.resolve())
    me = os.getpid()
    for entry in proc.iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            for fd in (entry / "fd").iterdir():
                try:
                    if os.readlink(fd) == target:
                        return int(entry.name)
                except OSError:
                    continue
        except OSError:
            continue
    return None


def _check_live(path: Path, live_seconds: int, force: bool) -> None:
    if force:
        return
    why = liveness(path, live_seconds)
    if why is not None:
        raise LiveSessionError(
            f"{path}: the session looks in use ({why}); quit the client first, "
            "or force the change if it is not running."
        )


def reduce_in_place(
    path: Path,
    *,
    config: Config,
    force: bool = False,
    live_seconds: int = DEFAULT_LIVE_SECONDS,
    on_invalid: str = "error",
    counting: CountOptions | None = None,
    log: Callable[[str], None] | None = None,
) -> Change:
    """Reduce a session file in place and record the change as a new layer.

    Raises:
        LiveSessionError: the session looks in use and ``force`` is not set.
    """
    path = Path(os.path.abspath(path))
    raw = api.read_input(str(path))
    state = state_dir(path, raw)
    _check_live(path, live_seconds, force)
    _sweep(path.parent)
    layer = _next_layer(state, "reduce")
    report, _ = api.reduce_file(
        path,
        path,
        config=config,
        offload_dir=layer,
        raw=raw,
        in_place=True,
        on_invalid=on_invalid,
        counting=counting,
        log=log,
        return_output=False,  # written as it is made, never held beside the session
    )
    # A layer holds what this run replaced. None was made when the session is a ctx
    # output that the chain leaves as it is; one whose output is its input is let go.
    manifest = read_manifest(layer) if layer.is_dir() else None
    if manifest is None:
        unchanged = not layer.exists()
    else:
        unchanged = manifest["output"]["sha256"] == manifest["input"]["sha256"]
    change = Change(path, layer, len(raw), report.bytes_after, report=report)
    if unchanged:
        # Nothing changed: no layer to undo.
        _discard(layer)
        change.layer = None
    else:
        update_index(path)
    return change


def fix_in_place(
    path: Path,
    *,
    force: bool = False,
    live_seconds: int = DEFAULT_LIVE_SECONDS,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
) -> Change:
    """Repair what :func:`ctxcli.sessions.doctor.diagnose` finds, as a new layer.

    Raises:
        LiveSessionError: the session looks in use and ``force`` is not set.
    """
    path = Path(os.path.abspath(path))
    raw = api.read_input(str(path))
    agent, _sid = identify(path, raw)
    _check_live(path, live_seconds, force)
    _sweep(path.parent)
    state = state_dir(path, raw)
    layer = _next_layer(state, "doctor")
    store = OffloadStore(layer, str(layer))
    try:
        repair = plan_fixes(raw, store, max_line_bytes=max_line_bytes)
        if repair.changed_lines == 0:
            store.abort()
            return Change(path, None, len(raw), len(raw), repair=repair)
        header = Header.new(
            format=agent,
            units="lines",
            kind="doctor",
            input=InputSide(name=str(path), sha256=sha256(raw), bytes=len(raw)),
            output=Side(sha256=sha256(repair.output), bytes=len(repair.output)),
        )
        store.commit(header, repair.script)
        api.write_atomic(path, repair.output, mode=path.stat().st_mode & 0o777)
    except BaseException:
        store.abort()
        raise
    update_index(path)
    return Change(path, layer, len(raw), len(repair.output), repair=repair, notes=repair.notes)


def has_layers(path: Path) -> bool:
    """True if in-place changes of ``path`` are recorded (so restore should use them)."""
    try:
        return bool(layers(state_dir(Path(os.path.abspath(path)))))
    except CtxError:
        return False


def restore_session(
    path: Path,
    *,
    in_place: bool = False,
    force: bool = False,
    live_seconds: int = DEFAULT_LIVE_SECONDS,
) -> Restored:
    """Undo every recorded in-place change of a session file, newest first.

    Lines the client appended after the last change are kept at the end. With
    ``in_place`` the file is replaced by the original and the layers are removed.

    Raises:
        RestoreError: nothing is recorded, or the file was changed inside what ctx
            wrote (not only appended to).
    """
    path = Path(os.path.abspath(path))
    raw = api.read_input(str(path))
    state = state_dir(path, raw)
    found = layers(state)
    if not found:
        raise RestoreError(
            f"{path}: no in-place change by ctx is recorded in {state}; nothing to restore."
        )
    data, tail = raw, b""
    used: list[Path] = []
    for layer in reversed(found):
        # The one matching rule of every restore: this layer's output, or it plus lines.
        hit = match_reduction(data, layer)
        if hit is None:
            manifest = read_manifest(layer)
            if manifest is None:
                raise RestoreError(f"{layer} is damaged (no valid manifest); restore cannot go on.")
            if sha256(data) == manifest["input"]["sha256"]:
                continue  # committed, but the run was stopped before it replaced the file
            raise RestoreError(
                f"{path} was changed inside what ctx wrote (it is not the output of "
                f"{layer}, nor that output with lines appended); it cannot be restored safely."
            )
        size = len(data) - hit[1]
        tail = data[size:] + tail
        data = restore_bytes(data[:size], layer, reduced_name=str(path))
        used.append(layer)
    original = data + tail
    if in_place:
        _check_live(path, live_seconds, force)
        _sweep(path.parent)
        api.write_atomic(path, original, mode=path.stat().st_mode & 0o777)
        update_index(path)
        # The layers are spent: keep none that a later restore would trip over.
        _discard(state)
    return Restored(original, used, len(tail), sha256(original))


def update_index(path: Path) -> bool:
    """Keep the client's ``sessions-index.json`` entry consistent with the file.

    The JSONL file is authoritative (some Claude Code versions stopped writing the
    index); readers of the index compare ``fileMtime`` with the file to tell a stale
    entry and show ``messageCount``. Only an existing entry is updated; returns True
    if one was.
    """
    index = path.parent / INDEX
    try:
        text = index.read_bytes()
        data = orjson.loads(text)
    except (OSError, orjson.JSONDecodeError):
        return False
    entries = data.get("entries") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        return False
    sid = path.stem
    entry = next(
        (
            e
            for e in entries
            if isinstance(e, dict) and (e.get("sessionId") == sid or e.get("fullPath") == str(path))
        ),
        None,
    )
    if entry is None:
        return False
    # fileMtime (milliseconds) is how a reader tells a current entry from a stale one;
    # messageCount counts user and assistant records. ``modified`` is the time of the
    # conversation's last activity, which a rewrite does not change: left alone.
    entry["fileMtime"] = path.stat().st_mtime_ns // 1_000_000
    entry["messageCount"] = count_messages(path.read_bytes())
    option = orjson.OPT_INDENT_2 if b"\n" in text.strip() else 0
    api.write_atomic(index, orjson.dumps(data, option=option))
    return True


def count_messages(raw: bytes) -> int:
    """User and assistant records, the count the index's ``messageCount`` holds."""
    count = 0
    for line in raw.split(b"\n"):
        if b'"type":"user"' in line or b'"type":"assistant"' in line:
            try:
                data = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            if isinstance(data, dict) and data.get("type") in ("user", "assistant"):
                count += 1
    return count
