#!/usr/bin/env python
"""Ingest benchmark (a script, not a test): one run over one bundle, compared with grep on the same files.

Makes a bundle (or takes one), then measures, on the same files:
  bytes, lines, ingest wall time and MB/s, peak RSS of the whole process tree (parent + workers,
  sampled from /proc every 50 ms) and the largest single process (getrusage children),
  `grep -rcE 'NCCL WARN|NVRM: Xid'` wall time and ingest/grep throughput ratio,
  analyze time and peak RSS, report time, peak RSS and size, end-to-end time (ingest + analyze + report).

Bundles:
  --bundle PATH                    an existing bundle (folder or archive)
  --simulate N                     `forensics.simulate.simulate` with N nodes (--hours, --gpus-per-node)
  --synthetic N --mb-per-node M    N node folders of mixed text (NCCL INFO/WARN lines, dmesg with a few
                                   XIDs, step lines, nvidia-smi CSV), about M MB per node
  --big-file-mb M                  one node with a single M MB mixed log
  --big-logs M                     a few large logs, M MB in all, each made by its family's realistic
                                   generator (bench/big_*.py): an NCCL debug log, a syslog, a training
                                   log, an nvidia-smi dmon loop and a --query-gpu CSV loop (the
                                   few-multi-GB-logs case)

Examples (keep runs short on a shared machine):
  python bench/run.py --synthetic 200 --mb-per-node 1          # many small per-node files
  python bench/run.py --big-file-mb 1000                       # one large log
  python bench/run.py --big-logs 2000 --skip-report            # a few large logs of every family
  python bench/run.py --simulate 1000 --hours 1 --skip-report  # the 1,000-node bundle
Add --results bench/RESULTS.md to append the run as a table row.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

GREP_PATTERN = "NCCL WARN|NVRM: Xid"


# ----------------------------------------------------------------------------- synthetic text


def _node_lines(host: str, rng: random.Random) -> dict[str, list[str]]:
    """One screenful of each file kind for `host`; repeated (with varying numbers) to reach a size."""
    pid = rng.randint(1000, 99999)
    nccl = [
        f"{host}:{pid}:{pid + 7} [{g}] NCCL INFO Channel {c:02d}/0 : {g} -> {(g + 1) % 8} via P2P/IPC/read"
        for g in range(8)
        for c in range(4)
    ]
    nccl += [
        f"{host}:{pid}:{pid + 7} [{g}] NCCL INFO comm 0x55d0c{g}a0 rank {g} nranks 64 cudaDev {g} "
        f"busId {0x18 + g * 0x10:02x}000 commId 0x1f2e3d4c5b6a7988 - Init COMPLETE"
        for g in range(8)
    ]
    steps = [
        f"[2026-11-29 10:{m:02d}:{s:02d}] iteration {m * 60 + s:>6}/ 100000 | consumed samples: {m * 3840} | "
        f"elapsed time per iteration (ms): {1500 + rng.random() * 40:.1f} | learning rate: 1.5E-04 | "
        f"lm loss: {2.5 - m * 0.001:.6E} | loss scale: 1.0 |"
        for m in range(0, 10)
        for s in range(0, 60, 20)
    ]
    dmesg = [
        f"[{t:>5}.{rng.randint(0, 999999):06d}] mlx5_core 0000:{0x0c + t % 4:02x}:00.0: "
        "mlx5_pcie_event:299:(pid 1234): PCIe slot advertised sufficient power (27W)."
        for t in range(10, 40)
    ] + [
        f"[{t:>5}.000000] usb 1-1: new high-speed USB device number {t} using xhci_hcd" for t in range(40, 60)
    ]
    return {"nccl": nccl, "steps": steps, "dmesg": dmesg}


def _write_repeated(path: Path, block: list[str], target: int, rare: list[str], rng: random.Random) -> None:
    text = "\n".join(block) + "\n"
    reps = max(1, target // len(text))
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh:
        for i in range(reps):
            fh.write(text)
            if rare and rng.random() < 0.02:
                fh.write(rng.choice(rare).format(i=i) + "\n")


def synth_node(root: Path, host: str, mb: float, seed: int, single_file: bool = False) -> None:
    rng = random.Random(seed)
    ls = _node_lines(host, rng)
    size = int(mb * 1024**2)
    warn = [
        f"{host}:1234:1240 [3] NCCL WARN NET/IB : Got completion from peer 10.0.0.{{i}}<46532> with error 12",
        f"{host}:1234:1240 [3] transport/net_ib.cc:1696 NCCL WARN NET/IB : mlx5_3:1 async event: port error",
    ]
    xid = [
        "[{i:>5}.123456] NVRM: Xid (PCI:0000:3b:00): 79, pid=2342, name=python, GPU has fallen off the bus.",
        "[{i:>5}.223456] NVRM: Xid (PCI:0000:3b:00): 94, pid=2342, name=python, Contained ECC error.",
    ]
    if single_file:
        _write_repeated(root / host / "train.log", ls["nccl"] + ls["steps"], size, warn, rng)
        return
    _write_repeated(root / host / "nccl.log", ls["nccl"] + ls["steps"], int(size * 0.6), warn, rng)
    _write_repeated(root / host / "dmesg.log", ls["dmesg"], int(size * 0.3), xid, rng)
    csv = ["timestamp, index, pci.bus_id, utilization.gpu [%], temperature.gpu, power.draw [W]"]
    csv += [
        f"2026/11/29 10:{m:02d}:{s:02d}.000, {g}, 00000000:{0x18 + g * 0x10:02X}:00.0, {90 + g % 7} %, "
        f"{60 + g}, {650.5 + g:.2f} W"
        for m in range(60)
        for s in range(0, 60, 30)
        for g in range(8)
    ]
    path = root / host / "nvidia-smi-query.csv"
    text = "\n".join(csv) + "\n"
    reps = max(1, int(size * 0.1) // len(text))
    with open(path, "w") as fh:
        fh.write(csv[0] + "\n")
        body = "\n".join(csv[1:]) + "\n"
        for _ in range(reps):
            fh.write(body)


BIG_LOGS = (
    # (path in the bundle, generator module, share of the bundle's bytes, extra arguments)
    ("gpu-node-001/nccl-debug.log", "big_nccl", 0.30, {}),
    ("gpu-node-002/syslog", "big_kernel", 0.25, {"style": "syslog"}),
    ("gpu-node-003/train.log", "big_steps", 0.25, {}),
    ("gpu-node-004/nvidia-smi-dmon.log", "big_nvsmi", 0.10, {"kind": "dmon"}),
    ("gpu-node-005/nvidia-smi-query.csv", "big_nvsmi", 0.10, {"kind": "csv"}),
)


def big_logs(root: Path, mb: float) -> None:
    """A bundle of a few large logs, `mb` MB in all, from the families' generators (bench/big_*.py)."""
    import importlib

    sys.path.insert(0, str(Path(__file__).parent))
    for i, (rel, module, share, kw) in enumerate(BIG_LOGS):
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        importlib.import_module(module).write(path, mb * share, seed=i, **kw)


# ----------------------------------------------------------------------------- measuring


class TreeRss:
    """Samples the summed RSS of a process and all its descendants (from /proc), keeping the peak."""

    def __init__(self, pid: int, every: float = 0.05) -> None:
        self.pid = pid
        self.every = every
        self.peak = 0
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _tree(self) -> list[int]:
        parents: dict[int, int] = {}
        for d in os.listdir("/proc"):
            if d.isdigit():
                try:
                    with open(f"/proc/{d}/stat") as fh:
                        fields = fh.read().rsplit(")", 1)[1].split()
                    parents[int(d)] = int(fields[1])
                except (OSError, IndexError, ValueError):
                    pass
        tree, frontier = [self.pid], [self.pid]
        while frontier:
            nxt = [p for p, pp in parents.items() if pp in frontier]
            tree.extend(nxt)
            frontier = nxt
        return tree

    def _rss(self, pid: int) -> int:
        try:
            with open(f"/proc/{pid}/statm") as fh:
                return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, IndexError, ValueError):
            return 0

    def _run(self) -> None:
        tick = 0
        tree = [self.pid]
        while not self._stop.is_set():
            if tick % 10 == 0:  # re-walk the tree twice a second; sum RSS every tick
                tree = self._tree()
            self.peak = max(self.peak, sum(self._rss(p) for p in tree))
            tick += 1
            time.sleep(self.every)

    def stop(self) -> int:
        self._stop.set()
        self._t.join()
        return self.peak


def grep_seconds(bundle: Path, nfiles: int) -> float:
    """`grep -rcE GREP_PATTERN` over the bundle's files, best of 2, the page cache warmed first (for the
    ingest too: it runs after) unless the files are too many to name on one command line."""
    if nfiles < 20000:
        files = [str(p) for p in bundle.rglob("*") if p.is_file()]
        subprocess.run(["cat", *files], stdout=subprocess.DEVNULL, check=False)
    greps = []
    for _ in range(2):
        g0 = time.perf_counter()
        # to a pipe, not /dev/null: GNU grep stops at the first match when its output is /dev/null
        subprocess.run(["grep", "-rcE", GREP_PATTERN, str(bundle)], stdout=subprocess.PIPE, check=False)
        greps.append(time.perf_counter() - g0)
    return min(greps)


def timed(cmd: list[str], **kw: object) -> tuple[float, int, subprocess.CompletedProcess[bytes]]:
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)  # type: ignore[call-overload]
    sampler = TreeRss(proc.pid)
    out, err = proc.communicate()
    wall = time.perf_counter() - t0
    peak = sampler.stop()
    res = subprocess.CompletedProcess(cmd, proc.returncode, out, err)
    if proc.returncode not in (0, 1):
        sys.stderr.write(err.decode(errors="replace")[-3000:])
        raise SystemExit(f"command failed ({proc.returncode}): {' '.join(cmd)}")
    return wall, peak, res


IDLE_READ_CSV_MB_S = 1600
"""polars read_csv line loading on this kind of machine when idle (shared/DESIGN.md, median of 5)."""


def calibrate(work: Path) -> float:
    """MB/s of polars' line loader over a 64 MB text file now: how loaded is the shared machine?

    Comparing it with the idle figure gives a factor to read the run's absolute times against
    (grep, short and memory-bound, suffers much less from the load than a minutes-long ingest).
    """
    import polars as pl

    p = work / "calibrate.txt"
    line = b"node-0001:1234:1240 [3] NCCL INFO Channel 00/0 : 3 -> 4 via P2P/IPC/read some more text\n"
    p.write_bytes(line * (64 * 1024**2 // len(line)))
    p.read_bytes()
    t0 = time.perf_counter()
    pl.read_csv(p, separator="\x1f", has_header=False, quote_char=None, encoding="utf8-lossy", infer_schema=False)
    dt = time.perf_counter() - t0
    size = p.stat().st_size
    p.unlink()
    return size / 1e6 / max(dt, 1e-9)


def bundle_stats(bundle: Path) -> tuple[int, int, int]:
    files = [p for p in bundle.rglob("*") if p.is_file() and p.name != "truth.json"]
    nbytes = sum(p.stat().st_size for p in files)
    lines = 0
    for p in files:
        with open(p, "rb") as fh:
            while blk := fh.read(1 << 24):
                lines += blk.count(b"\n")
    return len(files), nbytes, lines


PACKAGES = ("forensics", "parsers", "reports")
"""The tool's packages in a source tree, compiled to bytecode before it is measured (`compile_tree`)."""


def compile_tree(tree: Path) -> None:
    """Write the bytecode of `tree`'s packages (`compileall`, whatever PYTHONDONTWRITEBYTECODE says), as an
    install does: where the environment forbids writing it (this project's machines set
    PYTHONDONTWRITEBYTECODE=1), a checkout without it (a fresh worktree, or modules changed since) has every
    process of a run, the parent and each worker, compile them again: ~0.25 s of CPU each for all of them (a
    run of the parent and two workers ~0.75 s, 12 % of a 100-node bundle's ingest, measured as the same
    revision against itself). Bytecode already up to date is left as it is."""
    dirs = [str(tree / d) for d in PACKAGES if (tree / d).is_dir()]
    got = subprocess.run([sys.executable, "-m", "compileall", "-q", *dirs], capture_output=True, text=True)
    if got.returncode:
        raise SystemExit(f"{tree}: its modules did not compile ({got.stderr.strip()[-500:]})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--bundle", type=Path)
    src.add_argument("--simulate", type=int, metavar="NODES")
    src.add_argument("--synthetic", type=int, metavar="NODES")
    src.add_argument("--big-file-mb", type=float)
    src.add_argument("--big-logs", type=float, metavar="MB")
    ap.add_argument("--mb-per-node", type=float, default=1.0)
    ap.add_argument("--hours", type=float, default=1.0)
    ap.add_argument("--gpus-per-node", type=int, default=8)
    ap.add_argument("--jobs", type=int, default=0)
    ap.add_argument("--work", type=Path, default=None, help="where to put the bundle and OUT (default: a temp dir)")
    ap.add_argument("--keep", action="store_true", help="keep the bundle and OUT")
    ap.add_argument("--skip-report", action="store_true", help="ingest and grep only")
    ap.add_argument("--results", type=Path, help="append a Markdown row to this file")
    ap.add_argument("--label", default="")
    a = ap.parse_args()

    work = a.work or Path(tempfile.mkdtemp(prefix="forensics-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    if a.bundle:
        bundle, kind = a.bundle, f"bundle {a.bundle}"
    elif a.simulate:
        from forensics.simulate import simulate

        bundle = work / "bundle"
        shutil.rmtree(bundle, ignore_errors=True)
        simulate(bundle, nodes=a.simulate, gpus_per_node=a.gpus_per_node, hours=a.hours, faults=[], seed=1)
        kind = f"simulate {a.simulate} nodes × {a.gpus_per_node} GPUs, {a.hours} h"
    elif a.synthetic:
        bundle = work / "bundle"
        shutil.rmtree(bundle, ignore_errors=True)
        for i in range(a.synthetic):
            synth_node(bundle, f"node-{i:04d}", a.mb_per_node, seed=i)
        kind = f"synthetic {a.synthetic} nodes × {a.mb_per_node} MB (3 files each)"
    elif a.big_logs:
        bundle = work / "bundle"
        shutil.rmtree(bundle, ignore_errors=True)
        big_logs(bundle, a.big_logs)
        kind = f"{len(BIG_LOGS)} large logs, {a.big_logs:.0f} MB in all"
    else:
        bundle = work / "bundle"
        shutil.rmtree(bundle, ignore_errors=True)
        synth_node(bundle, "node-0001", a.big_file_mb, seed=0, single_file=True)
        kind = f"one {a.big_file_mb:.0f} MB log"
    gen = time.perf_counter() - t0
    nfiles, nbytes, nlines = bundle_stats(bundle)
    mb = nbytes / 1e6
    print(f"bundle: {kind}: {nfiles} files, {mb:.1f} MB, {nlines} lines (made in {gen:.1f} s)", flush=True)

    grep_s = grep_seconds(bundle, nfiles)

    calib = calibrate(work)
    print(f"machine now: polars read_csv {calib:.0f} MB/s (idle 2-core reference: {IDLE_READ_CSV_MB_S} MB/s)",
          flush=True)

    import forensics  # (the tree this interpreter runs the tool from)

    compile_tree(Path(forensics.__file__).resolve().parents[1])
    out = work / "out"
    fx = [sys.executable, "-m", "forensics.cli"]
    cmd = [*fx, "ingest", str(bundle), "-o", str(out), "--force", "-q"]
    if a.jobs:
        cmd += ["-j", str(a.jobs)]
    load_before = os.getloadavg()[0]
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    ing_s, ing_rss, _ = timed(cmd)
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    # CPU of the ingest and its (waited-for) workers: less sensitive than wall time to a loaded machine
    ing_cpu = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    load_after = os.getloadavg()[0]
    children = ru1.ru_maxrss * 1024
    manifest = json.loads((out / "manifest.json").read_text())
    tot = manifest["totals"]
    res = {
        "label": a.label or kind,
        "files": nfiles,
        "mb": round(mb, 1),
        "lines": nlines,
        "parsed": tot["parsed_lines"],
        "unrecognized": tot["unrecognized_lines"],
        "ingest_s": round(ing_s, 2),
        "ingest_mb_s": round(mb / ing_s, 1),
        "ingest_cpu_s": round(ing_cpu, 2),
        "ingest_cpu_ms_per_file": round(1000 * ing_cpu / max(nfiles, 1), 1),
        "grep_ratio_by_cpu_pct": round(100 * grep_s / max(ing_cpu, 1e-9), 2),
        "loadavg_1min_before_after": [round(load_before, 1), round(load_after, 1)],
        "grep_s": round(grep_s, 3),
        "grep_mb_s": round(mb / grep_s, 1),
        "ratio_pct": round(100 * grep_s / ing_s, 1),
        "peak_tree_rss_mb": round(ing_rss / 1e6),
        "max_process_rss_mb": round(children / 1e6),
        "read_csv_mb_s_now": round(calib),
        "load_factor": round(IDLE_READ_CSV_MB_S / calib, 1),
        "rows": tot["rows"],
        "tables_mb": round(sum(p.stat().st_size for p in (out / "tables").rglob("*.parquet")) / 1e6, 1),
    }
    if not a.skip_report:
        an_s, an_rss, _ = timed([*fx, "analyze", str(out)])
        rep_s, rep_rss, _ = timed([*fx, "report", str(out)])
        res.update(
            analyze_s=round(an_s, 2),
            report_s=round(rep_s, 2),
            report_mb=round((out / "report.html").stat().st_size / 1e6, 2),
            end_to_end_s=round(ing_s + an_s + rep_s, 1),
            peak_rss_any_stage_mb=round(max(ing_rss, an_rss, rep_rss) / 1e6),
            # (each stage's own: the analysis of the synthetic bundle went over 2 GB unseen while only the
            # ingest's figure was tabled)
            analyze_peak_rss_mb=round(an_rss / 1e6),
            report_peak_rss_mb=round(rep_rss / 1e6),
        )
    print(json.dumps(res, indent=2))
    if a.results:
        machine = f"{platform.machine()}, {os.cpu_count()} CPU, {_mem_gib()} GiB"
        row = (
            f"| {res['label']} | {nfiles} | {res['mb']} | {res['ingest_s']} | {res['ingest_mb_s']} | "
            f"{res['grep_s']} | {res['ratio_pct']}% | {res['peak_tree_rss_mb']} | "
            f"{res.get('analyze_s', '–')} | {res.get('report_s', '–')} | {res.get('report_mb', '–')} | "
            f"{res.get('end_to_end_s', '–')} | {machine} |\n"
        )
        with open(a.results, "a") as fh:
            fh.write(row)
    if not a.keep and not a.work:
        shutil.rmtree(work, ignore_errors=True)


def _mem_gib() -> int:
    with open("/proc/meminfo") as fh:
        return round(int(fh.readline().split()[1]) / 1024**2)


if __name__ == "__main__":
    main()
