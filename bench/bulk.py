"""Each line format in bulk, on its own: one large log of a format, ingested, against grep on the same file.

A bundle's ratio to grep is a mix of its formats' ratios: this script says which format pulls a mix down. For
each format it writes (or reuses) one `--mb` MB log with the family's realistic generator (bench/big_*.py)
in `WORK/<format>/gpu-node-001/`, then measures, as bench/run.py does: `forensics ingest` wall time, its CPU
(parent + workers), peak RSS of the process tree, and `grep -rcE 'NCCL WARN|NVRM: Xid'` over the same file
(page cache warm, best of 2, to a pipe), and the ratio grep s / ingest s. A format is read in 16 MB pieces
by both workers, so its ratio is what a bundle made of it alone reaches on this machine.

    python bench/bulk.py [--mb 256] [--work DIR] [--formats nccl syslog megatron ...] [--keep]

The ingest runs as `python -m forensics.cli` in the current folder, which comes first on its import path: to
measure another checkout, run the script from that checkout's folder (`PYTHONPATH` alone is not enough).

Formats (generator, options): nccl (big_nccl); syslog, journal, dmesg (big_kernel styles); megatron,
megatron-bare (without `srun -l`), deepspeed, torchtitan, hf (big_steps seeds); dmon, csv, q, xml, table,
ib, bugreport (big_nvsmi kinds).
Note grep's own speed differs per format (it skims lines without a candidate byte), so the ratios do too.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import resource
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from run import IDLE_READ_CSV_MB_S, calibrate, grep_seconds, timed  # noqa: E402

FORMATS: dict[str, tuple[str, str, dict[str, object]]] = {
    # format: (file name in the node folder, generator module, write() options)
    "nccl": ("nccl-debug.log", "big_nccl", {"seed": 0}),
    "syslog": ("syslog", "big_kernel", {"style": "syslog"}),
    "journal": ("journal.log", "big_kernel", {"style": "journal_iso"}),
    "dmesg": ("dmesg.log", "big_kernel", {"style": "dmesg_ctime"}),
    "megatron": ("train.log", "big_steps", {"seed": 0}),
    "megatron-bare": ("train.log", "big_steps", {"seed": 0, "srun": False}),
    "deepspeed": ("train.log", "big_steps", {"seed": 1}),
    "torchtitan": ("train.log", "big_steps", {"seed": 2}),
    "hf": ("train.log", "big_steps", {"seed": 3}),
    "dmon": ("nvidia-smi-dmon.log", "big_nvsmi", {"kind": "dmon"}),
    "csv": ("nvidia-smi-query.csv", "big_nvsmi", {"kind": "csv"}),
    "q": ("nvidia-smi-q.log", "big_nvsmi", {"kind": "q"}),
    "xml": ("nvidia-smi-qx.xml", "big_nvsmi", {"kind": "xml"}),
    "table": ("nvidia-smi.log", "big_nvsmi", {"kind": "table"}),
    "ib": ("ib-counters.log", "big_nvsmi", {"kind": "ib"}),
    "bugreport": ("nvidia-bug-report.log", "big_nvsmi", {"kind": "bugreport"}),
}


def make(work: Path, fmt: str, mb: float) -> Path:
    """The format's bundle folder, its log written unless one of about `mb` MB is already there."""
    name, module, kw = FORMATS[fmt]
    bundle = work / fmt
    path = bundle / "gpu-node-001" / name
    if not (path.exists() and abs(path.stat().st_size - mb * 1e6) < 0.02 * mb * 1e6 + 1e6):
        shutil.rmtree(bundle, ignore_errors=True)
        path.parent.mkdir(parents=True)
        importlib.import_module(module).write(path, mb, **kw)  # type: ignore[arg-type]
    return bundle


def measure(bundle: Path, out: Path) -> dict[str, object]:
    """Ingest `bundle` into `out` and grep it: the figures of one row."""
    path = next(p for p in bundle.rglob("*") if p.is_file())
    grep_s = grep_seconds(bundle, 1)
    cmd = [sys.executable, "-m", "forensics.cli", "ingest", str(bundle), "-o", str(out), "--force", "-q"]
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall, rss, _ = timed(cmd)
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    m = json.loads((out / "manifest.json").read_text())
    f = m["files"][0]
    mb = path.stat().st_size / 1e6
    return {
        "mb": round(mb, 1),
        "parser": f.get("format"),
        "status": f.get("status"),
        "unrecognized": f.get("unrecognized"),
        "ingest_s": round(wall, 2),
        "cpu_s": round(cpu, 2),
        "cpu_ms_per_16mb": round(1000 * cpu / (mb / 16.777216)),
        "grep_s": round(grep_s, 3),
        "ratio_pct": round(100 * grep_s / wall, 1),
        "peak_tree_rss_mb": round(rss / 1e6),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=float, default=256.0, help="size of each format's log (default 256)")
    ap.add_argument("--work", type=Path, default=None, help="where the logs and outputs go (kept, reused)")
    ap.add_argument("--formats", nargs="+", choices=list(FORMATS), default=list(FORMATS))
    ap.add_argument("--keep", action="store_true", help="keep the logs (with --work they are always kept)")
    a = ap.parse_args()
    work = a.work or Path(tempfile.mkdtemp(prefix="forensics-bulk-"))
    work.mkdir(parents=True, exist_ok=True)
    calib = calibrate(work)
    print(f"machine now: polars read_csv {calib:.0f} MB/s (idle 2-core reference: {IDLE_READ_CSV_MB_S} "
          f"MB/s), load factor {IDLE_READ_CSV_MB_S / calib:.1f}, load average {os.getloadavg()[0]:.1f}",
          flush=True)
    print("| format | parser | MB | ingest s | CPU s | CPU ms / 16 MB | grep s | grep/ingest | peak RSS MB | "
          "status |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for fmt in a.formats:
        bundle = make(work, fmt, a.mb)
        r = measure(bundle, work / f"out-{fmt}")
        shutil.rmtree(work / f"out-{fmt}", ignore_errors=True)
        print(f"| {fmt} | {r['parser']} | {r['mb']} | {r['ingest_s']} | {r['cpu_s']} | "
              f"{r['cpu_ms_per_16mb']} | {r['grep_s']} | {r['ratio_pct']} % | {r['peak_tree_rss_mb']} | "
              f"{r['status']} |", flush=True)
        if not a.work and not a.keep:
            shutil.rmtree(bundle, ignore_errors=True)
    if not a.work and not a.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
