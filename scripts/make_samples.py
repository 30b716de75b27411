"""Regenerate the shipped sample bundles under samples/ (each with its truth.json).

    python scripts/make_samples.py            # rewrites samples/<name>/ for every sample below
    python scripts/make_samples.py --check    # regenerate into a temp dir and compare byte for byte

The samples are small on purpose (4 nodes × 8 GPUs, half an hour; `nvidia-smi -q` snapshots gzipped)
so the repository stays under 2 MB of sample data. For a large bundle (the benchmark), call the
simulator directly, e.g. 1,000 nodes × 8 GPUs × one day with two faults:

    forensics simulate -o /data/big --nodes 1000 --gpus-per-node 8 --hours 24 \\
        --fault gpu_lost@417:3+0.8 --fault thermal@12:6+0.3 --seed 42

or from Python (the node files are written by a process pool; the bytes do not depend on it):

    from pathlib import Path
    from forensics.simulate import parse_fault, simulate
    simulate(Path("/data/big"), nodes=1000, hours=24,
             faults=[parse_fault("gpu_lost@417:3+0.8"), parse_fault("thermal@12:6+0.3")], seed=42)
"""

from __future__ import annotations

import argparse
import filecmp
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from forensics.simulate import parse_fault, simulate  # noqa: E402

SAMPLES: dict[str, dict] = {
    # A GPU falls off the bus on one node of four; the job hangs, every other rank's watchdog fires.
    "incident-xid79": {"seed": 9, "nodes": 4, "hours": 0.5, "faults": ["gpu_lost@1:5+0.55"]},
    # One GPU in HW thermal slowdown: the whole synchronous job runs ~30 % slower.
    "thermal-straggler": {"seed": 4, "nodes": 4, "hours": 0.4, "faults": ["thermal@2:3+0.35"]},
    # A healthy job with benign noise (an old application Xid 13 days before, stable IB counters).
    "healthy": {"seed": 10, "nodes": 4, "hours": 0.25, "faults": []},
}


def make(out_root: Path) -> None:
    for name, spec in SAMPLES.items():
        out = out_root / name
        if out.exists():
            shutil.rmtree(out)
        simulate(out, nodes=spec["nodes"], hours=spec["hours"], seed=spec["seed"],
                 faults=[parse_fault(f) for f in spec["faults"]], gzip_snapshots=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare a fresh generation with samples/")
    args = ap.parse_args()
    if not args.check:
        make(ROOT / "samples")
        total = sum(p.stat().st_size for p in (ROOT / "samples").rglob("*") if p.is_file())
        print(f"samples/: {total / 1e6:.2f} MB")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        make(Path(tmp))
        bad = []
        for name in SAMPLES:
            a, b = Path(tmp) / name, ROOT / "samples" / name
            fa = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
            fb = sorted(p.relative_to(b) for p in b.rglob("*") if p.is_file()) if b.exists() else []
            if fa != fb:
                bad.append(f"{name}: file lists differ")
                continue
            bad += [f"{name}/{p}" for p in fa if not filecmp.cmp(a / p, b / p, shallow=False)]
        for line in bad:
            print("differs:", line)
        return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
