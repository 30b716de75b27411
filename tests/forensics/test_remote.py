"""OUT as a URL (fsspec): the stages run on a local folder mirrored to the URL, manifest.json last."""

from __future__ import annotations

import io
import json
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from forensics.cli import app
from forensics.remote import is_url, local_path
from tests.conftest import make_bundle

SAMPLE = Path(__file__).resolve().parents[2] / "samples" / "incident-xid79"
runner = CliRunner()


def xid_lines(n: int) -> str:
    return "".join(
        f"[{10 + i:>6}.000000] NVRM: Xid (PCI:0000:3b:00): 79, pid={i}, GPU has fallen off the bus.\n"
        for i in range(n)
    )


@pytest.fixture
def memfs():  # type: ignore[no-untyped-def]
    fsspec = pytest.importorskip("fsspec")
    fs = fsspec.filesystem("memory")
    fs.store.clear()
    fs.pseudo_dirs.clear()
    fs.pseudo_dirs.append("")
    yield fs
    fs.store.clear()


def test_urls_and_paths_are_told_apart() -> None:
    assert is_url("s3://bucket/x") and is_url("memory://a") and is_url("gs://b/c/")
    assert (
        not is_url("out") and not is_url("/tmp/out") and not is_url("file:///tmp/out") and not is_url("C:/x")
    )
    assert local_path("file:///tmp/out") == Path("/tmp/out") and local_path("out") == Path("out")


def test_run_writes_every_output_to_the_url_and_analyze_reads_it_back(memfs) -> None:  # type: ignore[no-untyped-def]
    r = runner.invoke(app, ["run", str(SAMPLE), "-o", "memory://bucket/inc-1", "-q"])
    assert r.exit_code == 0, r.output
    assert "details in memory://bucket/inc-1/manifest.json" in r.output
    assert "Report: memory://bucket/inc-1/report.html" in r.output
    names = {p.split("/inc-1/", 1)[1] for p in memfs.find("/bucket/inc-1")}
    assert {"manifest.json", "findings.json", "report.html", "tables/events/part-0.parquet"} <= names
    assert not any(".forensics-work" in n for n in names)
    ev = pl.read_parquet(io.BytesIO(memfs.cat_file("/bucket/inc-1/tables/events/part-0.parquet")))
    assert ev.filter(pl.col("kind") == "xid").height > 0
    doc = json.loads(memfs.cat_file("/bucket/inc-1/findings.json"))
    assert "XID 79" in doc["findings"][0]["title"]

    # analyze and report fetch the tables, and upload only what they write
    memfs.rm("/bucket/inc-1/findings.json")
    memfs.rm("/bucket/inc-1/report.html")
    r = runner.invoke(app, ["analyze", "memory://bucket/inc-1"])
    assert r.exit_code == 0 and "XID 79" in r.output, r.output
    r = runner.invoke(app, ["report", "memory://bucket/inc-1"])
    assert r.exit_code == 0 and "Report: memory://bucket/inc-1/report.html" in r.output, r.output
    assert memfs.exists("/bucket/inc-1/findings.json") and memfs.exists("/bucket/inc-1/report.html")


def test_an_ingested_url_is_not_replaced_without_force(memfs, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    src = make_bundle(tmp_path, {"node-001/dmesg.log": xid_lines(3), "node-002/dmesg.log": xid_lines(2)})
    assert runner.invoke(app, ["ingest", str(src), "-o", "memory://b/out", "-q"]).exit_code == 0
    r = runner.invoke(app, ["ingest", str(src), "-o", "memory://b/out", "-q"])
    assert r.exit_code == 2
    assert "output 'memory://b/out' already holds a previous ingest; use --force to replace it" in r.output
    small = make_bundle(tmp_path / "2", {"node-009/dmesg.log": xid_lines(1)})
    r = runner.invoke(app, ["ingest", str(small), "-o", "memory://b/out", "-q", "--force"])
    assert r.exit_code == 0, r.output
    m = json.loads(memfs.cat_file("/b/out/manifest.json"))
    assert [f["path"] for f in m["files"]] == ["node-009/dmesg.log"]
    ev = pl.read_parquet(io.BytesIO(memfs.cat_file("/b/out/tables/events/part-0.parquet")))
    assert ev["node"].unique().to_list() == ["node-009"]


def test_analyze_of_an_empty_url_is_a_clear_error(memfs) -> None:  # type: ignore[no-untyped-def]
    r = runner.invoke(app, ["analyze", "memory://nothing/here"])
    assert r.exit_code == 2, r.output
    assert (
        "'memory://nothing/here' holds no ingested bundle (no manifest.json); run 'forensics ingest BUNDLE -o memory://nothing/here' first"
        in " ".join(r.output.split())
    )


def test_dask_ingest_to_a_url(memfs, tmp_path: Path, dask_scheduler: str) -> None:  # type: ignore[no-untyped-def]
    """The issue's scale-out path end to end: per-file work on a Dask LocalCluster, tables to a URL."""
    src = make_bundle(tmp_path, {f"node-{i:03d}/dmesg.log": xid_lines(2 + i) for i in range(4)})
    r = runner.invoke(app, ["ingest", str(src), "-o", "memory://lake/inc", "-q", "--dask", dask_scheduler])
    assert r.exit_code == 0, r.output
    ev = pl.read_parquet(io.BytesIO(memfs.cat_file("/lake/inc/tables/events/part-0.parquet")))
    assert ev.height == 2 + 3 + 4 + 5
