"""Ingest: manifest contents, chunked parsing equals whole-file parsing, parser bugs contained, outputs."""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import random
import stat
import time
import types
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from forensics import identity
from forensics import ingest as ingest_mod
from forensics.bundle import BundleFile, Limits
from forensics.errors import BundleError, OutputError
from forensics.ingest import ingest, ingest_file
from forensics.outputs import FILE_MODE, footer_metadata, read_table, read_tables, require_ingested
from forensics.schema import conform, conform_all, conforms_later, get_schema
from parsers import registry, step_log
from parsers.base import FileContext, ParseResult, account, numbered
from tests.conftest import FIXTURES, make_bundle

PART = ingest_mod.PART_COLUMN


@pytest.fixture(autouse=True)
def stats_checked(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """In every test here: the plan `_write_in_parts` is given from the parts' `PartStats` is the one it reads
    from the parts, and the year reconciliation told what they know gives what it gives reading them (the
    tables and the notes). Counts how often each was checked."""
    from forensics import years

    seen = {"by_part": 0, "years": 0, "inferred": 0}
    write = ingest_mod._write_in_parts

    def checked_write(
        lf: pl.LazyFrame,
        table: str,
        folder: Path,
        as_is: Any = None,
        by_part: Any = None,
        rowwise: Any = None,
        whole: Any = None,
    ) -> int:
        if by_part is not None:
            key = ["node", "file", PART]
            scanned = ingest_mod._scan_by_part(lf)
            assert by_part.sort(key, nulls_last=True).equals(scanned.sort(key, nulls_last=True)), table
            seen["by_part"] += 1
        return write(lf, table, folder, as_is, by_part, rowwise, whole)

    reconcile = years.reconcile

    def checked_reconcile(tables: dict[str, Any], known: Any = None) -> tuple[dict[str, Any], list[str]]:
        got, notes = reconcile(tables, known)
        if known:
            plain, plain_notes = reconcile(tables)
            assert notes == plain_notes
            for t, df in got.items():
                a, b = df.lazy().collect(), plain[t].lazy().collect()
                assert a.equals(b, null_equal=True), t
            seen["years"] += 1
            seen["inferred"] += sum(k.inferred is not None for k in known.values())
        return got, notes

    monkeypatch.setattr(ingest_mod, "_write_in_parts", checked_write)
    monkeypatch.setattr(years, "reconcile", checked_reconcile)
    return seen

REAL = Path("/work/shared/real-logs/hw")


def xid_lines(n: int, start: int = 0) -> str:
    return "".join(
        f"[{10 + i:>6}.000000] NVRM: Xid (PCI:0000:3b:00): 79, pid={i}, GPU has fallen off the bus.\n"
        f"[{10 + i:>6}.500000] usb 1-1: new device {i}\n"
        for i in range(start, start + n)
    )


MANIFEST_KEYS = ("path", "node", "format", "parser", "bytes", "lines", "parsed", "unrecognized", "status", "sha256")


def test_manifest_lists_every_file_with_its_accounting(tmp_path: Path) -> None:
    text = xid_lines(5)
    src = make_bundle(
        tmp_path,
        {
            "node-001/dmesg.log": text,
            "node-002/dmesg.log.gz": text,
            "node-002/empty.log": "",
            "node-002/blob.bin": bytes(range(256)) * 10,
            "node-003/notes.txt": "nothing to see\nhere\n\n",
        },
    )
    m = ingest(src, tmp_path / "out")
    files = {f["path"]: f for f in m["files"]}
    assert sorted(files) == [
        "node-001/dmesg.log",
        "node-002/blob.bin",
        "node-002/dmesg.log.gz",
        "node-002/empty.log",
        "node-003/notes.txt",
    ]
    for f in files.values():
        for k in MANIFEST_KEYS:
            assert k in f, (f["path"], k)
    d = files["node-001/dmesg.log"]
    assert (d["node"], d["format"], d["parser"], d["status"]) == ("node-001", "kernel-log", "parsers.kernel_log", "ok")
    assert (d["bytes"], d["lines"], d["parsed"], d["unrecognized"]) == (len(text), 10, 10, 0)
    assert d["sha256"] == hashlib.sha256(text.encode()).hexdigest()
    gz = files["node-002/dmesg.log.gz"]
    assert (gz["bytes"], gz["lines"], gz["status"]) == (len(text), 10, "ok")
    assert gz["sha256"] == hashlib.sha256((src / "node-002/dmesg.log.gz").read_bytes()).hexdigest()
    assert files["node-002/empty.log"]["status"] == "skipped: empty file"
    assert files["node-002/blob.bin"]["status"].startswith("skipped: binary content")
    notes = files["node-003/notes.txt"]
    assert (notes["status"], notes["lines"], notes["unrecognized"]) == ("skipped: format not recognised", 3, 2)
    assert [list(x) for x in notes["unrecognized_examples"][:2]] == [[1, "nothing to see"], [2, "here"]]
    # the files table says the same as the manifest
    ft = read_table(tmp_path / "out", "files")
    assert ft.height == 5
    assert ft.filter(pl.col("path") == "node-001/dmesg.log")["parsed"].item() == 10
    ev = read_table(tmp_path / "out", "events")
    assert ev.filter(pl.col("kind") == "xid").height == 10
    assert m["totals"]["files"] == 5 and m["totals"]["rows"]["files"] == 5


def _bf(p: Path, path: str | None = None, node: str = "node-001", comp: str | None = None) -> BundleFile:
    return BundleFile(path or p.name, p, p.stat().st_size, node, "path", comp)


def test_chunked_parse_equals_whole_file_parse(tmp_path: Path) -> None:
    p = tmp_path / "dmesg.log"
    p.write_text(xid_lines(3000))
    whole = ingest_file(_bf(p), Limits(), 2026, None)
    chunked = ingest_file(_bf(p), Limits(), 2026, None, chunk_bytes=10_000)
    assert whole.row == chunked.row
    a, b = whole.tables["events"], chunked.tables["events"]
    assert a.height == 3000 and b.equals(a)
    assert b["line"].to_list()[:3] == [1, 3, 5] and b["line"].max() == 5999


def test_spilled_parts_hold_the_same_rows(tmp_path: Path) -> None:
    p = tmp_path / "dmesg.log"
    p.write_text(xid_lines(2000))
    whole = ingest_file(_bf(p), Limits(), 2026, None)
    spilled = ingest_file(_bf(p), Limits(), 2026, None, chunk_bytes=20_000, spill=tmp_path / "spill")
    assert "events" not in spilled.tables and len(spilled.parts["events"]) > 1
    got = pl.concat([ingest_mod._read_part(x, "events") for x in spilled.parts["events"]])
    assert got.equals(whole.tables["events"])
    # a part keeps the columns with values only; the reader puts the others back as nulls, and the string
    # columns of one value in every row (node, file) back from `Part.consts`
    part = spilled.parts["events"][0]
    kept = pl.read_parquet(part.path).columns
    assert len(kept) < got.width and "node" not in kept and "file" not in kept
    assert dict(part.consts)["node"] == "node-001" and dict(part.consts)["file"] == "dmesg.log"


def test_big_file_through_the_whole_ingest_in_chunks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ingest_mod, "CHUNK_BYTES", 50_000)
    monkeypatch.setattr(ingest_file, "__kwdefaults__", {**ingest_file.__kwdefaults__, "chunk_bytes": 50_000})
    src = make_bundle(tmp_path, {"node-001/dmesg.log": xid_lines(4000), "node-002/dmesg.log": xid_lines(10)})
    m = ingest(src, tmp_path / "out", jobs=1)
    ev = read_table(tmp_path / "out", "events")
    assert ev.filter(pl.col("node") == "node-001").height == 4000
    assert m["totals"]["lines"] == 8020
    assert not (tmp_path / "out" / ".forensics-work").exists()


def _fake_parser(boom: bool) -> types.ModuleType:
    mod = types.ModuleType("fake_parser")
    mod.NAME = "fake"
    mod.DESCRIPTION = "test"
    mod.TABLES = ("events",)
    mod.FILENAME_HINTS = ()
    mod.DETECTS = "FAKEFORMAT"
    mod.PRIORITY = 99

    def sniff(head: bytes, name: str) -> float:
        return 1.0 if head.startswith(b"FAKEFORMAT") else 0.0

    def parse(lines: pl.Series, ctx: FileContext) -> ParseResult:
        if boom and any("BOOM" in x for x in lines.to_list()):
            raise ZeroDivisionError("parser bug")
        fr = numbered(lines, ctx)
        parsed, unrec, ex = account(fr, pl.col("text").str.starts_with("FAKE"))
        return ParseResult({}, parsed, unrec, ex)

    mod.sniff = sniff
    mod.parse = parse
    return mod


def test_a_parser_bug_is_contained_to_its_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "PARSERS", (_fake_parser(boom=True), *registry.PARSERS))
    src = make_bundle(
        tmp_path,
        {
            "node-001/a.log": "FAKEFORMAT\nFAKE BOOM\n",
            "node-001/b.log": "FAKEFORMAT\nFAKE fine\nnot fake\n",
            "node-001/dmesg.log": xid_lines(2),
        },
    )
    m = ingest(src, tmp_path / "out", jobs=1)
    files = {f["path"]: f for f in m["files"]}
    assert files["node-001/a.log"]["status"] == "error: parser fake failed: ZeroDivisionError: parser bug"
    assert files["node-001/b.log"]["status"] == "ok"
    assert (files["node-001/b.log"]["parsed"], files["node-001/b.log"]["unrecognized"]) == (2, 1)
    assert files["node-001/dmesg.log"]["status"] == "ok"
    assert any(n.startswith("node-001/a.log: ") and "ZeroDivisionError" in n for n in m["notes"])
    assert read_table(tmp_path / "out", "events").height == 2


def test_a_polars_panic_is_contained_to_its_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """pyo3's PanicException is no Exception (polars 2.1's `pl.format` raised one on a column holding an empty
    chunk): a parser that raises it loses its file, and a batch that raises it is read file by file."""
    from polars.exceptions import PanicException

    mod = _fake_parser(boom=False)
    plain = mod.parse

    def parse(lines: pl.Series, ctx: FileContext) -> ParseResult:
        if any("PANIC" in x for x in lines.to_list()):
            raise PanicException("assertion failed: i < self.len()")
        return plain(lines, ctx)

    def parse_many(items: list[tuple[pl.Series, FileContext]]) -> list[ParseResult]:
        raise PanicException("the batch")

    mod.parse, mod.parse_many = parse, parse_many
    monkeypatch.setattr(registry, "PARSERS", (mod, *registry.PARSERS))
    files = {f"node-{k:03d}/a.log": "FAKEFORMAT\nFAKE fine\n" for k in range(4)}
    src = make_bundle(tmp_path, {**files, "node-009/a.log": "FAKEFORMAT\nFAKE PANIC\n", "node-001/dmesg.log": xid_lines(2)})
    m = ingest(src, tmp_path / "out", jobs=1)
    got = {f["path"]: f for f in m["files"]}
    assert got["node-009/a.log"]["status"] == "error: parser fake failed: PanicException: assertion failed: i < self.len()"
    assert all(got[p]["status"] == "ok" and got[p]["parsed"] == 2 for p in files)
    assert got["node-001/dmesg.log"]["status"] == "ok"
    assert read_table(tmp_path / "out", "events").height == 2


def test_a_parser_bug_in_a_later_chunk_drops_the_file_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "PARSERS", (_fake_parser(boom=True), *registry.PARSERS))
    p = tmp_path / "a.log"
    p.write_text("FAKEFORMAT\n" + "FAKE ok\n" * 5000 + "FAKE BOOM\n")
    o = ingest_file(_bf(p), Limits(), None, None, chunk_bytes=1000, spill=tmp_path / "spill")
    assert o.row["status"].startswith("error: parser fake failed")
    assert o.tables == {} and o.parts == {}


def _summing_parser() -> types.ModuleType:
    """A parser that keeps state across a file: one row counting the file's FAKE lines (`merge_chunks` adds
    up the rows of its chunks)."""
    mod = _fake_parser(boom=False)

    def parse(lines: pl.Series, ctx: FileContext) -> ParseResult:
        fr = numbered(lines, ctx)
        fake = pl.col("text").str.starts_with("FAKE")
        parsed, unrec, ex = account(fr, fake)
        n = int(fr.select(fake.sum()).item())
        row = {"node": ctx.node, "kind": "fake_count", "code": str(n), "severity": "info"}
        row |= {"message": "FAKE lines", "source": "fake", "file": ctx.path}
        return ParseResult({"events": pl.DataFrame([{**row, "line": ctx.first_line}])}, parsed, unrec, ex)

    def merge_chunks(tables: dict[str, pl.DataFrame]) -> dict[str, pl.DataFrame]:
        ev = tables["events"]
        total = str(ev["code"].cast(pl.Int64).sum())
        return {**tables, "events": ev.head(1).with_columns(code=pl.lit(total))}

    mod.TABLES = ("events",)
    mod.parse = parse
    mod.merge_chunks = merge_chunks
    return mod


@pytest.mark.parametrize("held_bytes", [ingest_mod.RANGE_HELD_BYTES, 0])
def test_a_file_read_in_chunks_or_ranges_is_merged_by_its_parser(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, held_bytes: int
) -> None:
    """A parser with state across a file (`merge_chunks`) gets the tables of a file read in several chunks,
    or byte ranges, in their order, and makes them what reading it whole gives: here one row counting every
    FAKE line. Its ranges' tables are merged whether they came back in memory or spilled."""
    monkeypatch.setattr(registry, "PARSERS", (_summing_parser(), *registry.PARSERS))
    monkeypatch.setattr(ingest_mod, "RANGE_HELD_BYTES", held_bytes)
    text = "FAKEFORMAT\n" + "".join(f"FAKE {i}\n" if i % 7 else "other\n" for i in range(4000))
    src = make_bundle(tmp_path, {"n1/a.log": text})
    f = _bundle_files(src, tmp_path)["n1/a.log"]
    whole = ingest_file(f, Limits(), None, None)
    count = whole.tables["events"].select("code", "line").rows()
    assert count == [(str(1 + 4000 - len(range(0, 4000, 7))), 1)]
    chunked = ingest_file(f, Limits(), None, None, chunk_bytes=5_000, spill=tmp_path / "spill")
    assert chunked.row["lines"] == whole.row["lines"] and "events" not in chunked.parts
    assert chunked.tables["events"].select("code", "line").rows() == count
    monkeypatch.setattr(ingest_mod, "CHUNK_BYTES", 5_000)
    monkeypatch.setattr(ingest_mod, "SPLIT_MIN_BYTES", 10_000)
    split = ingest_mod._plan_split(f, Limits())
    assert split is not None and len(split.spans) > 4
    parts = tmp_path / "parts"
    ranges = [
        ingest_file(f, Limits(), None, None, spill=parts / str(k), span=span, parser_name=split.parser)
        for k, span in enumerate(split.spans)
    ]
    assert all(("events" in r.parts) == (held_bytes == 0) for r in ranges)
    merged = ingest_mod._merge_spans(f, split, ranges, None)
    assert "events" not in merged.parts and merged.tables["events"].select("code", "line").rows() == count
    assert not list((tmp_path / "parts").rglob("*.parquet"))  # (the spilled parts read are removed)


def test_a_parsers_merge_that_fails_keeps_the_pieces_rows_with_a_note(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bug in a parser's `merge_chunks` costs neither the file nor the run: the pieces' rows are kept as
    they came, and a note says so."""
    parser = _summing_parser()

    def broken(tables: dict[str, pl.DataFrame]) -> dict[str, pl.DataFrame]:
        raise KeyError("boom")

    parser.merge_chunks = broken
    monkeypatch.setattr(registry, "PARSERS", (parser, *registry.PARSERS))
    text = "FAKEFORMAT\n" + "FAKE x\n" * 3000
    src = make_bundle(tmp_path, {"n1/a.log": text})
    f = _bundle_files(src, tmp_path)["n1/a.log"]
    chunked = ingest_file(f, Limits(), None, None, chunk_bytes=5_000, spill=tmp_path / "spill")
    assert chunked.row["status"] == "ok" and chunked.tables["events"].height > 1
    assert any("merging its chunks failed (KeyError" in n for n in chunked.notes)
    monkeypatch.setattr(ingest_mod, "CHUNK_BYTES", 5_000)
    monkeypatch.setattr(ingest_mod, "SPLIT_MIN_BYTES", 10_000)
    split = ingest_mod._plan_split(f, Limits())
    assert split is not None
    parts = tmp_path / "parts"
    ranges = [
        ingest_file(f, Limits(), None, None, spill=parts / str(k), span=span, parser_name=split.parser)
        for k, span in enumerate(split.spans)
    ]
    merged = ingest_mod._merge_spans(f, split, ranges, None)
    assert merged.row["status"] == "ok" and merged.tables["events"].height == len(split.spans)
    assert any("merging its byte ranges failed (KeyError" in n for n in merged.notes)


def test_content_node_fills_rows_of_an_unknown_path(tmp_path: Path) -> None:
    syslog = "".join(
        f"Nov 29 10:00:{i:02d} gpu-node-42 kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.\n"
        for i in range(3)
    )
    src = make_bundle(tmp_path, {"collected/messages": syslog})
    ingest(src, tmp_path / "out")
    ev = read_table(tmp_path / "out", "events")
    assert set(ev["node"].to_list()) == {"gpu-node-42"}


# ----------------------------------------------------------------------------- outputs and re-runs


def test_rerun_refuses_without_force_and_replaces_with_force(tmp_path: Path) -> None:
    out = tmp_path / "out"
    a = make_bundle(tmp_path / "a", {"node-001/dmesg.log": xid_lines(3)})
    b = make_bundle(tmp_path / "b", {"node-009/dmesg.log": xid_lines(1)})
    ingest(a, out)
    (out / "findings.json").write_text("{}")
    (out / "report.html").write_text("<html>")
    with pytest.raises(OutputError, match=r"already holds a previous ingest; use --force to replace it"):
        ingest(b, out)
    ingest(b, out, force=True)
    ev = read_table(out, "events")
    assert set(ev["node"]) == {"node-009"} and ev.height == 1
    assert not (out / "findings.json").exists() and not (out / "report.html").exists()
    assert sorted(p.name for p in out.iterdir()) == ["manifest.json", "tables"]


def test_out_with_foreign_files_is_never_overwritten(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "thesis.tex").write_text("precious")
    src = make_bundle(tmp_path, {"node-001/dmesg.log": xid_lines(1)})
    with pytest.raises(OutputError, match="already holds other files"):
        ingest(src, out)
    with pytest.raises(OutputError, match="not gpu-forensics output; refusing"):
        ingest(src, out, force=True)
    assert (out / "thesis.tex").read_text() == "precious"


def test_out_that_is_a_file(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.write_text("x")
    src = make_bundle(tmp_path, {"node-001/dmesg.log": xid_lines(1)})
    with pytest.raises(OutputError, match=r"output '.*out' is a file, not a folder"):
        ingest(src, out)


def test_missing_bundle_leaves_a_previous_ingest_alone(tmp_path: Path) -> None:
    out = tmp_path / "out"
    ingest(make_bundle(tmp_path, {"node-001/dmesg.log": xid_lines(1)}), out)
    with pytest.raises(BundleError, match="no such file or directory"):
        ingest(tmp_path / "missing", out, force=True)
    require_ingested(out)


def test_failure_while_writing_leaves_no_complete_looking_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    ingest(make_bundle(tmp_path / "a", {"node-001/dmesg.log": xid_lines(3)}), out)
    calls = {"n": 0}
    real = ingest_mod.write_table

    def flaky(df: pl.DataFrame, table: str, folder: Path) -> Path:
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt
        return real(df, table, folder)

    monkeypatch.setattr(ingest_mod, "write_table", flaky)
    with pytest.raises(KeyboardInterrupt):
        ingest(make_bundle(tmp_path / "b", {"node-002/dmesg.log": xid_lines(3)}), out, force=True)
    assert not (out / "manifest.json").exists()
    with pytest.raises(OutputError, match="holds no ingested bundle"):
        require_ingested(out)
    # the interrupted run's leftovers do not block the next run
    monkeypatch.setattr(ingest_mod, "write_table", real)
    ingest(make_bundle(tmp_path / "c", {"node-003/dmesg.log": xid_lines(3)}), out, force=True)
    assert set(read_table(out, "events")["node"]) == {"node-003"}


def test_leftover_work_folder_alone_counts_as_empty(tmp_path: Path) -> None:
    out = tmp_path / "out"
    (out / ".forensics-work" / "staging").mkdir(parents=True)
    ingest(make_bundle(tmp_path, {"node-001/dmesg.log": xid_lines(1)}), out)
    assert json.loads((out / "manifest.json").read_text())["totals"]["files"] == 1


def test_every_table_is_written_and_readable(tmp_path: Path) -> None:
    out = tmp_path / "out"
    ingest(make_bundle(tmp_path, {"node-001/dmesg.log": xid_lines(3)}), out)
    tables = read_tables(out)
    for t, df in tables.items():
        if t != "anomalies":
            assert (out / "tables" / t / "part-0.parquet").is_file(), t
        assert isinstance(df, pl.DataFrame)


def test_parallel_ingest_writes_the_same_tables_as_sequential(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = {f"node-{i:03d}/dmesg.log": xid_lines(3 + i) for i in range(26)}
    src = make_bundle(tmp_path, files)
    pools: list[bool] = []  # per pool started: whether the bundle's walk was over
    walking = [False]
    new_pool, open_bundle = ingest_mod._new_pool, ingest_mod.open_bundle

    def spy_pool(jobs: int) -> ProcessPoolExecutor:
        pools.append(not walking[0])
        return new_pool(jobs)

    def spy_walk(*args: Any) -> Any:
        walking[0] = True
        try:
            return open_bundle(*args)
        finally:
            walking[0] = False

    monkeypatch.setattr(ingest_mod, "_new_pool", spy_pool)
    monkeypatch.setattr(ingest_mod, "open_bundle", spy_walk)
    m1 = ingest(src, tmp_path / "seq", jobs=1)
    assert pools == []
    m2 = ingest(src, tmp_path / "par", jobs=2)
    # the workers were started during the walk, once it had seen `PARALLEL_MIN_FILES` files, and did the work
    assert pools == [False]
    assert [f["status"] for f in m1["files"]] == [f["status"] for f in m2["files"]]
    assert m1["totals"] == m2["totals"]
    for t in ("events", "files"):
        assert read_table(tmp_path / "seq", t).equals(read_table(tmp_path / "par", t)), t


def test_dask_ingest_writes_the_same_tables(tmp_path: Path, dask_scheduler: str) -> None:
    """`ingest(dask=ADDRESS)` on a LocalCluster (threads, one worker) equals the local ingest.

    Needs the optional extra `gpu-forensics[dask]`; skipped cleanly without it.
    """
    files = {f"node-{i:03d}/dmesg.log": xid_lines(2 + i) for i in range(5)}
    files["node-009/blob.bin"] = bytes(range(256)) * 4
    src = make_bundle(tmp_path, files)
    m1 = ingest(src, tmp_path / "local", jobs=1)
    m2 = ingest(src, tmp_path / "dask", dask=dask_scheduler)
    assert m1["totals"] == m2["totals"]
    assert [f["status"] for f in m1["files"]] == [f["status"] for f in m2["files"]]
    for t in ("events", "files"):
        assert read_table(tmp_path / "local", t).equals(read_table(tmp_path / "dask", t)), t


def test_dask_ingest_parses_a_large_log_in_ranges(
    tmp_path: Path, dask_scheduler: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ingest_mod, "CHUNK_BYTES", 20_000)
    monkeypatch.setattr(ingest_mod, "SPLIT_MIN_BYTES", 40_000)
    src = make_bundle(tmp_path, {"node-001/dmesg.log": xid_lines(2000), "node-002/dmesg.log": xid_lines(5)})
    assert len(ingest_mod._plan_split(_bundle_files(src, tmp_path)["node-001/dmesg.log"], Limits()).spans) > 5
    m1 = ingest(src, tmp_path / "local", jobs=1)
    # (and the events too many to hold, as a flood's: the parent takes the Dask workers' rows lazily)
    monkeypatch.setattr(ingest_mod, "HOLD_ROWS", 100)
    monkeypatch.setattr(ingest_mod, "PART_ROWS", 300)
    m2 = ingest(src, tmp_path / "dask", dask=dask_scheduler)
    assert len(list((tmp_path / "dask" / "tables" / "events").glob("*.parquet"))) > 3
    strip = [{k: v for k, v in f.items() if k != "ingested_at"} for f in m1["files"]]
    assert strip == [{k: v for k, v in f.items() if k != "ingested_at"} for f in m2["files"]]
    assert read_table(tmp_path / "local", "events").equals(read_table(tmp_path / "dask", "events"))


def test_dask_unreachable_scheduler_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("distributed")
    from forensics.errors import UsageError

    monkeypatch.setattr(ingest_mod, "DASK_CONNECT_TIMEOUT", "2s")  # (nothing answers at port 1: no wait)

    src = make_bundle(tmp_path, {"node-001/dmesg.log": xid_lines(1)})
    with pytest.raises(UsageError, match="cannot reach the Dask scheduler at 'tcp://127.0.0.1:1'"):
        ingest(src, tmp_path / "out", dask="tcp://127.0.0.1:1")


def test_a_worker_that_dies_loses_only_its_own_file(tmp_path: Path) -> None:
    import sys

    from forensics.bundle import open_bundle
    from forensics.ingest import _run_parallel

    sys.path.insert(0, str(Path(__file__).parent))  # spawn workers import the helper by this path
    try:
        import _crashy  # type: ignore[import-not-found]

        files = {f"node-{i:03d}/dmesg.log": xid_lines(3) for i in range(6)}
        files["node-002/crash.log"] = xid_lines(50)  # the largest: it goes first
        b = open_bundle(make_bundle(tmp_path, files), tmp_path / "staging")
        order = sorted(b.files, key=lambda f: f.size, reverse=True)
        seen: list[str] = []
        outs = _run_parallel(
            order, 2, tmp_path / "work", Limits(), 2026, None, lambda f: seen.append(f.path),
            task=_crashy.crash_on_named_files,
        )
    finally:
        sys.path.remove(str(Path(__file__).parent))
    st = {o.row["path"]: o.row["status"] for o in outs}
    assert st.pop("node-002/crash.log") == "error: worker process died while reading this file"
    assert set(st.values()) == {"ok"} and len(st) == 6
    assert sorted(seen) == sorted(files)
    assert sum(o.row["parsed"] for o in outs) == 6 * 6


def test_a_worker_that_dies_amid_many_small_files_costs_a_few_pools(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Small files go to workers in batches; when one kills its worker, the tasks that had not started are
    run again in one fresh pool, and only the few that had started are narrowed down to the culprit: not a
    pool per file of the bundle."""
    import sys

    from forensics.bundle import open_bundle
    from forensics.ingest import _run_parallel

    sys.path.insert(0, str(Path(__file__).parent))
    passes: list[int] = []
    real = ingest_mod._pool_pass

    def counted(files: list, *args: object, **kw: object) -> object:
        passes.append(len(files))
        return real(files, *args, **kw)

    monkeypatch.setattr(ingest_mod, "_pool_pass", counted)
    monkeypatch.setattr(ingest_mod, "BATCH_FILES", 4)
    try:
        import _crashy  # type: ignore[import-not-found]

        files = {f"node-{i:03d}/dmesg.log": xid_lines(3) for i in range(120)}
        files["node-040/crash.log"] = xid_lines(3)
        b = open_bundle(make_bundle(tmp_path, files), tmp_path / "staging")
        seen: list[str] = []
        outs = _run_parallel(
            b.files, 2, tmp_path / "work", Limits(), 2026, None, lambda f: seen.append(f.path),
            task=_crashy.crash_on_named_files,
        )
    finally:
        sys.path.remove(str(Path(__file__).parent))
    st = {o.row["path"]: o.row["status"] for o in outs}
    assert st.pop("node-040/crash.log") == "error: worker process died while reading this file"
    assert set(st.values()) == {"ok"} and len(st) == 120
    assert sorted(seen) == sorted(files)
    assert len(passes) <= 4 + 3 * 4, passes  # not one pool per file


def test_a_large_file_parsed_in_byte_ranges_equals_the_file_parsed_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Workers parse a large file's line-aligned byte ranges side by side; the parent shifts their line
    numbers, fills the node the content names, sums the counts and takes the checksum of the whole file."""
    syslog = "".join(
        f"Nov 29 10:{i // 60 % 60:02d}:{i % 60:02d} gpu-node-7 kernel: [{100 + i}.000000] NVRM: Xid "
        f"(PCI:0000:3b:00): 79, pid={i}, GPU has fallen off the bus.\n"
        f"Nov 29 10:{i // 60 % 60:02d}:{i % 60:02d} gpu-node-7 systemd[1]: Started session {i}.\n"
        + ("garbage that no grammar knows\n" if i % 500 == 7 else "")
        for i in range(3000)
    )
    files = {"node-001/dmesg.log": xid_lines(4000), "syslog": syslog}
    files |= {f"node-{i:03d}/dmesg.log": xid_lines(3) for i in range(2, 6)}
    src = make_bundle(tmp_path, files)
    whole = ingest(src, tmp_path / "whole", jobs=1)
    monkeypatch.setattr(ingest_mod, "CHUNK_BYTES", 40_000)
    monkeypatch.setattr(ingest_mod, "SPLIT_MIN_BYTES", 80_000)
    monkeypatch.setattr(ingest_mod, "PARALLEL_MIN_BYTES", 0)
    planned = {f: ingest_mod._plan_split(b, Limits()) for f, b in _bundle_files(src, tmp_path).items()}
    assert len(planned["node-001/dmesg.log"].spans) > 5 and len(planned["syslog"].spans) > 5
    assert planned["node-002/dmesg.log"] is None
    split = ingest(src, tmp_path / "split", jobs=2)

    def rows(m: dict) -> dict:
        return {f["path"]: {k: v for k, v in f.items() if k != "ingested_at"} for f in m["files"]}

    assert rows(split) == rows(whole)
    assert rows(split)["syslog"]["node"] == "gpu-node-7" and rows(split)["syslog"]["node_source"] == "content"
    assert [e[0] for e in rows(split)["syslog"]["unrecognized_examples"]] == [17, 1018, 2019, 3020, 4021, 5022]
    for t in ("events", "files"):
        a, b = read_table(tmp_path / "whole", t), read_table(tmp_path / "split", t)
        assert a.height > 0 and b.equals(a), t
    assert not list((tmp_path / "split").glob(".forensics-work*"))


@pytest.mark.parametrize("held_bytes", [ingest_mod.RANGE_HELD_BYTES, 0])
def test_a_ranges_small_tables_come_back_in_memory_and_give_the_rows_spilled_ones_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, held_bytes: int
) -> None:
    """A byte range's events (a few hundred rows) come back in memory, not spilled (`RANGE_HELD_BYTES`); above
    that size they are spilled. The file's merged outcome holds the same rows either way: line numbers
    shifted past the ranges before, the node the content names filled in."""
    syslog = "".join(
        f"Nov 29 10:{i // 60 % 60:02d}:{i % 60:02d} gpu-node-7 kernel: [{100 + i}.000000] NVRM: Xid "
        f"(PCI:0000:3b:00): 79, pid={i}, GPU has fallen off the bus.\n"
        for i in range(2000)
    )
    src = make_bundle(tmp_path, {"syslog": syslog})
    f = _bundle_files(src, tmp_path)["syslog"]
    monkeypatch.setattr(ingest_mod, "CHUNK_BYTES", 30_000)
    monkeypatch.setattr(ingest_mod, "SPLIT_MIN_BYTES", 60_000)
    split = ingest_mod._plan_split(f, Limits())
    assert split is not None and len(split.spans) > 4
    monkeypatch.setattr(ingest_mod, "RANGE_HELD_BYTES", held_bytes)
    ranges = [
        ingest_file(f, Limits(), 2025, None, spill=tmp_path / "parts" / str(k), span=span, parser_name=split.parser)
        for k, span in enumerate(split.spans)
    ]
    for r in ranges:
        assert r.row["status"] == "ok"
        assert ("events" in r.tables, "events" in r.parts) == ((True, False) if held_bytes else (False, True))
    outcomes = ingest_mod.Outcomes(tmp_path / "spill")
    outcomes.append(ingest_mod._merge_spans(f, split, ranges, None))
    got = ingest_mod._sorted(outcomes.table("events"), "events")
    whole = ingest_file(f, Limits(), 2025, None)
    want = ingest_mod._sorted(conform(whole.tables["events"], "events"), "events")
    assert got.height == 2000 and got.equals(want)
    assert set(got.get_column("node")) == {"gpu-node-7"} and got.get_column("line").to_list() == list(range(1, 2001))


def _dmon_loop(n: int) -> str:
    """`nvidia-smi dmon -s pe -o DT` on 2 GPUs, its header repeated every 10 samples, GPU 1's double-bit ECC
    counter going up now and then (an event where it changes, none where a chunk only starts after it)."""
    head = (
        "#Date       Time        gpu    pwr  gtemp  mtemp sbecc dbecc   pci\n"
        "#YYYYMMDD   HH:MM:SS    Idx      W      C      C  errs  errs  errs\n"
    )
    out = []
    for i in range(n):
        if i % 10 == 0:
            out.append(head)
        t = f"{i // 3600 % 24:02d}:{i // 60 % 60:02d}:{i % 60:02d}"
        out.append(f" 20231114   {t}      0    612     63     70     0     0     0\n")
        out.append(f" 20231114   {t}      1    640     66     74     0 {i // 997:5d}     0\n")
    return "".join(out)


def _csv_loop(n: int, hosts: tuple[str, ...] = ()) -> str:
    """`nvidia-smi --query-gpu` in a loop, its header printed once (once a host under `pdsh`, interleaved)."""
    head = ", ".join(
        ("timestamp", "index", "pci.bus_id", "temperature.gpu", "power.draw [W]",
         "ecc.errors.uncorrected.volatile.total")
    ) + "\n"
    out = [f"{h}: {head}" for h in hosts] or [head]
    for i in range(n):
        for h in hosts or ("",):
            t = f"{i // 3600 % 24:02d}:{i // 60 % 60:02d}:{i % 60:02d}"
            row = f"2023/11/14 {t}.123, 0, 00000000:18:00.0, 63, 612.34 W, {i // 1500}\n"
            out.append(f"{h}: {row}" if h else row)
    return "".join(out)


def test_a_dmon_or_csv_loop_parsed_in_byte_ranges_equals_the_loop_read_through(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A loop whose header governs the rows after it (`carry`) is parsed in ranges on the workers too: each
    range after the lines the chunk before it hands on, worked out by the parent as reading the file through
    in chunks would (the header in force, each GPU's last samples). Same rows, events, counts and examples as
    reading it through; without the parent's count (Dask) the file stays one task."""
    files = {
        "node-001/nvidia-smi-dmon.log": _dmon_loop(3000),
        "node-002/nvidia-smi-query.csv": _csv_loop(3000),
        "pdsh/nvidia-smi-query.csv": _csv_loop(1500, ("gpu-node-01", "gpu-node-02")),
        "node-003/dmesg.log": xid_lines(3),
        "node-004/dmesg.log": xid_lines(3),
    }
    src = make_bundle(tmp_path, files)
    whole = ingest(src, tmp_path / "whole", jobs=1)
    monkeypatch.setattr(ingest_mod, "CHUNK_BYTES", 40_000)
    monkeypatch.setattr(ingest_mod, "SPLIT_MIN_BYTES", 80_000)
    monkeypatch.setattr(ingest_mod, "PARALLEL_MIN_BYTES", 0)
    listed = _bundle_files(src, tmp_path)
    big = [p for p in files if "dmesg" not in p]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as counter:
        planned = {p: ingest_mod._plan_split(listed[p], Limits(), counter) for p in big}
        assert all(len(planned[p].spans) > 3 for p in big)
        dmon = planned["node-001/nvidia-smi-dmon.log"]
        assert dmon.first_line(0) == 1 and dmon.carried(0) == []
        assert dmon.carried(2)[0].startswith("#Date") and dmon.carried(2)[-1].startswith(" 20231114")
        assert planned["pdsh/nvidia-smi-query.csv"].carried(3)[:2] == [
            f"gpu-node-0{h}: timestamp, index, pci.bus_id, temperature.gpu, power.draw [W], "
            "ecc.errors.uncorrected.volatile.total" for h in (1, 2)
        ]
    assert all(ingest_mod._plan_split(listed[p], Limits()) is None for p in big)  # no count, no ranges
    split = ingest(src, tmp_path / "split", jobs=2)

    def rows(m: dict) -> dict:
        return {f["path"]: {k: v for k, v in f.items() if k != "ingested_at"} for f in m["files"]}

    assert rows(split) == rows(whole)
    for t in ("gpu_samples", "events", "files"):
        a, b = read_table(tmp_path / "whole", t), read_table(tmp_path / "split", t)
        assert a.height > 0 and b.equals(a), t
    assert read_table(tmp_path / "split", "gpu_samples").height == 2 * 3000 + 3000 + 2 * 1500
    assert read_table(tmp_path / "split", "events").filter(pl.col("kind") == "ecc_uncorrectable").height == 4


def test_a_loop_whose_carried_lines_cannot_be_worked_out_fails_as_reading_it_through_would(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When the parent's count cannot work out what a range is read after (here `carry` raises on the second
    range), the file fails with the parser's error, as reading it through would, instead of ranges read
    without their header; the other files are read."""
    from parsers import nvidia_smi_dmon

    files = {
        "node-001/nvidia-smi-dmon.log": _dmon_loop(3000),
        "node-002/nvidia-smi-query.csv": _csv_loop(3000),
        "node-003/dmesg.log": xid_lines(3),
    }
    src = make_bundle(tmp_path, files)
    monkeypatch.setattr(ingest_mod, "CHUNK_BYTES", 40_000)
    monkeypatch.setattr(ingest_mod, "SPLIT_MIN_BYTES", 80_000)
    monkeypatch.setattr(ingest_mod, "PARALLEL_MIN_BYTES", 0)
    real, calls = nvidia_smi_dmon.carry, []

    def flaky(lines: pl.Series) -> list[str]:
        calls.append(1)
        if len(calls) == 2:
            raise ValueError("a bug in carry")
        return real(lines)

    monkeypatch.setattr(nvidia_smi_dmon, "carry", flaky)
    m = ingest(src, tmp_path / "out", jobs=2)
    st = {f["path"]: f["status"] for f in m["files"]}
    failed = "error: parser nvidia-smi-dmon failed: the header lines"
    assert st["node-001/nvidia-smi-dmon.log"].startswith(failed)
    assert st["node-002/nvidia-smi-query.csv"] == "ok" and st["node-003/dmesg.log"] == "ok"
    samples = read_table(tmp_path / "out", "gpu_samples")
    assert samples.height == 3000 and set(samples.get_column("file")) == {"node-002/nvidia-smi-query.csv"}


def test_a_dmon_loop_read_in_chunks_reports_a_counter_once_where_a_chunk_ends_after_a_repeated_header(
    tmp_path: Path,
) -> None:
    """The lines a chunk hands on start under the header in force where they start, not at the repeated
    header among them: GPU 1's last sample before that header reaches the next chunk, and its double-bit ECC
    count (already up) is not reported again there."""
    p = tmp_path / "nvidia-smi-dmon.log"
    p.write_text(_dmon_loop(3000))
    f = BundleFile("node-001/nvidia-smi-dmon.log", p, p.stat().st_size, "node-001", "path")
    whole = ingest_mod.ingest_file(f, Limits(), 2023, None)
    cut = [
        ingest_mod.ingest_file(f, Limits(), 2023, None, chunk_bytes=size) for size in (40_000, 30_000, 7_777)
    ]
    for o in cut:
        assert o.tables["events"].equals(whole.tables["events"]) and o.tables["events"].height == 3
        assert o.tables["gpu_samples"].equals(whole.tables["gpu_samples"])
        assert (o.row["lines"], o.row["parsed"], o.row["unrecognized"]) == (
            whole.row["lines"], whole.row["parsed"], whole.row["unrecognized"]
        )


def _bundle_files(src: Path, tmp_path: Path) -> dict[str, BundleFile]:
    from forensics.bundle import open_bundle

    return {f.path: f for f in open_bundle(src, tmp_path / "staging-plan").files}


def test_a_worker_that_dies_on_a_byte_range_loses_only_that_file(tmp_path: Path) -> None:
    import sys

    from forensics.bundle import open_bundle
    from forensics.ingest import _run_parallel, _Split

    sys.path.insert(0, str(Path(__file__).parent))
    try:
        import _crashy  # type: ignore[import-not-found]

        files = {f"node-{i:03d}/dmesg.log": xid_lines(3) for i in range(4)}
        files["node-002/crash.log"] = xid_lines(400)
        files["node-003/big.log"] = xid_lines(400)
        b = open_bundle(make_bundle(tmp_path, files), tmp_path / "staging")
        order = sorted(b.files, key=lambda f: f.size, reverse=True)
        splits = {
            p: _Split("kernel-log", 1.0, None, [(0, 10_000), (10_000, 20_000), (20_000, len(files[p]))])
            for p in ("node-002/crash.log", "node-003/big.log")
        }
        # ranges must start at a line start: cut after a line end
        for p, sp in splits.items():
            text = files[p].encode()
            cuts = [0, text.index(b"\n", 10_000) + 1, text.index(b"\n", 20_000) + 1, len(text)]
            splits[p] = _Split(sp.parser, sp.score, sp.runner_up, list(zip(cuts, cuts[1:])))
        outs = _run_parallel(
            order, 2, tmp_path / "work", Limits(), 2026, None, lambda f: None,
            task=_crashy.crash_on_named_files, splits=splits,
        )
    finally:
        sys.path.remove(str(Path(__file__).parent))
    st = {o.row["path"]: o for o in outs}
    assert st["node-002/crash.log"].row["status"] == "error: worker process died while reading this file"
    big = st["node-003/big.log"].row
    assert (big["status"], big["lines"], big["parsed"]) == ("ok", 800, 800)
    assert big["sha256"] == hashlib.sha256(files["node-003/big.log"].encode()).hexdigest()
    assert len(outs) == 6 and sum(o.row["status"] == "ok" for o in outs) == 5


@given(
    data=st.lists(
        st.binary(max_size=60)
        | st.sampled_from([b"\n", b"\r", b"\r\n", b"x" * 300, b"\n==R", b"==R x\n", b"R"])
        | st.sampled_from([b"\nh7: ==R", b"\r==R"]),
        max_size=80,
    ),
    span=st.integers(1, 400),
    probe=st.integers(1, 64),
    record=st.sampled_from([None, b"==R", b"R"]),
    record_probe=st.integers(1, 500),
    factor=st.integers(1, 3),
)
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_line_spans_are_the_chunks_the_reader_yields(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    data: list[bytes],
    span: int,
    probe: int,
    record: bytes | None,
    record_probe: int,
    factor: int,
) -> None:
    """The byte ranges planned for a file are the chunks reading it through makes, with a record start
    (`RECORD_START`: chunks end before a line opening a record) or without, and with the chunk size of the
    format the head shows (`chunk_of`: the reader starts at `span // factor` bytes and learns it at its first
    cut)."""
    from forensics import bundle as bundle_mod
    from forensics.bundle import ChunkReader, line_spans

    monkeypatch.setattr(bundle_mod, "RECORD_PROBE", record_probe)
    body = b"".join(data)
    p = tmp_path / "f.log"
    p.write_bytes(body)
    f = BundleFile("f.log", p, len(body), "n", "path")
    reader = ChunkReader(
        f, Limits(), max(1, span // factor), record_of=lambda head: record,
        chunk_of=(lambda head: span) if factor > 1 else None,
    )
    chunks = list(reader)
    assert [body[a:b] for a, b in line_spans(f, span, probe, record)] == chunks
    assert b"".join(chunks) == body
    if record:  # a chunk with a record's line (or a prefixed one) in its last RECORD_PROBE ends before one
        lo = 0
        for c, nxt in itertools.pairwise(chunks):
            window = body[lo + max(1, span - record_probe) : lo + span]
            if any(m in window for m in (b"\n" + record, b"\r" + record, b"\nh7: " + record)):
                assert nxt.startswith((record, b"h7: " + record)) and c.endswith((b"\n", b"\r")), (c, nxt)
            lo += len(c)


def _dump_loop(fixture: str, n: int) -> str:
    """`n` dumps of a real `nvidia-smi -q` / `-q -x` fixture one after the other, as `nvidia-smi -q -l 1`
    writes them, each with its own time (the fixture's harness lines left out)."""
    import re

    text = (FIXTURES / fixture).read_text()
    text = "\n".join(line for line in text.splitlines() if "#SOURCE" not in line) + "\n"
    at = re.compile(r"(?m)^(\s*(?:Timestamp\s+: |<timestamp>)\w+ \w+ +\d+ )\d\d:\d\d:\d\d")
    stamp = "{}10:{:02d}:{:02d}"
    return "".join(at.sub(lambda m, i=i: stamp.format(m.group(1), i // 60, i % 60), text) for i in range(n))


def _read_whole_in_chunks_and_in_ranges(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    name: str,
    text: str,
    chunk: int,
    tables: tuple[str, ...] = ("inventory", "gpu_samples", "events"),
    same_notes: bool = True,
) -> dict[str, Any]:
    """Ingest `text` as one file of a bundle read whole, then in chunks of `chunk` bytes (jobs 1) and in byte
    ranges of that size (jobs 2): every time the same manifest rows, notes and tables. The whole manifest."""
    from forensics import bundle as bundle_mod

    src = make_bundle(tmp_path, {f"node-001/{name}": text, "node-002/dmesg.log": xid_lines(2)})
    whole = ingest(src, tmp_path / "whole", jobs=1)
    # a record is looked for in a chunk's last half (in its last MB of 16 as the ingest runs): the first chunk
    # still holds the head the format was detected from, a runner-up format is detected on it too, and only a
    # record longer than half a chunk is cut (a section of many kernel lines)
    assert chunk - chunk // 2 >= bundle_mod.HEAD_BYTES
    monkeypatch.setattr(bundle_mod, "RECORD_PROBE", chunk // 2)
    monkeypatch.setattr(ingest_mod, "CHUNK_BYTES", chunk)
    monkeypatch.setattr(ingest_mod, "SPLIT_MIN_BYTES", 2 * chunk)
    monkeypatch.setattr(ingest_mod, "PARALLEL_MIN_BYTES", 0)
    assert len(text.encode()) >= 6 * chunk  # (read in 6 chunks or more)

    def rows(m: dict) -> list:
        return [{k: v for k, v in f.items() if k != "ingested_at"} for f in m["files"]]

    for jobs in (1, 2):
        got = ingest(src, tmp_path / f"jobs{jobs}", jobs=jobs)
        assert rows(got) == rows(whole) and (got["notes"] == whole["notes"] or not same_notes), jobs
        for t in tables:
            a, b = read_table(tmp_path / "whole", t), read_table(tmp_path / f"jobs{jobs}", t)
            assert a.height > 0 and b.equals(a), (jobs, t)
    return whole


def test_inventory_repeated_across_a_files_pieces_keeps_its_first_line() -> None:
    """A file read in pieces keeps a fact of its parser's `INVENTORY_KEY` once, at its first line in the file,
    whatever order the pieces' rows came in (`_made_whole`); a parser without the key keeps its rows."""
    rows = [("a.txt", "driver_version", "535", 900), ("a.txt", "driver_version", "535", 6),
            ("a.txt", "serial", "1", 40), ("b.txt", "serial", "1", 7), ("b.txt", "serial", "1", 3)]
    inv = conform(
        pl.DataFrame(rows, schema=["file", "attribute", "value", "line"], orient="row").with_columns(
            node=pl.lit("n1"), component=pl.lit("node"), source=pl.lit("nvidia-smi-q")
        ),
        "inventory",
    )
    keyed = types.SimpleNamespace(INVENTORY_KEY=("node", "component", "attribute", "value"))
    a = inv.filter(pl.col("file") == "a.txt")
    b = inv.filter(pl.col("file") == "b.txt")
    def whole(parser: object, rows: pl.DataFrame) -> pl.DataFrame:
        return ingest_mod._made_whole(parser, {"inventory": rows}, [], "", ("chunks", "chunk"))["inventory"]

    got = pl.concat([whole(keyed, a), whole(types.SimpleNamespace(), b)])
    assert sorted(got.select("file", "attribute", "line").rows()) == [
        ("a.txt", "driver_version", 6),
        ("a.txt", "serial", 40),
        ("b.txt", "serial", 3),
        ("b.txt", "serial", 7),
    ]
    assert ingest_mod.sort_order(inv.head(0), ["file", "line"]) is not None  # (no row: nothing to hash)


def test_an_nvidia_smi_table_loop_read_in_chunks_or_ranges_gives_what_reading_it_whole_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`nvidia-smi -l N` (the default table, each snapshot under its time line) longer than a chunk: pieces
    end before a snapshot (`nvidia_smi_table.record_start`) and the facts every snapshot restates are kept
    once (a cut inside a snapshot lost GPU rows, left lines not understood and repeated the inventory)."""
    loop = _dump_loop("nvidia-smi-table/table_550_89col_h100x8_time_first_line.txt", 220)
    whole = _read_whole_in_chunks_and_in_ranges(tmp_path, monkeypatch, "nvidia-smi.log", loop, 100_000)
    row = next(f for f in whole["files"] if f["path"].endswith("nvidia-smi.log"))
    assert row["format"] == "nvidia-smi-table" and row["status"] == "ok" and row["unrecognized"] == 0
    assert read_table(tmp_path / "whole", "gpu_samples").height == 220 * 8


def test_a_step_table_read_in_chunks_or_ranges_gives_what_reading_it_whole_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A W&B-style step table (CSV) longer than a chunk: each chunk is parsed after the header and the last
    rows (`step_table.carry`). Without them every chunk but the first took its first row for a header and
    read no step at all; the first rows' step times are the deltas of the runtime from the rows before."""
    runtime = [0.85 * i + (0.3 if i % 97 == 0 else 0) for i in range(16_000)]
    rows = [f"{i},{runtime[i]:.3f},{2.5 - i / 40000:.5f}" for i in range(1, 16_000)]
    text = "_step,_runtime,train/loss\n" + "\n".join(rows[:5000] + ["# resumed", "", *rows[5000:]]) + "\n"
    whole = _read_whole_in_chunks_and_in_ranges(
        tmp_path, monkeypatch, "wandb_history.csv", text, 34_000, tables=("steps",)
    )
    row = next(f for f in whole["files"] if f["path"].endswith("wandb_history.csv"))
    assert row["format"] == "step-table" and row["unrecognized"] == 1  # (the comment line)
    steps = read_table(tmp_path / "whole", "steps")
    assert steps.height == 15999 and steps.get_column("step_time_s").null_count() == 1  # (the first step's)


@pytest.mark.parametrize("srun", [True, False])
def test_a_megatron_log_read_in_chunks_or_ranges_keeps_each_iterations_timers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, srun: bool
) -> None:
    """A Megatron training log longer than a chunk: chunks and byte ranges end before an `iteration N/M |`
    line (`step_log.record_start`), so the `(min, max) time across ranks` block printed after it stays with it
    (a cut between them lost the step's timers and left the block's lines not understood). Without `srun -l`
    the log's head (the arguments, c10d warnings) is detected as a PyTorch-distributed log, whose chunks the
    step grammar reads too (`_mixed.parse`): they end before an iteration line all the same
    (`_mixed.record_start`; they were cut anywhere)."""
    from bench import big_steps

    big_steps.write(tmp_path / "train.log", 1.5, 0, srun=srun)  # (seed 0: Megatron)
    text = (tmp_path / "train.log").read_text()
    assert "(min, max) time across ranks" in text
    whole = _read_whole_in_chunks_and_in_ranges(
        tmp_path, monkeypatch, "train.log", text, 100_000, tables=("steps", "events"), same_notes=False
    )
    row = next(f for f in whole["files"] if f["path"].endswith("train.log"))
    assert row["format"] == ("step-log" if srun else "torch-distributed")
    steps = read_table(tmp_path / "whole", "steps")
    assert steps.height > 100 and steps.get_column("optimizer_s").null_count() < steps.height


def test_an_nccl_log_read_in_chunks_or_ranges_gives_what_reading_it_whole_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An NCCL debug log longer than a chunk, with communicators created throughout and WARNs: its parser's
    `merge_chunks` combines the COLL aggregates a cut splits, merges the rank rows again and gives a WARN the
    rank of its process in its largest communicator, learnt in any chunk (a later chunk gave the rank in a
    sub-communicator); `shift_lines` moves an aggregate's first line in a byte range numbered from 1. Only
    the per-chunk counts in the notes differ."""
    from bench import big_nccl

    big_nccl.write(tmp_path / "big.log", 2.0, seed=7)  # (3 WARNs, ~960 communicators)
    text = (tmp_path / "big.log").read_text()
    _read_whole_in_chunks_and_in_ranges(
        tmp_path, monkeypatch, "nccl-debug.log", text, 150_000, tables=("events", "comms", "inventory"),
        same_notes=False,
    )
    events = read_table(tmp_path / "whole", "events").filter(pl.col("file").str.ends_with("nccl-debug.log"))
    assert events.height >= 3 and events.get_column("rank").null_count() == 0


@pytest.mark.parametrize(
    "name, fixture, n, form",
    [
        ("nvidia-smi-q.txt", "nvidia-smi/q_h100_535_hw_power_brake_active.txt", 40, "plain"),
        ("nvidia-smi-q.txt", "nvidia-smi/q_h100_535_hw_power_brake_active.txt", 40, "pdsh"),
        ("nvidia-smi-q.txt", "nvidia-smi/q_h100_535_hw_power_brake_active.txt", 40, "cr"),
        ("nvidia-smi-q.xml", "nvidia-smi-xml/qx_h100_535_v12_event_reasons_remap_pending.xml", 150, "plain"),
    ],
)
def test_a_dump_loop_read_in_chunks_or_ranges_gives_what_reading_it_whole_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, fixture: str, n: int, form: str
) -> None:
    """An `nvidia-smi -q` (or `-q -x`) loop longer than a chunk: chunks and byte ranges end before a dump's
    first line (`RECORD_START`), so no dump is cut in two (which made the file 'partial', lost rows and left
    lines not understood), and the inventory facts every dump restates are kept once per file, as reading
    the file whole does (`INVENTORY_KEY`)."""
    loop = _dump_loop(fixture, n)
    if form == "pdsh":  # (every line behind pdsh's host prefix)
        loop = "".join(f"gpu-node-7: {line}\n" for line in loop.splitlines())
    elif form == "cr":  # (old-Mac line ends)
        loop = loop.replace("\n", "\r")
    assert len(loop) > 900_000
    whole = _read_whole_in_chunks_and_in_ranges(tmp_path, monkeypatch, name, loop, 100_000)
    row = next(f for f in whole["files"] if f["path"].endswith(name))
    assert row["status"] == "ok" and row["unrecognized"] == 0 and row["lines"] > 10_000
    gpus = loop.count("Serial Number" if name.endswith(".txt") else "<serial>") // n
    inv = read_table(tmp_path / "whole", "inventory")
    assert gpus >= 2 and inv.filter(pl.col("attribute") == "serial").height == gpus  # (each GPU's, once)


@pytest.mark.parametrize("chunk", [34_000, 41_000])
def test_a_bug_report_read_in_chunks_or_ranges_gives_what_reading_it_whole_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int
) -> None:
    """An nvidia-bug-report.log longer than a chunk: cut before a section's separator line where one is near
    the chunk's end (`RECORD_START`), else inside a long section (here its dmesg), whose header the next chunk
    is parsed after (`carry`); the facts its sections state again are kept once (`INVENTORY_KEY`). Rows,
    counts and notes are those of reading the report whole."""
    path = FIXTURES / "bug-report" / "bug_report_560_titanv_xid79_sections.log"
    lines = [line for line in path.read_text().splitlines() if "#SOURCE" not in line]
    at = lines.index("dmesg:") + 4  # (after its boot and module lines, before its Xid at 5301 s)
    dmesg = []  # (one boot: the uptime only grows)
    for i in range(5000):
        dmesg.append(f"[ {100 + i // 10}.{i % 10}00000] usb 1-1: new high-speed USB device number {i}")
        if i % 120 == 7:
            xid = f"NVRM: Xid (PCI:0000:01:00): 13, pid={i}, Graphics Exception"
            dmesg.append(f"[ {100 + i // 10}.{i % 10}50000] {xid}")
    report = "\n".join([*lines[:at], *dmesg, *lines[at:]]) + "\n"
    whole = _read_whole_in_chunks_and_in_ranges(tmp_path, monkeypatch, "nvidia-bug-report.log", report, chunk)
    row = next(f for f in whole["files"] if f["path"].endswith("nvidia-bug-report.log"))
    assert row["format"] == "bug-report" and row["status"] == "ok"
    events = read_table(tmp_path / "whole", "events")
    xid13 = pl.col("file").str.ends_with("report.log") & (pl.col("kind") == "xid") & (pl.col("code") == "13")
    assert events.filter(xid13).height == 42


def test_tables_too_large_to_hold_are_written_in_sorted_parts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stats_checked: dict[str, int]
) -> None:
    """Past HOLD_ROWS, steps, gpu_samples and events stay in Parquet parts: the clock, year and identity stages
    run lazily and the table is written in sorted parts of PART_ROWS rows; the rows and the notes are the same
    as when held in memory."""
    from forensics.simulate import simulate

    src = tmp_path / "bundle"
    simulate(src, nodes=4, gpus_per_node=4, hours=0.5, faults=[], seed=3)
    # a raw dmesg whose times the journal's copies of its lines anchor, and a dmesg -T whose zone they tell
    xid = "NVRM: Xid (PCI:0000:18:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."
    (src / "logs" / "hgx-h100-0003_dmesg.raw.log").write_text(
        "".join(f"[ {5000 + i}.000000] {xid}\n" for i in range(60)) + "[   10.000000] Linux version 6.8.0\n"
    )
    (src / "logs" / "hgx-h100-0003_dmesg.T.log").write_text(f"[Mon Jun  2 12:00:03 2025] {xid}\n")
    (src / "logs" / "hgx-h100-0003_journal.log").write_text(
        "".join(f"2025-06-02T12:{i // 60:02d}:{i % 60:02d}.000000+02:00 hgx-h100-0003 kernel: {xid}\n" for i in range(3))
    )
    held_m = ingest(src, tmp_path / "held", jobs=1)
    monkeypatch.setattr(ingest_mod, "HOLD_ROWS", 50)
    monkeypatch.setattr(ingest_mod, "PART_ROWS", 40)
    monkeypatch.setattr(ingest_mod, "HOLD_BYTES", 20_000)
    m = ingest(src, tmp_path / "parts", jobs=1)
    assert stats_checked["by_part"] == 2 and stats_checked["years"] == 1  # (what the parts' writers counted)
    assert m["notes"] == held_m["notes"]
    assert any("anchored to boot time" in n for n in m["notes"]) and any("shifted by -120 min" in n for n in m["notes"])
    for t in ("steps", "gpu_samples", "events"):
        held, parts = read_table(tmp_path / "held", t), read_table(tmp_path / "parts", t)
        files = sorted((tmp_path / "parts" / "tables" / t).glob("*.parquet"))
        assert held.height > 80 and len(files) >= held.height // 40, t
        assert m["totals"]["rows"][t] == held.height
        for f in files:
            one = pl.read_parquet(f)
            assert one.height <= 40 * 1.5
            keys = [k for k in ingest_mod._SORT_KEYS[t] if k in one.columns]
            assert one.select(keys).equals(one.select(keys).sort(keys, nulls_last=True, maintain_order=True))
        cols = held.columns
        assert parts.sort(cols, nulls_last=True).equals(held.sort(cols, nulls_last=True)), t
    assert not (tmp_path / "parts" / ".forensics-work").exists()


def _query_gpu_loop(n: int) -> str:
    head = (
        "timestamp, index, pci.bus_id, utilization.gpu [%], temperature.gpu, power.draw [W], "
        "ecc.errors.uncorrected.volatile.total, clocks_event_reasons.hw_thermal_slowdown\n"
    )
    rows = [
        f"2026/11/29 10:{i // 60 % 60:02d}:{i % 60:02d}.000, {g}, 00000000:{0x18 + g * 0x10:02X}:00.0, 97 %, "
        f"{60 + g}, 650.00 W, {3 if g == 5 else 0}, {'Active' if g == 2 and 200 <= i < 260 else 'Not Active'}\n"
        for i in range(n)
        for g in range(8)
    ]
    return head + "".join(rows)


@pytest.mark.parametrize("name", ["nvidia-smi-query.csv", "dmon.log"])
def test_monitoring_loop_parsed_in_chunks_equals_whole(tmp_path: Path, name: str) -> None:
    """A --query-gpu / dmon loop longer than a chunk: the next chunk is parsed after the header in force and
    each GPU's last sample (`parser.carry` + tail), so no row is lost and a counter already non-zero at a
    chunk start is not reported again."""
    p = tmp_path / name
    if name.endswith(".csv"):
        p.write_text(_query_gpu_loop(400))
    else:
        hdr = "# gpu    pwr  gtemp  mtemp     sm    mem    enc    dec\n# Idx      W      C      C      %      %      %      %\n"
        p.write_text(hdr + "".join(f"    {g}   {300 + i % 50}     {40 + g}      -     {90 + (i % 5)}     30      0      0\n"
                                   for i in range(3000) for g in range(8) if True) )
    whole = ingest_file(_bf(p), Limits(), 2026, None)
    chunked = ingest_file(_bf(p), Limits(), 2026, None, chunk_bytes=20_000)
    assert whole.row == chunked.row and whole.row["unrecognized"] == 0
    assert whole.tables.keys() == chunked.tables.keys()
    for t in whole.tables:
        assert chunked.tables[t].equals(whole.tables[t]), t
    assert whole.tables["gpu_samples"].height == (400 * 8 if name.endswith(".csv") else 3000 * 8)
    if name.endswith(".csv"):
        ev = whole.tables["events"]
        assert sorted(ev.select("kind", "gpu_index").rows()) == [("ecc_uncorrectable", 5), ("thermal", 2)]


def test_longest_tasks_are_handed_out_first() -> None:
    """A large file that cannot be split (compressed, or a monitoring loop read in order) starts before the
    16 MB ranges of split files, or it alone would run on at the end while the other workers idle; a split
    file's ranges stay in order and its checksum follows them."""
    mb = 1024**2

    def bf(path: str, size: int, compression: str | None = None) -> BundleFile:
        return BundleFile(path, None, size, "n", "path", compression)

    big_log, loop = bf("a/nccl.log", 64 * mb), bf("b/dmon.log", 40 * mb)
    gz, small = bf("c/x.gz", 5 * mb, "gzip"), bf("d", 10)
    spans = [(0, 16 * mb), (16 * mb, 32 * mb + 7), (32 * mb + 7, 48 * mb), (48 * mb, 64 * mb)]
    splits = {"a/nccl.log": ingest_mod._Split("nccl", 1.0, None, spans)}
    order = ingest_mod._tasks([big_log, loop, gz, small], splits)
    assert order == [(loop, -1), (gz, -1), (big_log, 0), (big_log, 1), (big_log, 2), (big_log, 3),
                     (big_log, -2), (small, -1)]


def test_outcomes_keep_every_row_across_merges_and_spills(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Thousands of small per-file frames are merged in blocks (and spilled past HOLD_BYTES): every row is
    kept, once, whatever the order of merges and spills, and the table has its dtypes where pooled frames
    sent their columns of nulls typeless (`_nulls_typeless`), before or after frames that fill them."""
    monkeypatch.setattr(ingest_mod, "MERGE_EVERY", 7)
    outcomes = ingest_mod.Outcomes(tmp_path / "spill")
    want = []
    for i in range(100):
        cols = {"file": [f"f{i}"] * 3, "line": [1, 2, 3], "message": ["m"] * 3, "node": ["n"] * 3}
        if i % 3 == 0:
            cols["code"], cols["gpu_index"] = ["7"] * 3, [1, 2, 3]  # filled here, typeless in the others
        df = pl.DataFrame(cols).with_columns(source=pl.lit("s"), kind=pl.lit("k"), severity=pl.lit("i"))
        sent = ingest_mod._nulls_typeless(conform(df, "events"))
        want += [(f"f{i}", n, "7" if i % 3 == 0 else None) for n in (1, 2, 3)]
        outcomes.append(ingest_mod.FileOutcome({"path": f"f{i}"}, tables={"events": sent}))
        if i == 60:
            outcomes._spill()
    got = outcomes.table("events")
    assert got.schema == get_schema("events")
    assert sorted(zip(got["file"], got["line"], got["code"], strict=True), key=str) == sorted(want, key=str)
    assert got["gpu_index"].drop_nulls().len() == 34 * 3


def _megatron_iterations(n: int) -> list[str]:
    """`n` Megatron iteration lines of 4 srun ranks (`srun -l` prefixes)."""
    return [
        f"{i % 4}:  iteration {i:8d}/ 100000 | consumed samples: {i * 8:10d} | elapsed time per iteration (ms): "
        f"{1000 + (i * 37) % 200:.1f} | learning rate: 1.0E-04 | global batch size:     8 | lm loss: 2.5E+00 |"
        for i in range(1, n + 1)
    ]


def _cut_in_ranges_and_parts(monkeypatch: pytest.MonkeyPatch) -> None:
    """A file of 60 kB or more cut into 30 kB byte ranges, even in a small bundle; steps and gpu_samples of
    more than 100 rows left in their parts, written in parts of 700 rows."""
    monkeypatch.setattr(ingest_mod, "CHUNK_BYTES", 30_000)
    monkeypatch.setattr(ingest_mod, "SPLIT_MIN_BYTES", 60_000)
    monkeypatch.setattr(ingest_mod, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(ingest_mod, "HOLD_ROWS", 100)
    monkeypatch.setattr(ingest_mod, "PART_ROWS", 700)


def _spy_on_kept_parts(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The written parts the parent takes as a worker wrote them (`_keep_part`), as they are taken."""
    kept: list[Path] = []
    keep = ingest_mod._keep_part
    monkeypatch.setattr(ingest_mod, "_keep_part", lambda part, to: kept.append(to) or keep(part, to))
    return kept


def test_a_large_table_from_byte_ranges_written_in_parts_keeps_every_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A training log split into byte ranges whose steps are too many to hold: the ranges' parts (lines
    shifted by each range's offset) are read back piece by piece, each piece opening only the parts that hold
    its rows; the table has the rows of a plain sequential ingest, in sorted parts."""
    lines = _megatron_iterations(3000)
    src = make_bundle(tmp_path, {"node-001/train.log": "\n".join(lines) + "\n", "node-002/train.log": lines[0] + "\n"})
    whole = ingest(src, tmp_path / "whole", jobs=1)
    _cut_in_ranges_and_parts(monkeypatch)
    spans = ingest_mod._plan_split(_bundle_files(src, tmp_path)["node-001/train.log"], Limits()).spans
    assert len(spans) > 5
    kept = _spy_on_kept_parts(monkeypatch)
    split = ingest(src, tmp_path / "split", jobs=2)
    assert split["totals"] == whole["totals"] and whole["totals"]["rows"]["steps"] == 3001
    a, b = read_table(tmp_path / "whole", "steps"), read_table(tmp_path / "split", "steps")
    assert "__part" not in b.columns and b.columns == a.columns
    assert b.sort(a.columns, nulls_last=True).equals(a.sort(a.columns, nulls_last=True))
    files = sorted((tmp_path / "split" / "tables" / "steps").glob("*.parquet"))
    assert len(files) >= 3001 // 700
    # the parent counted the lines before each range, so the workers' parts (a range's steps) were written
    # numbered as in the file and are taken as they are; each is a sorted part of the table
    assert len(kept) >= len(spans) - 2 and {k.name for k in kept} <= {f.name for f in files}
    # kept or written by the parent, every part is as readable as a file the user writes
    assert {stat.S_IMODE(f.stat().st_mode) for f in files} == {FILE_MODE}
    for part in (f for f in files if f.name in {k.name for k in kept}):
        df = pl.read_parquet(part)
        assert df.height and df.equals(df.sort("node", "rank", "step", "file", "line", maintain_order=True))
        assert footer_metadata(part)[b"gpu_forensics.table"] == b"steps"


def test_ranges_numbered_from_a_wrong_count_are_shifted_and_not_kept_as_they_are(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Should the parent's count of the lines before a range be off (a file changed while read, a line end
    counted otherwise than the reader counts it), the merge shifts the range's rows by the difference and
    the parent rewrites its part: line numbers stay those of the file."""
    lines = _megatron_iterations(1500)
    src = make_bundle(tmp_path, {"node-001/train.log": "\n".join(lines) + "\n", "node-002/x.log": lines[0] + "\n"})
    whole = ingest(src, tmp_path / "whole", jobs=1)
    _cut_in_ranges_and_parts(monkeypatch)
    count = ingest_mod.span_first_lines
    monkeypatch.setattr(ingest_mod, "span_first_lines", lambda f, sp: [n + 3 * (n > 1) for n in count(f, sp)])
    kept = _spy_on_kept_parts(monkeypatch)
    split = ingest(src, tmp_path / "split", jobs=2)
    assert split["totals"] == whole["totals"]
    a, b = read_table(tmp_path / "whole", "steps"), read_table(tmp_path / "split", "steps")
    assert b.sort(a.columns, nulls_last=True).equals(a.sort(a.columns, nulls_last=True))
    assert len(kept) == 1  # the first range only: its count (line 1) was right


def test_parts_of_a_file_named_by_its_content_get_the_node_and_are_not_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A training log at the bundle's root whose lines name their host (`pdsh` prefixes): its ranges' steps
    get that node from the parent (`Part.node`), so none of the workers' parts is taken as it is."""
    lines = ["gpu-node-9: " + line for line in _megatron_iterations(3000)]
    src = make_bundle(tmp_path, {"train.log": "\n".join(lines) + "\n", "node-002/x.log": lines[0] + "\n"})
    whole = ingest(src, tmp_path / "whole", jobs=1)
    _cut_in_ranges_and_parts(monkeypatch)
    kept = _spy_on_kept_parts(monkeypatch)
    split = ingest(src, tmp_path / "split", jobs=2)
    assert split["totals"] == whole["totals"] and kept == []
    a, b = read_table(tmp_path / "whole", "steps"), read_table(tmp_path / "split", "steps")
    assert b.sort(a.columns, nulls_last=True).equals(a.sort(a.columns, nulls_last=True))
    assert set(b.get_column("node")) == {"gpu-node-9"}


def test_a_megatron_log_is_read_in_chunks_of_its_chunk_factor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Megatron log's byte ranges, and the chunks of the same log read through (compressed: never split), are
    its `chunk_factor` times `CHUNK_BYTES`; a kernel log's are `CHUNK_BYTES`. Read either way, the log gives the
    same rows."""
    import gzip

    lines = _megatron_iterations(3000)
    text = "\n".join(lines) + "\n"
    src = make_bundle(tmp_path, {"node-001/train.log": text, "node-002/dmesg.log": xid_lines(2000)})
    (src / "node-003").mkdir()
    (src / "node-003" / "train.log.gz").write_bytes(gzip.compress(text.encode()))
    _cut_in_ranges_and_parts(monkeypatch)
    factor = ingest_mod.chunk_factor(step_log, text.encode()[:4096])
    assert factor > 1
    files = _bundle_files(src, tmp_path)
    for path, size in (("node-001/train.log", factor * 30_000), ("node-002/dmesg.log", 30_000)):
        spans = ingest_mod._plan_split(files[path], Limits()).spans
        assert max(b - a for a, b in spans) <= size < 2 * min(b - a for a, b in spans[:-1]), path
    chunks: list[int] = []
    parse = ingest_mod._mixed.parse

    def counted(parser: Any, lines: pl.Series, ctx: FileContext) -> ParseResult:
        chunks.append(len(lines))
        return parse(parser, lines, ctx)

    monkeypatch.setattr(ingest_mod._mixed, "parse", counted)
    ingest_file(files["node-003/train.log.gz"], Limits(), None, None, chunk_bytes=ingest_mod.CHUNK_BYTES)
    assert len(chunks) == len(ingest_mod._plan_split(files["node-001/train.log"], Limits()).spans)
    split = ingest(src, tmp_path / "out", jobs=2)
    steps = read_table(tmp_path / "out", "steps")
    a, b = (
        steps.filter(pl.col("node") == n).drop("node", "file").sort("line") for n in ("node-001", "node-003")
    )
    assert a.height == 3000 and a.equals(b)
    assert {f["path"]: f["status"] for f in split["files"]} == dict.fromkeys(files, "ok")


def test_small_ranges_written_together_are_read_not_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ranges of a few dozen steps (fewer than 1/SOLO_SHARE of a written part) are written several to a part:
    such a part is read from all of them, none is taken as it is, and no row is lost."""
    lines = _megatron_iterations(3000)
    text = "\n".join(lines) + "\n"
    src = make_bundle(tmp_path, {"node-001/train.log": text, "node-002/x.log": lines[0] + "\n"})
    whole = ingest(src, tmp_path / "whole", jobs=1)
    _cut_in_ranges_and_parts(monkeypatch)
    # (ranges of 4 kB: a training log's are `CHUNK_FACTOR` chunks)
    monkeypatch.setattr(ingest_mod, "CHUNK_BYTES", 4_000 // ingest_mod.chunk_factor(step_log, text.encode()))
    monkeypatch.setattr(ingest_mod, "SPLIT_MIN_BYTES", 8_000)
    monkeypatch.setattr(ingest_mod, "SOLO_SHARE", 16)  # (a range's ~13 steps: fewer than 700 // 16)
    kept = _spy_on_kept_parts(monkeypatch)
    split = ingest(src, tmp_path / "split", jobs=2)
    assert split["totals"] == whole["totals"] and kept == []
    a, b = read_table(tmp_path / "whole", "steps"), read_table(tmp_path / "split", "steps")
    assert b.height == 3001 and b.sort(a.columns, nulls_last=True).equals(a.sort(a.columns, nulls_last=True))


@pytest.mark.parametrize("keep", [False, True])
def test_rows_without_a_line_in_a_later_part_are_written_once(tmp_path: Path, keep: bool) -> None:
    """A (node, file) cut into line ranges: its rows without a line go with the first piece, whichever part
    holds them (a part with some past the first range was read by no piece), and a part holding some is
    not taken as it is for a later piece."""
    from forensics.outputs import write_table_file
    from forensics.schema import conform

    outcomes = ingest_mod.Outcomes(tmp_path / "spill")
    spans = [list(range(1, 1001)), [*range(1001, 1991), *[None] * 5], list(range(2001, 3001))]
    for i, lines in enumerate(spans):
        n = len(lines)
        cols = {"node": ["n1"] * n, "source": ["dmon"] * n, "file": ["f.log"] * n, "gpu_index": [0] * n}
        df = conform(pl.DataFrame(cols).with_columns(line=pl.Series(lines, dtype=pl.Int64)), "gpu_samples")
        part = tmp_path / f"p{i}.parquet"
        write_table_file(ingest_mod._sorted(df, "gpu_samples"), "gpu_samples", part)
        outcomes.parts.setdefault("gpu_samples", []).append(ingest_mod.Part(str(part), final=True))
    lf = outcomes.lazy("gpu_samples", tmp_path / "hive")
    as_is = outcomes.as_is["gpu_samples"] if keep else {}
    assert len(outcomes.as_is["gpu_samples"]) == 3
    ingest_mod.PART_ROWS, saved = 1000, ingest_mod.PART_ROWS
    try:
        assert ingest_mod._write_in_parts(lf, "gpu_samples", tmp_path / "tables", as_is) == 2995
    finally:
        ingest_mod.PART_ROWS = saved
    got = pl.read_parquet(sorted((tmp_path / "tables" / "gpu_samples").glob("*.parquet")))
    assert got.height == 2995 and got.get_column("line").null_count() == 5
    assert got.get_column("line").drop_nulls().n_unique() == 2990


_DMON_LOOP = (
    "#Date       Time        gpu    pwr  gtemp  mtemp     sm    mem\n"
    "#YYYYMMDD   HH:MM:SS    Idx      W      C      C      %      %\n"
) + "".join(
    f" 20231114   13:{i // 60 % 60:02d}:{i % 60:02d}      {g}    612     63     70     98     41\n"
    for i in range(1500) for g in range(2)
)
"""A dmon loop of two GPUs named by index only: 3,000 samples."""
_GPU_QUERY_CSV = (
    "timestamp, index, pci.bus_id, uuid, temperature.gpu\n"
    "2023/11/14 13:34:16.123, 0, 00000000:18:00.0, GPU-0a1b2c3d-4e5f-6071-8293-a4b5c6d7e8f9, 63\n"
    "2023/11/14 13:34:16.123, 1, 00000000:2A:00.0, GPU-1a1b2c3d-4e5f-6071-8293-a4b5c6d7e8f9, 64\n"
)
"""A `--query-gpu` CSV naming the same two GPUs by index and bus id: the node's inventory."""


@pytest.mark.parametrize("inventory", [True, False])
def test_a_large_tables_parts_filled_by_the_identity_stage_are_filled_as_they_are(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, inventory: bool
) -> None:
    """dmon samples name a GPU by index only. With the node's `--query-gpu` CSV (index and bus id), identity
    resolution fills the bus id of every sample: each part the file was read in (in chunks, each a written part
    of its own) is read, filled and written again (`rowwise`), none taken as it is; without it, nothing changes
    the samples and every such part is taken as it is. Either way, the rows of a whole-file ingest."""
    dmon, csv = _DMON_LOOP, _GPU_QUERY_CSV
    files = {"node-001/nvidia-smi-dmon.log": dmon} | ({"node-001/gpu-query.csv": csv} if inventory else {})
    src = make_bundle(tmp_path, files)
    whole = ingest(src, tmp_path / "whole", jobs=1)
    # read in chunks of ~430 lines, each spilled as a part of its own; the table too large to hold
    monkeypatch.setattr(ingest_mod, "CHUNK_BYTES", 30_000)
    monkeypatch.setattr(ingest_mod, "HOLD_ROWS", 100)
    monkeypatch.setattr(ingest_mod, "PART_ROWS", 700)
    kept = _spy_on_kept_parts(monkeypatch)
    filled: list[int] = []
    resolve_rowwise = identity.resolve_rowwise

    def spied(tables: dict[str, Any]) -> Any:
        out, notes, fill = resolve_rowwise(tables)
        return out, notes, fill and (lambda df: filled.append(df.height) or fill(df))

    monkeypatch.setattr(identity, "resolve_rowwise", spied)
    chunked = ingest(src, tmp_path / "chunked", jobs=1)
    assert chunked["totals"] == whole["totals"]
    a, b = read_table(tmp_path / "whole", "gpu_samples"), read_table(tmp_path / "chunked", "gpu_samples")
    assert b.sort(a.columns, nulls_last=True).equals(a.sort(a.columns, nulls_last=True))
    assert len(list((tmp_path / "chunked" / "tables" / "gpu_samples").glob("*.parquet"))) > 3
    dmon_rows = b.filter(pl.col("file").str.ends_with("dmon.log"))
    assert dmon_rows.height == 3000
    if inventory:
        assert kept == [] and len(filled) >= 3 and dmon_rows.get_column("gpu_bus_id").null_count() == 0
    else:
        assert len(kept) >= 3 and filled == [] and dmon_rows.get_column("gpu_bus_id").null_count() == 3000


def _dmon_pool(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[Path, dict[str, Any], list[Path], list[str]]:
    """A bundle of three nodes' dmon loops beside their `--query-gpu` CSV (the inventory) and three other
    nodes' loops alone, ingested in this process; then the settings that make a pool ingest of it hand each
    batch of three loops over as a part. Returned: the bundle, the manifest of the ingest here, the parts the
    parent will keep as they are (`_spy_on_kept_parts`) and the tables of the whole spilled parts it reads."""
    dmon, csv = _DMON_LOOP, _GPU_QUERY_CSV
    whole = {f"node-00{k}/nvidia-smi-dmon.log": dmon for k in range(1, 4)}
    whole |= {f"node-00{k}/gpu-query.csv": csv for k in range(1, 4)}
    lone = {f"other-00{k}/nvidia-smi-dmon.log": dmon for k in range(1, 4)}
    src = make_bundle(tmp_path, whole | lone)
    here = ingest(src, tmp_path / "here", jobs=1)
    monkeypatch.setattr(ingest_mod, "_small", lambda files, size: False)
    monkeypatch.setattr(ingest_mod, "PREFILL_MIN_BYTES", 0)
    monkeypatch.setattr(ingest_mod, "HOLD_ROWS", 100)
    monkeypatch.setattr(ingest_mod, "HANDED_BYTES", 1)
    monkeypatch.setattr(ingest_mod, "PART_ROWS", 12_000)
    monkeypatch.setattr(ingest_mod, "SOLO_SHARE", 4)
    monkeypatch.setattr(ingest_mod, "BATCH_FILES", 3)  # (a batch of each node's three loops, the other's)
    kept = _spy_on_kept_parts(monkeypatch)
    read_whole: list[str] = []
    completed = ingest_mod._completed

    def spied(df: pl.DataFrame, p: Any, table: str) -> pl.DataFrame:
        if p.whole:
            read_whole.append(table)
        return completed(df, p, table)

    monkeypatch.setattr(ingest_mod, "_completed", spied)
    return src, here, kept, read_whole


def _pooled_as_here(src: Path, tmp_path: Path, here: dict[str, Any]) -> pl.DataFrame:
    """The samples of a pool ingest of `src`, checked against those of the ingest here (`_dmon_pool`)."""
    pooled = ingest(src, tmp_path / "pooled", jobs=2)
    assert pooled["totals"] == here["totals"]
    a, b = read_table(tmp_path / "here", "gpu_samples"), read_table(tmp_path / "pooled", "gpu_samples")
    assert b.sort(a.columns, nulls_last=True).equals(a.sort(a.columns, nulls_last=True))
    filled = b.filter(pl.col("node").str.starts_with("node-") & pl.col("file").str.ends_with("dmon.log"))
    assert filled.height == 9000 and filled.get_column("gpu_bus_id").null_count() == 0
    assert b.filter(pl.col("node").str.starts_with("other-")).get_column("gpu_bus_id").null_count() == 9000
    for part in (tmp_path / "pooled" / "tables" / "gpu_samples").glob("*.parquet"):
        assert ingest_mod.in_sort_order(pl.read_parquet(part), "gpu_samples")
    return b


def test_workers_hand_dmon_samples_a_node_inventory_will_fill_as_whole_parts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In the pool, a batch of dmon loops whose nodes have other files (a `--query-gpu` CSV: the inventory)
    comes back as a whole spilled part (`Part.whole`), which the parent reads, fills and writes once; a batch
    whose nodes have no other file, as a written part the parent takes as it is. The tables are those of an
    ingest in this process (written parts, filled by the parent)."""
    src, here, kept, read_whole = _dmon_pool(tmp_path, monkeypatch)
    # (a bundle under `PREFILL_MIN_BYTES`: the workers fill none, see the next test)
    monkeypatch.setattr(ingest_mod, "PREFILL_MIN_BYTES", sum(p.stat().st_size for p in src.rglob("*")) + 1)
    _pooled_as_here(src, tmp_path, here)
    assert read_whole == ["gpu_samples"] and len(kept) == 1


@pytest.mark.parametrize("seen", ["whole", "other", "none"])
def test_workers_fill_dmon_samples_from_the_map_the_parent_published(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seen: str
) -> None:
    """In the pool, a worker fills the bus ids of the dmon samples it hands over from the GPU map the parent
    published (`_GpuBoard`) and writes them as a part of the table (`Part.filled`). Where the map it saw
    holds the whole inventory's rows on its nodes, the parent keeps that part as it is; where it held other
    rows (the inventory was not yet whole), the fill is taken back and the identity stage fills the rows as
    any (and the table is written anew, every part); with no map, the samples come as a whole spilled part,
    as before. The tables are those of an ingest in this process every time."""
    src, here, kept, read_whole = _dmon_pool(tmp_path, monkeypatch)
    m = identity.gpu_map(read_table(tmp_path / "here", "inventory"))
    assert m.height == 3 * 2  # (two GPUs a node)
    if seen == "other":  # (each node's bus ids a GPU along: what an inventory renumbered later would show)
        m = m.with_columns(pl.col("gpu_bus_id").shift(1).over("node").fill_null("0000:ff:00.0"))
    board = ingest_mod._GpuBoard

    class Seen(board):  # (the map the workers see: put up before the first task, never changed)
        def __init__(self, path: Path) -> None:
            super().__init__(path)
            if seen != "none":
                m.write_parquet(path)

        def publish(self) -> None:
            pass

    monkeypatch.setattr(ingest_mod, "_GpuBoard", Seen)
    _pooled_as_here(src, tmp_path, here)
    # the lone nodes' batch is kept as it is but where the table is written anew; the filled batch where the
    # map was the whole one's
    assert len(kept) == {"whole": 2, "other": 0, "none": 1}[seen]
    assert read_whole == (["gpu_samples"] if seen == "none" else [])


def test_a_worker_fills_only_samples_the_map_names_wholly(tmp_path: Path) -> None:
    """`_prefilled`: every row named by index only, on nodes the published map names, with indexes it holds,
    or no fill at all (the part goes to the parent as a whole spilled part); the rows filled are the identity
    stage's, and the part records the map rows it took."""
    n = 800
    t0 = datetime(2024, 1, 1, tzinfo=UTC)

    def samples(node: str = "n1", index: Any = None, bus: Any = None) -> pl.DataFrame:
        return conform(
            pl.DataFrame(
                {
                    "node": [node] * n,
                    "source": ["nvidia-smi-dmon"] * n,
                    "file": [f"{node}/dmon.log"] * n,
                    "ts": [t0 + timedelta(seconds=k // 4) for k in range(n)],
                    "gpu_index": [k % 4 if index is None else index for k in range(n)],
                    "gpu_bus_id": [bus] * n,
                    "line": list(range(1, n + 1)),
                }
            ),
            "gpu_samples",
        )

    rows = [("n1", "gpu", f"0000:{0x18 + g:02x}:00.0", g) for g in range(4)]
    m = pl.DataFrame(rows, schema=["node", "component", "gpu_bus_id", "gpu_index"], orient="row")
    m = m.with_columns(pl.col("gpu_index").cast(pl.Int64))
    gpus = tmp_path / "map.parquet"
    identity.gpu_map(m).write_parquet(gpus)
    got = ingest_mod._prefilled(samples(), gpus, "gpu_samples")
    assert got is not None
    df, used = got
    named = ("source", "file", "device", "attribute", "value")
    inv = conform(m.with_columns(pl.lit("x").alias(c) for c in named), "inventory")
    expected = identity.resolve({"inventory": inv, "gpu_samples": samples()})[0]["gpu_samples"]
    assert df.equals(ingest_mod._sorted(expected, "gpu_samples"))
    assert df.get_column("gpu_bus_id").null_count() == 0
    assert used == tuple((r[0], r[3], r[2]) for r in rows)
    assert ingest_mod._prefilled(samples("n2"), gpus, "gpu_samples") is None  # (a node the map does not name)
    assert ingest_mod._prefilled(samples(index=7), gpus, "gpu_samples") is None  # (an index it lacks)
    by_bus = samples(bus="0000:18:00.0")
    assert ingest_mod._prefilled(by_bus, gpus, "gpu_samples") is None  # (rows named by bus id)
    assert ingest_mod._prefilled(samples(), tmp_path / "none.parquet", "gpu_samples") is None  # (no map yet)
    o = ingest_mod.FileOutcome(row={}, tables={"gpu_samples": samples()})
    ingest_mod._handed([o], [tmp_path / "a"], (1, 1, frozenset(), gpus))  # (handed as a part, however small)
    (part,) = o.parts["gpu_samples"]
    assert part.as_is and part.filled == used and not part.whole
    assert ingest_mod._read_part(part, "gpu_samples").equals(ingest_mod._sorted(expected, "gpu_samples"))


def test_a_kept_part_whose_indexes_the_identity_stage_fills_is_sorted_again(tmp_path: Path) -> None:
    """A written part of samples named by bus id only, in time order: identity resolution gives them their GPU
    index, a sort key, so the part filled as it is (`rowwise`) is sorted again; a part of samples named by
    index only gets bus ids and keeps its order. The table holds the rows, and each part the order, of writing
    every row again from the stage's LazyFrame (what was done before `rowwise`)."""
    from forensics.outputs import write_table_file

    bus = [f"0000:{0x18 + g:02x}:00.0" for g in range(4)]
    inv = conform(
        pl.DataFrame(
            {"node": ["n1"] * 4, "component": ["gpu"] * 4, "gpu_index": list(range(4)), "gpu_bus_id": bus}
        ).with_columns(pl.lit("x").alias(c) for c in ("source", "file", "device", "attribute", "value")),
        "inventory",
    )
    t0 = datetime(2024, 1, 1, tzinfo=UTC)
    outcomes = ingest_mod.Outcomes(tmp_path / "spill")
    for i, by_index in enumerate((False, True)):
        n = 400
        cols = {
            "node": ["n1"] * n,
            "source": ["dmon"] * n,
            "file": [f"f{i}.log"] * n,
            "ts": [t0 + timedelta(seconds=k // 4) for k in range(n)],
            "gpu_index": [3 - k % 4 if by_index else None for k in range(n)],
            "gpu_bus_id": [None if by_index else bus[3 - k % 4] for k in range(n)],
            "line": list(range(1, n + 1)),
        }
        df = conform(pl.DataFrame(cols), "gpu_samples")
        part = tmp_path / f"p{i}.parquet"
        write_table_file(ingest_mod._sorted(df, "gpu_samples"), "gpu_samples", part)
        stats = ingest_mod.part_stats(df)
        outcomes.parts.setdefault("gpu_samples", []).append(
            ingest_mod.Part(str(part), final=True, rows=n, stats=stats)
        )
    lf = outcomes.lazy("gpu_samples", tmp_path / "hive")
    by_part = outcomes.known["gpu_samples"].by_part
    tables, _notes, fill = identity.resolve_rowwise({"inventory": inv, "gpu_samples": lf})
    assert fill is not None and tables["gpu_samples"] is not lf
    saved = ingest_mod.PART_ROWS, ingest_mod.SOLO_SHARE
    ingest_mod.PART_ROWS, ingest_mod.SOLO_SHARE = 1000, 4
    try:
        args = (tables["gpu_samples"], "gpu_samples")
        as_is = outcomes.as_is["gpu_samples"]
        assert ingest_mod._write_in_parts(*args, tmp_path / "filled", as_is, by_part, fill) == 800
        assert ingest_mod._write_in_parts(*args, tmp_path / "again", {}, by_part) == 800
    finally:
        ingest_mod.PART_ROWS, ingest_mod.SOLO_SHARE = saved
    parts = {k: sorted((tmp_path / k / "gpu_samples").glob("*.parquet")) for k in ("filled", "again")}
    assert len(parts["filled"]) == 2
    for ps in parts.values():
        for p in ps:
            assert ingest_mod.in_sort_order(pl.read_parquet(p), "gpu_samples")
    a, b = (pl.read_parquet(parts[k]) for k in ("filled", "again"))
    assert a.get_column("gpu_index").null_count() == 0 and a.get_column("gpu_bus_id").null_count() == 0
    assert a.sort(a.columns, nulls_last=True).equals(b.sort(b.columns, nulls_last=True))


@given(
    data=st.lists(
        st.binary(max_size=40)
        | st.sampled_from([b"\n", b"\r", b"\r\n", b"\xef\xbb\xbf", b"\x1f", "é".encode()]),
        max_size=40,
    ),
    big=st.booleans(),
)
@settings(max_examples=150, deadline=None)
def test_count_lines_counts_the_lines_the_reader_makes(data: list[bytes], big: bool) -> None:
    """`count_lines` (the parent's count before a range, without decoding it) is the length of
    `lines_from_bytes`, on small chunks and on those of 1 MB or more (read by polars' CSV reader)."""
    from forensics.bundle import count_lines
    from parsers.base import READER_SPLIT_MIN, lines_from_bytes

    body = b"".join(data)
    if big:
        body = (body or b"x") * (READER_SPLIT_MIN // max(1, len(body)) + 1)
    assert count_lines(body) == len(lines_from_bytes(body))


@pytest.mark.parametrize("size", [1 << 20, (1 << 20) + 1, 3 * (1 << 18) - 1, 5 * (1 << 18) + 7])
def test_the_blocked_count_finds_separators_at_every_block_edge(size: int) -> None:
    """`bundle._count` compares a block of `_COUNT_BLOCK` bytes at a time: separators on either side of each
    block's edge, at the start and at the end are all counted, as `bytes.count` counts them."""
    from forensics.bundle import _COUNT_BLOCK, _count

    body = bytearray(b"x" * size)
    for edge in range(0, size + 1, _COUNT_BLOCK):
        for at in (edge - 1, edge, edge + 1):
            if 0 <= at < size:
                body[at] = 10
    body[0] = body[-1] = 10
    data = bytes(body)
    assert _count(data, b"\n") == data.count(b"\n") and _count(data, b"\r") == 0


def test_a_kept_part_is_linked_or_copied_where_links_fail(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`_keep_part` hard-links a worker's part into the table's folder; across file systems (or where links
    are refused) it copies it, atomically; either way the rows are there and the source stays."""
    from forensics.outputs import write_table_file
    from forensics.schema import conform

    part = tmp_path / "work" / "steps-0.parquet"
    part.parent.mkdir()
    rows = {"node": ["n1"] * 3, "rank": [0, 1, 2], "step": [5] * 3, "framework": ["x"] * 3, "file": ["f"] * 3}
    df = conform(pl.DataFrame({**rows, "line": [1, 2, 3]}), "steps")
    write_table_file(df, "steps", part)
    linked = tmp_path / "t" / "steps" / "part-00000.parquet"
    ingest_mod._keep_part(part, linked)
    assert pl.read_parquet(linked).equals(df) and os.stat(part).st_nlink == 2

    def refuse(src: object, dst: object) -> None:
        raise OSError(18, "Invalid cross-device link")

    monkeypatch.setattr(ingest_mod.os, "link", refuse)
    target = tmp_path / "t" / "steps" / "part-00001.parquet"
    ingest_mod._keep_part(part, target)
    assert pl.read_parquet(target).equals(df) and part.exists() and os.stat(target).st_nlink == 1
    assert not [p for p in target.parent.iterdir() if p.name.startswith(".")]  # no temporary left


def test_line_count_of_a_split_file_gives_each_range_its_first_line_or_1_when_the_file_cannot_be_read(
    tmp_path: Path,
) -> None:
    from concurrent.futures import ThreadPoolExecutor

    from forensics.bundle import line_spans, span_first_lines

    p = tmp_path / "f.log"
    p.write_bytes(b"".join(b"line %d\n" % i for i in range(3000)))
    f = BundleFile("f.log", p, p.stat().st_size, "n", "path")
    spans = line_spans(f, 2048)
    with ThreadPoolExecutor(1) as counter:
        count = ingest_mod._LineCount(f, spans, counter)
        missing = BundleFile("g.log", tmp_path / "gone.log", 10, "n", "path")
        gone = ingest_mod._LineCount(missing, spans, counter)
        assert [count.at(k) for k in reversed(range(len(spans)))] == list(span_first_lines(f, spans))[::-1]
        assert gone.at(3) == 1 and gone.done


def test_line_count_hands_out_each_range_once_counted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A range's first line is there as soon as the count gets to it, not after the whole file; a count that
    stops short leaves the ranges it counted as counted, the others at 1."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    go = threading.Event()

    def slow(f: object, spans: object) -> Iterator[int]:
        yield 1
        yield 40
        go.wait(10)
        raise OSError("gone")

    monkeypatch.setattr(ingest_mod, "span_first_lines", slow)
    with ThreadPoolExecutor(1) as counter:
        f = BundleFile("f.log", tmp_path / "f.log", 1, "n", "path")
        count = ingest_mod._LineCount(f, [(0, 1)] * 4, counter)
        assert (count.at(0), count.at(1), count.done) == (1, 40, False)
        go.set()
        assert (count.at(1), count.at(3)) == (40, 1) and count.done


def test_span_first_lines_number_each_range_where_it_starts(tmp_path: Path) -> None:
    from forensics.bundle import line_spans, span_first_lines
    from parsers.base import lines_from_bytes

    body = b"".join(b"line %d\n" % i if i % 7 else b"\r\n" for i in range(5000)) + b"tail without end"
    p = tmp_path / "f.log"
    p.write_bytes(body)
    f = BundleFile("f.log", p, len(body), "n", "path")
    spans = line_spans(f, 4096)
    firsts = list(span_first_lines(f, spans))
    assert len(spans) > 5 and firsts[0] == 1
    for (start, end), first, nxt in zip(spans, firsts, [*firsts[1:], None], strict=True):
        n = len(lines_from_bytes(body[start:end]))
        assert nxt is None or nxt == first + n
    assert firsts[-1] + len(lines_from_bytes(body[spans[-1][0]:])) - 1 == len(lines_from_bytes(body))


def test_out_with_glob_characters_in_its_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """OUT is the user's path: '[run 1]' in it is not a glob pattern when the parts are read back."""
    from forensics.simulate import simulate

    src = tmp_path / "bundle"
    simulate(src, nodes=2, gpus_per_node=2, hours=0.25, faults=[], seed=4)
    monkeypatch.setattr(ingest_mod, "HOLD_ROWS", 50)
    monkeypatch.setattr(ingest_mod, "PART_ROWS", 40)
    out = tmp_path / "runs [1]" / "out*"
    m = ingest(src, out, jobs=1)
    for t in ("steps", "gpu_samples", "events"):
        assert read_table(out, t).height == m["totals"]["rows"][t]
    assert len(list((out / "tables" / "gpu_samples").glob("*.parquet"))) > 1


def test_a_pool_that_breaks_before_any_task_starts_does_not_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When a pool breaks while the first tasks are handed out (no task started, none a suspect), the files
    are narrowed down one at a time instead of being handed to fresh pools forever."""
    from forensics.bundle import open_bundle

    b = open_bundle(make_bundle(tmp_path, {f"node-{i:03d}/dmesg.log": xid_lines(3) for i in range(5)}), tmp_path / "s")
    calls: list[int] = []

    def fake(files: list, jobs: int, index: dict, work: Path, limits: Limits, year_hint: object,
             collected: object, tick: object, outcomes: list, *a: object, **kw: object) -> tuple[list, list]:
        calls.append(len(files))
        assert len(calls) < 20, "looping"
        if len(files) > 1:
            return [], list(files)  # broke while handing out: nothing started, everything unsent
        outcomes.append(ingest_file(files[0], limits, None, None))
        return [], []

    monkeypatch.setattr(ingest_mod, "_pool_pass", fake)
    outs = ingest_mod._run_parallel(b.files, 2, tmp_path / "work", Limits(), None, None, lambda f: None)
    assert sorted(o.row["path"] for o in outs) == sorted(f.path for f in b.files)
    assert calls == [5, 1, 1, 1, 1, 1]


def test_workers_start_with_one_polars_thread_and_leave_the_environment_as_it_was(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each worker is one process on one core: its polars pool (sized when polars is first imported, before any
    initializer runs) has one thread, whatever this process's environment says."""
    monkeypatch.setenv("POLARS_MAX_THREADS", "7")
    monkeypatch.setenv("_RJEM_MALLOC_CONF", "dirty_decay_ms:500,muzzy_decay_ms:1000")  # (as polars leaves it)
    monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_", raising=False)
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "12345")  # the user's own: kept
    pool = ingest_mod._new_pool(1)
    try:
        assert pool.submit(pl.thread_pool_size).result(timeout=120) == 1
        # (and its allocators keep the memory it frees: read by jemalloc and glibc as the process starts)
        # (polars, imported in the worker, reads the value it inherits after its own defaults: it wins)
        conf = pool.submit(os.getenv, "_RJEM_MALLOC_CONF").result(timeout=60)
        assert conf.endswith(ingest_mod.WORKER_ENV["_RJEM_MALLOC_CONF"])
        mmap = pool.submit(os.getenv, "MALLOC_MMAP_THRESHOLD_").result(timeout=60)
        assert mmap == ingest_mod.WORKER_ENV["MALLOC_MMAP_THRESHOLD_"]
        assert pool.submit(os.getenv, "MALLOC_TRIM_THRESHOLD_").result(timeout=60) == "12345"
    finally:
        pool.shutdown()
    assert os.environ["POLARS_MAX_THREADS"] == "7" and os.environ["_RJEM_MALLOC_CONF"].endswith("1000")
    assert "MALLOC_MMAP_THRESHOLD_" not in os.environ and os.environ["MALLOC_TRIM_THRESHOLD_"] == "12345"


def _many_parser(boom: bool, calls: list[int]) -> types.ModuleType:
    """`_fake_parser` with a `parse_many` that reads its files in one call (and fails on BOOM when `boom`)."""
    mod = _fake_parser(boom=False)
    one = mod.parse

    def parse_many(items: list[tuple[pl.Series, FileContext]]) -> list[ParseResult]:
        calls.append(len(items))
        if boom and any("BOOM" in x for lines, _ in items for x in lines.to_list()):
            raise ZeroDivisionError("batch bug")
        return [one(lines, ctx) for lines, ctx in items]

    mod.parse_many = parse_many
    return mod


def test_small_files_of_one_format_are_parsed_in_one_call_with_the_same_outcomes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []
    monkeypatch.setattr(registry, "PARSERS", (_many_parser(boom=False, calls=calls), *registry.PARSERS))
    texts = {
        "n1/a.log": "FAKEFORMAT\nFAKE 1\nnot fake\n",
        "n2/a.log": "FAKEFORMAT\n\nFAKE 2\n",
        "n3/dmesg.log": xid_lines(3),  # another format, no parse_many: alone
        "n4/a.log": "",  # empty: never parsed
        "n5/a.log": "FAKEFORMAT\r\nFAKE crlf\r\n",
        "n6/a.bin": "FAKEFORMAT\n" + "\x00" * 200,  # binary: skipped before parsing
    }
    files = []
    for path, text in texts.items():
        p = tmp_path / path.replace("/", "_")
        p.write_text(text)
        files.append(_bf(p, path=path, node=path.split("/")[0]))
    spills = [tmp_path / "spill" / str(i) for i in range(len(files))]
    got = ingest_mod.ingest_files(files, Limits(), 2026, None, spills)
    assert calls == [3]
    alone = [ingest_file(f, Limits(), 2026, None) for f in files]
    for o, a in zip(got, alone, strict=True):
        assert o.row == a.row and o.examples == a.examples and o.notes == a.notes
    # the tables come back pooled: the first outcome holds every file's rows, in the files' order
    assert all(not o.tables for o in got[1:])
    expected = {t: pl.concat([a.tables[t] for a in alone if t in a.tables]) for a in alone for t in a.tables}
    assert got[0].tables.keys() == expected.keys()
    assert all(conform(got[0].tables[t], t).equals(expected[t], null_equal=True) for t in expected)
    assert [o.row["status"] for o in got] == ["ok", "ok", "ok", "skipped: empty file", "ok", "skipped: binary content"]


def test_a_failing_parse_many_falls_back_to_each_file_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    monkeypatch.setattr(registry, "PARSERS", (_many_parser(boom=True, calls=calls), *registry.PARSERS))
    files = []
    for i, text in enumerate(["FAKEFORMAT\nFAKE ok\n", "FAKEFORMAT\nFAKE BOOM\n", "FAKEFORMAT\nbad\n"]):
        p = tmp_path / f"{i}.log"
        p.write_text(text)
        files.append(_bf(p))
    got = ingest_mod.ingest_files(files, Limits(), None, None, [None] * 3)
    assert calls == [3]
    assert [(o.row["status"], o.row["parsed"], o.row["unrecognized"]) for o in got] == [
        ("ok", 2, 0), ("ok", 2, 0), ("ok", 1, 1)
    ]


def test_a_file_of_several_chunks_is_not_handed_to_parse_many(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    monkeypatch.setattr(registry, "PARSERS", (_many_parser(boom=False, calls=calls), *registry.PARSERS))
    monkeypatch.setattr(ingest_mod, "CHUNK_BYTES", 1000)
    big, small = tmp_path / "big.log", tmp_path / "small.log"
    big.write_text("FAKEFORMAT\n" + "FAKE line\n" * 500)
    small.write_text("FAKEFORMAT\nFAKE x\n")
    got = ingest_mod.ingest_files([_bf(big), _bf(small)], Limits(), None, None, [None, None])
    assert calls == []  # the one file left is parsed alone
    assert got[0].row["lines"] == 501 and got[0].row["parsed"] == 501 and got[1].row["parsed"] == 2


def test_batches_hold_files_of_one_name_shape_in_task_order() -> None:
    def bf(path: str, size: int) -> BundleFile:
        return BundleFile(path, None, size, "n", "path", None)

    files = [bf(f"r{i:02d}/train_rank{i}.log", 1000 - i) for i in range(5)]
    files += [bf(f"r{i:02d}/dmesg.log", 900 - i) for i in range(3)]
    big = bf("x/huge.log", 10 * 1024**2)
    tasks = ingest_mod._tasks([*files, big], {})
    batched = ingest_mod._batched(tasks, 2)
    assert batched == [
        (big, -1),
        (tuple(files[0:2]), ingest_mod.BATCH),
        (tuple(files[2:4]), ingest_mod.BATCH),
        (files[4], -1),
        (tuple(files[5:7]), ingest_mod.BATCH),
        (files[7], -1),
    ]


def test_a_batch_sends_each_table_as_one_frame(tmp_path: Path) -> None:
    files = []
    for i in range(3):
        p = tmp_path / f"dmesg{i}.log"
        p.write_text(xid_lines(2 + i, start=10 * i))
        files.append(_bf(p, path=f"n{i}/dmesg.log", node=f"n{i}"))
    alone = [ingest_file(f, Limits(), 2026, None) for f in files]
    got = ingest_mod._ingest_batch(ingest_file, tuple(files), (None, None, None), Limits(), 2026, None)
    assert [o.row for o in got] == [o.row for o in alone]
    assert got[1].tables == {} and got[2].tables == {}
    want = pl.concat([o.tables["events"] for o in alone])
    assert got[0].tables["events"].equals(want)


_KEY_VALUES = {
    "s": st.one_of(st.none(), st.sampled_from(["", "a", "b", "node-10", "node-9", "é", "Z"])),
    "i": st.one_of(st.none(), st.integers(-3, 3), st.integers(-(2**40), 2**40)),
    "big": st.one_of(st.none(), st.integers(-(2**61), 2**61)),  # (spans up to 2^62: packed, alone)
    "t": st.one_of(st.none(), st.integers(0, 2**45)),
}


@given(st.lists(st.tuples(*(_KEY_VALUES[k] for k in ("s", "i", "big", "t", "s"))), min_size=2, max_size=60))
@settings(max_examples=150, deadline=None)
def test_packed_sort_order_is_the_stable_multi_column_sort(rows: list[tuple]) -> None:
    df = pl.DataFrame(
        rows, schema={"a": pl.String, "b": pl.Int64, "c": pl.Int64, "d": pl.Int64, "e": pl.String}, orient="row"
    ).with_columns(pl.col("d").cast(pl.Datetime("us", "UTC")), tag=pl.int_range(pl.len()))
    for keys in (["a", "b", "d", "e"], ["c", "a", "c", "d"], ["b"], ["d", "c", "b", "a", "e"]):
        want = df.sort(keys, nulls_last=True, maintain_order=True)
        order = ingest_mod.sort_order(df, keys)
        assert order is not None and df[order].equals(want, null_equal=True)
        # flagged sorted exactly when the rows are in order already (`_sorted` then leaves them as they are)
        assert order.flags["SORTED_ASC"] == order.equals(pl.int_range(df.height, dtype=pl.UInt32, eager=True))
        # so does the check row by row (`in_sort_order`: a worker's table it may write as the table's part)
        assert ingest_mod.rows_in_order(df, keys) == order.flags["SORTED_ASC"]
        assert ingest_mod.rows_in_order(want, keys)
        again = ingest_mod.sort_order(want, keys)
        assert again is not None and again.flags["SORTED_ASC"]
        assert want[again].equals(want, null_equal=True)


@given(
    st.lists(
        st.tuples(_KEY_VALUES["s"], _KEY_VALUES["s"], st.integers(-3, 3), st.integers(1, 30)),
        min_size=1,
        max_size=20,
    )
)
@settings(max_examples=150, deadline=None)
def test_packed_sort_order_of_string_runs_is_the_stable_multi_column_sort(runs: list[tuple]) -> None:
    """Keys that come in runs of one value (a table's node and file: rows arrive a file at a time) are coded
    by run (`_string_codes`): the same order as the multi-column sort."""
    rows = [(a, b, (c * 7 + j) % 5) for a, b, c, n in runs for j in range(n)]
    df = pl.DataFrame(rows, schema={"a": pl.String, "b": pl.String, "c": pl.Int64}, orient="row")
    for keys in (["a", "c"], ["a", "b", "c"], ["b"], ["c", "a"]):
        want = df.sort(keys, nulls_last=True, maintain_order=True)
        order = ingest_mod.sort_order(df, keys)
        assert order is not None and df[order].equals(want, null_equal=True)
        assert ingest_mod.rows_in_order(df, keys) == order.flags["SORTED_ASC"]
        assert ingest_mod.rows_in_order(want, keys)
    for col in ("a", "b"):
        got = ingest_mod._string_codes(df.get_column(col))
        distinct = df.get_column(col).unique().drop_nulls().sort().to_list()
        if got is None:
            assert not distinct
        else:
            codes, n = got
            assert n == len(distinct)
            assert codes.to_list() == [n if v is None else distinct.index(v) for v in df.get_column(col)]


@given(
    st.lists(st.tuples(_KEY_VALUES["s"], st.one_of(st.none(), st.integers(0, 3)), st.integers(0, 3)), min_size=2,
             max_size=40),
    st.sampled_from([None, "x", ""]),
    st.booleans(),
)
@settings(max_examples=200, deadline=None)
def test_stable_sorted_is_the_stable_multi_column_sort(rows: list[tuple], const: str | None, by_last: bool) -> None:
    """`_stable_sorted` sorts by fewer keys (none of one value or nulls throughout; a stable sort by the keys
    before those the rows are in order by already) and gathers fewer columns: the frame of polars' sort."""
    if by_last:  # (in order by the last keys: a dmon loop's samples by time and line, GPUs interleaved)
        rows = sorted(rows, key=lambda r: (r[2], r[1] is None, r[1] or 0))
    n = len(rows)
    df = pl.DataFrame(
        [
            pl.Series("a", [r[0] for r in rows], dtype=pl.String),
            pl.Series("node", [const] * n, dtype=pl.String),
            pl.Series("b", [r[1] for r in rows], dtype=pl.Int64),
            pl.repeat(None, n, dtype=pl.Int32, eager=True).alias("gpu"),
            pl.Series("c", [r[2] for r in rows], dtype=pl.Int64),
            pl.int_range(n, eager=True).alias("tag"),
        ]
    )
    for keys in (["node", "a", "b", "c"], ["gpu", "node", "c"], ["a", "gpu", "b", "c"], ["node", "b", "c"], ["node"]):
        want = df.sort(keys, nulls_last=True, maintain_order=True)
        if ingest_mod.rows_in_order(df, keys):
            continue  # (`_sorted` sorts only rows not in order)
        got = ingest_mod._stable_sorted(df, keys)
        assert got.schema == want.schema and got.equals(want, null_equal=True)


@given(
    st.lists(st.tuples(st.one_of(st.none(), st.integers(0, 5)), st.booleans()), min_size=0, max_size=40),
    st.randoms(use_true_random=False),
)
@settings(max_examples=100, deadline=None)
def test_gathered_rows_is_the_gather(rows: list[tuple], rnd: random.Random) -> None:
    """`_gathered_rows` (the columns of nulls made anew) gives what `df[order]` gives: values, dtypes (a
    zoned time, text, flags, small integers) and the columns' order."""
    n = len(rows)
    df = pl.DataFrame(
        [
            pl.Series("v", [r[0] for r in rows], dtype=pl.Int64),
            pl.repeat(None, n, dtype=pl.Datetime("us", "UTC"), eager=True).alias("ts"),
            pl.Series("f", [r[1] for r in rows], dtype=pl.Boolean),
            pl.repeat(None, n, dtype=pl.String, eager=True).alias("s"),
            pl.Series("w", [None if r[0] is None else str(r[0]) for r in rows], dtype=pl.String),
            pl.repeat(None, n, dtype=pl.Int32, eager=True).alias("i"),
        ]
    )
    perm = list(range(n))
    rnd.shuffle(perm)
    order = pl.Series("i", perm, dtype=pl.UInt32)
    for frame in (df, df.select("ts", "s"), df.select("v", "w")):
        got, want = ingest_mod._gathered_rows(frame, order), frame[order]
        assert got.schema == want.schema and got.equals(want, null_equal=True)


def test_a_large_files_parts_become_written_parts_of_their_own() -> None:
    """`_line_cuts`: the byte ranges of a large file (disjoint line ranges) are written one per part, parts too
    small to stand alone together; overlapping parts fall back to equal line ranges. The cuts always cover
    the lines from the first to the last, without gap or overlap."""
    cuts = ingest_mod._line_cuts
    assert cuts([(1, 99, 90), (100, 180, 80), (181, 300, 95)], 1, 300, 265, 100) == [(1, 100), (100, 181), (181, 301)]
    # parts of fewer than part_rows // SOLO_SHARE rows go together, up to part_rows
    share = ingest_mod.SOLO_SHARE
    small = [(i * 10 + 1, i * 10 + 9, 2) for i in range(10)]
    assert cuts(small, 1, 99, 20, 4 * share) == [(1, 100)]
    alone = [(31, 400, 50)]  # (at least part_rows // SOLO_SHARE rows)
    assert cuts([*small[:3], *alone, *[(s + 400, e + 400, m) for s, e, m in small[:2]]], 1, 419, 60, 50 * share) == [
        (1, 31), (31, 401), (401, 420)
    ]
    # a part larger than part_rows is cut in equal line ranges; overlapping parts too
    assert cuts([(1, 100, 300), (101, 110, 10)], 1, 110, 310, 100) == [(1, 35), (35, 69), (69, 101), (101, 111)]
    assert cuts([(1, 100, 50), (50, 150, 100)], 1, 150, 150, 100) == [(1, 76), (76, 151)]


@given(st.lists(st.tuples(st.integers(1, 50), st.integers(0, 40), st.integers(1, 300)), min_size=1, max_size=12),
       st.integers(1, 200), st.booleans())
@settings(max_examples=200, deadline=None)
def test_line_cuts_cover_every_line_once(parts: list[tuple[int, int, int]], part_rows: int, overlap: bool) -> None:
    spans, at = [], 1
    for gap, width, n in parts:
        first = at + gap - (60 if overlap and spans else 0)
        spans.append((max(1, first), max(1, first) + width, n))
        at = max(1, first) + width + 1
    spans.sort()
    lo, hi, n = spans[0][0], max(e for _, e, _ in spans), sum(m for _, _, m in spans)
    got = ingest_mod._line_cuts(spans, lo, hi, n, part_rows)
    assert got[0][0] == lo and got[-1][1] == hi + 1
    assert all(a < b for a, b in got) and all(b == c for (_, b), (c, _) in zip(got, got[1:], strict=False))


def test_packed_sort_order_gives_way_to_values_it_cannot_pack() -> None:
    df = pl.DataFrame({"x": [2**62, -(2**62), 0], "y": [1.5, 0.5, 0.1]})
    assert ingest_mod.sort_order(df, ["x"]) is None  # (a span of 2^63)
    assert ingest_mod.sort_order(df, ["y"]) is None  # (floats are not packed)
    assert ingest_mod._sorted(df.rename({"x": "node"}).with_columns(pl.col("node").cast(pl.String)), "files").equals(
        df.rename({"x": "node"}).with_columns(pl.col("node").cast(pl.String))
    )


def _raw_events_parser(calls: list[int]) -> types.ModuleType:
    """A format whose parser returns events as it makes them: a few columns, out of the table's order, some
    of another dtype (`line` Int64), and `BADNODE` files without their node (a required column)."""
    mod = _fake_parser(boom=False)
    one = mod.parse

    def parse(lines: pl.Series, ctx: FileContext) -> ParseResult:
        result = one(lines, ctx)
        fr = numbered(lines, ctx).filter(pl.col("text").str.starts_with("FAKE "))
        bad = any("BADNODE" in x for x in lines.to_list())
        events = fr.select(
            pl.col("line").cast(pl.Int64),
            pl.col("text").alias("message"),
            pl.lit(None if bad else ctx.node, dtype=pl.String).alias("node"),
            pl.lit("fake").alias("source"),
            pl.lit("fake").alias("kind"),
            pl.lit("info").alias("severity"),
            pl.lit(ctx.path).alias("file"),
            *([pl.lit("7").alias("code")] if "CODE" in "".join(lines.to_list()) else []),
        )
        return replace(result, tables={"events": events})

    def parse_many(items: list[tuple[pl.Series, FileContext]]) -> list[ParseResult]:
        calls.append(len(items))
        return [parse(lines, ctx) for lines, ctx in items]

    mod.parse, mod.parse_many = parse, parse_many
    return mod


def test_a_batch_conforms_its_files_tables_together_and_a_bad_frame_still_fails_its_own_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The frames of a batch are conformed after the batch (`_pooled`), those of one schema in one select: the
    pooled table is the files' conformed tables one after the other, and a frame `conform` refuses (a null
    in a required column) fails its own file, with the error it gets alone."""
    calls: list[int] = []
    monkeypatch.setattr(registry, "PARSERS", (_raw_events_parser(calls), *registry.PARSERS))
    texts = [
        "FAKEFORMAT\nFAKE 1\nFAKE 2\n",
        "FAKEFORMAT\nFAKE 3\nnot fake\n",
        "FAKEFORMAT\nFAKE CODE 4\n",  # another schema (a `code` column) between two of the first
        "FAKEFORMAT\nFAKE BADNODE\n",
        "FAKEFORMAT\nFAKE 5\n",
    ]
    files = []
    for i, text in enumerate(texts):
        p = tmp_path / f"{i}.log"
        p.write_text(text)
        files.append(_bf(p, path=f"n{i}/a.log", node=f"n{i}"))
    got = ingest_mod.ingest_files(files, Limits(), 2026, None, [None] * len(files))
    assert calls == [len(files)]
    alone = [ingest_file(f, Limits(), 2026, None) for f in files]
    assert [o.row for o in got] == [a.row for a in alone]
    status = got[3].row["status"]
    assert status.startswith("error: parser fake failed: SchemaError") and "'node' is required" in status
    sent = got[0].tables["events"]  # (as it crosses to the parent: columns of nulls typeless)
    assert sent.schema["gpu_index"] == pl.Null and sent.schema["code"] == pl.String
    events = conform(sent, "events")
    one_by_one = pl.concat([a.tables["events"] for a in alone if "events" in a.tables])
    assert events.equals(one_by_one, null_equal=True)
    assert events["message"].to_list() == ["FAKE 1", "FAKE 2", "FAKE 3", "FAKE CODE 4", "FAKE 5"]
    assert events["code"].to_list() == [None, None, None, "7", None]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.sampled_from(["node", "code", "gpu_index", "rank", "detail"]), max_size=5), st.integers(0, 6)
)
def test_conform_all_is_each_frame_conformed_then_joined(extra: list[str], n: int) -> None:
    frames = []
    for i in range(n):
        cols = {
            "message": [f"m{i}"], "source": ["s"], "kind": ["k"], "severity": ["info"], "file": ["f"],
            "line": [i], "node": [f"n{i}"],
        }
        for c in extra[: i % (len(extra) + 1)]:
            # (a column all null in one frame is of dtype Null there: `pl.concat` takes it with the others')
            typed = [str(i)] if c in ("code", "detail", "node") else [i]
            cols[c] = [None] if i % 3 == 2 and c != "node" else typed
        df = pl.DataFrame(cols)
        assert conforms_later(df, "events", dict(df.schema))
        frames.append(df)
    if frames:
        assert conform_all(frames, "events").equals(pl.concat([conform(df, "events") for df in frames]))
    bad = pl.DataFrame({"message": ["m"], "nope": [1]})
    assert not conforms_later(bad, "events", dict(bad.schema))
    unfilled = pl.DataFrame({"message": ["m"], "node": [None]},
                            schema={"message": pl.String, "node": pl.String})
    assert not conforms_later(unfilled, "events", dict(unfilled.schema))


def _binary_reference(head: bytes) -> str | None:
    """`_binary_reason` written plainly: a share of NUL bytes, of control bytes other than text's (tab, line
    ends, form feed, backspace, escape), or of bytes that are no UTF-8, in the first 8 KiB."""
    sample = head[:8192]
    n = len(sample)
    if not n:
        return None
    if sample.count(0) > max(8, n // 50):
        return "binary content (NUL bytes)"
    if sum(1 for b in sample if b >= 32 or b in (9, 10, 13, 27, 12, 8)) / n < 0.85:
        return "binary content (mostly non-text bytes)"
    if sample.decode("utf-8", errors="replace").count("\ufffd") > max(8, n // 20):
        return "binary content (not UTF-8 text)"
    return None


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.sampled_from([b"a", b" ", b"\n", b"\x00", b"\x01", b"\x1b", b"\x7f", "é".encode(), b"\xff"]),
        max_size=400,
    ),
    st.integers(1, 40),
)
def test_binary_reason_follows_its_rules(parts: list[bytes], repeat: int) -> None:
    head = b"".join(parts) * repeat
    assert ingest_mod._binary_reason(head) == _binary_reference(head)


def test_a_pool_started_early_and_not_taken_is_stopped(monkeypatch: pytest.MonkeyPatch) -> None:
    from forensics.bundle import Bundle

    monkeypatch.setattr(ingest_mod, "PARALLEL_MIN_FILES", 3)
    early = ingest_mod._EarlyPool(1)
    bundle = Bundle(root="x")
    bundle.files += [BundleFile(f"n/{i}.log", None, 10, "n", "path") for i in range(2)]
    early.walked(bundle)
    assert early.pool is None  # a small bundle so far: no workers
    bundle.files.append(BundleFile("n/2.log", None, 10, "n", "path"))
    early.walked(bundle)
    pool = early.pool
    assert pool is not None
    procs = list(pool._processes.values())  # type: ignore[union-attr]
    early.walked(bundle)
    assert early.pool is pool  # started once
    early.close()
    assert early.pool is None and procs and not any(p.is_alive() for p in procs)


def test_the_parent_of_a_parallel_ingest_of_small_files_never_imports_the_parsers(tmp_path: Path) -> None:
    """The parsers are the workers' (`_Deferred`): a bundle of small files is ingested without the parent
    paying their import (~0.23 s of CPU) before it can start the workers."""
    import subprocess
    import sys

    src = make_bundle(tmp_path, {f"node-{i:03d}/dmesg.log": xid_lines(2) for i in range(30)})
    code = (
        "import sys; from pathlib import Path; from forensics.ingest import ingest\n"
        f"m = ingest(Path({str(src)!r}), Path({str(tmp_path / 'out')!r}), jobs=2)\n"
        "assert all(f['status'] == 'ok' for f in m['files']), m['files']\n"
        "assert m['totals']['rows']['events'] == 60, m['totals']\n"
        "print(sorted(n for n in sys.modules if n.startswith('parsers')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         timeout=300)
    assert out.stdout.strip() == "['parsers', 'parsers.base']", out.stdout


def _steps_frame(n: int, node: str = "n1", path: str = "n1/train.log") -> pl.DataFrame:
    df = pl.DataFrame(
        {
            "node": [node] * n,
            "rank": [0] * n,
            "step": list(range(n)),
            "step_time_s": [0.5 + (i % 7) / 10 for i in range(n)],
            "framework": ["torchtitan"] * n,
            "detail": [f'{{"grad_norm":{i % 13}}}' for i in range(n)],
            "file": [path] * n,
            "line": list(range(1, n + 1)),
        }
    )
    return conform(df, "steps")


@pytest.mark.parametrize(
    ("named_by", "node", "alone", "whole"),
    [
        ("index", "n1", False, True),
        ("bus", "n1", False, True),
        ("both", "n1", False, False),
        ("index", "unknown", False, False),
        ("index", "n1", True, False),
    ],
)
def test_samples_the_identity_stage_will_fill_are_handed_as_a_whole_spilled_part(
    tmp_path: Path, named_by: str, node: str, alone: bool, whole: bool
) -> None:
    """A large part of samples that name their GPU by index only (dmon) or bus id only, on a known node with
    other files than the task's, is spilled sorted with its columns of values (`Part.whole`: the parent reads,
    fills and writes it once); one naming both, of no known node, or of a node whose files are all the task's
    (nothing to fill it from), is written as the table's parts are (`final`). Either reads back as the rows
    sorted."""
    n = 20_000
    t0 = datetime(2024, 1, 1, tzinfo=UTC)
    df = conform(
        pl.DataFrame(
            {
                "node": [node] * n,
                "source": ["nvidia-smi-dmon"] * n,
                "file": ["n1/dmon.log"] * n,
                "ts": [t0 + timedelta(seconds=k // 8) for k in range(n)],
                "gpu_index": [k % 8 if named_by != "bus" else None for k in range(n)],
                "gpu_bus_id": [f"0000:{0x18 + k % 8:02x}:00.0" if named_by != "index" else None for k in range(n)],
                "power_w": [float(k % 300) for k in range(n)],
                "line": list(range(1, n + 1)),
            }
        ),
        "gpu_samples",
    )
    o = ingest_mod.FileOutcome(row={}, tables={"gpu_samples": df})
    ingest_mod._handed([o], [tmp_path / "a"], ingest_mod._handing(frozenset({"n1"} if alone else ())))
    (part,) = o.parts["gpu_samples"]
    assert part.whole == whole and part.final != whole and part.rows == n
    assert part.kept_whole == whole and part.as_is != whole
    assert part.stats == ingest_mod.part_stats(df)
    back = ingest_mod._read_part(part, "gpu_samples")
    assert ingest_mod.in_sort_order(back, "gpu_samples")
    assert back.equals(ingest_mod._sorted(df, "gpu_samples"), null_equal=True)


@pytest.mark.parametrize("final", [True, False])
def test_a_worker_hands_a_large_table_over_as_a_part_that_reads_back_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, final: bool
) -> None:
    """A table of `PART_ROWS // SOLO_SHARE` rows or more goes as a part written as the table's are (`final`),
    which the parent may take as it is; a smaller one as a spilled part (its constant columns left out)."""
    if not final:
        monkeypatch.setattr(ingest_mod, "PART_ROWS", 64 * 30_000)
    big, small = _steps_frame(20_000), _steps_frame(10, node="n2", path="n2/train.log")
    assert big.estimated_size() >= ingest_mod.HANDED_BYTES > small.estimated_size()
    events = conform(pl.DataFrame({"node": ["n1"], "source": ["kernel"], "kind": ["xid"], "severity": ["high"],
                                   "message": ["m"], "file": ["f"], "line": [1]}), "events")
    a = ingest_mod.FileOutcome(row={}, tables={"steps": big, "events": events})
    b = ingest_mod.FileOutcome(row={}, tables={"steps": small})
    got = ingest_mod._handed([a, b], [tmp_path / "a", tmp_path / "b"])
    assert got == [a, b]
    # the large table of `LARGE_TABLES` goes as a part; the small one, and the other tables, stay in memory
    assert set(a.tables) == {"events"} and list(a.parts) == ["steps"] and b.tables["steps"] is small
    (part,) = a.parts["steps"]
    assert Path(part.path).parent == tmp_path / "a" and part.rows == 20_000
    assert part.as_is == final and (part.consts == () if final else dict(part.consts)["node"] == "n1")
    assert ingest_mod._read_part(part, "steps").equals(big, null_equal=True)
    # the parent's lazy scan of the parts gives the rows back too
    outcomes = ingest_mod.Outcomes()
    outcomes.append(a)
    lf = outcomes.lazy("steps", tmp_path / "hive")
    assert lf.collect().drop(ingest_mod.PART_COLUMN).equals(big, null_equal=True)


def test_the_parent_counts_a_tables_rows_from_its_parts_without_reading_their_footers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from forensics.outputs import parquet_rows

    outcomes = ingest_mod.Outcomes(tmp_path / "parent")
    handed = ingest_mod.FileOutcome(row={}, tables={"steps": _steps_frame(20_000)})
    ingest_mod._handed([handed], [tmp_path / "a"])  # a worker's part
    outcomes.append(handed)
    held = _steps_frame(30, node="n2", path="n2/t.log")
    outcomes.append(ingest_mod.FileOutcome(row={}, tables={"steps": held}))
    outcomes._spill()  # the parent's own part
    held = _steps_frame(7, node="n3", path="n3/t.log")
    outcomes.append(ingest_mod.FileOutcome(row={}, tables={"steps": held}))
    parts = outcomes.parts["steps"]
    assert len(parts) == 2
    assert [p.rows for p in parts] == [parquet_rows(p.path) for p in parts] == [20_000, 30]

    def no_footer(path: object) -> int:
        raise AssertionError(f"footer read of {path}")

    monkeypatch.setattr(ingest_mod, "parquet_rows", no_footer)
    assert outcomes.rows("steps") == 20_037
    # a part made without its count is counted from its footer
    monkeypatch.undo()
    outcomes.parts["steps"][0] = parts[0]._replace(rows=None)
    assert outcomes.rows("steps") == 20_037


@pytest.mark.parametrize("values", [1, 3, ingest_mod.FEW_CONSTS + 1])
def test_a_column_left_out_of_parts_reads_back_its_value_by_part(values: int) -> None:
    # parts 0..199 (part 7 holds the column itself, -1 rows held in memory): each part's value, else null
    at = {k: f"value-{k % values}" for k in range(200) if k != 7}
    part = pl.Series(ingest_mod.PART_COLUMN, [*range(200), -1, 7, 3], dtype=pl.Int32)
    got = pl.DataFrame(part).select(ingest_mod._const_values(at)).to_series()
    assert got.dtype == pl.String
    assert got.to_list() == [at.get(k) for k in part.to_list()]


def test_a_part_that_cannot_be_written_leaves_the_rows_in_memory(tmp_path: Path) -> None:
    blocked = tmp_path / "file-not-folder"
    blocked.write_text("x")
    big = _steps_frame(20_000)
    o = ingest_mod.FileOutcome(row={}, tables={"steps": big})
    ingest_mod._handed([o], [blocked])
    assert o.tables["steps"] is big and o.parts == {}
    ingest_mod._handed([o], [None])  # (no spill folder: Dask, the in-process ingest)
    assert o.tables["steps"] is big and o.parts == {}


def test_a_pooled_ingest_that_hands_tables_over_as_parts_writes_the_same_tables(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from forensics.simulate import simulate

    src = tmp_path / "bundle"
    simulate(src, nodes=3, gpus_per_node=8, hours=4, faults=[], seed=2)
    handed: list[str] = []
    arrived = ingest_mod._arrived

    def spy(f: Any, k: int, got: Any, *args: Any) -> None:
        for o in got if isinstance(got, list) else [got]:
            handed.extend(p.path for ps in o.parts.values() for p in ps if p.path.endswith("-handed.parquet"))
        arrived(f, k, got, *args)

    monkeypatch.setattr(ingest_mod, "_arrived", spy)
    monkeypatch.setattr(ingest_mod, "_small", lambda files, size: False)
    m1 = ingest(src, tmp_path / "seq", jobs=1)
    m2 = ingest(src, tmp_path / "par", jobs=2)
    assert handed  # (the nvidia-smi CSV loops' samples, 4 h of 8 GPUs)
    assert m1["totals"] == m2["totals"]
    assert [f["status"] for f in m1["files"]] == [f["status"] for f in m2["files"]]
    for t in ("events", "steps", "gpu_samples", "inventory", "comms", "files"):
        assert read_table(tmp_path / "seq", t).equals(read_table(tmp_path / "par", t), null_equal=True), t


def _titan_log(rank: int, steps: int, start: int = 0) -> str:
    """`steps` torchtitan step lines of one rank, a second apart."""
    return "".join(
        f"[rank{rank}]:[titan] 2025-04-08 12:{(start + i) // 60 % 60:02d}:{(start + i) % 60:02d},"
        f"{i % 1000:03d} - root - INFO - step: {i + 1}  loss: {10 - i / 1000:.4f}  grad_norm: 1.{i % 97:04d}"
        f"  memory: 61.42GiB(77.64%)  tps: {1000 + i:,}  tflops: 39.61  mfu: 12.70%\n"
        for i in range(steps)
    )


def _batches_in_parts(monkeypatch: pytest.MonkeyPatch, kept_from: int) -> list[Path]:
    """Ingest small files in parallel batches of three, each batch's large tables handed as parts, the tables
    written in parts, a part of `kept_from` rows or more kept as it is; return the list of kept parts that
    `_spy_on_kept_parts` fills."""
    monkeypatch.setattr(ingest_mod, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(ingest_mod, "PARALLEL_MIN_FILES", 0)
    monkeypatch.setattr(ingest_mod, "BATCH_FILES", 3)
    monkeypatch.setattr(ingest_mod, "HANDED_BYTES", 1)
    monkeypatch.setattr(ingest_mod, "HOLD_ROWS", 100)
    monkeypatch.setattr(ingest_mod, "PART_ROWS", ingest_mod.SOLO_SHARE * kept_from)
    return _spy_on_kept_parts(monkeypatch)


def test_a_batch_whose_rows_are_whole_files_is_kept_as_the_worker_wrote_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Small rank logs go to workers in batches of files next to each other in (node, path) order
    (`_batched`); a batch's steps are written as a part of the table (`_handed`), which the parent takes as
    it is: it holds every row of its files (`_part_blocks`), even where another part holds a file of the same
    node between them (node-005's second rank log, a batch of its own). The table has the rows of an ingest
    that holds it in memory, each part sorted, each file's rows in one part."""
    files = {f"node-{i:03d}/rank0.log": _titan_log(0, 300, start=i) for i in range(12)}
    files["node-005/extra_rank1.log"] = _titan_log(1, 300)
    src = make_bundle(tmp_path, files)
    held = ingest(src, tmp_path / "held", jobs=1)
    kept = _batches_in_parts(monkeypatch, kept_from=250)
    got = ingest(src, tmp_path / "parts", jobs=2)
    assert got["totals"] == held["totals"] and got["totals"]["rows"]["steps"] == 13 * 300
    a, b = read_table(tmp_path / "held", "steps"), read_table(tmp_path / "parts", "steps")
    assert b.sort(a.columns, nulls_last=True).equals(a.sort(a.columns, nulls_last=True), null_equal=True)
    # kept: the batches of nodes 0-2, 3-5, 6-8 and 9-11, and the file alone
    parts = sorted((tmp_path / "parts" / "tables" / "steps").glob("*.parquet"))
    assert len(kept) == len(parts) == 5
    seen: list[tuple[str, str]] = []
    for p in parts:
        one = pl.read_parquet(p)
        assert ingest_mod.in_sort_order(one, "steps")
        seen += one.select("node", "file").unique().rows()
    assert len(seen) == len(set(seen)) == 13  # (each file in one part)
    kept_nodes = {pl.read_parquet(parts[0].parent / p.name).get_column("node").min() for p in kept}
    assert kept_nodes == {"node-000", "node-003", "node-005", "node-006", "node-009"}


def test_samples_out_of_order_are_sorted_by_the_worker_and_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A `--query-gpu` loop writes its samples a moment at a time (every GPU, then the next moment): the
    worker sorts a batch's samples before writing its part (`_handed`), and the parent keeps the part as it
    is, though the nodes' `-q` dumps, in another part, lie between its files in (node, file) order. The
    table has the rows of an ingest that holds it in memory, and each part is sorted."""
    header = "timestamp, index, pci.bus_id, temperature.gpu, utilization.gpu [%]\n"

    def loop(node: int) -> str:
        return header + "".join(
            f"2025/04/08 12:{m // 60:02d}:{m % 60:02d}.000, {g}, 00000000:{g + 7:02X}:00.0,"
            f" {30 + (m + g + node) % 40}, {(m * g) % 100} %\n"
            for m in range(150)
            for g in range(4)
        )

    dump = (FIXTURES / "nvidia-smi" / "q_rtx4090_535_idle_pcie_gen1.txt").read_text()
    files = {}
    for i in range(6):
        files[f"node-{i:03d}/gpu.csv"] = loop(i)
        files[f"node-{i:03d}/smi.txt"] = dump
    src = make_bundle(tmp_path, files)
    held = ingest(src, tmp_path / "held", jobs=1)
    kept = _batches_in_parts(monkeypatch, kept_from=1000)
    got = ingest(src, tmp_path / "parts", jobs=2)
    assert got["totals"] == held["totals"] and got["totals"]["rows"]["gpu_samples"] > 6 * 600
    a, b = read_table(tmp_path / "held", "gpu_samples"), read_table(tmp_path / "parts", "gpu_samples")
    assert b.sort(a.columns, nulls_last=True).equals(a.sort(a.columns, nulls_last=True), null_equal=True)
    parts = sorted((tmp_path / "parts" / "tables" / "gpu_samples").glob("*.parquet"))
    assert len(kept) == 2 and len(parts) == 3  # (two batches of three loops; the dumps' samples written here)
    for p in parts:
        assert ingest_mod.in_sort_order(pl.read_parquet(p), "gpu_samples")


def test_cpu_lists_and_the_cpus_shared_out_among_the_workers_core_by_core() -> None:
    assert ingest_mod.parse_cpu_list("0-3,8,10-11\n") == [0, 1, 2, 3, 8, 10, 11]
    assert ingest_mod.parse_cpu_list("5") == [5]
    # a core's hardware threads side by side, whether numbered next to each other (0,1) or apart (0,4)
    adjacent = {c: [c - c % 2, c - c % 2 + 1] for c in range(8)}
    split = {c: [c % 4, c % 4 + 4] for c in range(8)}
    assert ingest_mod.group_cpus(list(range(8)), adjacent, 4) == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert ingest_mod.group_cpus(list(range(8)), split, 4) == [[0, 4], [1, 5], [2, 6], [3, 7]]
    # as many workers as CPUs: one each; more CPUs than a whole share: the rest in no group (the parent's)
    assert ingest_mod.group_cpus(list(range(8)), split, 8) == [[0], [4], [1], [5], [2], [6], [3], [7]]
    assert ingest_mod.group_cpus([0, 1, 2], {}, 2) == [[0], [1]]
    fives = [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9], [10, 11, 12, 13, 14]]
    assert ingest_mod.group_cpus(list(range(16)), {}, 3) == fives


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="CPU affinity is Linux's")
def test_workers_are_pinned_to_cpus_of_their_own_when_there_are_enough(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each worker's threads (its main thread and polars' pool thread, which it hands every operation to)
    share its CPUs, and no two workers share one; not pinned when the CPUs are fewer than the workers, or
    when FORENSICS_PIN_WORKERS=0."""
    allowed = sorted(os.sched_getaffinity(0))
    assert ingest_mod.worker_cpus(len(allowed) + 1) == []
    assert ingest_mod.worker_cpus(1) == []
    monkeypatch.setenv(ingest_mod.PIN_ENV, "0")
    assert ingest_mod.worker_cpus(2) == []
    monkeypatch.delenv(ingest_mod.PIN_ENV)
    if len(allowed) < 2:
        pytest.skip("one CPU: workers are not pinned")
    cpus = ingest_mod.worker_cpus(2)
    assert len(cpus) == 2 and not set(cpus[0]) & set(cpus[1]) and set(cpus[0] + cpus[1]) <= set(allowed)
    assert len(cpus[0]) == len(cpus[1]) == len(allowed) // 2
    pool = ingest_mod._new_pool(2)
    try:
        seen: dict[int, dict[int, list[int]]] = {}
        for _ in range(200):
            # (a task that takes a moment, so that both workers take some)
            seen.update(pool.map(_thread_affinities, [0.05, 0.05]))
            if len(seen) == 2:
                break
        assert len(seen) == 2
        per_worker = []
        for threads in seen.values():
            assert len(threads) >= 2  # (the main thread and polars' pool thread at least)
            got = {tuple(a) for a in threads.values()}
            assert len(got) == 1, threads
            per_worker.append(list(next(iter(got))))
        assert sorted(per_worker) == sorted(cpus)
    finally:
        pool.shutdown()


def _thread_affinities(wait: float) -> tuple[int, dict[int, list[int]]]:
    """(this process's id, each of its threads' CPUs), after a polars operation and `wait` seconds."""
    pl.Series([1, 2]).sum()
    time.sleep(wait)
    tids = map(int, os.listdir("/proc/self/task"))
    return os.getpid(), {t: cpus for t in tids if (cpus := _affinity(t)) is not None}


def _affinity(tid: int) -> list[int] | None:
    try:
        return sorted(os.sched_getaffinity(tid))
    except OSError:  # (a thread that ended since)
        return None


def test_part_stats_count_what_the_parent_would_read_from_the_part() -> None:
    """`part_stats` of a frame (typeless columns of nulls too, as a pooled frame has them): each (node, file)
    pair's rows and line range, whether a time is year-inferred, the dated times by hour; `_known` reads them
    back as `Outcomes.lazy` reads the parts (a line offset added, rows of node 'unknown' given the node)."""
    hour = 3600 * 1_000_000
    df = pl.DataFrame(
        {
            "node": ["a", "a", "unknown", "unknown", "b"],
            "file": ["f", "f", "g", "g", "h"],
            "line": [3, 9, None, 4, None],
            "ts": pl.Series([0, hour + 5, 2 * hour, None, 7], dtype=pl.Int64).cast(pl.Datetime("us", "UTC")),
            "ts_quality": ["exact", "local_assumed_utc", "year_inferred", "year_inferred", "none"],
            "rank": [None] * 5,
        }
    )
    st = ingest_mod.part_stats(df)
    assert sorted(st.ranges, key=str) == sorted(
        [("a", "f", 2, 3, 9, 0), ("unknown", "g", 2, 4, 4, 1), ("b", "h", 1, None, None, 1)], key=str
    )
    assert st.inferred and sorted(st.dated) == [(0, 1), (1, 1)]
    assert not ingest_mod.part_stats(df.filter(pl.col("file") == "f")).inferred
    typeless = df.with_columns(pl.lit(None).alias("ts"), pl.lit(None).alias("ts_quality"))
    assert ingest_mod.part_stats(typeless).dated == () and not ingest_mod.part_stats(typeless).inferred
    parts = [
        ingest_mod.Part("p0", line_offset=10, node="n7", stats=st),
        ingest_mod.Part("p1", stats=ingest_mod.part_stats(df.head(1))),
    ]
    known = ingest_mod._known(parts, df.tail(1))
    rows = sorted(known.by_part.rows(), key=str)
    assert rows == sorted(
        [
            ("a", "f", 0, 2, 13, 19, 0),
            ("n7", "g", 0, 2, 14, 14, 1),
            ("b", "h", 0, 1, None, None, 1),
            ("a", "f", 1, 1, 3, 3, 0),
            ("b", "h", -1, 1, None, None, 1),
        ],
        key=str,
    )
    assert known.by_part.schema == ingest_mod._BY_PART_SCHEMA
    assert known.years.inferred is not None
    which = pl.DataFrame({PART: [0, 1, -1]}, schema={PART: pl.Int32}).filter(known.years.inferred)
    assert which[PART].to_list() == [0]
    assert sorted(known.years.dated.rows()) == [(0, 1), (0, 1), (1, 1)]


def _absl_log(steps: int, start_day: int = 12) -> str:
    """`steps` MaxText (absl) step lines: month and day without a year, a second apart."""
    return "".join(
        f"I05{start_day:02d} 10:{i // 60 % 60:02d}:{i % 60:02d}.123456 140234 train.py:540] "
        f"completed step: {i}, "
        f"seconds: 1.341, TFLOP/s/device: 257.929, Tokens/s/device: 36653.244, total_weights: 196608, "
        f"loss: {10 - i / 1000:.3f}\n"
        for i in range(steps)
    )


def test_a_large_tables_year_inferred_rows_are_moved_as_when_its_parts_are_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stats_checked: dict[str, int]
) -> None:
    """Year-less step times in the parts of a large table, moved by the year reconciliation from what the
    parts' writers counted, as reading the parts and as holding the table move them."""
    src = tmp_path / "bundle"
    for n in range(6):
        (src / f"node{n}").mkdir(parents=True)
        (src / f"node{n}" / "train.log").write_text(_absl_log(700) if n % 2 else _titan_log(0, 700))
    held = ingest(src, tmp_path / "held", jobs=1, year=2026)
    moved = [n for n in held["notes"] if "year-less times moved" in n]
    assert len(moved) == 3  # (absl's May 2026 moved to May 2025, where the torchtitan lines are)
    monkeypatch.setattr(ingest_mod, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(ingest_mod, "PARALLEL_MIN_FILES", 0)
    monkeypatch.setattr(ingest_mod, "BATCH_FILES", 2)
    monkeypatch.setattr(ingest_mod, "HANDED_BYTES", 1)
    monkeypatch.setattr(ingest_mod, "HOLD_ROWS", 100)
    monkeypatch.setattr(ingest_mod, "PART_ROWS", 600)
    parts = ingest(src, tmp_path / "parts", jobs=2, year=2026)
    assert stats_checked["years"] == 1 and stats_checked["inferred"] == 1
    assert stats_checked["by_part"] == 0  # (the stage changed the table: its parts are read for the plan)
    assert [n for n in parts["notes"] if "year-less times moved" in n] == moved
    cols = get_schema("steps")
    a, b = read_table(tmp_path / "held", "steps"), read_table(tmp_path / "parts", "steps")
    assert a.sort(list(cols), nulls_last=True).equals(b.sort(list(cols), nulls_last=True), null_equal=True)


def test_the_collector_runs_less_often_while_ingesting_and_as_before_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ingest runs with the collector's thresholds raised, and gives them back, also when it fails."""
    import gc

    seen: list[tuple[int, int, int]] = []
    real = ingest_mod._ingest_bundle

    def spy(*a: Any, **k: Any) -> Any:
        seen.append(gc.get_threshold())
        return real(*a, **k)

    monkeypatch.setattr(ingest_mod, "_ingest_bundle", spy)
    before = gc.get_threshold()
    xid = "[    1.000000] NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.\n"
    make_bundle(tmp_path / "b", {"node-1/dmesg.log": xid})
    ingest(tmp_path / "b", tmp_path / "out", jobs=1)
    assert seen == [ingest_mod.GC_THRESHOLD] and gc.get_threshold() == before
    monkeypatch.setattr(ingest_mod, "_ingest_bundle", lambda *a, **k: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        ingest(tmp_path / "b", tmp_path / "out2", jobs=1)
    assert gc.get_threshold() == before


@given(
    st.lists(
        st.tuples(
            st.one_of(st.none(), st.integers(0, 10**6)),
            st.one_of(st.none(), st.integers(0, 3 * 10**10)),
            st.sampled_from(["exact", "year_inferred", "none", "local_assumed_utc", None]),
        ),
        min_size=1,
        max_size=40,
    ),
    st.booleans(),
)
@settings(max_examples=150, deadline=None)
def test_part_stats_of_one_file_are_those_of_the_queries(rows: list[tuple], runs: bool) -> None:
    """`part_stats` of one node and file's rows (`_one_file_stats`: column by column, hours counted by run)
    gives what the queries of any rows give: the range, whether a year was inferred, the rows of each hour."""
    if runs:  # (a file's samples: GPU by GPU, in time order)
        rows = sorted(rows, key=lambda r: (r[1] is None, r[1] or 0))
    df = pl.DataFrame(
        {
            "node": ["n1"] * len(rows),
            "file": ["n1/dmon.log"] * len(rows),
            "line": [r[0] for r in rows],
            "ts": [r[1] for r in rows],
            "ts_quality": [r[2] for r in rows],
        },
        schema={
            "node": pl.String, "file": pl.String, "line": pl.Int64, "ts": pl.Int64, "ts_quality": pl.String
        },
    ).with_columns(pl.col("ts").cast(pl.Datetime("us", "UTC")))
    half = len(rows) // 2
    for frame in (df, pl.concat([df.head(half), df.tail(len(rows) - half)], rechunk=False)):
        got, want = ingest_mod._one_file_stats(frame, "n1", "n1/dmon.log"), ingest_mod._stats_by_query(frame)
        assert got.ranges == want.ranges and got.inferred == want.inferred
        assert sorted(got.dated) == sorted(want.dated)
        assert ingest_mod.part_stats(frame) == got  # (the hours in the order of their first rows)
