"""The dataset case of ``make bench``: Ray Data with 1 and 2 workers, and ``ctx reduce -j 2``.

Builds a JSONL dataset of real trajectories (every file of ../shared/transcripts, as
text in a ``trajectory`` column, replicated with varied ids) of ``BENCH_DATASET_MB``
MiB (default 20; ``BENCH_DATASET_MB=1000`` for the ~1 GB, ~1,200-row case of the issue)
and reduces the same rows three ways, in one run:

* ``reduce_dataset`` on Ray Data (local mode, 2 CPUs) with 1 actor, then 2 actors;
* ``ctx reduce DIR --jobs 2`` on the same trajectories as one file each.

Prints rows/s, MiB/s, the scaling from 1 to 2 workers and the peak RSS of each worker
(Ray: the highest VmHWM of a ReduceBatch actor process; ctx: of its largest process).
Ray's start-up is timed apart and left out of the throughput. Replicas share their
texts, so their blobs are stored once (as in a dataset of repeated runs).
"""

from __future__ import annotations

import json
import os
import re
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


def build(work: Path, target_mb: float) -> tuple[Path, Path, int, float]:
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
        if len(lines) == 50:
            (data / f"part-{part:04d}.jsonl").write_text("".join(lines))
            lines, part = [], part + 1
    if lines:
        (data / f"part-{part:04d}.jsonl").write_text("".join(lines))
    return data, files, rows, size / MB


def ray_case(data: Path, work: Path, actors: int, rows: int) -> tuple[float, float, float]:
    """Seconds to reduce and write the dataset with ``actors`` workers, seconds of the
    reduce operator alone (from Ray's stats), and the peak RSS of a worker.

    Trajectories are large rows: one row per block and per batch spreads them evenly.
    """
    from ctxcli.datasets.ray import read_dataset, reduce_dataset, write_dataset

    out, off = work / f"ray-out-{actors}", work / f"ray-off-{actors}"
    with PeakRss("ReduceBatch") as rss:
        start = time.perf_counter()
        ds = read_dataset(str(data), fmt="jsonl", min_blocks=rows)
        reduced = reduce_dataset(
            ds, CONFIG, offload_uri=str(off), column="trajectory", concurrency=actors, batch_size=1
        ).materialize()
        write_dataset(reduced, str(out), fmt="jsonl")
        seconds = time.perf_counter() - start
    m = re.search(r"MapBatches\(ReduceBatch\).*? in ([\d.]+)s", reduced.stats())
    return seconds, float(m.group(1)) if m else float("nan"), max(rss.peaks.values(), default=0.0)


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
    work = Path(tempfile.mkdtemp(prefix="ctx-bench-ds-"))
    results: list[tuple[str, float, float, str]] = []
    try:
        data, files, rows, mbytes = build(work, target)

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
            t1, op1, r1 = ray_case(data, work, 1, rows)
            t2, op2, r2 = ray_case(data, work, 2, rows)
        finally:
            signal.alarm(0)
            ray.shutdown()
        j2, rj = jobs_case(files, work, 2)
        results = [
            ("Ray Data, 1 worker", t1, r1, f"reduce operator {op1:.2f}s"),
            (
                "Ray Data, 2 workers",
                t2,
                r2,
                f"{t1 / t2:.2f}x; operator {op2:.2f}s ({op1 / op2:.2f}x)",
            ),
            ("ctx reduce DIR --jobs 2", j2, rj, f"{j2 / t2:.2f}x the Ray time"),
        ]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(
        f"\ndataset: {rows} real trajectories (../shared/transcripts replicated), {mbytes:.1f} MiB; "
        f"Ray start-up {init_s:.1f}s (not counted)\n"
    )
    print(
        f"{'dataset case':28} {'seconds':>8} {'rows/s':>8} {'MiB/s':>7} {'peak RSS/worker':>16}  note"
    )
    for name, s, rss, note in results:
        print(f"{name:28} {s:8.2f} {rows / s:8.1f} {mbytes / s:7.2f} {rss:14.0f}MB  {note}")
    scaling = t1 / t2
    print(
        f"\n  [{'met' if scaling >= 1.7 else 'MISSED'}] Ray 1 -> 2 workers >= 1.7x ({scaling:.2f}x)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
