"""Atomic outputs and Parquet tables other tools can read (pyarrow datasets, polars scans)."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from forensics.errors import OutputError, SchemaError
from forensics.ingest import ingest
from forensics.outputs import (
    META_TABLE,
    META_VERSION,
    footer_metadata,
    atomic_path,
    read_table,
    require_ingested,
    write_json,
    write_table,
)
from forensics.schema import SCHEMA_VERSION, TABLES, conform, empty
from tests.conftest import make_bundle

SYSLOG = "".join(
    f"2026-11-29T10:00:{i:02d}.000000+00:00 node-00{i % 3} kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=1, "
    "GPU has fallen off the bus.\n"
    for i in range(30)
)


def test_atomic_path_replaces_only_on_success(tmp_path: Path) -> None:
    target = tmp_path / "f.json"
    target.write_text("old")
    with pytest.raises(RuntimeError), atomic_path(target) as tmp:
        tmp.write_text("half")
        raise RuntimeError("boom")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["f.json"]  # no temp file left
    write_json(target, {"a": 1})
    assert json.loads(target.read_text()) == {"a": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["f.json"]


def test_write_table_failure_keeps_the_previous_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    df = conform(pl.DataFrame({"path": ["a"], "node": ["n"], "status": ["ok"]}), "files")
    write_table(df, "files", tmp_path)
    before = (tmp_path / "files" / "part-0.parquet").read_bytes()
    with pytest.raises(SchemaError):
        write_table(pl.DataFrame({"path": [1.5]}), "files", tmp_path)

    def dies_midway(frame: object, where: object, **kw: object) -> None:
        Path(str(where)).write_bytes(b"PAR1 half a file")
        raise KeyboardInterrupt

    monkeypatch.setattr(pl.DataFrame, "write_parquet", dies_midway)
    with pytest.raises(KeyboardInterrupt):
        write_table(df, "files", tmp_path)
    assert (tmp_path / "files" / "part-0.parquet").read_bytes() == before
    assert sorted(p.name for p in (tmp_path / "files").iterdir()) == ["part-0.parquet"]


def test_foreign_parquet_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "tables" / "events"
    folder.mkdir(parents=True)
    pl.DataFrame({"x": [1]}).write_parquet(folder / "part-0.parquet")
    with pytest.raises(SchemaError, match="is not table 'events' of schema version"):
        read_table(tmp_path, "events")


def test_require_ingested(tmp_path: Path) -> None:
    with pytest.raises(OutputError, match="holds no ingested bundle"):
        require_ingested(tmp_path)
    (tmp_path / "manifest.json").write_text("[1, 2]")
    with pytest.raises(OutputError, match="is not a gpu-forensics manifest"):
        require_ingested(tmp_path)
    (tmp_path / "manifest.json").write_text("{not json")
    with pytest.raises(OutputError, match="cannot read"):
        require_ingested(tmp_path)


@pytest.fixture(scope="module")
def ingested(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("ing")
    src = make_bundle(root, {"collected/syslog": SYSLOG, "node-001/dmesg.log": SYSLOG})
    out = root / "out"
    ingest(src, out)
    return out


def test_every_table_opens_with_pyarrow_datasets_and_polars(ingested: Path) -> None:
    for t in TABLES:
        folder = ingested / "tables" / t
        if not folder.exists():
            continue
        dset = ds.dataset(folder, format="parquet")
        arrow = dset.to_table()
        lazy = pl.scan_parquet(folder / "*.parquet").collect()
        assert arrow.num_rows == lazy.height == read_table(ingested, t).height
        assert arrow.schema.names == list(empty(t).columns)
        meta = footer_metadata(next(folder.glob("*.parquet")))
        assert meta[META_TABLE] == t.encode() and meta[META_VERSION] == str(SCHEMA_VERSION).encode()


def test_parquet_layout_timestamps_compression_sorting(ingested: Path) -> None:
    part = ingested / "tables" / "events" / "part-0.parquet"
    md = pq.ParquetFile(part).metadata
    assert md.num_rows == 60
    for rg in range(md.num_row_groups):
        for c in range(md.num_columns):
            assert md.row_group(rg).column(c).compression == "ZSTD"
    schema = pq.read_schema(part)
    ts = schema.field("ts").type
    assert (ts.unit, ts.tz) == ("us", "UTC")
    ev = read_table(ingested, "events")
    assert ev.height == 60
    keys = ["node", "gpu_index", "ts", "file", "line"]
    assert ev.select(keys).equals(ev.select(keys).sort(keys, nulls_last=True, maintain_order=True))
    assert set(ev["node"]) == {"node-000", "node-001", "node-002"}


def test_analysis_reads_very_large_tables_thinned(tmp_path: Path) -> None:
    """Past the limit, steps keep every k-th step number on every rank plus each rank's last step, and
    gpu_samples the samples of one second in k; the note says so; smaller tables are read whole."""
    from forensics.ingest import ingest
    from forensics.outputs import read_analysis_tables
    from forensics.simulate import simulate

    src = tmp_path / "b"
    simulate(src, nodes=4, gpus_per_node=4, hours=0.5, faults=[], seed=3)
    ingest(src, tmp_path / "out", jobs=1)
    whole = {t: read_table(tmp_path / "out", t) for t in ("steps", "gpu_samples", "events")}
    same, notes = read_analysis_tables(tmp_path / "out")
    assert notes == [] and all(same[t].drop("weight", strict=False).equals(whole[t]) for t in whole)
    assert same["events"]["weight"].eq(1).all()  # (every event a row of its own)
    limit = 30
    thin, notes = read_analysis_tables(tmp_path / "out", limit=limit)
    # (no run of events alike longer than the first and last ones kept whole: every row, each of weight 1)
    assert thin["events"].drop("weight").equals(whole["events"]) and thin["events"]["weight"].eq(1).all()
    for t in ("steps", "gpu_samples"):
        k = -(-whole[t].height // limit)
        assert thin[t].height < whole[t].height and any(n.startswith(f"{t}: {whole[t].height:,} rows thinned") for n in notes)
        assert thin[t].join(whole[t], on=list(whole[t].columns), how="anti", nulls_equal=True).height == 0  # real rows only
    s, k = thin["steps"], -(-whole["steps"].height // limit)
    # each kept step number is kept on every rank that logged it: ranks stay comparable step by step
    per_step = s.group_by("step").len().join(whole["steps"].group_by("step").len(), on="step", suffix="_all")
    assert per_step.filter(pl.col("len") != pl.col("len_all")).height == 0
    numbers = whole["steps"]["step"].drop_nulls().unique().sort()
    # every 4th number and the last 80 would hold 85 of the 91 rows: the last numbers are kept within half
    # the limit, one in k2 of the others within the rest
    assert s.height <= limit and set(numbers.tail(limit // 2)) <= set(s["step"])
    assert any("would keep" in n for n in notes if n.startswith("steps:"))
    # where every k-th number and the last k x 20 fit in the limit, those are what is kept
    roomy, notes = read_analysis_tables(tmp_path / "out", limit=90)
    k = -(-whole["steps"].height // 90)
    assert k == 2 and roomy["steps"].height < whole["steps"].height
    assert set(roomy["steps"]["step"]) == set(numbers.gather_every(k)) | set(numbers.tail(k * 20))
    g = thin["gpu_samples"].filter(pl.col("ts").is_not_null())
    kg = -(-whole["gpu_samples"].height // limit)
    assert g.height > 0


def _repeated_steps(nodes: int, numbers: int, repeats: int) -> pl.DataFrame:
    """A steps table whose step numbers repeat: each rank logs steps 0..numbers-1 `repeats` times (a job
    restarted from its first checkpoint again and again), one row a line of its rank's log."""
    from datetime import UTC, datetime, timedelta

    from forensics.schema import conform

    n = numbers * repeats
    rows = [
        {
            "ts": datetime(2026, 1, 1, tzinfo=UTC) + timedelta(seconds=10 * i),
            "ts_quality": "exact",
            "node": f"node-{r:02d}",
            "rank": r,
            "framework": "megatron",
            "step": i % numbers,
            "step_time_s": 1.0,
            "file": f"node-{r:02d}/train.log",
            "line": i + 1,
        }
        for r in range(nodes)
        for i in range(n)
    ]
    return conform(pl.DataFrame(rows), "steps")


def test_analysis_thins_steps_whose_numbers_repeat(tmp_path: Path) -> None:
    """Where step numbers repeat within each rank's log, every-k-th number and the last ones hold every row:
    the thinning keeps every number and blocks of lines of every file instead, and stays near the limit."""
    from forensics.outputs import read_analysis_tables, write_table

    out = tmp_path / "out"
    whole = _repeated_steps(nodes=4, numbers=30, repeats=200)  # 24,000 rows, 800 a step number
    write_table(whole, "steps", out / "tables")
    limit = 4_000
    thin, notes = read_analysis_tables(out, limit=limit)
    s = thin["steps"]
    assert 0.5 * limit <= s.height <= 1.5 * limit  # (blocks picked by a hash: about one in 6)
    assert any("every step number (30 in 24,000 rows of 4 logs: they repeat)" in n for n in notes)
    assert any("about one block of 64 lines in 6 of every file" in n for n in notes)
    assert s.join(whole, on=list(whole.columns), how="anti", nulls_equal=True).height == 0  # real rows only
    # every rank keeps every step number, each about as often
    per_rank = s.group_by("node").agg(pl.col("step").unique().sort()).get_column("step").to_list()
    assert len(per_rank) == 4 and all(x == list(range(30)) for x in per_rank)
    per_step = s.group_by("step").len().get_column("len")
    assert per_step.max() <= 1.5 * per_step.min()
    # the same rows on every reading
    assert read_analysis_tables(out, limit=limit)[0]["steps"].equals(s)
    # numbers that do not repeat, with room for every 2nd and the last 40: thinned as before
    once = _repeated_steps(nodes=4, numbers=1_500, repeats=1)
    write_table(once, "steps", out / "tables")
    thin, notes = read_analysis_tables(out, limit=4_000)
    assert not any("would keep" in n or "repeat" in n for n in notes) and thin["steps"].height == 4 * (750 + 20)


def test_write_json_writes_long_record_lists_a_record_a_line(tmp_path: Path) -> None:
    from forensics.outputs import RECORD_LINES, write_json

    obj = {"totals": {"files": 2}, "files": [{"path": f"n{i}/dmesg", "bytes": i, "x": None} for i in range(RECORD_LINES + 1)]}
    write_json(tmp_path / "m.json", obj)
    text = (tmp_path / "m.json").read_text()
    assert json.loads(text) == obj
    assert '    {"path": "n3/dmesg", "bytes": 3, "x": null},\n' in text
    small = {"findings": [{"a": [1, 2]}], "k": "é"}
    write_json(tmp_path / "f.json", small)
    assert (tmp_path / "f.json").read_text() == json.dumps(small, indent=2, ensure_ascii=False) + "\n"


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002])
def test_output_file_mode_is_the_mode_open_gives_and_learning_it_leaves_the_umask_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, umask: int
) -> None:
    import builtins
    import os

    from forensics import outputs

    old = os.umask(umask)
    try:
        (tmp_path / "plain").write_bytes(b"")
        expected = (tmp_path / "plain").stat().st_mode & 0o777
        assert outputs._file_mode() == expected
        assert os.umask(umask) == umask  # unchanged
        real_open = builtins.open

        def no_proc(path: object, *a: object, **kw: object) -> object:
            if str(path).startswith("/proc"):
                raise OSError("no /proc here")
            return real_open(path, *a, **kw)  # type: ignore[call-overload]

        monkeypatch.setattr(builtins, "open", no_proc)
        assert outputs._file_mode() == expected and os.umask(umask) == umask
    finally:
        os.umask(old)


def _flood_events() -> pl.DataFrame:
    """Events of a flood and a few others, in table order (node, GPU, time): node-01's GPU 0 logs Xid 13
    5,000 times with an Xid 43 every 7th line, node-02's and node-04's rank 3 an NCCL IB error 1,500 times each
    naming one of two peers, node-03 one Xid 79."""
    from datetime import UTC, datetime, timedelta

    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    rows = [
        {"ts": t0 + timedelta(milliseconds=10 * i), "ts_quality": "exact", "node": "node-01", "gpu_index": 0,
         "gpu_bus_id": "0000:38:00.0", "source": "kernel", "kind": "xid", "code": "43" if i % 7 == 0 else "13",
         "severity": "unknown", "message": f"NVRM: Xid (PCI:0000:38:00): {43 if i % 7 == 0 else 13}, pid={i}",
         "file": "node-01/dmesg.log", "line": i + 1}
        for i in range(5000)
    ]
    rows += [
        {"ts": t0 + timedelta(milliseconds=20 * i), "ts_quality": "exact", "node": f"node-0{2 + 2 * (i >= 1500)}", "rank": 3,
         "source": "nccl", "kind": "nccl_ib_error", "code": "12", "severity": "high",
         "message": f"node-02:1:2 [3] NCCL WARN NET/IB : Got completion from peer 10.0.0.{1 + i % 2}<4242> with status=12",
         "detail": f'{{"peer": "10.0.0.{1 + i % 2}<4242>"}}', "file": "node-02/nccl.log", "line": i + 1}
        for i in range(3000)
    ]
    rows.append({"ts": t0, "ts_quality": "exact", "node": "node-03", "gpu_index": 5, "gpu_bus_id": "0000:ab:00.0",
                 "source": "kernel", "kind": "xid", "code": "79", "severity": "unknown",
                 "message": "NVRM: Xid (PCI:0000:ab:00): 79, GPU has fallen off the bus.", "file": "node-03/dmesg.log",
                 "line": 9})
    return conform(pl.DataFrame(rows, infer_schema_length=None), "events")


def test_analysis_reads_an_event_flood_thinned(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past the limit, each run of events alike keeps its first and last rows and one in k of the rest, each
    row weighing the rows it stands for: counts, first and last times and the candidates stay those of every
    row; read a row group at a time, in two parts."""
    from forensics import outputs
    from forensics.hardware import candidates_from_events
    from forensics.network import peer_candidates
    from forensics.outputs import RUN_HEAD, RUN_TAIL, read_analysis_tables, write_table

    monkeypatch.setattr(outputs, "ROW_GROUP_ROWS", 500)
    whole = _flood_events()
    out = tmp_path / "out"
    write_table(whole.head(4000), "events", out / "tables", name="part-0.parquet")
    write_table(whole.slice(4000), "events", out / "tables", name="part-1.parquet")
    limit = 1_000
    thin, notes = read_analysis_tables(out, limit=limit)
    ev = thin["events"]
    assert any(n.startswith("events: 8,001 rows thinned to ") and "the tables keep every row" in n for n in notes)
    assert ev.height <= limit + (RUN_HEAD + RUN_TAIL) * 3 and ev.height < whole.height
    # real rows only, each once, in table order
    assert ev.drop("weight").join(whole, on=list(whole.columns), how="anti", nulls_equal=True).height == 0
    assert ev.select("file", "line").is_unique().all() and ev.drop("weight").equals(
        whole.join(ev.select("file", "line"), on=["file", "line"], how="semi", maintain_order="left")
    )
    runs = ["node", "kind", "code", "rank", "gpu_index"]
    per = lambda df, n: df.group_by(runs).agg(n=n, first=pl.col("ts").min(), last=pl.col("ts").max(),  # noqa: E731
                                              lo=pl.col("line").min(), hi=pl.col("line").max()).sort(runs)
    assert per(ev, pl.col("weight").sum()).equals(per(whole, pl.len()))  # counts, first and last: exact
    for key, rows in whole.group_by(runs):
        kept = set(ev.join(rows.select("file", "line"), on=["file", "line"], how="semi")["line"])
        lines = rows["line"].to_list()
        assert set(lines[:RUN_HEAD]) | set(lines[-RUN_TAIL:]) <= kept, key  # a run's first and last rows whole
    assert ev.filter(pl.col("code") == "79")["weight"].to_list() == [1]
    again, _ = read_analysis_tables(out, limit=limit)
    assert again["events"].equals(ev)
    # what the analysis makes of them: the same candidates (their counts, times and evidence lines)
    assert candidates_from_events(ev, ["node-01", "node-02", "node-03"]) == candidates_from_events(
        whole, ["node-01", "node-02", "node-03"]
    )
    nodes = pl.DataFrame({"node": ["node-09"], "attribute": ["ip"], "value": ["10.0.0.1"]})
    peers, thinned = peer_candidates(whole, nodes), peer_candidates(ev, nodes)
    assert len(peers) == 2 and [c.title for c in thinned] == [c.title for c in peers]
    # errors of one run name either peer: each peer's count is an estimate from the rows kept, and says so
    assert [c.summary.startswith("about ") for c in thinned] == [True, True]
    assert sum(int(c.summary.split()[1]) for c in thinned) == 3000


def test_a_thinned_run_keeps_its_earliest_and_latest_time(tmp_path: Path) -> None:
    """A flood whose times do not follow its rows (a log written again and again, each copy with its times):
    the run's earliest and latest rows are kept wherever they lie, so its first and last times stay exact."""
    from datetime import UTC, datetime, timedelta

    from forensics.outputs import read_analysis_tables, write_table

    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    secs = list(range(1000))
    secs[502], secs[503] = -86_400, 86_400  # rows 503 and 504: a day before and after the others, mid-run
    whole = conform(pl.DataFrame({
        "ts": [t0 + timedelta(seconds=s) for s in secs], "ts_quality": ["exact"] * 1000, "node": ["n1"] * 1000,
        "source": ["kernel"] * 1000, "kind": ["xid"] * 1000, "code": ["13"] * 1000, "severity": ["unknown"] * 1000,
        "message": [f"NVRM: Xid (PCI:0000:38:00): 13, second {s}" for s in secs], "file": ["n1/dmesg"] * 1000,
        "line": list(range(1, 1001)),
    }), "events")
    write_table(whole, "events", tmp_path / "out" / "tables")
    ev, notes = read_analysis_tables(tmp_path / "out", limit=200)
    assert "one in 10 of the rest" in notes[0] or "one in 9 of" in notes[0]  # (neither keeps rows 503, 504)
    assert ev["events"].height < 300 and ev["events"]["weight"].sum() == 1000
    assert (ev["events"]["ts"].min(), ev["events"]["ts"].max()) == (t0 - timedelta(days=1), t0 + timedelta(days=1))


def test_a_count_the_fleet_wide_burst_cuts_from_a_thinned_run_says_about(tmp_path: Path) -> None:
    """Xid 13 on every node at once (the fleet-wide application fault takes the burst's rows) and on node-01 an
    hour before too, in the same run: a thinned row by the cut stands for rows on both sides of it, so node-01's
    count of the rest is an estimate and says so; read whole, it is exact."""
    from datetime import UTC, datetime, timedelta

    from forensics.hardware import candidates_from_events
    from forensics.outputs import read_analysis_tables, write_table

    t0 = datetime(2026, 1, 1, 12, tzinfo=UTC)
    rows = []
    for node in ("node-01", "node-02", "node-03", "node-04"):
        times = [t0 - timedelta(hours=1) + timedelta(seconds=i) for i in range(300)] if node == "node-01" else []
        times += [t0 + timedelta(milliseconds=10 * i) for i in range(300)]
        rows += [{"ts": t, "ts_quality": "exact", "node": node, "gpu_index": 0, "gpu_bus_id": "0000:38:00.0",
                  "source": "kernel", "kind": "xid", "code": "13", "severity": "unknown",
                  "message": f"NVRM: Xid (PCI:0000:38:00): 13, pid={i}", "file": f"{node}/dmesg.log", "line": i + 1}
                 for i, t in enumerate(times)]
    whole = conform(pl.DataFrame(rows), "events")
    write_table(whole, "events", tmp_path / "out" / "tables")
    ev = read_analysis_tables(tmp_path / "out", limit=500)[0]["events"]
    assert ev.height < whole.height
    nodes = ["node-01", "node-02", "node-03", "node-04"]
    got, want = ({c.node: c for c in candidates_from_events(df, nodes)} for df in (ev, whole))
    assert got[None].title == want[None].title and want[None].title.startswith("Application fault on every node")
    assert want["node-01"].summary.endswith(": 300 event(s).")
    assert ": about " in got["node-01"].summary


def test_thinned_link_downs_say_about_only_where_a_run_mixes_ups_and_downs(tmp_path: Path) -> None:
    """A NIC flapping 2,000 times (up and down lines in one run) and another NIC down 2,000 times: thinned, the
    first's downs are an estimate and say so, the second's stay exact; read whole, both are exact."""
    from datetime import UTC, datetime, timedelta

    from forensics.hardware import candidates_from_events
    from forensics.outputs import read_analysis_tables, write_table

    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    rows = [
        {"ts": t0 + timedelta(seconds=i), "ts_quality": "exact", "node": "node-01", "gpu_bus_id": bus,
         "source": "kernel", "kind": "nic_link", "severity": "medium", "file": "node-01/dmesg.log", "line": 2 * i + j,
         "message": f"mlx5_core {bus} {dev}: Link {'up' if dev == 'mlx5_0' and i % 3 == 0 else 'down'}"}
        for i in range(2000)
        for j, (bus, dev) in enumerate((("0000:1a:00.0", "mlx5_0"), ("0000:2a:00.0", "mlx5_1")))
    ]
    whole = conform(pl.DataFrame(rows), "events")
    write_table(whole, "events", tmp_path / "out" / "tables")
    ev = read_analysis_tables(tmp_path / "out", limit=600)[0]["events"]
    assert ev.height < whole.height
    titles = {c.gpu_bus_id or c.title.split()[0]: c.title for c in candidates_from_events(ev, ["node-01"])}
    exact = {c.gpu_bus_id or c.title.split()[0]: c.title for c in candidates_from_events(whole, ["node-01"])}
    assert exact == {"mlx5_0": "mlx5_0 link went down 1333 time(s) on node-01",
                     "mlx5_1": "mlx5_1 link went down 2000 time(s) on node-01"}
    assert titles["mlx5_1"] == exact["mlx5_1"]
    assert titles["mlx5_0"].startswith("mlx5_0 link went down about ")
