"""A model of ctx's user surface, run as random sequences of commands (issue 41).

The rule-based state machine below drives ctx as a user does, through the CLI in
process, on a scratch machine (:mod:`support.user_model`: its docstring is the spec and
lists the invariants checked after every step). The rules: ``ctx reduce`` to stdout,
from stdin, with ``-o``, ``--in-place`` and in batches, each with a preset, a config
file or ``--offload-dir`` drawn at random, on the starting files and on ctx's own
outputs (a second run with another chain); the ``--force`` an error suggested; ``ctx
restore`` to stdout, ``-o``, ``--in-place`` and in batches; ``ctx doctor --fix``; a
client appending lines (in use or not); the user moving, copying or deleting a file.

``make test`` runs a bounded, derandomized search (``CTX_MODEL_EXAMPLES`` sequences of
up to ``CTX_MODEL_STEPS`` steps, 25 and 12: well under two minutes when nothing fails; a
failure is reported unshrunk, its whole transcript in the message). ``make fuzz`` runs
new random sequences for ``CTX_FUZZ_SECONDS`` (``CTX_FUZZ_EXAMPLES`` per round,
``CTX_FUZZ_STEPS`` steps), shrinks what it finds and keeps it in hypothesis' database
(``CTX_FUZZ_DB``, default ``.hypothesis/ctx-fuzz``), which is tried first next time.

Every distinct failure the search found on main 4ab46ae is a named test at the end of
this module, replaying the shrunk sequence (steps that did nothing left out) and
each named after its bug. They were xfail (strict) until the bug was fixed; reverting a
fix makes its test fail, and the bounded search with it: the proof that it finds them.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.database import DirectoryBasedExampleDatabase
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from ctxcli.pipeline.presets import preset_names
from support.paths import REPO, need_shared
from support.user_model import (
    BATCH_DIRS,
    CC_HOOKED,
    CC_SESSION,
    CC_SUBAGENT,
    CODEX_ARCHIVE,
    CODEX_REAL,
    CODEX_SESSION,
    CONFIGS,
    DOC_TAILS,
    OFFLOAD_DIRS,
    OUTPUT_NAMES,
    PROJECT_DIRS,
    WORK_DIRS,
    World,
    world,
)

pytestmark = pytest.mark.real_data

Chain = tuple[str | None, str | None]
"""A preset, or a config file: what a reduce runs (neither: the default chain)."""

CHAINS: list[Chain] = [
    (None, None),
    *((name, None) for name in preset_names()),
    *((None, name) for name in CONFIGS),
]
"""What a reduce runs: the default chain, a preset (``ctx presets``) or a config file."""

PICK = st.one_of(st.just(0), st.integers(1, 64))
"""Which file a rule acts on: half the time the one acted on last (a user goes on with it)."""

OFFLOAD = st.sampled_from([None, *OFFLOAD_DIRS])
CHAIN = st.sampled_from(CHAINS)


class UserSurface(RuleBasedStateMachine):
    """Random sequences of what a user does with ctx; the model checks every step."""

    scratch: Path = Path(tempfile.gettempdir())
    cache: Path = Path(tempfile.gettempdir())

    def __init__(self) -> None:
        super().__init__()
        self.w: World | None = None

    @initialize(doc_tail=st.sampled_from(DOC_TAILS))
    def start(self, doc_tail: bytes) -> None:
        root = Path(tempfile.mkdtemp(prefix="m-", dir=self.scratch))
        self.w = World(root, self.cache, doc_tail=doc_tail).open()

    def teardown(self) -> None:
        if self.w is not None:
            self.w.close()
            shutil.rmtree(self.w.root, ignore_errors=True)

    # --- which files a rule may act on ------------------------------------------

    @property
    def world(self) -> World:
        assert self.w is not None
        return self.w

    def _pick(self, i: int, keys: list[str]) -> str:
        """The file a rule acts on: 0 is the one acted on last, N the Nth in name order.

        Names, not recency, for the others: a shrunk sequence stays the same sequence
        when hypothesis drops a step before it.
        """
        last = self.world.last(keys)
        if i == 0 and last is not None:
            return last
        ordered = sorted(keys)
        return ordered[(i - 1) % len(ordered)]

    def _all(self) -> list[str]:
        return list(self.world.files)

    def _reduced(self) -> list[str]:
        """Files ctx changed: their bytes are not what they hold."""
        w = self.world
        return [k for k, e in w.files.items() if w.read(k) != e.expect]

    def _sessions(self) -> list[str]:
        return [k for k in self.world.files if self.world.is_session(k)]

    def _growing(self) -> list[str]:
        return [k for k in self._sessions() if self.world.files[k].tail]

    def has_reduced(self) -> bool:
        return self.w is not None and bool(self._reduced())

    def has_sessions(self) -> bool:
        return self.w is not None and bool(self._sessions())

    def has_growing(self) -> bool:
        return self.w is not None and bool(self._growing())

    def has_hint(self) -> bool:
        return self.w is not None and self.w.hint is not None

    def started(self) -> bool:
        return self.w is not None

    # --- reduce ---------------------------------------------------------------------

    @precondition(started)
    @rule(
        i=PICK,
        output=st.sampled_from(OUTPUT_NAMES),
        chain=CHAIN,
        offload=OFFLOAD,
        piped=st.booleans(),
    )
    def reduce_to_stdout(
        self, i: int, output: str, chain: Chain, offload: str | None, piped: bool
    ) -> None:
        """``ctx reduce FILE > OUT``, or ``cat FILE | ctx reduce - > OUT`` (piped)."""
        self._reduce(i, "stdout", chain, offload, output=output, stdin=piped)

    @precondition(started)
    @rule(i=PICK, output=st.sampled_from([*OUTPUT_NAMES, "a"]), chain=CHAIN, offload=OFFLOAD)
    def reduce_to_file(self, i: int, output: str, chain: Chain, offload: str | None) -> None:
        """``ctx reduce FILE -o OUT`` (``a`` is an existing directory)."""
        self._reduce(i, "file", chain, offload, output=output)

    @precondition(started)
    @rule(i=PICK, chain=CHAIN, offload=OFFLOAD, by_id=st.booleans())
    def reduce_in_place(self, i: int, chain: Chain, offload: str | None, by_id: bool) -> None:
        """``ctx reduce FILE --in-place`` (or ``--session ID``)."""
        self._reduce(i, "inplace", chain, offload, by_id=by_id)

    def _reduce(self, i: int, to: str, chain: Chain, offload: str | None, **how: Any) -> None:
        src = self._pick(i, self._all())
        self.world.reduce(src, to, preset=chain[0], config=chain[1], offload_dir=offload, **how)

    @precondition(started)
    @rule(
        picks=st.lists(PICK, min_size=2, max_size=3),
        out=st.sampled_from(BATCH_DIRS),
        chain=CHAIN,
        offload=OFFLOAD,
    )
    def reduce_batch(self, picks: list[int], out: str, chain: Chain, offload: str | None) -> None:
        srcs = list(dict.fromkeys(self._pick(i, self._all()) for i in picks))
        self.world.reduce_batch(srcs, out, preset=chain[0], config=chain[1], offload_dir=offload)

    @precondition(has_hint)
    @rule()
    def follow_force_hint(self) -> None:
        self.world.follow_hint()

    # --- restore --------------------------------------------------------------------

    @precondition(has_reduced)
    @rule(i=PICK, output=st.sampled_from(OUTPUT_NAMES))
    def restore_to_stdout(self, i: int, output: str) -> None:
        self.world.restore(self._pick(i, self._reduced()), "stdout", output=output)

    @precondition(has_reduced)
    @rule(i=PICK, output=st.sampled_from(OUTPUT_NAMES))
    def restore_to_file(self, i: int, output: str) -> None:
        self.world.restore(self._pick(i, self._reduced()), "file", output=output)

    @precondition(has_reduced)
    @rule(i=PICK, by_id=st.booleans())
    def restore_in_place(self, i: int, by_id: bool) -> None:
        self.world.restore(self._pick(i, self._reduced()), "inplace", by_id=by_id)

    @precondition(has_reduced)
    @rule(picks=st.lists(PICK, min_size=2, max_size=3), out=st.sampled_from([*BATCH_DIRS, None]))
    def restore_batch(self, picks: list[int], out: str | None) -> None:
        pool = self._reduced() + self._all()
        srcs = list(
            dict.fromkeys(
                self._pick(i, pool if k else self._reduced()) for k, i in enumerate(picks)
            )
        )
        self.world.restore_batch(srcs, out)

    # --- sessions and the client ---------------------------------------------------

    @precondition(has_sessions)
    @rule(i=PICK, by_id=st.booleans())
    def doctor_fix(self, i: int, by_id: bool) -> None:
        self.world.doctor(self._pick(i, self._sessions()), by_id=by_id)

    def _compacted(self) -> list[str]:
        """Files holding a client's compaction now (what ``ctx uncompact`` undoes)."""
        w = self.world
        return [k for k in w.files if b'"compact_boundary"' in (w.read(k) or b"")]

    @precondition(has_sessions)
    @rule(
        i=PICK,
        output=st.sampled_from([None, None, *OUTPUT_NAMES]),
        by_id=st.booleans(),
        compacted=st.booleans(),
    )
    def uncompact(self, i: int, output: str | None, by_id: bool, compacted: bool) -> None:
        """``ctx uncompact FILE -o OUT`` or, without an output, ``--in-place``.

        Mostly of a file that holds a compaction; else of any session or changed file.
        """
        pool = (compacted and self._compacted()) or self._sessions() + self._reduced()
        src = self._pick(i, pool)
        to = "inplace" if output is None else "file"
        self.world.uncompact(src, to, output=output, by_id=by_id)

    @precondition(has_growing)
    @rule(i=PICK, lines=st.integers(1, 8), torn=st.booleans(), live=st.booleans())
    def client_appends(self, i: int, lines: int, torn: bool, live: bool) -> None:
        self.world.append(self._pick(i, self._growing()), lines, torn=torn, live=live)

    # --- the user's own file operations ----------------------------------------

    @precondition(started)
    @rule(i=PICK, dest=st.sampled_from(PROJECT_DIRS + WORK_DIRS), copy=st.booleans())
    def move_or_copy(self, i: int, dest: str, copy: bool) -> None:
        self.world.move(self._pick(i, self._all()), dest, copy=copy)

    @precondition(lambda self: self.w is not None and bool(self.w.deletable()))
    @rule(i=PICK)
    def delete_input(self, i: int) -> None:
        self.world.delete(self._pick(i, self.world.deletable()))

    # --- after every step -----------------------------------------------------------

    @precondition(started)
    @invariant()
    def model_holds(self) -> None:
        self.world.check()


BOUNDED = settings(
    max_examples=int(os.environ.get("CTX_MODEL_EXAMPLES", "25")),
    stateful_step_count=int(os.environ.get("CTX_MODEL_STEPS", "12")),
    derandomize=True,
    database=None,
    # A failure is reported as found (its whole transcript is in the message): shrinking a
    # sequence of ctx runs takes minutes; `make fuzz` shrinks what it finds.
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    deadline=None,
    suppress_health_check=list(HealthCheck),
)


@pytest.fixture
def machine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[type[UserSurface]]:
    need_shared()
    UserSurface.scratch = tmp_path_factory.mktemp("model")
    UserSurface.cache = tmp_path_factory.mktemp("model-cache")
    yield UserSurface


def test_user_surface_model(machine: type[UserSurface]) -> None:
    """The bounded search ``make test`` runs: a few sequences, the same every run."""
    run_state_machine_as_test(machine, settings=BOUNDED)


@pytest.mark.fuzz
def test_user_surface_fuzz(machine: type[UserSurface]) -> None:
    """``make fuzz``: new sequences until ``CTX_FUZZ_SECONDS`` (default 600) run out.

    With ``CTX_FUZZ_DERANDOMIZE`` set (``.ci/run``): one fixed search instead.
    """
    budget = float(os.environ.get("CTX_FUZZ_SECONDS", "600"))
    db = DirectoryBasedExampleDatabase(
        os.environ.get("CTX_FUZZ_DB") or str(REPO / ".hypothesis" / "ctx-fuzz")
    )
    long_run = settings(
        max_examples=int(os.environ.get("CTX_FUZZ_EXAMPLES", "20")),
        stateful_step_count=int(os.environ.get("CTX_FUZZ_STEPS", "25")),
        database=db,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    if os.environ.get("CTX_FUZZ_DERANDOMIZE"):
        # CI: one search of CTX_FUZZ_EXAMPLES sequences from a fixed seed, the same on
        # every machine (a new finding belongs to `make fuzz` on a developer's machine,
        # where it becomes a named test, not to a landing that it would block at random).
        fixed = settings(long_run, derandomize=True, database=None)
        run_state_machine_as_test(machine, settings=fixed)
        return
    end = time.monotonic() + budget
    while time.monotonic() < end:
        run_state_machine_as_test(machine, settings=long_run)


# --- the sequences the machine found, replayed ----------------------------------------

Test = Callable[..., None]


@pytest.fixture
def w(tmp_path: Path) -> Iterator[World]:
    with world(tmp_path / "m", tmp_path / "cache") as opened:
        yield opened


@pytest.fixture
def doc_w(tmp_path: Path) -> Iterator[World]:
    """A world whose one-line JSON document (``run.traj``) ends in a newline and a space."""
    with world(tmp_path / "m", tmp_path / "cache", doc_tail=b"\n ") as opened:
        yield opened


def _issue(item: int, what: str) -> Callable[[Test], Test]:
    """Name the bug of issue 41 a replayed sequence found (fixed: the test must pass)."""
    return _named(f"issue 41 item {item}: {what}")


def _new(what: str) -> Callable[[Test], Test]:
    """Name a bug the model found beyond the issue's list (fixed: the test must pass)."""
    return _named(f"found by the model: {what}")


def _named(bug: str) -> Callable[[Test], Test]:
    def mark(test: Test) -> Test:
        test.__doc__ = f"Replays the shrunk sequence of {bug}."
        return test

    return mark


@_issue(1, "the second stdout reduction of an input replaces ./ctx-offload/<hash of input>")
def test_two_stdout_reductions_of_one_input_both_restore(w: World) -> None:
    w.reduce("work/chat.jsonl", "stdout", output="q.jsonl", preset="eino", stdin=True)
    w.reduce("work/chat.jsonl", "stdout", output="r.jsonl", preset="synaptic", stdin=True)
    w.check()


@_issue(1, "a second output of one transcript silently replaces the shared --offload-dir")
def test_two_outputs_of_one_input_into_one_offload_dir_both_restore(w: World) -> None:
    w.reduce(CC_SUBAGENT, "file", output="r.jsonl", preset="swe-agent", offload_dir="D")
    w.reduce(CC_SUBAGENT, "file", output="out/r.jsonl", offload_dir="D")
    w.check()


@_issue(2, "restore_many writes job 1's original over job 2's input, then refuses job 2")
def test_batch_restore_never_writes_over_an_input(w: World) -> None:
    w.reduce("work/chat.jsonl", "file", output="a/r.jsonl")
    w.reduce("work/tau.jsonl", "file", output="out/r.jsonl", preset="synaptic")
    w.restore_batch(["work/a/r.jsonl", "work/out/r.jsonl"], "out")


@_issue(3, "--force, as the error suggests, replaces the file's own earlier record in D")
def test_second_in_place_run_into_one_offload_dir_keeps_the_first(w: World) -> None:
    w.reduce("work/chat.jsonl", "inplace", config="trunc.toml", offload_dir="D")
    w.reduce("work/chat.jsonl", "inplace", preset="synaptic", offload_dir="D")
    w.follow_hint()
    w.check()


@_issue(4, "restore --in-place of a moved, grown session undoes one reduction and says restored")
def test_moved_grown_session_restores_through_both_reductions(w: World) -> None:
    moved = CC_SESSION.replace(PROJECT_DIRS[0], PROJECT_DIRS[2])
    w.reduce(CC_SESSION, "inplace", preset="claude-code-resume")
    w.move(CC_SESSION, PROJECT_DIRS[2])
    w.append(moved, 5)
    w.reduce(moved, "inplace", preset="claude-code-resume")
    w.restore(moved, "inplace")


@_issue(4, "the index finds no reduction of a session that grew since ctx changed it")
def test_output_of_a_grown_reduced_session_restores_to_the_original(w: World) -> None:
    w.reduce(CODEX_REAL, "inplace", preset="swe-agent")
    w.append(CODEX_REAL, 8)
    w.reduce(CODEX_REAL, "file", output="out/q.jsonl", config="terms.toml")
    w.check()


@_issue(5, "--offload-dir switches off the in-use check")
def test_offload_dir_does_not_switch_off_the_in_use_check(w: World) -> None:
    w.append(CC_SUBAGENT, 1, live=True)
    w.reduce(CC_SUBAGENT, "inplace", offload_dir="D")


@_issue(6, "trailing bytes of a one-line document are carried over as if appended")
def test_one_line_document_with_trailing_whitespace_restores_after_in_place(
    doc_w: World,
) -> None:
    doc_w.reduce("work/run.traj", "inplace", config="clear.toml")
    doc_w.check()


@_issue(17, "-o naming a directory: a temp-file error, and OUT.offload left behind")
def test_output_naming_a_directory_is_refused_and_writes_nothing(w: World) -> None:
    w.reduce("work/chat.jsonl", "file", output="a")


@_new("a run into D replaces D whole, with the batch offload dirs D/<name> of other inputs")
def test_offload_dir_holding_a_batchs_records_is_not_replaced(w: World) -> None:
    w.reduce("work/tau.jsonl", "file", output="r.jsonl", offload_dir="D")
    w.reduce_batch(["work/chat.jsonl", "work/r.jsonl"], "b", offload_dir="D")
    w.reduce("work/b/r.jsonl", "inplace", preset="reasonblocks", offload_dir="D")
    w.check()


@_new("restore --in-place discards a session's change record that its outputs restore through")
def test_restoring_a_session_in_place_keeps_what_its_outputs_restore_through(w: World) -> None:
    w.reduce(CC_SESSION, "inplace", preset="keep-terms")
    w.reduce(CC_SESSION, "file", output="a/q.jsonl", preset="reasonblocks")
    w.restore(CC_SESSION, "inplace", by_id=True)
    w.check()


@_new("an in-place run that changes nothing says 'offload in FILE.offload' and writes none")
def test_in_place_run_that_changes_nothing_names_no_missing_offload_dir(w: World) -> None:
    w.reduce("work/anthropic.jsonl", "inplace", preset="live", offload_dir="D")
    w.reduce("work/anthropic.jsonl", "inplace", preset="live")


@_issue(3, "--force replaces OUT.offload, a record the input's own way back goes through")
def test_reducing_back_onto_an_earlier_output_keeps_the_way_back(w: World) -> None:
    w.reduce("work/chat.jsonl", "file", output="q.jsonl")
    w.reduce("work/q.jsonl", "file", output="r.jsonl")
    w.reduce("work/r.jsonl", "file", output="q.jsonl")
    w.follow_hint()
    w.check()


@_new("a grown session's run into D replaces D, the record a stdout output restores from")
def test_run_into_a_directory_a_stdout_output_restores_from_keeps_it(w: World) -> None:
    w.reduce(CODEX_SESSION, "file", output="r.jsonl")
    w.append(CODEX_SESSION, 1)
    w.reduce(CODEX_SESSION, "stdout", output="r.jsonl", config="trunc.toml", offload_dir="D")
    w.append(CODEX_SESSION, 1)
    w.reduce(CODEX_SESSION, "file", output="a/r.jsonl", offload_dir="D")
    w.check()


@_new(
    "restore of an output made from a session reduced in place, after doctor --fix, adds the torn tail twice"
)
def test_output_of_a_reduced_session_restores_after_its_torn_tail_is_repaired(w: World) -> None:
    w.append(CODEX_SESSION, 1, torn=True)
    w.reduce(CODEX_SESSION, "inplace", preset="claude-code-resume")
    w.reduce(CODEX_SESSION, "file", output="r.jsonl")
    w.doctor(CODEX_SESSION)
    w.check()


@_new("a run into D replaces D although a reduction made from D's output restores through it")
def test_run_into_a_directory_another_reductions_chain_goes_through_keeps_it(w: World) -> None:
    w.reduce("work/tau.jsonl", "file", output="q.jsonl", preset="keep-terms", offload_dir="D")
    w.reduce("work/q.jsonl", "file", output="r.jsonl")
    w.restore("work/r.jsonl", "stdout", output="q.jsonl")
    w.reduce("work/q.jsonl", "file", output="out/r.jsonl", offload_dir="D")
    w.check()


@_new(
    "an output restored from a repaired session (its torn tail back), reduced in place, "
    "names the repair as what it was made from and no longer restores"
)
def test_an_original_restored_from_a_repair_is_not_taken_for_the_repair_plus_lines(
    w: World,
) -> None:
    w.append(CODEX_SESSION, 1, torn=True)
    w.doctor(CODEX_SESSION)
    w.restore(CODEX_SESSION, "file", output="r.jsonl")
    w.reduce("work/r.jsonl", "inplace", preset="reasonblocks")
    w.check()


@_new(
    "an output restored from a repaired session that grew since, reduced again, "
    "restores with the torn tail twice"
)
def test_a_restored_original_that_grew_is_not_undone_through_the_repair_again(
    w: World,
) -> None:
    w.append(CODEX_SESSION, 1, torn=True)
    w.doctor(CODEX_SESSION)
    w.append(CODEX_SESSION, 1)
    w.restore(CODEX_SESSION, "stdout", output="out/r.jsonl")
    w.reduce("work/out/r.jsonl", "file", output="r.jsonl", preset="synaptic")
    w.check()


@_new(
    "an uncompacted output written over by a restore of itself, then by another "
    "uncompaction, no longer restores: the first uncompaction is taken for a missing change"
)
def test_an_uncompacted_output_written_over_twice_restores(w: World) -> None:
    w.doctor(CC_SESSION)
    w.uncompact(CC_SESSION, "file", output="out/q.jsonl")
    w.restore("work/out/q.jsonl", "file", output="out/q.jsonl")
    w.restore(CC_SESSION, "stdout", output="a/q.jsonl")
    w.uncompact("work/a/q.jsonl", "file", output="out/q.jsonl")
    w.check()


@_new("an uncompacted output a reduction to stdout wrote over no longer restores")
def test_an_uncompacted_output_a_stdout_reduction_wrote_over_restores(w: World) -> None:
    w.uncompact(CC_SESSION, "file", output="out/q.jsonl")
    w.reduce("work/chat.jsonl", "stdout", output="out/q.jsonl")
    w.check()


def test_a_hooked_session_reduced_and_moved_restores_its_cut_outputs(w: World) -> None:
    """The model's seed written with ctx's hook: reduced to a file, in place, and moved,
    every file restores to what the client would have written without the hook."""
    w.reduce(CC_HOOKED, "file", output="r.jsonl", preset="keep-terms")
    w.reduce(CC_HOOKED, "inplace")
    w.move(CC_HOOKED, PROJECT_DIRS[2])
    w.check()


@_new(
    "a session written with ctx's hook, reduced by a chain that takes the hook's hints out, "
    "restores without the cut outputs"
)
def test_a_hooked_session_reduced_past_its_hints_restores_its_cut_outputs(w: World) -> None:
    w.reduce(CC_HOOKED, "stdout", output="q.jsonl", config="terms.toml")
    w.reduce("work/q.jsonl", "stdout", output="a/q.jsonl", config="terms.toml", stdin=True)
    w.reduce("work/a/q.jsonl", "stdout", output="out/r.jsonl", preset="claude-code-resume")
    w.check()


@_new(
    "a file uncompacted in place, then written over by a reduction to stdout, no longer "
    "restores: its own uncompact record is taken for a missing change"
)
def test_a_file_changed_in_place_then_written_over_restores_what_it_holds(w: World) -> None:
    w.reduce(CC_SESSION, "file", output="out/q.jsonl")
    w.uncompact("work/out/q.jsonl", "inplace")
    w.reduce("work/chat.jsonl", "stdout", output="out/q.jsonl")
    w.check()


@_new(
    "an output uncompacted in place, then written again by 'uncompact -o', no longer "
    "restores: the in-place change of what it held before is taken for a missing change"
)
def test_an_output_written_again_by_uncompact_forgets_its_earlier_changes(w: World) -> None:
    w.reduce(CC_SESSION, "file", output="a/r.jsonl", config="clear.toml")
    w.uncompact("work/a/r.jsonl", "inplace")
    w.uncompact(CC_SESSION, "file", output="a/r.jsonl")
    w.check()


@_new(
    "a session restored in place, whose in-place reduction another output still needs, "
    "then repaired, no longer restores: the kept reduction is taken for a missing change"
)
def test_a_change_a_restore_in_place_kept_for_another_output_is_off_the_files_line(
    w: World,
) -> None:
    w.uncompact(CC_SESSION, "inplace")
    w.reduce(CC_SESSION, "inplace", preset="keep-terms")
    w.reduce(CC_SESSION, "file", output="out/q.jsonl")
    w.restore(CC_SESSION, "inplace")
    w.doctor(CC_SESSION)
    w.check()


@_new(
    "an output of a moved session restored in place discards the record the moved "
    "session restores through (it was left behind at the session's old path)"
)
def test_restoring_an_output_of_a_moved_session_keeps_the_sessions_record(w: World) -> None:
    w.reduce(CODEX_SESSION, "inplace", config="clear.toml")
    assert w.move(CODEX_SESSION, "")
    archived = f"{CODEX_ARCHIVE}/{Path(CODEX_SESSION).name}"
    w.reduce(archived, "file", output="r.jsonl", config="terms.toml")
    w.restore("work/r.jsonl", "inplace")
    w.check()


@_new(
    "a session whose last line the client was still writing, uncompacted in place, no "
    "longer restores once the client completes that line"
)
def test_a_session_uncompacted_mid_line_restores_after_the_line_is_completed(w: World) -> None:
    w.append(CC_SESSION, 1, torn=True)
    w.uncompact(CC_SESSION, "inplace")
    w.append(CC_SESSION, 1)
    w.check()
