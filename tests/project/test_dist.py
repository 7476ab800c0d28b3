"""The sdist and wheel `make dist` builds: complete, and working when installed alone.

Network (make test-network, not make test): builds both (the wheel from the sdist, as
`python -m build` does, its build backend from PyPI) and installs the wheel into a fresh
virtualenv, dependencies from PyPI through pip's cache. Nothing from the source tree or the
dev virtualenv is importable there.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from support.paths import REPO, SAMPLE

SHIPPED = ("ctxcli/py.typed", "ctxcli/ctx.schema.json")
DIST = "ctx-lossless"  # "ctxcli" on PyPI is another project
FILE_STEM = "ctx_lossless"  # the distribution name as file names spell it

pytestmark = [pytest.mark.slow, pytest.mark.network]


def _run(args: list[str | Path], cwd: Path, env: dict[str, str]) -> str:
    done = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"{args}\n--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    _run([sys.executable, "-m", "build", "--outdir", out, REPO], REPO, env)
    return out


def test_sdist_and_wheel_hold_the_package_data(dist: Path) -> None:
    (sdist,) = dist.glob(f"{FILE_STEM}-*.tar.gz")
    (wheel,) = dist.glob(f"{FILE_STEM}-*-py3-none-any.whl")
    with tarfile.open(sdist) as tar:
        names = tar.getnames()
    root = names[0].split("/")[0]
    for path in (*SHIPPED, "README.md", "pyproject.toml"):
        full = f"{root}/{path}" if path.endswith((".md", ".toml")) else f"{root}/src/{path}"
        assert full in names, path
    with zipfile.ZipFile(wheel) as zf:
        wheel_names = zf.namelist()
        entry_points = next(n for n in wheel_names if n.endswith(".dist-info/entry_points.txt"))
        assert "ctx = " in zf.read(entry_points).decode()
        metadata = zf.read(next(n for n in wheel_names if n.endswith(".dist-info/METADATA")))
    from ctxcli._version import __version__

    headers = metadata.decode().split("\n\n")[0].splitlines()
    assert f"Name: {DIST}" in headers and f"Version: {__version__}" in headers
    for path in SHIPPED:
        assert path in wheel_names
    assert not [n for n in wheel_names if n.startswith("tests/")]


def test_wheel_works_in_a_fresh_virtualenv(dist: Path, tmp_path: Path) -> None:
    (wheel,) = dist.glob(f"{FILE_STEM}-*-py3-none-any.whl")
    venv = tmp_path / "venv"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    _run([sys.executable, "-m", "venv", venv], tmp_path, env)
    bin_dir = venv / "bin"
    _run([bin_dir / "python", "-m", "pip", "install", "--quiet", wheel], tmp_path, env)
    installed = _run([bin_dir / "python", "-m", "pip", "list", "--format=freeze"], tmp_path, env)
    names = {line.split("==")[0].lower() for line in installed.splitlines()}
    assert DIST in names and "ctxcli" not in names
    ctx = bin_dir / "ctx"
    work = tmp_path / "run"
    work.mkdir()
    (work / "session.jsonl").write_bytes(SAMPLE.read_bytes())

    from ctxcli._version import __version__

    assert _run([ctx, "--version"], work, env) == f"ctx {__version__}\n"
    report = json.loads(
        _run([ctx, "reduce", "session.jsonl", "-o", "out.jsonl", "--json"], work, env)
    )
    assert report["tokens_after"] < report["tokens_before"]
    _run([ctx, "restore", "out.jsonl", "-o", "back.jsonl"], work, env)
    assert (work / "back.jsonl").read_bytes() == SAMPLE.read_bytes()
    # The schema shipped in the wheel is the one the installed ctx prints.
    printed = _run([ctx, "config", "schema"], work, env)
    with zipfile.ZipFile(wheel) as zf:
        assert printed == zf.read("ctxcli/ctx.schema.json").decode()
    # The Python API and its type marker come from the venv, not from this checkout;
    # the front door's preview of the same destination counts what `ctx reduce` did.
    probe = (
        "import ctxcli, pathlib;"
        "r = ctxcli.stats('session.jsonl', ctxcli.Destination('out.jsonl'));"
        "print(ctxcli.__file__);"
        "print((pathlib.Path(ctxcli.__file__).parent / 'py.typed').exists(), r.tokens_after)"
    )
    where, typed = _run([bin_dir / "python", "-c", probe], work, env).splitlines()
    assert Path(where).is_relative_to(venv)
    assert typed == f"True {report['tokens_after']}"
