#!/usr/bin/env python3
"""Measure the analysis on simulated bundles: recall, precision, rank-1 accuracy, healthy-bundle quietness.

For every fault kind × seed (plus healthy jobs and pairs of simultaneous faults) at the given sizes:
simulate → ingest → analyze → score (forensics/scoring.py). Prints a table and writes docs/ACCURACY.md.

    python scripts/score_analysis.py                      # the published figures (takes a while)
    python scripts/score_analysis.py --seeds 2 --nodes 16 # quicker
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from forensics.analyze import analyze  # noqa: E402
from forensics.ingest import ingest  # noqa: E402
from forensics.scoring import score  # noqa: E402
from forensics.simulate import FAULT_KINDS, parse_fault, simulate  # noqa: E402


def run_case(work: Path, faults: list[str], nodes: int, hours: float, seed: int) -> tuple[dict, dict, float]:
    bundle, out = work / "bundle", work / "out"
    shutil.rmtree(work, ignore_errors=True)
    truth = simulate(bundle, nodes=nodes, gpus_per_node=8, hours=hours, faults=[parse_fault(f) for f in faults], seed=seed)
    ingest(bundle, out, jobs=2)
    t0 = time.perf_counter()
    doc = analyze(out)
    return truth, doc, time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--nodes", type=int, nargs="+", default=[16, 64])
    ap.add_argument("--hours", type=float, default=1.0)
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "ACCURACY.md")
    ap.add_argument("--kinds", nargs="*", default=None)
    args = ap.parse_args()
    kinds = [k for k in (args.kinds or FAULT_KINDS) if k != "none"]
    cases: list[tuple[str, list[str], int, int]] = []
    for n in args.nodes:
        for seed in range(args.seeds):
            for k in kinds:
                cases.append((k, [k], n, seed))
            cases.append(("none", [], n, seed))
            a, b = kinds[seed % len(kinds)], kinds[(seed * 5 + 3) % len(kinds)]
            if a != b:
                cases.append((f"{a}+{b}", [f"{a}@1", f"{b}@{max(2, n // 2)}"], n, seed))
    rows = []
    tot = {"faults": 0, "found": 0, "serious": 0, "strict": 0, "lenient": 0, "top1": 0, "faulty": 0, "healthy": 0, "healthy_ok": 0}
    with tempfile.TemporaryDirectory() as tmp:
        for label, faults, n, seed in cases:
            truth, doc, secs = run_case(Path(tmp) / "case", faults, n, args.hours, seed)
            s = score(doc, truth)
            tot["faults"] += s.faults
            tot["found"] += s.found
            tot["serious"] += s.serious
            tot["strict"] += s.real_strict
            tot["lenient"] += s.real_lenient
            if s.top1_right is not None:
                tot["faulty"] += 1
                tot["top1"] += s.top1_right
            if s.healthy_ok is not None:
                tot["healthy"] += 1
                tot["healthy_ok"] += s.healthy_ok
            rows.append((label, n, seed, s, secs))
            status = "ok" if not s.misses and not s.false and s.top1_right is not False and s.healthy_ok is not False else "MISS"
            print(f"{label:<28} nodes={n:<4} seed={seed} found {s.found}/{s.faults} serious={s.serious} "
                  f"top1={s.top1_right} healthy_ok={s.healthy_ok} analyze={secs:.2f}s {status}"
                  + (f" misses={s.misses}" if s.misses else "") + (f" false={s.false}" if s.false else ""), flush=True)
    recall = tot["found"] / max(1, tot["faults"])
    p_strict = tot["strict"] / max(1, tot["serious"])
    p_len = tot["lenient"] / max(1, tot["serious"])
    top1 = tot["top1"] / max(1, tot["faulty"])
    lines = [
        "# Analysis accuracy on simulated bundles",
        "",
        f"Produced by `python scripts/score_analysis.py --seeds {args.seeds} --nodes {' '.join(map(str, args.nodes))} --hours {args.hours}`;"
        " matching rules in `forensics/scoring.py`.",
        "",
        "| measure | value | target |",
        "| --- | --- | --- |",
        f"| recall (injected faults found, right node/GPU/category, ≥ medium) | {recall:.3f} ({tot['found']}/{tot['faults']}) | ≥ 0.95 |",
        f"| precision, strict (≥ medium findings that match an injected fault) | {p_strict:.3f} ({tot['strict']}/{tot['serious']}) | ≥ 0.95 |",
        f"| precision, lenient (… or point at a faulty node) | {p_len:.3f} ({tot['lenient']}/{tot['serious']}) | |",
        f"| rank-1 finding is the true cause (faulty bundles) | {top1:.3f} ({tot['top1']}/{tot['faulty']}) | ≥ 0.90 |",
        f"| healthy bundles with no critical/high finding | {tot['healthy_ok']}/{tot['healthy']} | all |",
        "",
        "| case | nodes | seed | found | ≥medium findings | rank-1 right | analyze s | misses / false |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for label, n, seed, s, secs in rows:
        notes = "; ".join(s.misses + s.false)
        lines.append(f"| {label} | {n} | {seed} | {s.found}/{s.faults} | {s.serious} | {s.top1_right if s.top1_right is not None else ('quiet' if s.healthy_ok else 'NOISY')} | {secs:.2f} | {notes} |")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines[4:10]))


if __name__ == "__main__":
    main()
