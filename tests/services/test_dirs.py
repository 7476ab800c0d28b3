"""One resolver for ctx's own directories (services.dirs)."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from ctxcli.services.dirs import cache_dir, data_dir, private_dir


def test_ctx_variables_win_then_xdg(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("CTX_CACHE_DIR", str(tmp_path / "c"))
    monkeypatch.setenv("CTX_DATA_DIR", str(tmp_path / "d"))
    assert (cache_dir(), data_dir()) == (tmp_path / "c", tmp_path / "d")
    monkeypatch.delenv("CTX_CACHE_DIR")
    monkeypatch.delenv("CTX_DATA_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xc"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xd"))
    assert (cache_dir(), data_dir()) == (tmp_path / "xc" / "ctx", tmp_path / "xd" / "ctx")


def test_the_proxy_run_directory_honours_xdg_cache_home(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from ctxcli.proxy.engine import new_run_dir

    monkeypatch.delenv("CTX_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xc"))
    run = Path(new_run_dir())
    assert run.parent == tmp_path / "xc" / "ctx" / "proxy"
    assert stat.S_IMODE(run.parent.stat().st_mode) == 0o700


def test_private_dir_creates_owner_only_and_tightens_only_when_asked(tmp_path: Path) -> None:
    made = private_dir(tmp_path / "a" / "b")
    assert stat.S_IMODE(made.stat().st_mode) == 0o700
    assert stat.S_IMODE((tmp_path / "a").stat().st_mode) == 0o700
    wide = tmp_path / "wide"
    wide.mkdir(mode=0o755)
    wide.chmod(0o755)
    private_dir(wide)
    assert stat.S_IMODE(wide.stat().st_mode) == 0o755  # a directory a user named
    private_dir(wide, tighten=True)
    assert stat.S_IMODE(wide.stat().st_mode) == 0o700
