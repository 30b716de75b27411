#!/usr/bin/env python3
"""Look for wrong verdicts on varied simulated incidents: the cases `score_analysis.py` does not vary.

Every fault kind at 10, 50 and 92 % of the run, on a random node of a bundle of random size and window, plus
healthy jobs and pairs of faults; with `--large`, bigger bundles and longer windows, half with the
framework's lines in the worker logs (`mixed_logs`) and a third with gzipped snapshots. Prints each case and,
for the wrong ones, what was missed, what was found wrongly and the top findings; exits 1 when any was
wrong. The draw is fixed by `--seed`, so a case found wrong can be run again alone from its line.

    python scripts/sweep_analysis.py --seed 40            # ~2 minutes
    python scripts/sweep_analysis.py --seed 42 --large    # ~15 minutes

A fault that `truth.json` says left no trace is not counted missed (`forensics/scoring.py`). Faults begun in
the last seconds of a short window may still leave none the simulator knows of (the last telemetry sample and
the end snapshot before them): such a case is listed wrong, and its line says when the fault began.
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from forensics.analyze import analyze  # noqa: E402
from forensics.ingest import ingest  # noqa: E402
from forensics.scoring import score  # noqa: E402
from forensics.simulate import FAULT_KINDS, parse_fault, simulate  # noqa: E402

Case = tuple[list[str], int, float, int]


def draw(seed: int, large: bool) -> list[Case]:
    """(faults, nodes, hours, simulator seed) of each case."""
    r = random.Random(seed)
    kinds = [k for k in FAULT_KINDS if k != "none"]
    sizes, windows = ([16, 48, 96], [1.0, 3.0, 5.0]) if large else ([6, 12, 24, 40], [0.15, 0.7, 1.5, 2.5])
    cases: list[Case] = []
    for k in kinds:
        for frac in (0.1, 0.5, 0.92):
            n, h, s = r.choice(sizes), r.choice(windows), r.randrange(1000)
            cases.append(([f"{k}@{r.randrange(n)}+{frac}"], n, h, s))
    for _ in range(4):
        cases.append(([], r.choice([6, 24, 40]), r.choice([0.3, 1.5, 2.5]), r.randrange(1000)))
    for _ in range(8):
        a, b = r.sample(kinds, 2)
        n, h = r.choice([12, 24]), r.choice([0.7, 1.5])
        cases.append(([f"{a}@1+{r.choice([0.2, 0.6])}", f"{b}@{n - 2}+{r.choice([0.3, 0.8])}"], n, h, r.randrange(1000)))
    return cases


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=40)
    ap.add_argument("--large", action="store_true")
    args = ap.parse_args()
    cases = draw(args.seed, args.large)
    wrong = 0
    with tempfile.TemporaryDirectory() as tmp:
        for faults, n, h, seed in cases:
            work = Path(tmp) / "case"
            shutil.rmtree(work, ignore_errors=True)
            mixed, gz = args.large and seed % 2 == 0, args.large and seed % 3 == 0
            truth = simulate(work / "bundle", nodes=n, gpus_per_node=8, hours=h, faults=[parse_fault(f) for f in faults],
                             seed=seed, mixed_logs=mixed, gzip_snapshots=gz)
            ingest(work / "bundle", work / "out", jobs=2)
            doc = analyze(work / "out")
            s = score(doc, truth)
            ok = not s.misses and not s.false and s.top1_right is not False and s.healthy_ok is not False
            wrong += not ok
            line = f"{'ok   ' if ok else 'WRONG'} {' '.join(faults) or 'healthy'} nodes={n} hours={h} seed={seed} mixed_logs={mixed} gzip={gz}"
            if not ok:
                starts = ", ".join(f"{f['kind']} at {f['start']}" for f in truth["faults"])
                top = "; ".join(f"[{f['severity']}] {f['title']}" for f in doc["findings"][:4])
                line += f"\n      missed {s.misses} wrongly found {s.false}\n      {starts} (window end {truth['end']})\n      top: {top}"
            print(line, flush=True)
    print(f"{wrong} of {len(cases)} wrong")
    sys.exit(1 if wrong else 0)


if __name__ == "__main__":
    main()
