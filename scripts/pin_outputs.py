"""Pin what ctx writes: reduce every transcript with every preset and hash the results.

Run it before and after a change that must not change outputs (a move, a refactor)::

    python scripts/pin_outputs.py record build/pins-before.json
    python scripts/pin_outputs.py record build/pins-after.json
    python scripts/pin_outputs.py compare build/pins-before.json build/pins-after.json

Each run goes through the ``ctx`` command of the interpreter running this script (so it
pins what users get, whatever the library's layout), in a scratch directory with its own
HOME and data/cache directories, from relative paths, so the bytes do not depend on where
the repository is. For every transcript in ``../shared/transcripts`` (when present) and
``sample_transcripts/`` and every preset (plus the default chain) it records the sha256 of
the output, the manifest, each offload file, the ``--json`` reports of ``reduce`` and
``stats``, and whether ``ctx restore`` gives the input back byte for byte.

Hints cite the offload directory by its absolute path, so the bytes (and the token counts
of the reports) depend on where a run happens: every run happens under one fixed scratch
directory, ``$TMPDIR/ctx-pins``, taken under a lock so two records on one machine (two
engineers, two worktrees) wait for each other instead of sharing it.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "transcripts"
SAMPLES = ROOT / "sample_transcripts"
SUFFIXES = (".jsonl", ".json", ".traj")
SCRATCH = Path(tempfile.gettempdir()) / "ctx-pins"
"""Where every run happens: the same path each time, so hints cite the same bytes."""


def transcripts() -> list[Path]:
    found = []
    for folder in (SHARED, SAMPLES):
        if folder.is_dir():
            found += sorted(p for p in folder.iterdir() if p.suffix in SUFFIXES)
    return found


def presets() -> list[str | None]:
    """The built-in presets (wherever the package keeps them), and None: the default chain."""
    names = {p.stem for p in (ROOT / "src" / "ctxcli").rglob("presets/*.toml")}
    return [None, *sorted(names)]


def _ctx(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[bytes]:
    cmd = [sys.executable, "-m", "ctxcli", *args]
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, timeout=600)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _json_sha(data: bytes) -> str:
    """The hash of a JSON report with its timing fields left out (they vary run to run)."""
    try:
        report = json.loads(data)
    except ValueError:
        return _sha(data)
    return _sha(json.dumps(_untimed(report), sort_keys=True).encode())


def _untimed(value: object) -> object:
    if isinstance(value, dict):
        return {k: _untimed(v) for k, v in value.items() if "seconds" not in k and k != "elapsed"}
    if isinstance(value, list):
        return [_untimed(v) for v in value]
    return value


def _unfingerprinted(path: Path, output: str) -> bytes:
    """A file's bytes; a manifest's re-run key without the hash of ctx's code in it.

    ``rerun.config`` hashes ctx's own source (a re-run never keeps decisions another
    version of ctx made), so it changes with every code change by design. The
    manifest's hash of the output becomes ``output``, the pinned hash of the output (see
    :func:`_here`: the output cites the run's directory).
    """
    data = path.read_bytes()
    if path.name != "manifest.json":
        return data
    manifest = json.loads(data)
    if isinstance(manifest.get("rerun"), dict) and "config" in manifest["rerun"]:
        manifest["rerun"]["config"] = "<code fingerprint>"
    if isinstance(manifest.get("output"), dict) and "sha256" in manifest["output"]:
        manifest["output"]["sha256"] = output
    return json.dumps(manifest, sort_keys=True).encode()


def _here(data: bytes, work: Path) -> bytes:
    """``data`` with the run's directory named by one token.

    Hints, manifests and reports cite the offload directory by its absolute path, which
    lies under a fresh temporary directory: hashed as it is, no two records would agree.
    """
    for where in {str(work), os.path.realpath(work)}:
        data = data.replace(os.fsencode(where), b"<work>")
    return data


def pin_one(source: Path, preset: str | None, scratch: Path) -> tuple[str, dict[str, object]]:
    """Reduce one transcript with one chain in a directory of its own; hash what it wrote."""
    key = f"{source.name} :: {preset or 'default'}"
    work = scratch / hashlib.sha1(key.encode()).hexdigest()[:12]
    work.mkdir()
    home = work / "home"
    env = {
        **os.environ,
        "HOME": str(home),
        "XDG_DATA_HOME": str(home / "data"),
        "XDG_CACHE_HOME": str(home / "cache"),
        "XDG_CONFIG_HOME": str(home / "config"),
        "CTX_NO_CACHE": "1",
        "CTX_NO_PLUGINS": "1",
        "COLUMNS": "100",
    }
    env.pop("CTX_DATA_DIR", None)
    env.pop("CTX_CACHE_DIR", None)
    shutil.copyfile(source, work / source.name)
    chain = ["--preset", preset] if preset else []
    out_name = f"out{source.suffix}"
    reduce = _ctx(["reduce", source.name, "-o", out_name, "--json", *chain], work, env)
    pins: dict[str, object] = {"reduce_exit": reduce.returncode}
    if reduce.returncode == 0:
        pins["reduce_report"] = _json_sha(_here(reduce.stdout, work))
        pins["output"] = output = _sha(_here((work / out_name).read_bytes(), work))
        offload = work / f"{out_name}.offload"
        pins["offload"] = {
            str(p.relative_to(offload)): _sha(_here(_unfingerprinted(p, output), work))
            for p in sorted(offload.rglob("*"))
            if p.is_file()
        }
        restored = _ctx(["restore", out_name, "-o", "restored"], work, env)
        pins["restore_exact"] = (
            restored.returncode == 0
            and (work / "restored").read_bytes() == (work / source.name).read_bytes()
        )
    else:
        pins["reduce_stderr"] = _here(reduce.stderr, work).decode(errors="replace").strip()[-300:]
    stats = _ctx(["stats", source.name, "-o", out_name, "--json", *chain], work, env)
    pins["stats_exit"] = stats.returncode
    if stats.returncode == 0:
        pins["stats_report"] = _json_sha(_here(stats.stdout, work))
    shutil.rmtree(work)
    return key, pins


@contextmanager
def _scratch() -> Iterator[Path]:
    """:data:`SCRATCH`, empty and ours alone until the block ends."""
    with open(f"{SCRATCH}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        shutil.rmtree(SCRATCH, ignore_errors=True)
        SCRATCH.mkdir()
        try:
            yield SCRATCH
        finally:
            shutil.rmtree(SCRATCH, ignore_errors=True)


def record(target: Path, jobs: int) -> None:
    with _scratch() as scratch:
        runs = [(t, p) for t in transcripts() for p in presets()]
        with ThreadPoolExecutor(jobs) as pool:
            results = dict(pool.map(lambda run: pin_one(*run, scratch), runs))
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(dict(sorted(results.items())), indent=1, sort_keys=True) + "\n")
    print(f"{len(results)} runs pinned in {target}")


def compare(before: Path, after: Path) -> int:
    old = json.loads(before.read_text())
    new = json.loads(after.read_text())
    differ = 0
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key), new.get(key)
        if a == b:
            continue
        differ += 1
        if a is None or b is None:
            print(f"{key}: only in {'after' if a is None else 'before'}")
            continue
        fields = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
        print(f"{key}: {', '.join(fields)} differ")
    print(f"{len(set(old) | set(new)) - differ} identical, {differ} differ")
    return 1 if differ else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    rec = sub.add_parser("record", help="pin the current outputs into a JSON file")
    rec.add_argument("target", type=Path)
    rec.add_argument("--jobs", type=int, default=2)
    cmp = sub.add_parser("compare", help="list the runs whose hashes differ")
    cmp.add_argument("before", type=Path)
    cmp.add_argument("after", type=Path)
    args = parser.parse_args()
    if args.command == "record":
        record(args.target, args.jobs)
        return 0
    return compare(args.before, args.after)


if __name__ == "__main__":
    sys.exit(main())
