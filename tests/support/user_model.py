"""A scratch machine driven like a user drives ctx, and the model of what it must keep.

:class:`World` is one scratch directory with its own HOME, ctx data directory and a fake
client layout (Claude Code projects, Codex sessions and archive, as
:mod:`ctxcli.services.session_files` finds them), seeded with the bundled samples and
small cuts of real transcripts. Each method is one thing a user does: a ``ctx`` command
run in process through typer's CliRunner (stdout bytes written to a file stand for
``> out.jsonl``, stdin for ``cat s | ctx reduce -``), a client appending lines to its
session, a file moved, copied or deleted. ``tests/api/test_user_surface_model.py`` draws
these at random (hypothesis' rule-based state machine) and replays the sequences it
found as named regression tests.

The model is the spec, kept small enough to be obviously right:

- Every file the model tracks has an ``expect``: the bytes ``ctx restore FILE`` must give.
  A file ctx never changed expects its own bytes (there is nothing to restore); a
  session Claude Code wrote with ctx's PostToolUse hook expects what the client would
  have written without it (``ctx restore`` puts the cut outputs back). ``ctx
  reduce`` gives its output the ``expect`` of its input (restore undoes every reduction
  of a chain, so a second run on an output still restores to the first original); an
  in-place change (``reduce --in-place``, ``doctor --fix``, ``restore --in-place``)
  leaves the file's ``expect`` as it was; a client appending bytes to a session appends
  them to its ``expect`` (the README: appended lines are kept at the end); moving or
  copying a file carries its ``expect`` along (the index finds a moved or copied
  output). A restored file is a new original.
- Every transcript handed to ctx (each ``expect`` of a file ctx read, so the appended
  versions too) is an *obligation*: some tracked file's ``expect`` must start with it
  (the client's later lines may follow it).
- A user never deletes or overwrites the last file holding a transcript: the rules skip
  such a step. Writing over an output with ``-o`` replaces its ``OUTPUT.offload`` too,
  and following a ``--force`` hint replaces the offload directory it names: either way
  the user gives up every file restored through what is replaced (a directory inside it
  too), and does so only when each of them holds a transcript some other file holds.
  The file being reduced is never given up: a record of its own history is not
  "another transcript's", and ctx must keep it.
- Which file holds which original (invariant a): an output holds its input's
  ``expect``; ``ctx restore`` of it must give exactly that, whatever chain of outputs,
  in-place changes and repairs lies between (the README: restore undoes every change).

The invariants, checked after every step (:meth:`World.check`):

(a) every tracked file restores to its ``expect`` with ``ctx restore FILE`` (stdout), or
    already holds it; every obligation is held by a tracked file;
(b) a command changes nothing outside the outputs and offload directories it declares
    (its ``-o``, its input when in place, ``--offload-dir``, the config's
    ``offload_dir``, ``OUTPUT.offload`` and its numbered siblings, ``./ctx-offload``,
    ``sessions-index.json`` beside a session; ctx's own data and cache directories are
    not watched), a single-file command that fails changes nothing at all, and checking
    (restore to stdout) writes nothing;
(c) no exception escapes, no exit 123, no traceback on stderr;
(d) an exit 0 means what it printed: a restore that exits 0 wrote the ``expect``; a
    reduce that exits 0 wrote its output file and the offload directory it names;
(e) a session its client wrote to in the last 60 s is never changed in place without
    ``--force`` (exit non-zero, file untouched), whatever other flags say;
(f) a batch whose output would be one of its inputs is refused whole (nothing written),
    and a ``-o`` naming an existing directory for one input is refused.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import shlex
import shutil
import stat
import sys
import time
import traceback
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import orjson
import typer
from typer.testing import CliRunner

from support.hooked_sessions import hooked_session
from support.paths import REPO, need_shared

SAMPLES = REPO / "sample_transcripts"
LIVE_SECONDS = 60

CC_SHOP = "5b0e3c6a-8f2d-4c1e-9a7b-3d4f5e6a7b8c"
CC_SPOTTER = "4d5611e5-241a-462a-8d15-5122611a9569"
CODEX_SHOP = "01998f3a-6c2e-7d41-8b0f-5e2a9c7d4b13"
CODEX_SPECTORA = "0199812e-64f0-7f73-91fc-095dda01c36e"

CLAUDE_PROJECTS = "home/.claude/projects"
CODEX_SESSIONS = "home/.codex/sessions"
CODEX_ARCHIVE = "home/.codex/archived_sessions"
PROJECT_DIRS = ("-home-me-shop", "-home-USER-projects-spotter", "-home-me-shop-renamed")
"""Claude Code project folders; the last starts empty (a project the user renamed)."""

WORK_DIRS = ("", "a", "out")
"""Folders of the working directory files are written to and moved between."""

OUTPUT_NAMES = ("r.jsonl", "q.jsonl", "a/r.jsonl", "a/q.jsonl", "out/r.jsonl", "out/q.jsonl")
"""Where ``-o`` and ``>`` write, relative to the working directory: few, so runs meet."""

BATCH_DIRS = ("out", "a", "b", ".")
"""The ``-o DIR`` of a batch (``b`` does not exist until a batch makes it)."""

OFFLOAD_DIRS = ("D",)
"""Values of ``--offload-dir``: one, so runs meet in it."""

CONFIGS = {
    "trunc.toml": '[[stages]]\nuse = "truncate_tool_output"\nmax_chars = 1000\n',
    "clear.toml": ('[[stages]]\nuse = "clear_tool_results"\nmax_tokens = 2000\nkeep_rounds = 1\n'),
    "kept.toml": (
        'offload_dir = "kept"\n\n[[stages]]\nuse = "truncate_tool_output"\nmax_chars = 600\n'
    ),
    "terms.toml": (
        'preset = "keep-terms"\n\n[[stages]]\nuse = "truncate_tool_output"\nmax_chars = 2000\n'
    ),
}
"""Config files the test writes under ``cfg/`` (``kept.toml`` names an offload_dir)."""

CONFIG_OFFLOAD = {"kept.toml": "kept"}

DOC_TAILS = (b"", b"\n", b"\n ", b"\n\n\t")
"""What follows the one-line JSON document: nothing, a newline, or trailing whitespace."""


@dataclass(frozen=True)
class Seed:
    """A starting file: where it lives, from what, and what its client writes later."""

    key: str
    source: Path
    head_lines: int | None = None
    """Keep the first N lines at the start; the rest is what the client appends later."""


CC_SESSION = f"{CLAUDE_PROJECTS}/{PROJECT_DIRS[0]}/{CC_SHOP}.jsonl"
"""The sample Claude Code session (its line 40 is broken, as ``ctx doctor`` finds)."""
CC_SUBAGENT = f"{CLAUDE_PROJECTS}/{PROJECT_DIRS[1]}/{CC_SPOTTER}/subagents/agent-a2898e3.jsonl"
CC_HOOKED = f"{CLAUDE_PROJECTS}/{PROJECT_DIRS[0]}/s1.jsonl"
"""A session written with ctx's PostToolUse hook (its session id is ``s1``)."""
CODEX_SESSION = f"{CODEX_SESSIONS}/2026/03/03/rollout-2026-03-03T14-02-05-{CODEX_SHOP}.jsonl"
CODEX_REAL = f"{CODEX_SESSIONS}/2025/09/25/rollout-2025-09-25T08-02-05-{CODEX_SPECTORA}.jsonl"


def seeds() -> list[Seed]:
    """The starting files: the samples, and real transcripts cut to stay small."""
    shared = need_shared()
    cc_shop, cc_sub, codex_shop, codex_spec = CC_SESSION, CC_SUBAGENT, CODEX_SESSION, CODEX_REAL
    return [
        Seed("work/chat.jsonl", SAMPLES / "openai_chat_support.jsonl"),
        Seed("work/tau.jsonl", shared / "oai_taubench_airline_task2_trial1.jsonl"),
        Seed(
            "work/anthropic.jsonl", shared / "anthropic_derived_from_cc_mclaude_3cfce0ff.jsonl", 40
        ),
        # One line of JSON: the document format (the sample SWE-agent trajectory, compacted).
        Seed("work/run.traj", SAMPLES / "sweagent_function_calling.traj"),
        Seed(cc_shop, SAMPLES / "claude_code_session.jsonl", 45),
        Seed(cc_sub, shared / "cc_spotter_4d5611e5_subagent_a2898e3.jsonl", 60),
        Seed(codex_shop, SAMPLES / "codex_rollout.jsonl", 30),
        Seed(codex_spec, shared / "codex_agentcmd_2025-09-25T08-02-05.jsonl", 120),
    ]


def _head_and_tail(seed: Seed, doc_tail: bytes) -> tuple[bytes, bytes]:
    raw = seed.source.read_bytes()
    if seed.key.endswith(".traj"):
        return orjson.dumps(orjson.loads(raw)) + doc_tail, b""
    if seed.head_lines is None:
        return raw, b""
    lines = raw.splitlines(keepends=True)
    return b"".join(lines[: seed.head_lines]), b"".join(lines[seed.head_lines :])


@dataclass
class Entry:
    """What the model knows of one file."""

    expect: bytes
    """What ``ctx restore`` of the file must give (its own bytes if ctx never changed it)."""
    offloads: tuple[str, ...] = ()
    """The offload directories its restore goes through (keys, oldest first)."""
    tail: bytes = b""
    """What its client will append next (sessions only)."""
    live: bool = False
    """Its client wrote it last, less than a minute ago."""


@dataclass(frozen=True)
class Run:
    """One ``ctx`` command: its arguments and what it did."""

    args: tuple[str, ...]
    code: int
    stdout: bytes
    stderr: str


class Violation(AssertionError):
    """An invariant of the model does not hold."""


Snapshot = dict[str, tuple[Any, ...]]


@dataclass
class Hint:
    """A failed command whose error suggested ``--force``: what a user would run next."""

    op: str
    kwargs: dict[str, Any]
    offload: str | None
    """The offload directory it would replace (None: the in-use check is what stopped it)."""


@dataclass
class World:
    """One scratch machine: files, ctx's directories, the model and the shell transcript."""

    root: Path
    cache: Path
    doc_tail: bytes = b"\n"
    files: dict[str, Entry] = field(default_factory=dict)
    obligations: dict[str, bytes] = field(default_factory=dict)
    transcript: list[str] = field(default_factory=list)
    hint: Hint | None = None
    recent: list[str] = field(default_factory=list)
    """Keys of the files acted on, most recent first (a user goes on with the same file)."""
    _saved: dict[str, str | None] = field(default_factory=dict)
    _cwd: str = ""
    _snap: Snapshot = field(default_factory=dict)

    # --- set-up -------------------------------------------------------------------

    def open(self) -> World:
        """Make the scratch tree, point HOME and ctx's directories at it, seed the files."""
        env = {
            "HOME": str(self.root / "home"),
            "CTX_DATA_DIR": str(self.root / "data"),
            "CTX_CACHE_DIR": str(self.cache),
            "CTX_NO_PLUGINS": "1",
        }
        for var in ("CLAUDE_CONFIG_DIR", "CODEX_HOME", "XDG_DATA_HOME", "CTX_CONFIG", "CTX_PRICES"):
            env[var] = ""
        for var, value in env.items():
            self._saved.setdefault(var, os.environ.get(var))
            if value:
                os.environ[var] = value
            else:
                os.environ.pop(var, None)
        self._cwd = os.getcwd()
        work = self.root / "work"
        for folder in WORK_DIRS:
            (work / folder).mkdir(parents=True, exist_ok=True)
        for project in PROJECT_DIRS:
            (self.root / CLAUDE_PROJECTS / project).mkdir(parents=True, exist_ok=True)
        (self.root / CODEX_ARCHIVE).mkdir(parents=True, exist_ok=True)
        (work / "cfg").mkdir()
        for name, text in CONFIGS.items():
            (work / "cfg" / name).write_text(text)
        os.chdir(work)
        for seed in seeds():
            head, tail = _head_and_tail(seed, self.doc_tail)
            path = self.path(seed.key)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(head)
            _age(path)
            self.files[seed.key] = Entry(head, tail=tail)
        self._seed_hooked()
        self._snap = self.snapshot()
        return self

    def _seed_hooked(self) -> None:
        """A session Claude Code wrote with ctx's hook: ``ctx restore`` gives the uncut one.

        The hook offloaded two long outputs into ctx's data directory as the session ran;
        what the client would have written without it is the file's original.
        """
        build = self.root / "build"
        build.mkdir()
        hooked = hooked_session(build, hooks=True).read_bytes()
        direct = hooked_session(build, hooks=False).read_bytes()
        path = self.path(CC_HOOKED)
        path.write_bytes(hooked)
        _age(path)
        self.files[CC_HOOKED] = Entry(direct)
        shutil.rmtree(build)

    def close(self) -> None:
        """Give the process its working directory and environment back."""
        if self._cwd:
            os.chdir(self._cwd)
        for var, value in self._saved.items():
            if value is None:
                os.environ.pop(var, None)
            else:
                os.environ[var] = value
        self._saved.clear()

    # --- paths --------------------------------------------------------------------

    def path(self, key: str) -> Path:
        """The file a model key names (keys are paths relative to the scratch root)."""
        return self.root / key

    def key(self, path: Path | str) -> str:
        """The model key of a path (relative to the working directory, or absolute)."""
        full = Path(os.path.normpath(self.root / "work" / path))
        return full.relative_to(self.root).as_posix()

    def arg(self, key: str) -> str:
        """How a user names the file: relative in the working directory, else absolute."""
        if key.startswith("work/"):
            return key[len("work/") :]
        return str(self.path(key))

    def is_session(self, key: str) -> bool:
        """A file under the clients' session folders."""
        return key.startswith((CLAUDE_PROJECTS + "/", CODEX_SESSIONS + "/", CODEX_ARCHIVE + "/"))

    def session_id(self, key: str) -> str | None:
        """The id ``--session`` takes for this file, when it names it alone."""
        if not self.is_session(key):
            return None
        name = Path(key).stem
        sid = name if key.startswith(CLAUDE_PROJECTS) else name[-36:]
        same = [k for k in self.files if self.is_session(k) and Path(k).stem.endswith(sid)]
        return sid[:8] if len(same) == 1 and not sid.startswith("agent-") else None

    def read(self, key: str) -> bytes | None:
        """The file's bytes now (None if it is gone or not a file)."""
        try:
            return self.path(key).read_bytes()
        except OSError:
            return None

    def show(self, args: Sequence[str]) -> str:
        """A command as a user would type it (HOME as ~)."""
        home = str(self.root / "home")
        return " ".join(shlex.quote(a).replace(home, "~") for a in args)

    def touch(self, *keys: str | None) -> None:
        """Note that the user just acted on these files."""
        for key in keys:
            if key is None:
                continue
            if key in self.recent:
                self.recent.remove(key)
            self.recent.insert(0, key)

    def last(self, keys: Sequence[str]) -> str | None:
        """Of ``keys``, the one the user acted on last (None: none of them yet)."""
        return next((k for k in self.recent if k in keys), None)

    def say(self, line: str) -> None:
        """Add a line to the shell transcript shown with every violation."""
        self.transcript.append(line)

    def fail(self, what: str) -> Violation:
        """A violation, with the transcript that led to it."""
        shown = "\n".join(self.transcript[-40:])
        return Violation(f"{what}\n--- what the user did (newest last)\n{shown}")

    # --- the snapshot (invariant b) -------------------------------------------------

    def snapshot(self) -> Snapshot:
        """Every file and folder under the scratch root but ctx's data directory."""
        out: Snapshot = {}
        for folder, dirs, names in os.walk(self.root):
            if folder == str(self.root):
                dirs[:] = [d for d in dirs if d != "data"]
            rel = os.path.relpath(folder, self.root)
            for name in dirs:
                st = os.lstat(os.path.join(folder, name))
                out[os.path.normpath(os.path.join(rel, name))] = ("dir", stat.S_IMODE(st.st_mode))
            for name in names:
                st = os.lstat(os.path.join(folder, name))
                out[os.path.normpath(os.path.join(rel, name))] = (
                    stat.S_IMODE(st.st_mode),
                    st.st_size,
                    st.st_mtime_ns,
                    st.st_ino,
                )
        out.pop(".", None)
        return out

    @staticmethod
    def changed(before: Snapshot, after: Snapshot) -> list[str]:
        """Paths added, removed or changed between two snapshots."""
        keys = set(before) | set(after)
        return sorted(k for k in keys if before.get(k) != after.get(k))

    def sync(self) -> None:
        """Take the snapshot the next command is compared with (after a user's own step)."""
        self._snap = self.snapshot()

    # --- running ctx (invariant c) -------------------------------------------------

    def ctx(self, args: Sequence[str], stdin: bytes | None = None) -> Run:
        """Run ``ctx ARGS`` in process; an escaped exception, exit 123 or traceback fails.

        As typer's ``CliRunner.invoke`` runs it, but with the command built once: typer
        builds it from the app's signatures on every invoke (most of a restore's time).
        """
        with CliRunner().isolation(input=stdin) as streams:
            code, exc = 0, None
            try:
                _command().main(args=list(args), prog_name="ctx")
            except SystemExit as stop:
                code = stop.code if isinstance(stop.code, int) else int(stop.code is not None)
            except Exception as error:  # the boundary let something through: a bug
                exc = error
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
            out, err = streams[0].getvalue(), streams[1].getvalue()
        if exc is not None:
            trace = "".join(traceback.format_exception(exc))
            raise self.fail(f"$ {self.show(['ctx', *args])}\nraised:\n{trace}")
        run = Run(tuple(args), code, out, err.decode("utf-8", "replace"))
        if run.code == 123 or "Traceback (most recent call last)" in run.stderr:
            raise self.fail(f"$ {self.show(['ctx', *args])}\nexit {run.code}\n{run.stderr}")
        return run

    def command(
        self,
        args: Sequence[str],
        allowed: Sequence[str],
        *,
        stdin: bytes | None = None,
        redirect: str | None = None,
        single: bool = True,
    ) -> tuple[Run, list[str]]:
        """Run a command; check it wrote only under ``allowed`` (keys; trees with siblings).

        Returns the run and the paths (keys) it changed.
        """
        before = self._snap
        run = self.ctx(args, stdin)
        after = self.snapshot()
        changes = self.changed(before, after)
        shown = self.show(["ctx", *args])
        if stdin is not None:
            shown = f"cat <input> | {shown}"
        if redirect is not None:
            shown += f" > {self.arg(redirect)}"
        self.say(f"$ {shown}    # exit {run.code}")
        for line in run.stderr.strip().splitlines()[-4:]:
            self.say(f"    {line.replace(str(self.root / 'home'), '~')}")
        if single and run.code != 0 and changes:
            raise self.fail(f"{shown} failed (exit {run.code}) but changed {changes}")
        stray = [c for c in changes if not _permitted(c, allowed)]
        if stray:
            raise self.fail(f"{shown} wrote outside what it declares {list(allowed)}: {stray}")
        self._snap = after
        return run, changes

    # --- the checks after every step (invariants a, b) -----------------------------

    def check(self) -> None:
        """Every tracked file restores to what the model expects; every obligation is held."""
        for key, entry in sorted(self.files.items()):
            now = self.read(key)
            if now is None:
                raise self.fail(f"{key} is gone, but the model tracks it")
            if now == entry.expect:
                continue
            run = self.ctx(["restore", self.arg(key)])
            if run.code != 0 or run.stdout != entry.expect:
                got = f"{len(run.stdout)} bytes" if run.code == 0 else run.stderr.strip()
                raise self.fail(
                    f"`ctx restore {self.arg(key)}` must give the {len(entry.expect)} bytes "
                    f"(sha {_sha(entry.expect)}) it holds; exit {run.code}: {got}"
                    + (f" (sha {_sha(run.stdout)})" if run.code == 0 else "")
                )
        held = [e.expect for e in self.files.values()]
        for digest, data in self.obligations.items():
            if not any(h.startswith(data) for h in held):
                raise self.fail(
                    f"the transcript {digest} ({len(data)} bytes) handed to ctx is held "
                    "by no file any more"
                )
        after = self.snapshot()
        if after != self._snap:
            raise self.fail(f"`ctx restore` to stdout wrote {self.changed(self._snap, after)}")

    # --- what the model says of an input ----------------------------------------

    def _read_by_ctx(self, key: str) -> Entry:
        entry = self.files[key]
        self.obligations.setdefault(_sha(entry.expect), entry.expect)
        return entry

    def _covered(self, expect: bytes, without: set[str]) -> bool:
        """Some file other than ``without`` holds ``expect`` (or it with lines appended)."""
        return any(e.expect.startswith(expect) for k, e in self.files.items() if k not in without)

    def may_overwrite(self, key: str, inputs: Sequence[str] = ()) -> bool:
        """A user writes over ``key`` only if what it holds is held elsewhere too."""
        entry = self.files.get(key)
        if entry is None or key in inputs:
            return True
        return self._covered(entry.expect, {key})

    def _through(self, offload: str, keep: Sequence[str]) -> set[str]:
        """The files (but ``keep``) whose restore goes through the offload directory.

        Through a directory inside it too: replacing it replaces what it holds.
        """
        inside = offload + "/"
        return {
            k
            for k, e in self.files.items()
            if k not in keep and any(d == offload or d.startswith(inside) for d in e.offloads)
        }

    def _may_give_up(self, gone: set[str]) -> bool:
        """Each file of ``gone`` holds a transcript some file outside ``gone`` holds too."""
        return all(self._covered(self.files[k].expect, gone) for k in gone)

    def _give_up(self, gone: set[str], why: str) -> None:
        """The user lets these files go: the model no longer vouches for them."""
        if gone:
            self.say(f"# the user gives up {sorted(gone)} ({why})")
        for key in gone:
            del self.files[key]
            if key in self.recent:
                self.recent.remove(key)

    def _pair(self, target: str, keep: Sequence[str]) -> set[str] | None:
        """Writing ``target`` with its ``target.offload``: the files that go with them.

        Overwriting an output replaces the record beside it, and with it the way back of
        every file restored through that record; a user does it only if each of them
        holds a transcript held elsewhere (None: they would not).
        """
        if target not in self.files or target in keep:
            return set()
        gone = {target} | self._through(f"{target}.offload", keep)
        return gone if self._may_give_up(gone) else None

    def _live_refusal(self, key: str, force: bool, changes: list[str], what: str) -> None:
        """Invariant (e): a session in use is not changed in place without --force."""
        entry = self.files[key]
        if self.is_session(key) and entry.live and not force and key in changes:
            raise self.fail(
                f"{what} changed {self.arg(key)} without --force although its client wrote "
                f"it {LIVE_SECONDS}s ago or less (it is in use)"
            )

    def _check_named(self, named: str | None, allowed: Sequence[str]) -> None:
        """Invariant (d): the offload directory a reduce names is one it declares, and exists."""
        if named is None or named.startswith("data/"):
            return
        if not _permitted(named, allowed):
            raise self.fail(f"reduce said its offload is in {named}, not under {allowed}")
        if not (self.path(named) / "manifest.json").is_file():
            raise self.fail(f"reduce said its offload is in {named}, which holds no manifest")

    def _says(self, run: Run, changed: bool, changed_word: str, unchanged_word: str) -> None:
        """Invariant (d): "reduced in place" / "repaired" changed the file; the others did not."""
        if changed_word in run.stderr and not changed:
            raise self.fail(f"ctx said {changed_word!r} but the file did not change")
        if unchanged_word in run.stderr and changed:
            raise self.fail(f"ctx said {unchanged_word!r} but the file changed")

    def _named_offload(self, run: Run) -> str | None:
        """The offload directory a reduce says it wrote ("offload in PATH"), as a key."""
        found = re.findall(r"offload in (\S+)", run.stderr)
        if not found:
            return None
        where = Path(os.path.expanduser(found[-1].replace("~", str(self.root / "home"), 1)))
        if not where.is_absolute():
            where = self.root / "work" / where
        return os.path.relpath(where, self.root)

    def _keep_hint(self, op: str, kwargs: dict[str, Any], run: Run, offload: str | None) -> None:
        # The hint stays until followed or replaced: a user may copy it later.
        if run.code != 0 and re.search(r"pass --force\b", run.stderr):
            in_use = "in use" in run.stderr
            self.hint = Hint(op, kwargs, None if in_use else offload)

    # --- reduce ---------------------------------------------------------------------

    def reduce(
        self,
        src: str,
        to: str = "stdout",
        *,
        output: str | None = None,
        preset: str | None = None,
        config: str | None = None,
        offload_dir: str | None = None,
        stdin: bool = False,
        by_id: bool = False,
        force: bool = False,
    ) -> Run | None:
        """``ctx reduce SRC`` to stdout (``> output``), ``-o output``, or ``--in-place``.

        Returns None when a user would not run it (it would write over the last file
        holding a transcript).
        """
        kwargs = {
            "to": to,
            "output": output,
            "preset": preset,
            "config": config,
            "offload_dir": offload_dir,
            "stdin": stdin,
            "by_id": by_id,
        }
        entry = self.files[src]
        out_key = self.key(output) if output is not None else None
        if (
            to == "stdout"
            and out_key is not None
            and (out_key == src or not self.may_overwrite(out_key) or self.path(out_key).is_dir())
        ):
            return None  # `> the input` empties it before ctx runs; `> dir` is no file
        paired: set[str] = set()
        if to == "file" and out_key is not None and out_key != src:
            if offload_dir is None and config not in CONFIG_OFFLOAD:
                pair = self._pair(out_key, [src])
                if pair is None:
                    return None
                paired = pair - {out_key}
            elif not self.path(out_key).is_dir() and not self.may_overwrite(out_key):
                return None
        was_dir = out_key is not None and self.path(out_key).is_dir()
        sid = self.session_id(src) if by_id else None
        data = self.read(src) or b""
        args = ["reduce"]
        if stdin:
            args.append("-")
        elif sid is not None:
            args += ["--session", sid]
        else:
            args.append(self.arg(src))
        if to == "file":
            args += ["-o", str(output)]
        elif to == "inplace":
            args.append("--in-place")
        args += _chain_args(preset, config, offload_dir)
        if force:
            args.append("--force")
        # What the command declares it writes.
        declared = self._offload_of(to, out_key or src, offload_dir, config)
        allowed = [declared]
        if to == "file" and out_key is not None:
            allowed.append(out_key)
        if to == "inplace":
            # `--in-place` offloads to INPUT.offload (its help), even when a config names
            # an offload_dir (noted in fuzz-findings.md, not held against it).
            allowed += [src, f"{src}.offload"]
            if self.is_session(src):
                allowed.append(str(Path(src).parent / "sessions-index.json"))
        self._read_by_ctx(src)
        run, changes = self.command(
            args,
            allowed,
            stdin=data if stdin else None,
            redirect=out_key if to == "stdout" else None,
        )
        self._keep_hint("reduce", {"src": src, **kwargs}, run, declared)
        self.touch(src)
        if to == "inplace":
            self._live_refusal(src, force, changes, "reduce --in-place")
        if to == "file" and run.code == 0 and (out_key == src or was_dir):
            what = "the input" if out_key == src else "an existing directory"
            raise self.fail(f"reduce -o {output} exited 0 although {output} is {what}")
        if run.code != 0:
            return run
        named = self._named_offload(run)
        offloads = entry.offloads + tuple(d for d in (named, declared) if d)
        self._check_named(named, allowed)
        self._says(run, src in changes, "reduced in place", "the file is unchanged")
        if to == "stdout":
            assert out_key is not None
            self.path(out_key).parent.mkdir(parents=True, exist_ok=True)
            self.path(out_key).write_bytes(run.stdout)
            self.files[out_key] = Entry(entry.expect, offloads)
            self.touch(out_key)
            self.sync()
        elif to == "file":
            assert out_key is not None
            if not self.path(out_key).is_file():
                raise self.fail(f"reduce -o {output} exited 0 but wrote no file {output}")
            self._give_up(paired, f"{output} and {output}.offload were written over")
            self.files[out_key] = Entry(entry.expect, offloads)
            self.touch(out_key)
        else:
            if src in changes:
                self.files[src] = replace(entry, offloads=offloads, live=False)
        return run

    def _offload_of(self, to: str, target: str, offload_dir: str | None, config: str | None) -> str:
        """The offload directory a reduce declares (a key; a tree, numbered siblings too)."""
        if offload_dir is not None:
            return self.key(offload_dir)
        if config in CONFIG_OFFLOAD:
            return self.key(CONFIG_OFFLOAD[config])
        if to == "stdout":
            return "work/ctx-offload"
        if to == "inplace" and self.is_session(target):
            return "data"  # ctx's data directory (not watched)
        return f"{target}.offload"

    # --- a --force a user copies from the error --------------------------------

    def follow_hint(self) -> Run | None:
        """Run the command again with the ``--force`` its error suggested.

        Replacing another transcript's offload directory, the user gives up the outputs
        that directory restores, only if each is held by another file; the file being
        reduced is not one of them (its own history is no other transcript).
        """
        hint = self.hint
        self.hint = None
        if hint is None or hint.kwargs["src"] not in self.files:
            return None
        if hint.offload is not None:
            gone = self._through(hint.offload, [hint.kwargs["src"]])
            if not self._may_give_up(gone):
                return None  # it would lose a transcript: the user does not force
            self._give_up(gone, f"restored through {hint.offload}")
        if hint.op == "reduce":
            return self.reduce(**hint.kwargs, force=True)
        if hint.op == "restore":
            return self.restore(**hint.kwargs, force=True)
        if hint.op == "uncompact":
            return self.uncompact(**hint.kwargs, force=True)
        return self.doctor(**hint.kwargs, force=True)

    # --- restore --------------------------------------------------------------------

    def restore(
        self,
        src: str,
        to: str = "stdout",
        *,
        output: str | None = None,
        by_id: bool = False,
        force: bool = False,
    ) -> Run | None:
        """``ctx restore SRC`` to stdout (``> output``), ``-o output`` or ``--in-place``."""
        entry = self.files[src]
        out_key = self.key(output) if output is not None else None
        if to in ("stdout", "file") and out_key is not None:
            if out_key == src and to == "stdout":
                return None
            if self.path(out_key).is_dir() or not self.may_overwrite(out_key, [src]):
                return None
        sid = self.session_id(src) if by_id else None
        args = ["restore", *(["--session", sid] if sid else [self.arg(src)])]
        allowed: list[str] = []
        if to == "file":
            args += ["-o", str(output)]
            assert out_key is not None
            allowed.append(out_key)
        elif to == "inplace":
            args.append("--in-place")
            allowed += [src, *entry.offloads, f"{src}.offload"]
            if self.is_session(src):
                allowed.append(str(Path(src).parent / "sessions-index.json"))
        if force:
            args.append("--force")
        run, changes = self.command(args, allowed, redirect=out_key if to == "stdout" else None)
        self._keep_hint(
            "restore", {"src": src, "to": to, "output": output, "by_id": by_id}, run, None
        )
        self.touch(src)
        if to == "inplace":
            self._live_refusal(src, force, changes, "restore --in-place")
        if run.code != 0:
            return run
        if to == "stdout":
            got = run.stdout
        elif to == "file":
            assert out_key is not None
            got = self.read(out_key) or b""
        else:
            got = self.read(src) or b""
        if got != entry.expect:
            where = {"stdout": "stdout", "file": output, "inplace": self.arg(src)}[to]
            raise self.fail(
                f"restore exited 0 but {where} holds {len(got)} bytes (sha {_sha(got)}), "
                f"not the original's {len(entry.expect)} (sha {_sha(entry.expect)})"
            )
        if to == "stdout":
            assert out_key is not None
            self.path(out_key).write_bytes(got)
            self.files[out_key] = Entry(got)
            self.touch(out_key)
            self.sync()
        elif to == "file":
            assert out_key is not None
            self.files[out_key] = Entry(got)
            self.touch(out_key)
        elif src in changes:
            self.files[src] = replace(entry, offloads=(), live=False)
        return run

    # --- batches ---------------------------------------------------------------------

    def _batch_targets(self, srcs: Sequence[str], out_dir: str) -> list[str]:
        return [self.key(os.path.join(out_dir, Path(s).name)) for s in srcs]

    def _overlaps(self, srcs: Sequence[str], targets: Sequence[str]) -> bool:
        reals = {os.path.realpath(self.path(s)) for s in srcs}
        for t in targets:
            real = os.path.realpath(self.path(t))
            if any(r == real or r.startswith(real + "/") for r in reals):
                return True
        return False

    def reduce_batch(
        self,
        srcs: Sequence[str],
        out_dir: str,
        *,
        preset: str | None = None,
        config: str | None = None,
        offload_dir: str | None = None,
    ) -> Run | None:
        """``ctx reduce A B ... -o DIR``: each into ``DIR/<name>``, its offload beside it."""
        if len(srcs) < 2:
            return None  # one file is no batch: `-o DIR` then names the output file
        targets = self._batch_targets(srcs, out_dir)
        if offload_dir is not None:
            offloads = [self.key(os.path.join(offload_dir, Path(s).name)) for s in srcs]
        elif config in CONFIG_OFFLOAD:
            offloads = [self.key(os.path.join(CONFIG_OFFLOAD[config], Path(s).name)) for s in srcs]
        else:
            offloads = [f"{t}.offload" for t in targets]
        paired: dict[str, set[str]] = {}
        for t, o in zip(targets, offloads, strict=True):
            pair = self._pair(t, srcs) if o == f"{t}.offload" else set()
            if pair is None or (not pair and not self.may_overwrite(t, srcs)):
                return None
            paired[t] = pair - {t}
        clash = self._overlaps(srcs, [*targets, *offloads])
        args = ["reduce", *(self.arg(s) for s in srcs), "-o", out_dir]
        args += _chain_args(preset, config, offload_dir)
        expects = {s: self._read_by_ctx(s).expect for s in srcs}
        before = {t: self.read(t) for t in targets}
        run, changes = self.command(args, [*targets, *offloads], single=clash)
        if clash and run.code == 0:
            raise self.fail("a batch whose output would be one of its inputs ran")
        written: set[str] = set()
        for s, t, o in zip(srcs, targets, offloads, strict=True):
            if t in written or self.read(t) == before[t] and t not in changes:
                continue
            written.add(t)
            self._give_up(paired[t] & set(self.files), f"{t} and {t}.offload were written over")
            self.files[t] = Entry(expects[s], self.files[s].offloads + (o,))
            self.touch(s, t)
        return run

    def restore_batch(self, srcs: Sequence[str], out_dir: str | None) -> Run | None:
        """``ctx restore A B ... -o DIR`` (or ``--in-place``)."""
        if len(srcs) < 2:
            return None
        targets = list(srcs) if out_dir is None else self._batch_targets(srcs, out_dir)
        if out_dir is not None and any(not self.may_overwrite(t, srcs) for t in targets):
            return None
        clash = out_dir is not None and self._overlaps(srcs, targets)
        args = ["restore", *(self.arg(s) for s in srcs)]
        args += ["--in-place"] if out_dir is None else ["-o", out_dir]
        allowed = list(targets)
        if out_dir is None:
            for s in srcs:
                allowed += [*self.files[s].offloads, f"{s}.offload"]
                if self.is_session(s):
                    allowed.append(str(Path(s).parent / "sessions-index.json"))
        expects = {s: self.files[s].expect for s in srcs}
        before = {t: self.read(t) for t in targets}
        run, _changes = self.command(args, allowed, single=clash)
        if clash and run.code == 0:
            raise self.fail("a batch restore whose output is one of its inputs ran")
        done: set[str] = set()
        for s, t in zip(srcs, targets, strict=True):
            now = self.read(t)
            if t in done or now == before[t]:
                continue
            done.add(t)
            if now != expects[s]:
                raise self.fail(
                    f"batch restore wrote {self.arg(t)} ({len(now or b'')} bytes), which is "
                    f"not the original of {self.arg(s)} ({len(expects[s])} bytes)"
                )
            if out_dir is None:
                self.files[t] = replace(self.files[t], offloads=(), live=False)
            else:
                self.files[t] = Entry(expects[s])
            self.touch(s, t)
        return run

    # --- sessions -----------------------------------------------------------------

    def doctor(self, src: str, *, by_id: bool = False, force: bool = False) -> Run | None:
        """``ctx doctor FILE --fix`` (or ``--session ID``)."""
        sid = self.session_id(src) if by_id else None
        args = ["doctor", *(["--session", sid] if sid else [self.arg(src)]), "--fix"]
        if force:
            args.append("--force")
        self._read_by_ctx(src)
        allowed = [src, str(Path(src).parent / "sessions-index.json")]
        run, changes = self.command(args, allowed, single=False)
        if run.code not in (0, 1) and changes:
            raise self.fail(f"doctor --fix exited {run.code} but changed {changes}")
        self._keep_hint("doctor", {"src": src, "by_id": by_id}, run, None)
        self.touch(src)
        self._live_refusal(src, force, changes, "doctor --fix")
        if run.code in (0, 1):
            self._says(run, src in changes, "repaired", ": healthy")
        if src in changes:
            self.files[src] = replace(self.files[src], live=False)
        return run

    def uncompact(
        self,
        src: str,
        to: str = "file",
        *,
        output: str | None = None,
        by_id: bool = False,
        force: bool = False,
    ) -> Run | None:
        """``ctx uncompact SRC -o OUT`` or ``--in-place`` (or ``--session ID``).

        The same promises as a reduce: the output restores to what its input restores to,
        an in-place change leaves the file's original as it was. A file with no compaction
        (or no session at all) is left alone: "nothing written", or an error.
        """
        kwargs = {"to": to, "output": output, "by_id": by_id}
        entry = self.files[src]
        out_key = self.key(output) if output is not None else None
        paired: set[str] = set()
        if to == "file":
            assert out_key is not None
            if out_key == src or self.path(out_key).is_dir():
                return None
            pair = self._pair(out_key, [src])
            if pair is None:
                return None
            paired = pair - {out_key}
        sid = self.session_id(src) if by_id else None
        args = ["uncompact", *(["--session", sid] if sid else [self.arg(src)])]
        if to == "file":
            assert out_key is not None
            args += ["-o", str(output)]
            declared = f"{out_key}.offload"
            allowed = [out_key, declared]
        else:
            args.append("--in-place")
            declared = f"{src}.offload"
            allowed = [src, declared]
            if self.is_session(src):
                allowed.append(str(Path(src).parent / "sessions-index.json"))
        if force:
            args.append("--force")
        self._read_by_ctx(src)
        run, changes = self.command(args, allowed)
        self._keep_hint("uncompact", {"src": src, **kwargs}, run, None)
        self.touch(src)
        if to == "inplace":
            self._live_refusal(src, force, changes, "uncompact --in-place")
        if run.code != 0:
            return run
        if "nothing written" in run.stderr:
            if changes:
                raise self.fail(f"uncompact said 'nothing written' but changed {changes}")
            return run
        offloads = entry.offloads + (declared,)
        if to == "file":
            assert out_key is not None
            if not self.path(out_key).is_file():
                raise self.fail(f"uncompact -o {output} exited 0 but wrote no file {output}")
            self._give_up(paired, f"{output} and {output}.offload were written over")
            self.files[out_key] = Entry(entry.expect, offloads)
            self.touch(out_key)
        elif src in changes:
            self.files[src] = replace(entry, offloads=offloads, live=False)
        else:
            raise self.fail("uncompact --in-place exited 0, wrote something, but not the file")
        return run

    def append(self, src: str, lines: int, *, torn: bool = False, live: bool = False) -> bool:
        """The client appends its next ``lines`` lines (``torn``: the last one half-written)."""
        entry = self.files[src]
        if not entry.tail:
            return False
        cut = 0
        for _ in range(lines):
            nl = entry.tail.find(b"\n", cut)
            cut = len(entry.tail) if nl < 0 else nl + 1
            if cut >= len(entry.tail):
                break
        if torn and cut > 1:
            cut -= max(1, min(40, (cut - entry.tail.rfind(b"\n", 0, cut - 1)) // 2))
        chunk, rest = entry.tail[:cut], entry.tail[cut:]
        with open(self.path(src), "ab") as fh:
            fh.write(chunk)
        if not live:
            _age(self.path(src))
        self.files[src] = replace(entry, expect=entry.expect + chunk, tail=rest, live=live)
        self.touch(src)
        state = "in use" if live else "an hour ago"
        self.say(
            f"# the client appends {len(chunk)} bytes to {self.show([self.arg(src)])} ({state})"
        )
        self.sync()
        return True

    # --- the user's own file operations ---------------------------------------------

    def move(self, src: str, dest_dir: str, *, copy: bool = False) -> bool:
        """``mv`` (or ``cp -p``) a file to another project or folder, keeping its name."""
        dest = self._moved_to(src, dest_dir)
        if dest is None or dest in self.files or self.path(dest).exists():
            return False
        self.path(dest).parent.mkdir(parents=True, exist_ok=True)
        if copy:
            shutil.copy2(self.path(src), self.path(dest))
            self.files[dest] = replace(self.files[src])
        else:
            os.rename(self.path(src), self.path(dest))
            self.files[dest] = self.files.pop(src)
        _age(self.path(dest))
        self.files[dest] = replace(self.files[dest], live=False)
        if not copy and src in self.recent:
            self.recent.remove(src)
        self.touch(dest)
        verb = "cp -p" if copy else "mv"
        self.say(f"$ {verb} {self.show([self.arg(src), self.arg(dest)])}")
        self.sync()
        return True

    def _moved_to(self, src: str, dest_dir: str) -> str | None:
        """Where ``src`` lands in ``dest_dir``: the same path below the project folder."""
        parts = src.split("/")
        if src.startswith(CLAUDE_PROJECTS + "/"):
            if dest_dir not in PROJECT_DIRS:
                return None
            below = "/".join(parts[4:])
            return f"{CLAUDE_PROJECTS}/{dest_dir}/{below}"
        if src.startswith((CODEX_SESSIONS + "/", CODEX_ARCHIVE + "/")):
            target = (
                CODEX_ARCHIVE if src.startswith(CODEX_SESSIONS) else f"{CODEX_SESSIONS}/2026/04/01"
            )
            return f"{target}/{parts[-1]}"
        if dest_dir in WORK_DIRS:
            return os.path.normpath(f"work/{dest_dir}/{parts[-1]}")
        return None

    def deletable(self) -> list[str]:
        """The files whose transcript another file holds too."""
        return [k for k, e in self.files.items() if self._covered(e.expect, {k})]

    def delete(self, src: str) -> bool:
        """``rm`` a file whose transcript another file holds (an input after reducing it)."""
        entry = self.files[src]
        if not self._covered(entry.expect, {src}):
            return False
        self.path(src).unlink()
        del self.files[src]
        if src in self.recent:
            self.recent.remove(src)
        self.say(f"$ rm {self.show([self.arg(src)])}")
        self.sync()
        return True


def _chain_args(preset: str | None, config: str | None, offload_dir: str | None) -> list[str]:
    """The flags of what a reduce runs and where it offloads."""
    args = ["--preset", preset] if preset else []
    args += ["-c", f"cfg/{config}"] if config else []
    return args + (["--offload-dir", offload_dir] if offload_dir else [])


@functools.cache
def _command() -> Any:
    """ctx's command line as typer builds it (once)."""
    from ctxcli.cli import app

    return typer.main.get_command(app)


def _permitted(change: str, allowed: Sequence[str]) -> bool:
    """``change`` is an allowed path, lies in one (or a numbered sibling), or holds one."""
    for a in allowed:
        a = os.path.normpath(a)
        if change == a or change.startswith(a + "/"):
            return True
        if re.fullmatch(re.escape(a) + r"\.\d+(/.*)?", change):
            return True
        if a.startswith(change + "/"):  # a folder made to hold it
            return True
    return False


def _age(path: Path, seconds: float = 3600) -> None:
    """Make the file look written ``seconds`` ago (a file the user put there earlier)."""
    moment = time.time() - seconds
    os.utime(path, (moment, moment))


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:12]


@contextmanager
def world(root: Path, cache: Path, doc_tail: bytes = b"\n") -> Iterator[World]:
    """A :class:`World` for one test: opened, and its environment given back after."""
    w = World(root, cache, doc_tail=doc_tail)
    try:
        yield w.open()
    finally:
        w.close()
