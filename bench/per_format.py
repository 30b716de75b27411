"""CPU of the small-file ingest per format, as a worker spends it: the bundle's whole files in the workers'
batches (same-shape files, `ingest_files`), in this process, best of `--reps`; then the CPU of each format's
`parse_many` and of each sniffer over all the files (every file's head goes through every sniffer).

    python bench/per_format.py BUNDLE [--reps 3]

It runs under the workers' environment (`forensics.ingest.WORKER_ENV`: one polars thread, allocators that
keep freed memory), starting itself again once with it: without it, a 1.2 MB log's line cut took ~1 ms of
page faults on fresh memory instead of ~0.4 (or ~0.1 since the one-pass cut).
It also pins itself to one CPU (`ingest.worker_cpus(2)[0]`) and makes its selects sequential
(`ingest.sequential_frames`), as a worker of a 2-worker ingest runs: unpinned, each hand-off to polars' pool
thread could cross CPUs, which the workers do not pay (earlier rounds' figures from it are ~10 % high for it).

Compare trees by running it alternately from each checkout (timings on a shared machine drift by 10-20 %
within an hour: only same-time comparisons mean much).
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from forensics import bundle, ingest
from parsers import _mixed, registry


_STARTED_AS_A_WORKER = "FORENSICS_BENCH_AS_A_WORKER"


def _as_a_worker() -> None:
    """Start this script again, once, under the workers' environment.

    Once, by a marker variable, not by comparing the variables: polars prepends its own settings to
    `_RJEM_MALLOC_CONF` when imported, so the comparison never held and the script started itself forever.
    """
    if os.environ.get(_STARTED_AS_A_WORKER):
        return
    env = {**os.environ, **ingest._worker_env(), _STARTED_AS_A_WORKER: "1"}
    os.execve(sys.executable, [sys.executable, *sys.argv], env)


def main() -> None:
    _as_a_worker()
    if ingest.SEQUENTIAL_FRAMES:
        ingest.sequential_frames()  # (as `ingest._worker_init` does)
    cpus = ingest.worker_cpus(2)
    if cpus:
        # on one CPU, as a worker of a 2-worker ingest is: unpinned, each hand-off to polars' pool thread may
        # cross CPUs and cost more than the workers pay
        ingest._pin_process(cpus[0])
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("bundle", type=Path)
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    b = bundle.open_bundle(a.bundle, Path(tempfile.mkdtemp()))
    files = sorted(b.files, key=lambda f: f.size, reverse=True)
    tasks = ingest._batched(ingest._tasks(files, {}), ingest.BATCH_FILES)
    many: collections.Counter[str] = collections.Counter()
    sniff: collections.Counter[str] = collections.Counter()
    real_many, real_sniff = _mixed.parse_many, registry._safe_sniff

    def timed_many(parser: Any, items: Any) -> Any:
        t = time.process_time()
        try:
            return real_many(parser, items)
        finally:
            many[parser.NAME] += time.process_time() - t

    def timed_sniff(parser: Any, head: bytes, name: str) -> float:
        t = time.process_time()
        try:
            return real_sniff(parser, head, name)
        finally:
            sniff[parser.NAME] += time.process_time() - t

    _mixed.parse_many, registry._safe_sniff = timed_many, timed_sniff  # type: ignore[assignment]
    best: dict[str, tuple[int, float]] = {}
    total = float("inf")
    for _ in range(a.reps):
        many.clear()
        sniff.clear()
        per: dict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0])
        t0 = time.process_time()
        for f, k in tasks:
            group = f if k == ingest.BATCH else (f,)
            t = time.process_time()
            outs = ingest.ingest_files(group, bundle.Limits(), None, None, [None] * len(group))
            dt = time.process_time() - t
            for o in outs:
                x = per[str(o.row.get("format"))]
                x[0] += 1
                x[1] += dt / len(outs)
        total = min(total, time.process_time() - t0)
        for fmt, (n, s) in per.items():
            best[fmt] = (int(n), min(best.get(fmt, (0, float("inf")))[1], s))
    for fmt, (n, s) in sorted(best.items(), key=lambda kv: -kv[1][1]):
        print(f"{fmt:20s} files={n:6d} cpu={s:7.3f} s  {1000 * s / n:6.3f} ms/file")
    print(f"total (best rep) {total:.3f} s  {1000 * total / len(files):.3f} ms/file over {len(files)} files")
    print("parse_many CPU by format (last rep, s):", ", ".join(f"{k} {v:.3f}" for k, v in many.most_common()))
    by_sniffer = ", ".join(f"{k} {v:.3f}" for k, v in sniff.most_common())
    print("sniff CPU by sniffer over all files (last rep, s):", by_sniffer)


if __name__ == "__main__":
    main()
