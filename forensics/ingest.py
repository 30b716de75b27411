"""Ingest: read every file of a bundle with its parser, in parallel, into the tables and manifest.json.

Per file (a pure function, `ingest_file`, that can run in any process): read and decompress, reject
binary content, detect the format, parse, conform the tables. Then, over the whole bundle: node
attribution from content, clock anchoring (`forensics.timebase`), bus id → GPU index mapping
(`forensics.identity`), and atomic writes. `manifest.json` is written last: its presence means the
ingest completed.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import traceback
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from datetime import UTC, datetime
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import polars as pl

from forensics import __version__, identity, timebase
from forensics.bundle import HEAD_BYTES, Bundle, BundleFile, Limits, cleanup, logical_name, open_bundle, read_file
from forensics.errors import OutputError
from forensics.outputs import write_json, write_table
from forensics.schema import SCHEMA_VERSION, TABLES, conform, empty
from parsers import registry
from parsers.base import FileContext, ParseResult, lines_from_bytes

PARALLEL_MIN_BYTES = 32 * 1024**2
"""Below this much input, parse in this process: starting workers costs more than it saves."""

ProgressCallback = Callable[[str, int, int], None]
"""Called after each file with (path, files done, files total)."""

OUTPUT_FILES = ("manifest.json", "findings.json", "report.html")
IGNORED_NAMES = {"truth.json": "simulator ground truth, not a log"}


@dataclass
class FileOutcome:
    """What ingesting one file produced."""

    row: dict[str, Any]
    tables: dict[str, pl.DataFrame] = field(default_factory=dict)
    examples: list[tuple[int, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _binary_reason(head: bytes) -> str | None:
    if not head:
        return None
    sample = head[:8192]
    if b"\x00" in sample:
        return "binary content (NUL bytes)"
    text_bytes = sum(1 for b in sample if b >= 32 or b in (9, 10, 13, 27, 12, 8))
    if text_bytes / len(sample) < 0.85:
        return "binary content (mostly non-text bytes)"
    return None


def ingest_file(f: BundleFile, limits: Limits, year_hint: int | None, collected_at: datetime | None) -> FileOutcome:
    """Read, detect and parse one bundle file; never raises for bad input or a parser bug."""
    row: dict[str, Any] = {
        "path": f.path,
        "node": f.node,
        "node_source": f.node_source,
        "format": None,
        "parser": None,
        "score": None,
        "runner_up": None,
        "bytes": f.size,
        "lines": 0,
        "parsed": 0,
        "unrecognized": 0,
        "status": "ok",
        "sha256": None,
    }
    if f.skip_reason or f.source is None:
        row["status"] = f"skipped: {f.skip_reason or 'not readable'}"
        return FileOutcome(row)
    base = f.path.rsplit("/", 1)[-1]
    if base in IGNORED_NAMES and "/" not in f.path:
        row["status"] = f"skipped: {IGNORED_NAMES[base]}"
        return FileOutcome(row)
    try:
        got = read_file(f, limits)
    except OSError as exc:
        row["status"] = f"error: cannot read ({exc.strerror or exc})"
        return FileOutcome(row)
    data = got.data
    row["bytes"] = len(data)
    row["sha256"] = hashlib.sha256(data).hexdigest()
    if not data:
        row["status"] = "skipped: empty file" if not got.truncated else f"error: {got.reason}"
        return FileOutcome(row)
    if got.truncated and got.reason and got.reason.startswith("larger than"):
        row["status"] = f"skipped: {got.reason}"
        return FileOutcome(row)
    head = data[:HEAD_BYTES]
    name = logical_name(f.path)
    det = registry.detect(head, name)
    row["runner_up"] = det.runner_up
    if det.parser is None:
        reason = _binary_reason(head) or "format not recognised"
        row["status"] = f"skipped: {reason}"
        if reason == "format not recognised":
            lines = lines_from_bytes(data)
            nonblank = int((lines.str.strip_chars().str.len_bytes() > 0).sum())
            row["lines"] = len(lines)
            row["unrecognized"] = nonblank
            first = [(i + 1, t[:500]) for i, t in enumerate(lines.head(5).to_list())]
            return FileOutcome(row, examples=first)
        return FileOutcome(row)
    parser = det.parser
    row["format"] = parser.NAME
    row["parser"] = parser.__name__
    row["score"] = round(det.score, 3)
    ctx = FileContext(path=f.path, node=f.node, year_hint=year_hint, collected_at=collected_at)
    try:
        if hasattr(parser, "parse_bytes"):
            result: ParseResult = parser.parse_bytes(data, ctx)
            nlines = result.parsed + result.unrecognized
        else:
            if _binary_reason(head):
                row["status"] = "skipped: binary content"
                return FileOutcome(row)
            lines = lines_from_bytes(data)
            nlines = len(lines)
            result = parser.parse(lines, ctx)
        tables = {t: conform(df, t) for t, df in result.tables.items() if df.height}
    except Exception as exc:  # noqa: BLE001 - a parser bug is contained to its file
        tb = traceback.format_exc(limit=-3)
        row["status"] = f"error: parser {parser.NAME} failed: {type(exc).__name__}: {str(exc)[:300]}"
        return FileOutcome(row, notes=[f"{f.path}: {tb}"])
    row["lines"] = nlines
    row["parsed"] = result.parsed
    row["unrecognized"] = result.unrecognized
    if result.node and f.node == "unknown":
        row["node"] = result.node
        row["node_source"] = "content"
        tables = {
            t: df.with_columns(pl.col("node").replace("unknown", result.node)) if "node" in df.columns else df
            for t, df in tables.items()
        }
    if got.truncated or result.partial:
        row["status"] = "partial" + (f": {got.reason}" if got.reason else "")
    notes = [f"{f.path}: {n}" for n in result.notes]
    return FileOutcome(row, tables, result.unrecognized_examples, notes)


def _worker_init() -> None:
    os.environ["POLARS_MAX_THREADS"] = "1"


def prepare_out(out: Path, force: bool) -> None:
    """Make sure OUT can receive an ingest: a folder, and not a previous ingest unless `force`."""
    if out.exists() and not out.is_dir():
        raise OutputError(f"output '{out}' is a file, not a folder")
    if out.is_dir() and any(out.iterdir()):
        ours = (out / "manifest.json").exists() or (out / "tables").exists()
        if not force:
            what = "a previous ingest" if ours else "other files"
            raise OutputError(f"output folder '{out}' already holds {what}; use --force to replace it")
        if not ours and not (out / ".forensics-work").exists():
            raise OutputError(
                f"output folder '{out}' holds files that are not gpu-forensics output; refusing to overwrite them"
            )
    out.mkdir(parents=True, exist_ok=True)


def ingest(
    bundle_path: Path,
    out: Path,
    *,
    limits: Limits | None = None,
    jobs: int | None = None,
    force: bool = False,
    year: int | None = None,
    progress: ProgressCallback | None = None,
) -> dict[str, Any]:
    """Ingest the bundle at `bundle_path` into `out`; return the manifest.

    Raises:
        BundleError: the bundle cannot be opened at all.
        OutputError: OUT cannot be used.
    """
    limits = limits or Limits()
    prepare_out(out, force)
    work = out / ".forensics-work"
    shutil.rmtree(work, ignore_errors=True)
    staging = work / "staging"
    staging.mkdir(parents=True)
    try:
        bundle = open_bundle(bundle_path, staging, limits)
        manifest = _ingest_bundle(bundle, out, work, limits, jobs, year, progress)
    finally:
        cleanup(work)
    return manifest


def _ingest_bundle(
    bundle: Bundle,
    out: Path,
    work: Path,
    limits: Limits,
    jobs: int | None,
    year: int | None,
    progress: ProgressCallback | None,
) -> dict[str, Any]:
    collected = datetime.fromtimestamp(bundle.collected_at, UTC) if bundle.collected_at else None
    year_hint = year or (collected.year if collected else None)
    files = sorted(bundle.files, key=lambda f: f.size, reverse=True)
    total_bytes = sum(f.size for f in files)
    jobs = jobs or min(os.cpu_count() or 1, 8)
    outcomes: list[FileOutcome] = []
    done = 0
    if jobs <= 1 or total_bytes < PARALLEL_MIN_BYTES or len(files) < 2:
        for f in files:
            outcomes.append(ingest_file(f, limits, year_hint, collected))
            done += 1
            if progress:
                progress(f.path, done, len(files))
    else:
        ctx = get_context("spawn")
        with ProcessPoolExecutor(max_workers=jobs, mp_context=ctx, initializer=_worker_init) as pool:
            futures = {pool.submit(ingest_file, f, limits, year_hint, collected): f for f in files}
            for fut in as_completed(futures):
                f = futures[fut]
                try:
                    outcomes.append(fut.result())
                except Exception as exc:  # noqa: BLE001 - a crashed worker loses one file, not the run
                    outcomes.append(
                        FileOutcome(
                            {
                                "path": f.path,
                                "node": f.node,
                                "node_source": f.node_source,
                                "bytes": f.size,
                                "status": f"error: worker failed: {type(exc).__name__}: {exc}",
                            }
                        )
                    )
                done += 1
                if progress:
                    progress(f.path, done, len(files))
    outcomes.sort(key=lambda o: o.row["path"])

    tables: dict[str, pl.DataFrame] = {}
    for t in TABLES:
        if t in ("files", "anomalies"):
            continue
        parts = [o.tables[t] for o in outcomes if t in o.tables]
        tables[t] = pl.concat(parts, how="vertical") if parts else empty(t)
    notes = list(bundle.notes)
    for o in outcomes:
        notes.extend(o.notes)
    tables, tnotes = timebase.anchor(tables)
    notes.extend(tnotes)
    tables, inotes = identity.resolve(tables)
    notes.extend(inotes)
    files_df = conform(pl.DataFrame([o.row for o in outcomes], infer_schema_length=None), "files") if outcomes else empty("files")
    tables["files"] = files_df

    tmp_tables = work / "tables"
    for t, df in tables.items():
        write_table(_sorted(df, t), t, tmp_tables)
    final = out / "tables"
    old = work / "old-tables"
    if final.exists():
        final.rename(old)
    tmp_tables.rename(final)
    for stale in ("findings.json", "report.html"):
        (out / stale).unlink(missing_ok=True)
    for p in out.glob("ticket-*.txt"):
        p.unlink()

    manifest = {
        "schema_version": SCHEMA_VERSION,
        "tool_version": __version__,
        "bundle": bundle.root,
        "ingested_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "collected_at": collected.isoformat() if collected else None,
        "year_hint": year_hint,
        "limits": {"max_file_bytes": limits.max_file_bytes, "max_expand_bytes": limits.max_expand_bytes},
        "totals": {
            "files": len(outcomes),
            "bytes": int(files_df["bytes"].fill_null(0).sum()),
            "lines": int(files_df["lines"].fill_null(0).sum()),
            "parsed_lines": int(files_df["parsed"].fill_null(0).sum()),
            "unrecognized_lines": int(files_df["unrecognized"].fill_null(0).sum()),
            "rows": {t: df.height for t, df in tables.items()},
        },
        "notes": notes,
        "files": [{**o.row, "unrecognized_examples": o.examples} for o in outcomes],
    }
    write_json(out / "manifest.json", manifest)
    return manifest


_SORT_KEYS = {
    "events": ("node", "gpu_index", "ts", "file", "line"),
    "steps": ("node", "rank", "step", "file", "line"),
    "gpu_samples": ("node", "gpu_index", "ts", "file", "line"),
    "inventory": ("node", "component", "gpu_index", "attribute", "file", "line"),
    "comms": ("record", "node", "rank", "file", "line"),
    "files": ("path",),
}


def _sorted(df: pl.DataFrame, table: str) -> pl.DataFrame:
    keys = [k for k in _SORT_KEYS.get(table, ()) if k in df.columns]
    return df.sort(keys, nulls_last=True, maintain_order=True) if keys and df.height else df
