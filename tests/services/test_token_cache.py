"""The on-disk token-count cache: hits on rerun, concurrent writers, bounded size."""

from __future__ import annotations

import multiprocessing
import sqlite3
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest

from ctxcli.api import RunOptions, stats_file
from ctxcli.pipeline import stats_cache
from ctxcli.pipeline.config import load_config
from ctxcli.services.dirs import cache_dir
from ctxcli.services.tokens import by_name, engines
from ctxcli.services.tokens.bulk import CACHE_MIN_CHARS
from ctxcli.services.tokens.count_cache import DB_NAME, TokenCache
from ctxcli.services.tokens.ledger import CountOptions
from support.cli import invoke


def _session(n: int, start: int = 0) -> bytes:
    lines = []
    for i in range(start, start + n):
        lines.append({"role": "user", "content": f"question {i}: " + "why does it fail? " * 10})
        lines.append({"role": "assistant", "content": f"answer {i}: " + "because of ttl=0. " * 10})
    return b"".join(orjson.dumps(x) + b"\n" for x in lines)


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Texts the tokenizer really counts (long ones only: short ones skip the cache)."""
    seen: list[str] = []
    real = engines.load_engine("cl100k")[1]

    def fake(name: str, engine: str | None = None) -> tuple[str, Callable[[str], int]]:
        def fn(text: str) -> int:
            if len(text) >= CACHE_MIN_CHARS:
                seen.append(text)
            return real(text)

        return "test", fn

    monkeypatch.setattr(by_name, "load_engine", fake)
    return seen


def test_cache_lives_in_ctx_cache_dir(tmp_path: Path) -> None:
    assert cache_dir() == tmp_path / ".ctx-cache"


def test_rerun_counts_nothing_and_grown_session_counts_only_new_texts(
    tmp_path: Path, counted: list[str]
) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(_session(20))
    first = stats_file(path)
    assert len(counted) == 40
    counted.clear()
    again = stats_file(path)
    assert counted == []
    assert again.to_dict() == first.to_dict()
    path.write_bytes(_session(20) + _session(3, start=20))
    stats_file(path)
    assert len(counted) == 6
    assert all(t.startswith(("question 2", "answer 2")) for t in counted)


def test_no_cache_flag_and_env_turn_it_off(
    tmp_path: Path, counted: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(_session(5))
    stats_file(path, options=RunOptions(counting=CountOptions(cache=False)))
    assert not (cache_dir() / DB_NAME).exists()
    monkeypatch.setenv("CTX_NO_CACHE", "1")
    stats_file(path)
    stats_file(path)
    assert len(counted) == 30
    assert not (cache_dir() / DB_NAME).exists()
    invoke(["stats", str(path), "--json", "--no-cache"])


def test_cli_rerun_uses_the_cache(tmp_path: Path, counted: list[str]) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(_session(8))
    first = invoke(["stats", str(path), "--json"])
    assert len(counted) == 16
    second = invoke(["stats", str(path), "--json"])
    assert len(counted) == 16
    assert first.stdout == second.stdout


def test_size_is_bounded_and_recent_entries_stay(tmp_path: Path) -> None:
    cache = TokenCache(tmp_path / "c.sqlite3", max_entries=100)
    for batch in range(5):
        cache.put_many("cl100k", [(bytes([batch, i]) * 8, i) for i in range(60)])
    assert len(cache) <= 100
    latest = [bytes([4, i]) * 8 for i in range(60)]
    assert cache.get_many("cl100k", latest) == {k: i for i, k in enumerate(latest)}
    cache.close()


def test_tokenizers_do_not_share_counts(tmp_path: Path) -> None:
    cache = TokenCache(tmp_path / "c.sqlite3")
    cache.put_many("cl100k", [(b"k" * 16, 5)])
    assert cache.get_many("o200k", [b"k" * 16]) == {}
    assert cache.get_many("cl100k", [b"k" * 16]) == {b"k" * 16: 5}
    cache.close()


def _writer(path: str, worker: int, rounds: int) -> None:
    cache = TokenCache(Path(path))
    for r in range(rounds):
        # Half the keys are shared between the writers, half are their own.
        shared = [(f"shared-{r}-{i}".encode().ljust(16, b"."), i) for i in range(50)]
        own = [(f"w{worker}-{r}-{i}".encode().ljust(16, b"."), i + worker) for i in range(50)]
        cache.put_many("cl100k", shared + own)
        cache.get_many("cl100k", [k for k, _ in shared])
    cache.close()


def test_concurrent_writers_do_not_corrupt_it(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite3"
    TokenCache(path).close()
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(str(path), w, 40)) for w in (1, 2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    (rows,) = db.execute("SELECT count(*) FROM counts").fetchone()
    db.close()
    assert rows == 40 * 50 * 3
    cache = TokenCache(path)
    key = b"w2-39-49".ljust(16, b".")
    assert cache.get_many("cl100k", [key]) == {key: 51}
    cache.close()


def test_a_damaged_cache_file_is_skipped_with_a_warning(tmp_path: Path, counted: list[str]) -> None:
    cache_dir().mkdir(parents=True)
    (cache_dir() / DB_NAME).write_bytes(b"this is not a database" * 100)
    path = tmp_path / "s.jsonl"
    path.write_bytes(_session(4))
    report = stats_file(path)
    assert len(counted) == 8
    assert any("token cache" in w for w in report.warnings)


@pytest.fixture
def every_count(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every text the tokenizer counts, short ones included."""
    seen: list[str] = []
    real = engines.load_engine("cl100k")[1]

    def fake(name: str, engine: str | None = None) -> tuple[str, Callable[[str], int]]:
        return "test", lambda text: seen.append(text) or real(text)

    monkeypatch.setattr(by_name, "load_engine", fake)
    return seen


def test_unchanged_file_gets_its_remembered_report(
    tmp_path: Path, every_count: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(_session(10) + b'{"role": "user", "content": "short"}\n')
    first = stats_file(path)
    assert every_count
    every_count.clear()
    assert stats_file(path).to_dict() == first.to_dict()
    assert every_count == []  # not even the short texts: nothing was run
    # Another name, another configuration or other code: computed again (the short
    # texts are never in the token cache, so a run that computes counts something).
    other = tmp_path / "t.jsonl"
    other.write_bytes(path.read_bytes())
    assert stats_file(other).input == str(other)
    assert every_count
    every_count.clear()
    stats_file(path, config=load_config().with_overrides(language="zh"))
    assert every_count
    every_count.clear()
    monkeypatch.setattr(stats_cache, "_FINGERPRINT", b"edited checkout")
    assert stats_file(path).to_dict() == first.to_dict()
    assert every_count


def test_reports_of_online_or_unknown_stages_are_not_remembered() -> None:
    from ctxcli.core.errors import OnInvalid
    from ctxcli.pipeline.config import Config, StageConfig
    from ctxcli.stages.truncate_tool_output import TruncateToolOutputOptions

    default = load_config()
    assert stats_cache.report_key(b"x", "p", default, OnInvalid.ERROR) is not None
    custom = Config(default.settings, (StageConfig("my_plugin", TruncateToolOutputOptions()),))
    assert stats_cache.report_key(b"x", "p", custom, OnInvalid.ERROR) is None
    api_counts = default.with_overrides(tokenizer="anthropic")
    assert stats_cache.report_key(b"x", "p", api_counts, OnInvalid.ERROR) is None
