"""ctx's SQLite store (services.kv): upgrades, newer files, damage, permissions, processes.

The three databases (token counts, model answers, the reduction index) open through one
``connect`` with a migration list each. The "round two" SQL below is copied from the
modules as they were before the store existed: files written by that code must open,
keep their rows and be upgraded, never discarded.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import sqlite3
import stat
import subprocess
import sys
from collections.abc import Callable
from multiprocessing.synchronize import Barrier
from pathlib import Path

import pytest

from ctxcli.services import kv
from ctxcli.services.answer_cache import AnswerCache
from ctxcli.services.dirs import cache_dir, data_dir
from ctxcli.services.tokens.count_cache import DB_NAME, TokenCache
from ctxcli.services.tokens.count_cache import SCHEMA as COUNTS
from ctxcli.store.index import FILE as INDEX_FILE
from ctxcli.store.index import FORMER_FILE as FORMER_INDEX_FILE
from ctxcli.store.index import SCHEMA as INDEX
from ctxcli.store.index import IndexEntry, ReductionIndex
from support.cli import invoke
from support.paths import SAMPLE, SHARED

REAL = SHARED / "oai_taubench_airline_task2_trial1.jsonl"
needs_real = pytest.mark.real_data  # the corpus guard: skip in a clone, fail in CI
REDUCE = ["--preset", "swe-agent", "-q"]  # clears 15 tool results of REAL

# -- the schemas as round two wrote them (services/tokens/count_cache.py, services/answer_cache.py,
#    services/ledger.py before services/kv.py): literal SQL, never imported ------------

ROUND_TWO_COUNTS = """
PRAGMA journal_mode=WAL;
CREATE TABLE IF NOT EXISTS counts (
    tokenizer TEXT NOT NULL,
    digest BLOB NOT NULL,
    tokens INTEGER NOT NULL,
    used INTEGER NOT NULL,
    PRIMARY KEY (tokenizer, digest)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS counts_used ON counts (used);
CREATE TABLE IF NOT EXISTS blobs (
    key BLOB PRIMARY KEY,
    value BLOB NOT NULL,
    used INTEGER NOT NULL
);
INSERT INTO counts VALUES ('cl100k', x'00112233445566778899aabbccddeeff', 42, 1700000000);
INSERT INTO blobs VALUES (x'0102', x'7b7d', 1700000000);
"""

ROUND_ONE_COUNTS = """
CREATE TABLE IF NOT EXISTS counts (
    tokenizer TEXT NOT NULL,
    digest BLOB NOT NULL,
    tokens INTEGER NOT NULL,
    used INTEGER NOT NULL,
    PRIMARY KEY (tokenizer, digest)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS counts_used ON counts (used);
INSERT INTO counts VALUES ('cl100k', x'00112233445566778899aabbccddeeff', 42, 1700000000);
"""

ROUND_TWO_ANSWERS = """
CREATE TABLE IF NOT EXISTS entries (ns TEXT, key TEXT, value TEXT, PRIMARY KEY (ns, key));
INSERT INTO entries VALUES ('classifier', 'k1', '{"keep": true}');
"""

ROUND_TWO_INDEX = """
CREATE TABLE IF NOT EXISTS reductions (output_sha256 TEXT, output_bytes INTEGER,
 input_sha256 TEXT, offload_dir TEXT, path TEXT, created REAL,
 PRIMARY KEY (output_sha256, offload_dir));
"""

DIGEST = bytes.fromhex("00112233445566778899aabbccddeeff")


def _write_db(path: Path, script: str, user_version: int = 0) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(path)
    db.executescript(script)
    db.execute(f"PRAGMA user_version = {user_version}")
    db.commit()
    db.close()


def _user_version(path: Path) -> int:
    db = sqlite3.connect(path)
    try:
        return int(db.execute("PRAGMA user_version").fetchone()[0])
    finally:
        db.close()


def _names(path: Path) -> set[str]:
    db = sqlite3.connect(path)
    try:
        return {row[0] for row in db.execute("SELECT name FROM sqlite_master")}
    finally:
        db.close()


# -- files of an older ctx are upgraded in place ----------------------------------------


@pytest.mark.parametrize("script", [ROUND_TWO_COUNTS, ROUND_ONE_COUNTS], ids=["two", "one"])
def test_an_old_token_cache_keeps_its_counts_and_is_upgraded(tmp_path: Path, script: str) -> None:
    path = tmp_path / DB_NAME
    _write_db(path, script)
    cache = TokenCache(path)
    try:
        assert cache.get_many("cl100k", [DIGEST]) == {DIGEST: 42}
        cache.put_blob(b"k", b"v")  # a round-one file gained the blobs table
        assert cache.get_blob(b"k") == b"v"
    finally:
        cache.close()
    assert _user_version(path) == COUNTS.version


def test_an_old_answer_cache_keeps_its_answers_and_is_upgraded(tmp_path: Path) -> None:
    _write_db(tmp_path / AnswerCache.FILE, ROUND_TWO_ANSWERS)
    cache = AnswerCache(tmp_path)
    assert cache.get("classifier", "k1") == {"keep": True}
    cache.put("classifier", "k2", [1, 2])
    assert cache.get_many("classifier", ["k1", "k2"]) == {"k1": {"keep": True}, "k2": [1, 2]}
    assert cache.problem is None
    assert _user_version(tmp_path / AnswerCache.FILE) >= 1


@needs_real
def test_an_old_index_still_finds_a_moved_output_and_is_upgraded() -> None:
    """A round-two index (no version, no index on paths) on a real transcript's reduction."""
    invoke(["reduce", str(REAL), "-o", "out.jsonl", *REDUCE])
    index = data_dir() / INDEX_FILE
    db = sqlite3.connect(index)
    (row,) = db.execute("SELECT * FROM reductions").fetchall()
    db.close()
    # Output and offload directory both moved: only the index can pair them again.
    Path("out.jsonl").rename("moved.jsonl")
    Path("out.jsonl.offload").rename("elsewhere")
    index.unlink()
    _write_db(index, ROUND_TWO_INDEX)
    db = sqlite3.connect(index)
    db.execute(
        "INSERT INTO reductions VALUES (?, ?, ?, ?, ?, ?)",
        (*row[:3], str(Path("elsewhere").resolve()), *row[4:6]),
    )
    db.commit()
    db.close()
    assert "reductions_path" not in _names(index)
    invoke(["restore", "moved.jsonl", "-o", "back.jsonl"])
    assert Path("back.jsonl").read_bytes() == REAL.read_bytes()
    assert _user_version(index) == INDEX.version == 3
    assert {"reductions_path", "reductions_head"} <= _names(index)
    assert [e.offload_dir for e in ReductionIndex().find(output_sha256=row[0])] == [
        str(Path("elsewhere").resolve())
    ]


def test_an_index_under_its_former_name_is_moved_with_every_row() -> None:
    """The index was ledger.sqlite3: the first open moves it, rows still in its WAL too."""
    former = data_dir() / FORMER_INDEX_FILE
    _write_db(former, ROUND_TWO_INDEX)
    old_ctx = sqlite3.connect(former)  # an older ctx still has it open: the row is in the WAL
    try:
        old_ctx.execute("PRAGMA journal_mode=WAL")
        old_ctx.execute(
            "INSERT INTO reductions VALUES (?, 1, ?, '/off', '/out.jsonl', 0)", ("a" * 64, "b" * 64)
        )
        old_ctx.commit()
        assert Path(f"{former}-wal").stat().st_size > 0
        found = ReductionIndex().find(path="/out.jsonl")
    finally:
        old_ctx.close()
    assert [e.offload_dir for e in found] == ["/off"]
    index = data_dir() / INDEX_FILE
    assert not former.exists() and not Path(f"{former}-wal").exists()
    assert _user_version(index) == INDEX.version
    assert stat.S_IMODE(index.stat().st_mode) == 0o600
    assert [p.name for p in data_dir().iterdir() if "adopting" in p.name] == []


def test_a_reduction_recorded_under_the_former_name_still_restores_moved(tmp_path: Path) -> None:
    invoke(["reduce", str(SAMPLE), "-o", "out.jsonl", "-q"])
    (data_dir() / INDEX_FILE).rename(data_dir() / FORMER_INDEX_FILE)  # as an older ctx left it
    Path("out.jsonl").rename("moved.jsonl")  # only the index pairs it with out.jsonl.offload
    invoke(["restore", "moved.jsonl", "-o", "back.jsonl"])
    assert Path("back.jsonl").read_bytes() == SAMPLE.read_bytes()
    assert not (data_dir() / FORMER_INDEX_FILE).exists()


def test_the_path_lookup_uses_the_index_the_upgrade_adds(tmp_path: Path) -> None:
    index = ReductionIndex(tmp_path)
    index.record(IndexEntry("a" * 64, 1, "b" * 64, "/off", "/out.jsonl"))
    db = sqlite3.connect(index.path)
    plan = db.execute(
        "EXPLAIN QUERY PLAN SELECT * FROM reductions WHERE output_sha256 = ? OR path = ?",
        ("a" * 64, "/out.jsonl"),
    ).fetchall()
    db.close()
    assert any("reductions_path" in row[-1] for row in plan), plan
    assert not any(row[-1].startswith("SCAN") for row in plan), plan


# -- a newer ctx's file is refused, untouched ----------------------------------------------


def test_a_newer_ctxs_files_are_refused_in_one_line_and_left_as_they_are(tmp_path: Path) -> None:
    counts = cache_dir() / DB_NAME
    answers = cache_dir() / AnswerCache.FILE
    index = data_dir() / INDEX_FILE
    _write_db(counts, ROUND_TWO_COUNTS, user_version=99)
    _write_db(answers, ROUND_TWO_ANSWERS, user_version=99)
    _write_db(index, ROUND_TWO_INDEX, user_version=99)
    before = {p: p.read_bytes() for p in (counts, answers, index)}

    notes: list[str] = []
    assert TokenCache.open_default(notes.append) is None
    cache = AnswerCache(cache_dir())
    assert cache.get("classifier", "k1") is None
    cache.put("classifier", "k3", 1)
    found = ReductionIndex(log=notes.append)
    found.record(IndexEntry("a" * 64, 1, "b" * 64, "/off", "/out"))
    assert found.find(path="/out") == []
    problems = [*notes, cache.problem]
    assert len(problems) == 3
    for problem, path in zip(problems, (counts, index, answers), strict=True):
        assert problem is not None and "\n" not in problem
        assert str(path) in problem and "newer than this ctx knows (" in problem
        assert "upgrade ctx" in problem and "move the file aside" in problem
    assert {p: p.read_bytes() for p in before} == before

    with pytest.raises(kv.StoreError, match=r"has version 99, newer than this ctx knows"):
        kv.connect(index, INDEX)


# -- damage: a cache starts anew, the index is refused -------------------------------------


@needs_real
def test_a_damaged_token_cache_is_started_anew_and_works() -> None:
    path = cache_dir() / DB_NAME
    path.parent.mkdir(parents=True)
    path.write_bytes(b"this is not a database" * 100)
    first = json.loads(invoke(["stats", str(REAL), "--json"]).stdout)["files"][0]
    (warning,) = first["warnings"]
    assert warning.startswith(f"token cache {path} was damaged (file is not a database)")
    assert warning.endswith("started a new one") and "\n" not in warning
    second = json.loads(invoke(["stats", str(REAL), "--json"]).stdout)["files"][0]
    assert second["warnings"] == [] and second["tokens_after"] == first["tokens_after"]
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    (counts,) = db.execute("SELECT count(*) FROM counts").fetchone()
    (blobs,) = db.execute("SELECT count(*) FROM blobs").fetchone()
    db.close()
    assert counts > 0 and blobs == 1  # counts and the remembered report, in the new file


def test_a_damaged_answer_cache_is_started_anew(tmp_path: Path) -> None:
    (tmp_path / AnswerCache.FILE).write_bytes(b"\0garbage" * 1000)
    cache = AnswerCache(tmp_path)
    assert cache.get("ns", "k") is None
    cache.put("ns", "k", {"answer": 1})
    assert AnswerCache(tmp_path).get("ns", "k") == {"answer": 1}
    assert cache.problem is None


def _not_a_database(path: Path) -> None:
    path.write_bytes(b"not a database at all" * 50)


def _malformed_schema(path: Path) -> None:
    ReductionIndex(path.parent).record(IndexEntry("a" * 64, 1, "b" * 64, "/off", "/out"))
    data = bytearray(path.read_bytes())
    data[100:400] = b"\xff" * 300  # page 1 past the header: where the schema starts
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("damage", [_not_a_database, _malformed_schema])
def test_a_damaged_index_is_refused_in_one_line_and_never_rewritten(
    damage: Callable[[Path], None],
) -> None:
    index = data_dir() / INDEX_FILE
    index.parent.mkdir(parents=True)
    damage(index)
    damaged = index.read_bytes()
    notes: list[str] = []
    found = ReductionIndex(log=notes.append)
    found.record(IndexEntry("c" * 64, 1, "b" * 64, "/off2", "/out"))
    assert found.find(path="/out") == []
    found.forget(["/off"])
    assert len(notes) == 1, notes
    (note,) = notes
    assert "\n" not in note and note.startswith(f"{index}: the reduction index is damaged (")
    assert "move it aside to start a new reduction index" in note
    assert index.read_bytes() == damaged
    with pytest.raises(kv.StoreError, match="ctx leaves it as it is"):
        kv.connect(index, INDEX)


@needs_real
def test_a_run_with_a_damaged_index_succeeds_and_restores_beside_its_output() -> None:
    index = data_dir() / INDEX_FILE
    index.parent.mkdir(parents=True)
    _not_a_database(index)
    damaged = index.read_bytes()
    invoke(["reduce", str(REAL), "-o", "out.jsonl", *REDUCE])
    invoke(["restore", "out.jsonl", "-o", "back.jsonl"])
    assert Path("back.jsonl").read_bytes() == REAL.read_bytes()
    assert index.read_bytes() == damaged


# -- private files -------------------------------------------------------------------------


def test_every_database_is_private_and_an_old_wide_one_is_tightened(tmp_path: Path) -> None:
    ReductionIndex().record(IndexEntry("a" * 64, 1, "b" * 64, "/off", "/out"))
    AnswerCache(cache_dir()).put("ns", "k", 1)
    for path in (data_dir() / INDEX_FILE, cache_dir() / AnswerCache.FILE):
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700, path
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    old = tmp_path / "old"
    _write_db(old / "ledger.sqlite3", ROUND_TWO_INDEX)
    os.chmod(old, 0o755)
    os.chmod(old / "ledger.sqlite3", 0o644)
    db = kv.connect(old / "ledger.sqlite3", INDEX)
    try:
        assert stat.S_IMODE(old.stat().st_mode) == 0o700
        for suffix in ("", "-wal", "-shm"):
            assert stat.S_IMODE(Path(f"{old}/ledger.sqlite3{suffix}").stat().st_mode) == 0o600
    finally:
        db.close()


# -- read-only files: the index is still read, a cache is skipped ---------------------------

_READ_ONLY_PROBE = """
import json, sys
from pathlib import Path
from ctxcli.services.tokens.count_cache import TokenCache
from ctxcli.store.index import IndexEntry, ReductionIndex
root = Path(sys.argv[1])
notes = []
index = ReductionIndex(root, log=notes.append)
found = [e.offload_dir for e in index.find(path="/out")]
index.record(IndexEntry("c" * 64, 1, "b" * 64, "/other", "/out2"))
cache = TokenCache.open_default(notes.append)
print(json.dumps({"found": found, "notes": notes, "cache": cache is not None}))
"""


def test_a_read_only_index_is_still_read_and_a_read_only_cache_skipped(tmp_path: Path) -> None:
    root = tmp_path / "ro"
    ReductionIndex(root).record(IndexEntry("a" * 64, 1, "b" * 64, "/off", "/out"))
    TokenCache(cache_dir() / DB_NAME).close()
    os.chmod(root / INDEX_FILE, 0o400)
    os.chmod(cache_dir() / DB_NAME, 0o400)
    prefix: list[str] = []
    if os.geteuid() == 0:  # root writes anything: drop that power, as a user has none
        if shutil.which("setpriv") is None:
            pytest.skip("cannot drop root's file capabilities here: setpriv (util-linux) missing")
        prefix = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search,-fowner"]
    cmd = [*prefix, sys.executable, "-c", _READ_ONLY_PROBE, str(root)]
    out = subprocess.run(cmd, capture_output=True, timeout=120, check=True, text=True)
    result = json.loads(out.stdout)
    assert result["found"] == ["/off"]
    assert result["cache"] is False
    index_note, cache_note = result["notes"]
    assert str(root / INDEX_FILE) in index_note and "readonly" in index_note
    assert "token cache" in cache_note and "counting without it" in cache_note


# -- several processes at once -------------------------------------------------------------


def _racer(path: str, worker: int, rounds: int, barrier: Barrier) -> None:
    """Each round: wait for the file the parent prepared, open it with the other racer, write."""
    for r in range(rounds):
        barrier.wait(60)
        cache = TokenCache(Path(path))
        cache.put_many("cl100k", [(f"r{r}-w{worker}".encode().ljust(16, b"."), worker)])
        cache.close()
        barrier.wait(60)


def _damaged(path: Path) -> None:
    path.write_bytes(b"damaged " * 4096)


def _round_two(path: Path) -> None:
    _write_db(path, ROUND_TWO_COUNTS)


def _missing(path: Path) -> None:
    pass


_STATES: list[Callable[[Path], None]] = [_damaged] * 30 + [_missing, _round_two] * 30


def test_two_processes_opening_one_file_upgrade_or_rebuild_it_once(tmp_path: Path) -> None:
    """Bounded: 90 rounds, both racers released at once into a damaged, missing or old file."""
    path = tmp_path / "c" / DB_NAME
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(3)
    procs = [ctx.Process(target=_racer, args=(str(path), w, len(_STATES), barrier)) for w in (1, 2)]
    for p in procs:
        p.start()
    try:
        for r, prepare in enumerate(_STATES):
            state = prepare.__name__
            for leftover in path.parent.glob(f"{DB_NAME}*"):
                leftover.unlink()
            path.parent.mkdir(exist_ok=True)
            prepare(path)
            barrier.wait(60)  # go
            barrier.wait(120)  # both wrote
            db = sqlite3.connect(path)
            assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",), state
            keys = {row[0] for row in db.execute("SELECT digest FROM counts")}
            db.close()
            assert {f"r{r}-w{w}".encode().ljust(16, b".") for w in (1, 2)} <= keys, state
            assert _user_version(path) == COUNTS.version, state
    except BaseException:
        barrier.abort()  # the racers waiting for the next round stop at once
        raise
    finally:
        for p in procs:
            p.join(120)
    assert [p.exitcode for p in procs] == [0, 0]


def _recorder(root: str, worker: int, count: int) -> None:
    index = ReductionIndex(Path(root), log=print)
    for i in range(count):
        index.record(IndexEntry(f"{worker}-{i}".ljust(64, "0"), i, "b" * 64, f"/o{i}", "/p"))
    assert index.problem is None


def test_two_processes_record_into_one_index(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_recorder, args=(str(tmp_path), w, 60)) for w in (1, 2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0, 0]
    assert len(ReductionIndex(tmp_path).find(path="/p")) == 120
