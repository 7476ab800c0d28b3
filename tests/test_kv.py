"""ctx's SQLite store (services.kv): upgrades, newer files, damage, permissions, processes.

The three databases (token counts, model answers, the reduction index) open through one
``connect`` with a migration list each. The "round two" SQL below is copied from the
modules as they were before the store existed: files written by that code must open,
keep their rows and be upgraded, never discarded.
"""

from __future__ import annotations

import json
import multiprocessing
import sqlite3
from collections.abc import Callable
from multiprocessing.synchronize import Barrier
from pathlib import Path

import pytest

from conftest import SHARED, invoke
from ctxcli.services.dirs import cache_dir
from ctxcli.services.disk_cache import DiskCache
from ctxcli.services.token_cache import DB_NAME, TokenCache
from ctxcli.services.token_cache import SCHEMA as COUNTS

REAL = SHARED / "oai_taubench_airline_task2_trial1.jsonl"
needs_real = pytest.mark.skipif(not REAL.is_file(), reason=f"{REAL} not present")
REDUCE = ["--preset", "swe-agent", "-q"]  # clears 15 tool results of REAL

# -- the schemas as round two wrote them (services/token_cache.py, services/disk_cache.py,
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
    _write_db(tmp_path / DiskCache.FILE, ROUND_TWO_ANSWERS)
    cache = DiskCache(tmp_path)
    assert cache.get("classifier", "k1") == {"keep": True}
    cache.put("classifier", "k2", [1, 2])
    assert cache.get_many("classifier", ["k1", "k2"]) == {"k1": {"keep": True}, "k2": [1, 2]}
    assert cache.problem is None
    assert _user_version(tmp_path / DiskCache.FILE) >= 1


# -- damage: a cache starts anew -------------------------------------


@needs_real
def test_a_damaged_token_cache_is_started_anew_and_works() -> None:
    path = cache_dir() / DB_NAME
    path.parent.mkdir(parents=True)
    path.write_bytes(b"this is not a database" * 100)
    first = json.loads(invoke(["stats", str(REAL), "--json"]).stdout)
    (warning,) = first["warnings"]
    assert warning.startswith(f"token cache {path} was damaged (file is not a database)")
    assert warning.endswith("started a new one") and "\n" not in warning
    second = json.loads(invoke(["stats", str(REAL), "--json"]).stdout)
    assert second["warnings"] == [] and second["tokens_after"] == first["tokens_after"]
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    (counts,) = db.execute("SELECT count(*) FROM counts").fetchone()
    (blobs,) = db.execute("SELECT count(*) FROM blobs").fetchone()
    db.close()
    assert counts > 0 and blobs == 1  # counts and the remembered report, in the new file


def test_a_damaged_answer_cache_is_started_anew(tmp_path: Path) -> None:
    (tmp_path / DiskCache.FILE).write_bytes(b"\0garbage" * 1000)
    cache = DiskCache(tmp_path)
    assert cache.get("ns", "k") is None
    cache.put("ns", "k", {"answer": 1})
    assert DiskCache(tmp_path).get("ns", "k") == {"answer": 1}
    assert cache.problem is None


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


_STATES: list[Callable[[Path], None]] = [_damaged] * 30 + [_round_two, _missing] * 5


def test_two_processes_opening_one_file_upgrade_or_rebuild_it_once(tmp_path: Path) -> None:
    """Bounded: 40 rounds, both racers released at once into a damaged, old or missing file."""
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
