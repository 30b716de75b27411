"""What a bundle of many small files costs before any grammar runs: the floor under the ingest's speed.

For every file of a bundle, in one process (POLARS_MAX_THREADS=1 advised), CPU time of:
- `read`: open, read and checksum the file (ChunkReader), cut its lines (`lines_from_bytes`);
- `detect`: format detection of its head (all sniffers);
- `ingest`: the whole ingest of each file as the workers do it (read, detect, parse, tables), in the same
  batches (`ingest_files`: the small files of one format parsed together where the parser has `parse_many`);
- `alone`: the same, every file on its own (`ingest_file`);
- `floor`: `ingest` with every parse replaced by one that returns no rows (read + detect + machinery).

Then the best ratio against `grep -rcE` on the same files any parser could reach on this machine with the
ingest's per-file work: grep's seconds over (floor CPU / cores); and the CPU a 10 % ratio would leave once
the fixed costs of any Python ingest are paid: starting the interpreter and importing the tool (in the
parent and in each worker) and a plain open-and-read of every file.

With `--tables OUT` (an ingest's output of the same bundle), also the floor of ANY design that writes the
same tables: one interpreter with the imports, a plain read of every file and the write of the tables as
they are (already sorted; validated, zstd, as `outputs.write_table_file` writes a part), with no detection
and no parsing at all, against the CPU a 10 % ratio allows. Usage:

    POLARS_MAX_THREADS=1 python bench/floor.py BUNDLE [--cores 2] [--tables OUT]
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from forensics import bundle, ingest
from parsers import _mixed, registry
from parsers.base import ParseResult, lines_from_bytes


def _no_rows(parser: object, lines: object, ctx: object) -> ParseResult:
    return ParseResult({}, parsed=len(lines), unrecognized=0)  # type: ignore[arg-type]


def _no_rows_many(parser: object, items: list[tuple[object, object]]) -> list[ParseResult]:
    return [_no_rows(parser, lines, ctx) for lines, ctx in items]


def _ingest_all(files: list[bundle.BundleFile], lim: bundle.Limits) -> None:
    """Every file ingested in the tasks the workers get (batches of small files of one name shape)."""
    for f, k in ingest._batched(ingest._tasks(files, {}), ingest.BATCH_FILES):
        group = f if k == ingest.BATCH else (f,)
        ingest.ingest_files(group, lim, None, None, [None] * len(group))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("bundle", type=Path)
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--tables", type=Path, help="an ingest's output folder of the same bundle")
    a = ap.parse_args()
    b = bundle.open_bundle(a.bundle, Path(tempfile.mkdtemp()))
    files = [f for f in b.files if f.source is not None and not f.skip_reason]
    lim = bundle.Limits()
    cpu: dict[str, float] = {}

    t = time.process_time()
    heads = []
    for f in files:
        chunks = list(bundle.ChunkReader(f, lim, ingest.CHUNK_BYTES))
        for c in chunks:
            lines_from_bytes(c)
        heads.append((ingest._sniff_head(chunks[0]) if chunks else b"", ingest.logical_name(f.path)))
    cpu["read"] = time.process_time() - t

    t = time.process_time()
    for head, name in heads:
        registry.detect(head, name)
    cpu["detect"] = time.process_time() - t

    t = time.process_time()
    _ingest_all(files, lim)
    cpu["ingest"] = time.process_time() - t

    t = time.process_time()
    for f in files:
        ingest.ingest_file(f, lim, None, None)
    cpu["alone"] = time.process_time() - t

    real, real_many = _mixed.parse, _mixed.parse_many
    _mixed.parse = _no_rows  # type: ignore[assignment]
    _mixed.parse_many = _no_rows_many  # type: ignore[assignment]
    try:
        t = time.process_time()
        _ingest_all(files, lim)
        cpu["floor"] = time.process_time() - t
    finally:
        _mixed.parse, _mixed.parse_many = real, real_many  # type: ignore[assignment]

    grep = min(
        _timed(["grep", "-rcE", "NCCL WARN|NVRM: Xid", str(a.bundle)]) for _ in range(2)
    )
    n = len(files)
    mb = sum(f.size for f in files) / 1e6
    print(f"{n} files, {mb:.1f} MB; grep -rcE {grep:.3f} s")
    for k, v in cpu.items():
        print(f"  {k:7s} {v:7.2f} s CPU  {1000 * v / n:6.2f} ms/file")
    floor_wall = cpu["floor"] / a.cores
    full = 100 * grep / (cpu["ingest"] / a.cores)
    best = 100 * grep / floor_wall
    print(f"best grep/ingest ratio with this per-file work on {a.cores} cores: {best:.2f} % "
          f"(the full ingest's CPU alone allows {full:.2f} %)")

    imports = "import forensics.cli, forensics.ingest, parsers.registry"
    startup = min(_child_cpu([sys.executable, "-c", imports]) for _ in range(2))
    t = time.process_time()
    for f in files:
        with open(f.source, "rb") as fh:  # type: ignore[arg-type]
            fh.read()
    plain_read = time.process_time() - t
    fixed = startup * (1 + a.cores) + plain_read
    budget = a.cores * grep / 0.10
    print(f"fixed costs: interpreter + imports {startup:.2f} s CPU per process (parent + {a.cores} workers), "
          f"plain open+read of the files {plain_read:.2f} s: {fixed:.2f} s CPU; "
          f"10 % of grep allows {budget:.2f} s CPU in all ({a.cores} cores x {grep / 0.10:.2f} s), "
          f"leaving {max(0.0, budget - fixed) * 1e6 / n:.0f} us a file for detection, parsing and writing")
    if a.tables is not None:
        write, rows = _write_cpu(a.tables)
        ideal = startup + plain_read + write
        print(f"any design writing these tables ({rows:,} rows): one interpreter + imports {startup:.2f} s, "
              f"plain read {plain_read:.2f} s, writing the tables {write:.2f} s CPU (no detection, no parsing): "
              f"{ideal:.2f} s CPU, {100 * ideal / budget:.0f} % of what 10 % of grep allows "
              f"(best ratio with free detection and parsing {100 * grep / (ideal / a.cores):.1f} %)")


def _write_cpu(out: Path) -> tuple[float, int]:
    """CPU seconds to write the tables of an ingest output again as they are (one file a table), and their rows."""
    import polars as pl

    from forensics.outputs import write_table_file
    from forensics.schema import TABLES

    frames = {t: pl.read_parquet(out / "tables" / t / "*.parquet") for t in TABLES if (out / "tables" / t).is_dir()}
    with tempfile.TemporaryDirectory() as d:
        t = time.process_time()
        for name, df in frames.items():
            write_table_file(df, name, Path(d) / f"{name}.parquet")
        cpu = time.process_time() - t
    return cpu, sum(df.height for df in frames.values())


def _child_cpu(cmd: list[str]) -> float:
    """CPU seconds (user + system) of running `cmd` to completion."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(cmd, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def _timed(cmd: list[str]) -> float:
    t = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.PIPE, check=False)
    return time.perf_counter() - t


if __name__ == "__main__":
    main()
