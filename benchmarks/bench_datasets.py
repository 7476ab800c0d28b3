"""The dataset case of ``make bench``: ``ctx reduce --engine ray`` with 1 and 2 workers.

Builds a JSONL dataset of real trajectories (every file of ../shared/transcripts, as
text in a ``trajectory`` column, replicated with varied ids) of ``BENCH_DATASET_MB``
MiB (default 20; ``BENCH_DATASET_MB=1000`` for the ~1 GB case), ``BENCH_DATASET_ROWS``
rows per file (default 4), and reduces it as the CLI does, in one run:

* ``reduce_path`` (what ``ctx reduce --engine ray DIR`` calls: whole files, rows as
  text, outputs named after their inputs) on Ray Data in local mode (2 CPUs) with 1,
  then 2 actors;
* ``ctx reduce DIR --jobs 2`` on the same trajectories as one file each;
* the crossover: the same 1 and 2 actors on the first files of the dataset, for the
  sizes in ``BENCH_DATASET_SWEEP`` (MiB, default ``5,10,20,40``), to find from which
  size the second worker pays (``>= 1.3x``).

Prints rows/s, MiB/s, the scaling from 1 to 2 workers and the peak RSS of each worker
(Ray: the highest VmHWM of a FileBatch actor process; ctx: of its largest process).
Ray's start-up is timed apart and left out; starting the actors (each loads the
tokenizer) is part of every run, as it is of every ``ctx reduce --engine ray``.
Replicas share their texts, so their blobs are stored once.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
SHARED = REPO.parent / "shared" / "transcripts"
MB = 1024 * 1024
CONFIG = {
    "stages": [
        {"use": "truncate_tool_output"},
        {"use": "clear_tool_results"},
    ]
}


class PeakRss:
    """Polls /proc for processes whose command line names ``marker``; keeps each's VmHWM."""

    def __init__(self, marker: str) -> None:
        self.marker = marker.encode()
        self.peaks: dict[int, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _poll(self) -> None:
        while not self._stop.wait(0.2):
            for entry in os.listdir("/proc"):
                if not entry.isdigit():
                    continue
                try:
                    if self.marker not in Path(f"/proc/{entry}/cmdline").read_bytes():
                        continue
                    for line in Path(f"/proc/{entry}/status").read_text().splitlines():
                        if line.startswith("VmHWM:"):
                            kb = int(line.split()[1])
                            self.peaks[int(entry)] = max(self.peaks.get(int(entry), 0), kb / 1024)
                except OSError:
                    continue


def build(work: Path, target_mb: float, rows_per_file: int) -> tuple[Path, Path, int, float]:
    """The dataset (JSONL parts) and the same trajectories as files; rows and MiB."""
    pool = sorted(p for p in SHARED.iterdir() if p.is_file() and p.suffix != ".md")
    texts = [(p, p.read_text("utf-8")) for p in pool]
    data, files = work / "dataset", work / "files"
    data.mkdir()
    files.mkdir()
    rows, size, part = 0, 0, 0
    lines: list[str] = []
    while size < target_mb * MB:
        path, text = texts[rows % len(texts)]
        row_id = f"{rows:06d}-{path.stem}"
        lines.append(json.dumps({"id": row_id, "trajectory": text}) + "\n")
        (files / f"{row_id}{''.join(path.suffixes)}").write_text(text, "utf-8")
        size += len(text.encode("utf-8"))
        rows += 1
        if len(lines) == rows_per_file:
            (data / f"part-{part:04d}.jsonl").write_text("".join(lines))
            lines, part = [], part + 1
    if lines:
        (data / f"part-{part:04d}.jsonl").write_text("".join(lines))
    return data, files, rows, size / MB


def ray_case(data: Path, work: Path, actors: int) -> tuple[float, float, int]:
    """Seconds for ``reduce_path`` over ``data`` with ``actors`` workers, the peak RSS of
    a worker, and the rows reduced."""
    from ctxcli.datasets.ray import DatasetOptions, reduce_path

    out = work / f"ray-out-{actors}-{time.monotonic_ns()}"
    options = DatasetOptions(
        offload_uri=str(out) + ".offload", column="trajectory", concurrency=actors
    )
    with PeakRss("FileBatch") as rss:
        start = time.perf_counter()
        summary = reduce_path(str(data), str(out), CONFIG, options)
        seconds = time.perf_counter() - start
    assert summary.errors == 0, summary
    return seconds, max(rss.peaks.values(), default=0.0), summary.rows


def sweep(data: Path, work: Path, sizes_mb: list[float]) -> list[tuple[float, int, float, float]]:
    """For each size: the first files of ``data`` up to it, timed with 1 and 2 actors."""
    parts = sorted(data.iterdir())
    out: list[tuple[float, int, float, float]] = []
    for target in sizes_mb:
        subset = work / f"sweep-{target:g}"
        subset.mkdir()
        size = 0
        for part in parts:
            if size >= target * MB:
                break
            shutil.copy(part, subset / part.name)
            size += part.stat().st_size
        t1, _, _ = ray_case(subset, work, 1)
        t2, _, _ = ray_case(subset, work, 2)
        out.append((size / MB, len(list(subset.iterdir())), t1, t2))
    return out


def _burn(_: int) -> None:
    x = 0
    for i in range(20_000_000):
        x += i


def machine_scaling() -> float:
    """What a second process gains on this machine now (a CPU-bound loop, 2 jobs).

    On a shared machine the second core is rarely free: no worker pool can scale
    better than this, so the Ray scaling is printed next to it.
    """
    import multiprocessing

    times = []
    for n in (1, 2):
        start = time.perf_counter()
        with multiprocessing.get_context("spawn").Pool(n) as pool:
            pool.map(_burn, range(2))
        times.append(time.perf_counter() - start)
    return times[0] / times[1]


_RSS = (
    "import resource, subprocess, sys; subprocess.run(sys.argv[1:], check=False, "
    "stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL); "
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
)


def jobs_case(files: Path, work: Path, jobs: int) -> tuple[float, float]:
    out = work / f"jobs-out-{jobs}"
    cmd = [sys.executable, "-m", "ctxcli", "reduce", str(files), "-o", str(out), "-q"]
    env = {**os.environ, "CTX_NO_CACHE": "1", "CTX_NO_PLUGINS": "1"}
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", _RSS, *cmd, "-j", str(jobs)],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    return time.perf_counter() - start, int(proc.stdout.strip()) / 1024


def print_results(
    results: list[tuple[str, float, float, str]],
    rows: int,
    mbytes: float,
    crossover: list[tuple[float, int, float, float]],
    machine: float,
) -> None:
    """The cases' table, the crossover sweep and the 1.7x target."""
    print(
        f"{'dataset case':28} {'seconds':>8} {'rows/s':>8} {'MiB/s':>7} {'peak RSS/worker':>16}  note"
    )
    for name, s, rss, note in results:
        print(f"{name:28} {s:8.2f} {rows / s:8.1f} {mbytes / s:7.2f} {rss:14.0f}MB  {note}")
    print(f"\n{'MiB':>6} {'files':>6} {'1 worker s':>11} {'2 workers s':>12} {'scaling':>8}")
    for size, nfiles, a, b in crossover:
        print(f"{size:6.1f} {nfiles:6d} {a:11.2f} {b:12.2f} {a / b:7.2f}x")
    print(f"  (a CPU-bound loop gets {machine:.2f}x from a second process here, now)")
    pays = next((size for size, _n, a, b in crossover if a / b >= 1.3), None)
    where = f"from {pays:.1f} MiB" if pays is not None else "at none of these sizes"
    print(f"\n  the second worker pays (>= 1.3x) {where}")
    scaling = results[0][1] / results[1][1]
    print(
        f"  [{'met' if scaling >= 1.7 else 'MISSED'}] Ray 1 -> 2 workers >= 1.7x ({scaling:.2f}x)"
    )


def main() -> int:
    try:
        import ray
    except ImportError:
        print("dataset case: Ray is not installed (pip install -e '.[ray]'); skipped")
        return 0
    if not SHARED.is_dir():
        print("dataset case: ../shared/transcripts is absent; skipped")
        return 0
    target = float(os.environ.get("BENCH_DATASET_MB", "20"))
    per_file = int(os.environ.get("BENCH_DATASET_ROWS", "4"))
    sizes = [float(x) for x in os.environ.get("BENCH_DATASET_SWEEP", "5,10,20,40").split(",")]
    work = Path(tempfile.mkdtemp(prefix="ctx-bench-ds-"))
    results: list[tuple[str, float, float, str]] = []
    try:
        data, files, rows, mbytes = build(work, max(target, *sizes), per_file)

        # Ray's processes never outlive the bench: SIGTERM and a 10-minute alarm both
        # end it through the finally that shuts Ray down.
        def stop(signum: int, _frame: object) -> None:
            raise SystemExit(f"dataset case: stopped by signal {signum}")

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGALRM, stop)
        signal.alarm(int(os.environ.get("BENCH_DATASET_TIMEOUT", "600")))
        start = time.perf_counter()
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
        init_s = time.perf_counter() - start
        try:
            from ray.data import DataContext

            DataContext.get_current().enable_progress_bars = False
            ray_case(data, work, 2)  # warm-up: the first actors of a session start slower
            machine = machine_scaling()
            crossover = sweep(data, work, sizes)
            t1, r1, rows = ray_case(data, work, 1)
            t2, r2, _ = ray_case(data, work, 2)
        finally:
            signal.alarm(0)
            ray.shutdown()
        j2, rj = jobs_case(files, work, 2)
        results = [
            ("Ray Data, 1 worker", t1, r1, ""),
            ("Ray Data, 2 workers", t2, r2, f"{t1 / t2:.2f}x"),
            ("ctx reduce DIR --jobs 2", j2, rj, f"{j2 / t2:.2f}x the Ray time"),
        ]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(
        f"\ndataset: {rows} real trajectories (../shared/transcripts replicated), {mbytes:.1f} "
        f"MiB, {per_file} rows per file; Ray start-up {init_s:.1f}s (not counted)\n"
    )
    print_results(results, rows, mbytes, crossover, machine)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
