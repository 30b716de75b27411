#!/usr/bin/env python
"""Two source trees' ingests of one bundle, run in alternation (a script, not a test).

On a shared machine whose speed drifts by 10-30 % within an hour, a change worth a few percent shows only when
the two trees run one after the other, in alternating order, on the same warm files. This does that:

  python bench/ab.py --bundle DIR                      # this checkout's working tree against its HEAD
  python bench/ab.py --bundle DIR --base 471fdb7       # ... against a commit (a temporary git worktree)
  python bench/ab.py --bundle DIR --base /other/tree --head /one/tree --pairs 5 --check-tables

Each run is `python -m forensics.cli ingest BUNDLE -o OUT --force -q` with the tree first on PYTHONPATH and
an empty folder as the working directory: `python -m` puts the working directory ahead of PYTHONPATH, so a run
started from a checkout would import that checkout whatever the tree (which one a run imports is checked
before the first). Pairs run in ABBA order. For each run: wall time, CPU time of the ingest and its workers
(they are its children, waited for), and the manifest's own timings; then the medians and the paired
differences (head - base), after an untimed run of each (`--warmup`). `--check-tables` also compares the two
last outputs: every table's rows and the manifest's totals, notes and files' statuses. Each tree's compiled
modules (setup.py) are built in place first, as `pip install -e` does.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from run import bundle_stats, compile_tree  # noqa: E402 - the benchmark's own reading of a bundle, its bytecode


def _tree(spec: str, head: Path, scratch: Path) -> tuple[Path, bool]:
    """The source tree for `spec`: a folder as it is, or a git revision of `head`'s repository checked out in
    a temporary worktree (True: to be removed)."""
    p = Path(spec)
    if p.is_dir():
        return p.resolve(), False
    dest = scratch / "base-tree"
    add = ["git", "-C", str(head), "worktree", "add", "--detach", "-q", str(dest), spec]
    got = subprocess.run(add, capture_output=True, text=True)
    if got.returncode:
        why = got.stderr.strip()
        raise SystemExit(f"--base {spec}: no such folder, nor a revision git can check out in {head} ({why})")
    return dest, True


_BUILD = """
import runpy
import setuptools
from setuptools import Distribution
got = {}
setuptools.setup = lambda **kw: got.update(kw)  # (the tree's setup.py read for its modules alone)
runpy.run_path("setup.py")
dist = Distribution({"ext_modules": got.get("ext_modules", [])})
dist.get_command_obj("build_ext").inplace = True
dist.run_command("build_ext")
"""


def _build(tree: Path) -> None:
    """Build `tree`'s compiled modules in place (those of its setup.py: `parsers/_fastscan.c`), as `pip
    install -e` does for a checkout: a worktree of a revision has only their sources, and its runs would take
    the parsers' slower pure-polars paths. Up-to-date modules are left as they are. (Only the modules are read
    off setup.py: this interpreter's setuptools may be older than the one the project's build asks for.)"""
    if not (tree / "setup.py").is_file():
        return
    got = subprocess.run([sys.executable, "-c", _BUILD], cwd=tree, capture_output=True, text=True)
    if got.returncode:
        raise SystemExit(f"{tree}: its compiled modules did not build ({got.stderr.strip()[-500:]})")


def _env(tree: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(tree), *filter(None, [env.get("PYTHONPATH")])])
    return env


def _imports_from(tree: Path, cwd: Path) -> None:
    """Fail unless a run with `tree`'s environment imports the tool's packages from `tree`."""
    code = "import forensics, parsers; print(forensics.__file__); print(parsers.__file__)"
    out = subprocess.run(
        [sys.executable, "-c", code], env=_env(tree), cwd=cwd, check=True, capture_output=True, text=True
    ).stdout.split()
    for f in out:
        if not Path(f).resolve().is_relative_to(tree):
            raise SystemExit(f"a run meant for {tree} imports {f}: its tree is not the one measured")


def _run(tree: Path, bundle: Path, out: Path, cwd: Path, jobs: int) -> dict[str, float]:
    cmd = [sys.executable, "-m", "forensics.cli", "ingest", str(bundle), "-o", str(out), "--force", "-q"]
    if jobs:
        cmd += ["-j", str(jobs)]
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=_env(tree), cwd=cwd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode:
        sys.stderr.write(proc.stderr[-3000:])
        raise SystemExit(f"ingest failed ({proc.returncode}) with the tree {tree}")
    cpu = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    timings = json.loads((out / "manifest.json").read_text()).get("timings_s", {})
    return {"wall": wall, "cpu": cpu, **{k: float(v) for k, v in timings.items()}}


def _differences(a: Path, b: Path) -> list[str]:
    """What differs between two ingests' outputs: each table's rows (in their stored order), the manifest's
    totals, notes and the files' statuses and counts."""
    import polars as pl

    ma, mb = (json.loads((p / "manifest.json").read_text()) for p in (a, b))
    out = [f"manifest {key} differ" for key in ("totals", "notes") if ma.get(key) != mb.get(key)]
    fields = ("path", "status", "parser", "lines", "parsed", "unrecognized")
    fa = [{k: f.get(k) for k in fields} for f in ma.get("files", [])]
    fb = [{k: f.get(k) for k in fields} for f in mb.get("files", [])]
    if fa != fb:
        out.append("manifest files (status, parser or counts) differ")
    names = sorted({p.name for x in (a, b) for p in (x / "tables").iterdir() if p.is_dir()})
    for t in names:
        parts = [sorted((x / "tables" / t).glob("*.parquet")) for x in (a, b)]
        if not all(parts):
            out.append(f"table {t}: in one output only")
            continue
        da, db = (pl.read_parquet(ps) for ps in parts)
        if da.schema != db.schema:
            out.append(f"table {t}: schemas differ")
        elif not da.equals(db):
            out.append(f"table {t}: rows differ ({da.height} / {db.height})")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bundle", type=Path, required=True)
    ap.add_argument("--base", default="HEAD", help="a folder, or a git revision of --head's repository")
    ap.add_argument("--head", type=Path, default=ROOT, help="a folder (default: this checkout)")
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1, help="untimed runs of each tree first (default 1)")
    ap.add_argument("--jobs", type=int, default=0)
    ap.add_argument("--check-tables", action="store_true", help="compare the two trees' last outputs")
    ap.add_argument("--keep", action="store_true", help="keep the outputs (and a base worktree)")
    a = ap.parse_args()
    if a.pairs < 1:
        ap.error("--pairs must be 1 or more")
    if not a.bundle.exists():
        ap.error(f"--bundle {a.bundle}: no such file or folder")
    scratch = Path(tempfile.mkdtemp(prefix="forensics-ab-"))
    head = a.head.resolve()
    base, temporary = _tree(a.base, head, scratch)
    cwd = scratch / "cwd"
    cwd.mkdir()
    try:
        trees = {"base": base, "head": head}
        for tree in trees.values():
            _build(tree)
            compile_tree(tree)
            _imports_from(tree, cwd)
        nfiles, nbytes, _lines = bundle_stats(a.bundle)  # (read once: the first run does not pay the disk)
        print(f"base {base}\nhead {head}\nbundle {a.bundle}: {nfiles} files, {nbytes / 1e6:.0f} MB read once")
        for _ in range(a.warmup):  # (the trees' sources and the interpreter's files read, as in later runs)
            for name, tree in trees.items():
                _run(tree, a.bundle, scratch / f"out-{name}", cwd, a.jobs)
        runs: dict[str, list[dict[str, float]]] = {"base": [], "head": []}
        for i in range(a.pairs):
            for name in ("base", "head") if i % 2 == 0 else ("head", "base"):
                got = _run(trees[name], a.bundle, scratch / f"out-{name}", cwd, a.jobs)
                runs[name].append(got)
                print(
                    f"pair {i + 1} {name:4s} wall {got['wall']:7.2f} s  cpu {got['cpu']:7.2f} s  "
                    + "  ".join(f"{k} {v:.2f}" for k, v in got.items() if k not in ("wall", "cpu")),
                    flush=True,
                )
        print()
        for key in ("wall", "cpu"):
            med = {n: statistics.median(r[key] for r in rs) for n, rs in runs.items()}
            diffs = [h[key] - b[key] for b, h in zip(runs["base"], runs["head"], strict=True)]
            print(
                f"{key:4s} median base {med['base']:.2f} s, head {med['head']:.2f} s "
                f"({100 * (med['head'] - med['base']) / med['base']:+.1f} %); head - base a pair: mean "
                f"{statistics.mean(diffs):+.2f} s, from {min(diffs):+.2f} to {max(diffs):+.2f}"
            )
        if a.check_tables:
            diff = _differences(scratch / "out-base", scratch / "out-head")
            print("outputs: identical" if not diff else "outputs differ:\n  " + "\n  ".join(diff))
            if diff:
                raise SystemExit(1)
    finally:
        if a.keep:
            print(f"kept in {scratch}")
        else:
            if temporary:
                remove = ["git", "-C", str(head), "worktree", "remove", "--force", str(base)]
                subprocess.run(remove, check=False)
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
