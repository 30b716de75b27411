"""Atomic outputs: every file is written to a temporary name beside its target, fsynced, then renamed.

Parquet files carry the table name and schema version in their footer, and readers check them.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from forensics.errors import OutputError, SchemaError
from forensics.schema import SCHEMA_VERSION, TABLES, WEIGHT, empty, get_schema, validate, with_weight

if TYPE_CHECKING:
    import pyarrow as pa

# pyarrow (and numpy with it) is imported where its footer reader is needed, not at import: ingest workers,
# which write with polars, start ~0.2 s of CPU sooner each.

META_TABLE = b"gpu_forensics.table"
META_VERSION = b"gpu_forensics.schema_version"
ROW_GROUP_ROWS = 256 * 1024
ZSTD_LEVEL = 1
"""zstd level of the tables' parts (the readers need nothing but zstd)."""


def _file_mode() -> int:
    """The mode `open()` gives a new file here (0666 less the umask): `mkstemp`'s 0600 is for the temporary
    name only, outputs are as readable as any other file the user writes (a kept part of a large table,
    written by a worker with `open()`, has this mode too).

    The umask is read from /proc (Linux 4.7 and later) where it can be: setting it to learn it changes it for
    every thread of the process for an instant."""
    try:
        with open("/proc/self/status", "rb") as fh:
            mask = next(int(line.split()[1], 8) for line in fh if line.startswith(b"Umask:"))
    except (OSError, StopIteration, IndexError, ValueError):
        mask = os.umask(0o022)
        os.umask(mask)
    return 0o666 & ~mask


FILE_MODE = _file_mode()


@contextmanager
def atomic_path(target: Path) -> Iterator[Path]:
    """Yield a temporary path beside `target`; on success give it `FILE_MODE`, fsync it and rename it over
    `target`."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        os.chmod(tmp_path, FILE_MODE)
        with open(tmp_path, "rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp_path, target)
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


def write_text(target: Path, text: str) -> None:
    """Write a text file atomically."""
    with atomic_path(target) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_json(target: Path, obj: Any) -> None:
    """Write JSON atomically (indented, UTF-8, stable key order as given).

    A long list of records at the top level (the manifest's `files`: one per bundle file) is written a
    record a line: as readable, and Python's indenting encoder took 1.3 s for a 1,000-node manifest
    (the compact one, in C, 0.05 s).
    """
    write_text(target, _dumps(obj) + "\n")


RECORD_LINES = 500
"""A top-level list of more dicts than this is written one dict a line (findings stay indented)."""


def _dumps(obj: Any) -> str:
    def dumps(v: Any, indent: int | None = 2) -> str:
        return json.dumps(v, indent=indent, ensure_ascii=False, default=str)

    if not isinstance(obj, dict) or not obj:
        return dumps(obj)
    items = []
    for k, v in obj.items():
        key = dumps(str(k) if not isinstance(k, str) else k)
        if isinstance(v, list) and len(v) > RECORD_LINES and all(isinstance(x, dict) for x in v):
            # (one encoder for all records: `json.dumps` with options builds one a call, ~half its time)
            encode = json.JSONEncoder(ensure_ascii=False, default=str).encode
            body = ",\n".join("    " + encode(x) for x in v)
            items.append(f"  {key}: [\n{body}\n  ]")
        else:
            items.append(f"  {key}: " + dumps(v).replace("\n", "\n  "))
    return "{\n" + ",\n".join(items) + "\n}"


def write_table(df: pl.DataFrame, table: str, folder: Path, name: str = "part-0.parquet") -> Path:
    """Validate `df` as `table` and write it as `folder/<table>/<name>` (zstd), atomically.

    A table is one part, or several (`part-00000.parquet`, ...) when it was too large to hold at once.
    """
    target = folder / table / name
    with atomic_path(target) as tmp:
        write_table_file(df, table, tmp)
    return target


def write_table_file(df: pl.DataFrame, table: str, path: Path) -> None:
    """Validate `df` as `table` and write it to `path` as a part of the table (zstd, row groups of
    `ROW_GROUP_ROWS`, the table name and schema version in the footer), not atomically: `write_table`
    does that; an ingest worker writes a part of a large table so, for the parent to take as it is."""
    df = validate(df, table)
    meta = {META_TABLE.decode(): table, META_VERSION.decode(): str(SCHEMA_VERSION)}
    # polars' own writer: no Arrow copy of the table, ~3x faster than pyarrow's on string-heavy tables.
    # zstd level 1 rather than polars' default 3: a Megatron steps part (2 MB of timer JSON) 28 -> 21 ms, a
    # 190k-row gpu_samples part 57 -> 53 ms, and the files come out no larger (the columns are dictionary-
    # and run-length-encoded before zstd sees them).
    df.write_parquet(
        path, compression="zstd", compression_level=ZSTD_LEVEL, row_group_size=ROW_GROUP_ROWS, metadata=meta
    )


def footer_metadata(part: Path) -> dict[bytes, bytes]:
    """The key-value metadata in a Parquet file's footer (where the table name and schema version are)."""
    return dict(_footer(part).metadata or {})


def read_table(out: Path, table: str) -> pl.DataFrame:
    """Read one table from `out/tables/<table>/`; an absent table reads as empty.

    Raises:
        SchemaError: a Parquet file there is not this table of this schema version.
    """
    folder = out / "tables" / table
    parts = sorted(folder.glob("*.parquet")) if folder.is_dir() else []
    if not parts:
        return empty(table)
    footers = [_footer(part) for part in parts]
    read_table_check(parts, table, footers)
    schema = get_schema(table)
    # columns null in every row of every part are not read but made constant (no buffers): a table of
    # millions of rows of one source leaves most columns empty
    nulls = set(schema).intersection(*(_all_null_columns(md) for md in footers))
    # the parts in one call, read side by side (a table in 250 parts: ~4.1 -> ~1.5 s; a part at a time, each
    # footer read three times)
    try:
        df = pl.read_parquet(parts, columns=[c for c in schema if c not in nulls], glob=False)
    except pl.exceptions.PolarsError as exc:
        raise SchemaError(
            f"the parts of table '{table}' in '{folder}' do not read as one table: {exc}"
        ) from None
    if nulls:
        df = df.with_columns(pl.lit(None, dtype=schema[c]).alias(c) for c in nulls).select(list(schema))
    return validate(df, table)


def _footer(part: Path) -> Any:
    """A Parquet file's footer (`pyarrow.parquet.FileMetaData`)."""
    import pyarrow.parquet as pq

    return pq.read_metadata(part)


def _all_null_columns(md: Any) -> set[str]:
    """Columns whose every value is null in the part whose `_footer` is `md`, from its statistics (no data
    read)."""
    full: dict[str, bool] = {}
    for rg in range(md.num_row_groups):
        group = md.row_group(rg)
        for c in range(group.num_columns):
            col = group.column(c)
            st = col.statistics
            nulls = st.null_count if st is not None and st.has_null_count else None
            full[col.path_in_schema] = full.get(col.path_in_schema, True) and nulls == group.num_rows
    return {c for c, v in full.items() if v} if md.num_rows else set()


ANALYSIS_ROWS = 1_000_000
"""Most rows of steps and of gpu_samples the analysis and the report hold (about 250 bytes a row)."""
ANALYSIS_BYTES = 384 * 1024**2
"""... and about the most memory each of the two may take (steps with big timer breakdowns: ~1 KB a row)."""
THIN_TAIL_STEPS = 20
"""Thinned steps keep every step of the last k x this many (where a hang stopped the ranks)."""


def read_analysis_tables(out: Path, limit: int | None = None) -> tuple[dict[str, pl.DataFrame], list[str]]:
    """Every table of OUT, with steps and gpu_samples thinned to about `limit` rows when larger; return
    the tables and a note per thinned table.

    Thinning keeps whole samples, never averages (evidence lines stay verbatim), and is read lazily so
    memory holds only what is kept: steps keep every k-th logged step number and the last ones (the
    same steps on every rank, so ranks stay comparable at each kept step; a rank that stopped early is
    seen stopping up to k-1 steps early) and rows without a step;
    gpu_samples keep the samples of one sampling period in k (every GPU of every node at the same
    moments, whatever their offsets within a period; rows without a time: one block of 64 lines in k). Onsets (throttling, ECC, PCIe) are events the parsers
    found at full resolution, so thinning costs the statistics only short-lived detail.
    """
    limit = ANALYSIS_ROWS if limit is None else limit
    tables: dict[str, pl.DataFrame] = {}
    notes: list[str] = []
    for t in TABLES:
        parts = sorted((out / "tables" / t).glob("*.parquet")) if (out / "tables" / t).is_dir() else []
        sizes = [parquet_rows(p) for p in parts]
        rows = sum(sizes)
        # (the largest part: a loop's samples, where a part of snapshots only may come first, as parts kept
        # as the workers wrote them come in the order of their first files)
        largest = parts[sizes.index(max(sizes))] if parts else None
        cap = limit
        if t in THINNED and rows > 10_000:
            sample = pl.scan_parquet(largest, glob=False).head(10_000).collect()
            cap = min(limit, int(ANALYSIS_BYTES // max(1.0, sample.estimated_size() / max(1, sample.height))))
        if t not in THINNED or rows <= cap:
            tables[t] = with_weight(read_table(out, t)) if t == "events" else read_table(out, t)
            continue
        read_table_check(parts, t)
        if t == "events":
            tables[t], what = _thin_events(parts, cap)
            if what:
                notes.append(
                    f"events: {rows:,} rows thinned to {tables[t].height:,} for the analysis and the report ({what}); "
                    "the tables keep every row"
                )
            continue
        k = -(-rows // cap)
        lf = pl.scan_parquet(parts, glob=False)
        if t == "steps":
            keep, what = _thin_steps(lf, k, cap)
        else:
            # only the sources that sample in a loop (dmon, --query-gpu -l, DCGM) are thinned: snapshots
            # (-q, XML) are few, and keeping them for some nodes only would make the nodes look different
            per_source = lf.group_by("source").len().collect()
            dense = per_source.filter(pl.col("len") > cap // 20)
            sparse_rows = per_source.height and int(per_source.get_column("len").sum() - dense.get_column("len").sum())
            k = -(-int(dense.get_column("len").sum()) // max(1, cap - sparse_rows))
            # whole sampling periods: every GPU of every node keeps the same moments, whatever its offset
            period = _sampling_period_s(largest)
            sec = pl.col("ts").dt.epoch("s") // period
            thin_row = pl.when(pl.col("ts").is_null()).then((pl.col("line") // 64) % k == 0).otherwise(sec % k == 0)
            keep = ~pl.col("source").is_in(dense.get_column("source").implode()) | thin_row
            what = f"the samples of one {period} s period in {k} of {', '.join(sorted(dense.get_column('source')))}"
        df = validate(lf.filter(keep).collect(), t)
        tables[t] = df
        notes.append(
            f"{t}: {rows:,} rows thinned to {df.height:,} for the analysis and the report ({what}); "
            "the tables keep every row"
        )
    return tables, notes


THINNED = ("events", "steps", "gpu_samples")
"""The tables `read_analysis_tables` thins when they are larger than the analysis may hold."""
RUN_KEYS = ("node", "file", "source", "kind", "code", "severity", "gpu_index", "gpu_bus_id", "rank")
"""Events alike: a run of them is what a flood repeats (one Xid line of one GPU, one transport error of a rank)."""
RUN_HEAD = 50
RUN_TAIL = 50
"""Events of a run the thinning keeps whole: its first and its last ones (`_thin_events`)."""


def in_mixed_run(value: pl.Expr) -> pl.Expr:
    """Whether a row of thinned events stands for rows left out (`WEIGHT` > 1) of a run whose rows differ in
    `value` (a link up or down, the peer an error names): those rows may hold either, so what is counted by
    `value` is an estimate. (The caller has the events' `RUN_KEYS` columns.)"""
    return (pl.col(WEIGHT) > 1) & (value.n_unique().over(list(RUN_KEYS)) > 1)


def _thin_events(parts: list[Path], cap: int) -> tuple[pl.DataFrame, str | None]:
    """The events of `parts` thinned to about `cap` rows, with `WEIGHT`; and what the note says of it (None:
    no run long enough to thin, every row read).

    Of each run of events alike (`RUN_KEYS`, in table order: a run's rows lie in time order), the first
    `RUN_HEAD` and the last `RUN_TAIL` are kept, its earliest and latest (where its times are not in the order
    of its rows), and one in k of the rest, k as small as `cap` allows; a kept
    row's weight counts the rows of its run it stands for (itself and those left out up to the next kept
    one), so counts stay exact, and every run keeps its first and last time and verbatim lines. A run of
    millions of identical Xid lines adds no evidence past its first and last ones.

    Read a row group at a time (the parts are written in groups of `ROW_GROUP_ROWS`), twice: first what each
    run holds (its rows, where its earliest and latest are), then the rows kept. Memory holds a row group, a row
    a run and the rows kept, never the table nor a column of it (a fleet-wide flood's 7.4 M events: ~4 GB
    whole, their messages and JSON details most of it; a 5 GB dmesg of Xid lines: 26 M).
    """
    keys = list(RUN_KEYS)
    run = pl.struct(keys).hash(seed=BLOCK_SEED).alias("run")
    at, n = pl.col("at"), pl.col("n")
    # what each run holds: its rows (n) and the positions in it of its earliest and latest rows (the first of
    # equal ones), gathered over the row groups in order
    runs: pl.DataFrame | None = None
    for g in _row_groups(parts, [*keys, "ts"]):
        local = g.select(run, "ts").with_columns(at=pl.int_range(pl.len(), dtype=pl.Int64).over("run"))
        part = local.group_by("run").agg(
            m=pl.len().cast(pl.Int64),
            lo_ts=pl.col("ts").min(), lo_at=at.get(pl.col("ts").arg_min()),
            hi_ts=pl.col("ts").max(), hi_at=at.get(pl.col("ts").arg_max()),
        )
        if runs is None:
            runs = part.rename({"m": "n"})
            continue
        both = runs.join(part, on="run", how="full", coalesce=True, suffix="_g")
        later = pl.col("n").fill_null(0)  # (a row group's positions come after the run's rows before it)
        take_lo = pl.col("lo_ts").is_null() | (pl.col("lo_ts_g") < pl.col("lo_ts")).fill_null(False)
        take_hi = pl.col("hi_ts").is_null() | (pl.col("hi_ts_g") > pl.col("hi_ts")).fill_null(False)
        runs = both.select(
            "run",
            n=later + pl.col("m").fill_null(0),
            lo_ts=pl.when(take_lo).then("lo_ts_g").otherwise("lo_ts"),
            lo_at=pl.when(take_lo).then(later + pl.col("lo_at_g")).otherwise("lo_at"),
            hi_ts=pl.when(take_hi).then("hi_ts_g").otherwise("hi_ts"),
            hi_at=pl.when(take_hi).then(later + pl.col("hi_at_g")).otherwise("hi_at"),
        )
    assert runs is not None  # (the caller thins a table of rows)
    runs = runs.select("run", "n", "lo_at", "hi_at")
    middle = lambda c: pl.col(c).is_not_null() & (pl.col(c) >= RUN_HEAD) & (pl.col(c) < n - RUN_TAIL)  # noqa: E731
    fixed, rows = runs.select(
        (pl.min_horizontal(n, RUN_HEAD + RUN_TAIL) + middle("lo_at").cast(pl.Int64)
         + (middle("hi_at") & (pl.col("hi_at") != pl.col("lo_at"))).cast(pl.Int64)).sum().alias("fixed"),
        n.sum().alias("rows"),
    ).row(0)
    k = max(1, -(-(rows - fixed) // max(1, cap - fixed)))
    keep = (
        (at < RUN_HEAD) | (at >= n - RUN_TAIL) | (at == pl.col("lo_at")).fill_null(False)
        | (at == pl.col("hi_at")).fill_null(False) | ((at - RUN_HEAD) % k == 0)
    )
    # the rows kept, a row group at a time, each with its run and position in it (for the weights)
    before = runs.select("run", seen=pl.lit(0, pl.Int64))
    frames = []
    for g in _row_groups(parts):
        g = g.with_columns(run).with_columns(at=pl.int_range(pl.len(), dtype=pl.Int64).over("run"))
        placed = g.join(before, on="run", how="left", maintain_order="left").join(
            runs, on="run", how="left", maintain_order="left"
        )
        placed = placed.with_columns(at=at + pl.col("seen"))
        frames.append(placed.filter(keep).drop("seen", "lo_at", "hi_at"))
        counts = g.group_by("run").agg(m=pl.len().cast(pl.Int64))
        before = before.join(counts, on="run", how="left").select("run", seen=pl.col("seen") + pl.col("m").fill_null(0))
    kept = pl.concat(frames) if len(frames) > 1 else frames[0]
    weight = kept.select((at.shift(-1).over("run") - at).fill_null(n - at).cast(pl.UInt32).alias(WEIGHT))
    df = validate(kept.drop("run", "at", "n"), "events").hstack(weight)
    if df.height == rows:
        return df, None
    return df, f"each run of one node, file, kind, code and GPU: its first {RUN_HEAD} and last {RUN_TAIL} rows and one in {k} of the rest, each counting for the rows it stands for"


def _row_groups(parts: list[Path], columns: list[str] | None = None) -> Iterator[pl.DataFrame]:
    """The rows of `parts` one Parquet row group at a time, in order (only `columns`, where given)."""
    for part in parts:
        md = _footer(part)
        start = 0
        for rg in range(md.num_row_groups):
            n = md.row_group(rg).num_rows
            lf = pl.scan_parquet(part, glob=False)
            yield (lf.select(columns) if columns else lf).slice(start, n).collect()
            start += n


def _thin_steps(lf: pl.LazyFrame, k: int, cap: int) -> tuple[pl.Expr, str]:
    """Which step rows the analysis keeps (about `cap` of them at most) and what the note says of it.

    Every k-th of the step numbers the logs hold (not of all integers: logs print every N steps) and the last
    k x `THIN_TAIL_STEPS` ones whole, on every rank, with the rows without a step. Those may hold far more
    rows than `cap`:
    - step numbers that repeat within a rank's log (a job restarted from its checkpoints again and again, a
      log printed twice): every number is kept, and about one block of 64 lines in k3 of every file
      (dropping numbers would leave the timeline a few points, and its baseline theirs);
    - many ranks (the last k x 20 numbers hold k x 20 x ranks rows): the last numbers are kept as far as half
      of `cap` allows, and one in k2 of the others as far as the rest does, k2 as small as that allows (and
      blocks of lines as well where a few numbers alone hold more)."""
    counts = lf.group_by("step").len().collect()
    no_step = int(counts.filter(pl.col("step").is_null()).get_column("len").sum())
    counts = counts.filter(pl.col("step").is_not_null()).sort("step")
    numbers, sizes = counts.get_column("step"), counts.get_column("len")
    tail = k * THIN_TAIL_STEPS
    kept = pl.concat([numbers.gather_every(k), numbers.tail(tail)]).unique()
    rows = no_step + int(sizes.filter(numbers.is_in(kept.implode())).sum())
    what = f"one logged step number in {k} on every rank, and the last {tail} whole"
    if rows > cap:
        logs = int(lf.select(pl.struct("file", "rank").n_unique()).collect().item())
        if int(sizes.max() or 0) > 1.5 * logs:
            kept, rows = numbers, no_step + int(sizes.sum())
            what = f"every step number ({len(numbers):,} in {rows:,} rows of {logs:,} logs: they repeat)"
        else:
            # the tail: the last numbers whose rows fit in half of `cap` (at most `tail` of them)
            after = sizes.reverse().cum_sum().reverse()
            n_tail = min(tail, int((after <= cap // 2).sum()))
            head, head_sizes = numbers.head(len(numbers) - n_tail), sizes.head(len(numbers) - n_tail)
            room = max(1, cap - no_step - (int(sizes.tail(n_tail).sum()) if n_tail else 0))
            k2 = max(k, -(-int(head_sizes.sum()) // room))
            while k2 < len(head) and int(head_sizes.gather_every(k2).sum()) > room:
                k2 += max(1, k2 // 4)
            kept = pl.concat([head.gather_every(k2), numbers.tail(n_tail)]).unique()
            what = (
                f"one logged step number in {k2} on every rank, and the last {n_tail} whole (one in {k} and "
                f"the last {tail} would keep {rows:,} rows)"
            )
            rows = no_step + int(sizes.filter(numbers.is_in(kept.implode())).sum())
    keep = pl.col("step").is_null() | pl.col("step").is_in(kept.implode())
    if rows > cap:
        # blocks picked by a hash of (file, block), not every k3-th: a log that repeats itself (a restarted
        # job's, a file printed again) would keep the same part of every repetition
        k3 = -(-rows // cap)
        block = pl.struct(pl.col("file"), pl.col("line") // 64).hash(seed=BLOCK_SEED) % k3 == 0
        keep = keep & block
        what += f"; of those, about one block of 64 lines in {k3} of every file"
    return keep, what


BLOCK_SEED = 20261205
"""The seed of the hashes that pick blocks of step lines (`_thin_steps`) and tell runs of events apart
(`_thin_events`): the same rows on every run."""


def _sampling_period_s(part: Path) -> int:
    """The usual time between two samples of one GPU (whole seconds, at least 1), from the head of a part."""
    head = pl.scan_parquet(part, glob=False).select("node", "gpu_index", "file", "ts").head(200_000).collect()
    gaps = (
        head.drop_nulls("ts")
        .sort("node", "gpu_index", "file", "ts")
        .select(gap=pl.col("ts").diff().over("node", "gpu_index", "file").dt.total_seconds())
        .get_column("gap")
        .drop_nulls()
    )
    gaps = gaps.filter(gaps > 0)
    return max(1, int(gaps.median() or 1)) if len(gaps) else 1


def read_table_check(parts: list[Path], table: str, footers: list[Any] | None = None) -> None:
    """Raise SchemaError when a part is not `table` of this schema version (`footers`: their `_footer`s)."""
    for i, part in enumerate(parts):
        meta = dict((_footer(part) if footers is None else footers[i]).metadata or {})
        if meta.get(META_TABLE) != table.encode() or meta.get(META_VERSION) != str(SCHEMA_VERSION).encode():
            raise SchemaError(
                f"'{part}' is not table '{table}' of schema version {SCHEMA_VERSION} "
                "(written by another version? re-run 'forensics ingest')"
            )


def read_tables(out: Path) -> dict[str, pl.DataFrame]:
    """Read every table of an ingested OUT folder."""
    return {t: read_table(out, t) for t in TABLES}


def require_ingested(out: Path) -> dict[str, Any]:
    """Return OUT's manifest; raise OutputError when OUT was never (completely) ingested."""
    if out.exists() and not out.is_dir():
        raise OutputError(f"output '{out}' is a file, not a folder")
    manifest = out / "manifest.json"
    if not manifest.is_file():
        raise OutputError(
            f"'{out}' holds no ingested bundle (no manifest.json); run 'forensics ingest BUNDLE -o {out}' first"
        )
    try:
        data = json.loads(manifest.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise OutputError(f"cannot read '{manifest}': {exc}") from None
    if not isinstance(data, dict):
        raise OutputError(f"'{manifest}' is not a gpu-forensics manifest")
    return data


def parquet_rows(path: Path | str) -> int:
    """The number of rows of a Parquet file, from its footer (polars reads just that; pyarrow's reader would
    cost the ingest's parent ~0.35 s of imports, pyarrow's and numpy's)."""
    return int(pl.scan_parquet(path, glob=False).select(pl.len()).collect().item())


def arrow_schema(table: str) -> pa.Schema:
    """The Arrow schema of a table (for other tools)."""
    return empty(table).to_arrow().schema


__all__ = ["TABLES", "atomic_path", "read_analysis_tables", "read_table", "read_tables", "require_ingested", "write_json", "write_table"]
