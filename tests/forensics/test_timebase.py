"""timebase.anchor: monotonic kernel rows get boot-anchored times only where the bundle gives a boot time."""

from __future__ import annotations

from datetime import UTC, datetime

import polars as pl
import pytest

from forensics import timebase
from forensics.schema import conform
from parsers import kernel_log
from parsers.base import FileContext, lines_from_bytes

XID79 = "NVRM: Xid (PCI:0000:18:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."
LINK = "mlx5_core 0000:1a:00.0 mlx5_0: Port: 1 Link DOWN"


def tables(*files: tuple[str, str, str], boot_rows: list[tuple[str, str]] = ()) -> dict[str, pl.DataFrame]:
    ev, inv = [], []
    for path, node, text in files:
        r = kernel_log.parse(lines_from_bytes(text.encode()), FileContext(path=path, node=node, year_hint=2025))
        ev.append(conform(r.tables["events"], "events"))
        inv.append(conform(r.tables["inventory"], "inventory"))
    for node, value in boot_rows:
        row = {"node": [node], "component": ["node"], "attribute": ["boot_time"], "value": [value], "source": ["test"], "file": ["x"], "line": [1]}
        inv.append(conform(pl.DataFrame(row), "inventory"))
    return {"events": pl.concat(ev), "inventory": pl.concat(inv)}


def rows(t: dict[str, pl.DataFrame], file: str) -> list[tuple]:
    return t["events"].filter(pl.col("file") == file).select("line", "ts", "ts_quality").rows()


def test_line_pair_anchors_raw_dmesg_and_respects_reboot() -> None:
    raw = f"[ 5000.000000] {XID79}\n[ 5001.500000] {LINK}\n[   10.000000] Linux version 6.8.0\n[   20.000000] {LINK}\n"
    journal = f"2025-06-02T10:00:00.000000+00:00 n1 kernel: {XID79}\n"
    t, notes = timebase.anchor(tables(("n1/dmesg", "n1", raw), ("n1/journal", "n1", journal)))
    assert rows(t, "n1/dmesg") == [
        (1, datetime(2025, 6, 2, 10, 0, 0, tzinfo=UTC), "boot_anchored"),
        (2, datetime(2025, 6, 2, 10, 0, 1, 500000, tzinfo=UTC), "boot_anchored"),
        (4, None, "unanchored"),  # after the reboot: no evidence for that boot
    ]
    assert any("anchored to boot time 2025-06-02T08:36:40+00:00" in n for n in notes)
    assert any("left unanchored" in n for n in notes)


def test_repeated_messages_vote_for_the_true_offset() -> None:
    raw = "".join(f"[ {100 + i}.000000] {XID79}\n" for i in range(5))
    journal = "".join(f"2025-06-02T10:00:0{i}+00:00 n1 kernel: {XID79}\n" for i in range(5))
    t, _ = timebase.anchor(tables(("n1/dmesg", "n1", raw), ("n1/journal", "n1", journal)))
    got = [r[1] for r in rows(t, "n1/dmesg")]
    assert got == [datetime(2025, 6, 2, 10, 0, i, tzinfo=UTC) for i in range(5)]


def test_other_node_lines_are_not_used() -> None:
    t, _ = timebase.anchor(tables(("n1/dmesg", "n1", f"[ 5.0] {XID79}\n"), ("n2/journal", "n2", f"2025-06-02T10:00:00+00:00 n2 kernel: {XID79}\n")))
    assert rows(t, "n1/dmesg") == [(1, None, "unanchored")]


def test_inventory_boot_time_applies_to_last_boot_not_to_crash_records() -> None:
    pstore = "dmesg-erst-1:\nPanic#1 Part1\n<0>[ 30.0] Kernel panic - not syncing: x\n"
    t, _ = timebase.anchor(
        tables(("n2/dmesg", "n2", f"[ 100.0] {LINK}\n"), ("n2/pstore", "n2", pstore), boot_rows=[("n2", "2025-06-01T00:00:00Z")])
    )
    assert rows(t, "n2/dmesg") == [(1, datetime(2025, 6, 1, 0, 1, 40, tzinfo=UTC), "boot_anchored")]
    assert rows(t, "n2/pstore") == [(3, None, "unanchored")]


def test_k8b_syslog_boot_time_anchors_raw_dmesg_of_same_node() -> None:
    syslog = "Mar  3 10:00:00 n3 kernel: [ 1000.000000] usb 1-1: reset\n"
    t, _ = timebase.anchor(tables(("n3/kern.log", "n3", syslog), ("n3/dmesg", "n3", f"[ 1500.0] {LINK}\n")))
    assert rows(t, "n3/dmesg") == [(1, datetime(2025, 3, 3, 10, 8, 20, tzinfo=UTC), "boot_anchored")]


def test_nothing_to_do() -> None:
    t = {"events": conform(pl.DataFrame({"node": ["a"], "source": ["k"], "kind": ["x"], "severity": ["low"], "message": ["m"], "file": ["f"], "line": [1]}), "events")}
    out, notes = timebase.anchor(t)
    assert out["events"].equals(t["events"]) and notes == []
    assert timebase.anchor({}) == ({}, [])


def test_dmesg_T_local_clock_shifted_by_offset_seen_in_journal() -> None:
    ctime = f"[Mon Jun  2 12:00:03 2025] {XID79}\n[Mon Jun  2 12:05:00 2025] {LINK}\n"
    journal = f"2025-06-02T12:00:00.000000+02:00 n1 kernel: {XID79}\n"
    t, notes = timebase.anchor(tables(("n1/dmesg-T", "n1", ctime), ("n1/journal", "n1", journal)))
    assert rows(t, "n1/dmesg-T") == [
        (1, datetime(2025, 6, 2, 10, 0, 3, tzinfo=UTC), "zone_inferred"),
        (2, datetime(2025, 6, 2, 10, 5, 0, tzinfo=UTC), "zone_inferred"),
    ]
    assert any("shifted by -120 min" in n for n in notes)


def test_local_clock_without_offset_copy_is_left_alone() -> None:
    t, notes = timebase.anchor(tables(("n1/dmesg-T", "n1", f"[Mon Jun  2 12:00:03 2025] {XID79}\n")))
    assert rows(t, "n1/dmesg-T") == [(1, datetime(2025, 6, 2, 12, 0, 3, tzinfo=UTC), "local_assumed_utc")]
    assert notes == []


def test_ingest_anchors_raw_dmesg_end_to_end(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from forensics.ingest import ingest
    from tests.conftest import make_bundle

    bundle = make_bundle(
        tmp_path,
        {
            "node-01/dmesg.log": f"[ 5000.000000] {XID79}\n[ 5010.250000] {LINK}\n",
            "node-01/journal.log": f"2025-06-02T12:00:00+02:00 node-01 kernel: {XID79}\n",
            "node-02/proc_stat": "cpu  1 2 3 4\nbtime 1748851200\nprocesses 3\n",
            "node-02/dmesg.log": f"[  100.000000] {LINK}\n",
        },
    )
    manifest = ingest(bundle, tmp_path / "out", year=2025)
    ev = pl.read_parquet(tmp_path / "out" / "tables" / "events")
    got = {(r["file"], r["line"]): (r["ts"], r["ts_quality"]) for r in ev.iter_rows(named=True)}
    assert got[("node-01/dmesg.log", 1)] == (datetime(2025, 6, 2, 10, 0, 0, tzinfo=UTC), "boot_anchored")
    assert got[("node-01/dmesg.log", 2)] == (datetime(2025, 6, 2, 10, 0, 10, 250000, tzinfo=UTC), "boot_anchored")
    assert got[("node-02/dmesg.log", 1)] == (datetime(2025, 6, 2, 8, 1, 40, tzinfo=UTC), "boot_anchored")
    assert any("anchored to boot time" in n for n in manifest["notes"])


def test_recorded_timezone_converts_local_clock_files_with_dst() -> None:
    t = tables(
        ("n5/dmesg-T", "n5", f"[Mon Jan  6 12:00:00 2025] {XID79}\n[Mon Jun  2 12:00:00 2025] {LINK}\n"),
        ("n5/kern.log", "n5", f"Jun  2 12:00:00 n5 kernel: {LINK}\n"),
    )
    tz = {"node": ["n5"], "component": ["node"], "attribute": ["timezone"], "value": ["Europe/Berlin"], "source": ["timedatectl"], "file": ["n5/timedatectl"], "line": [4]}
    t["inventory"] = pl.concat([t["inventory"], conform(pl.DataFrame(tz), "inventory")])
    out, notes = timebase.anchor(t)
    assert rows(out, "n5/dmesg-T") == [
        (1, datetime(2025, 1, 6, 11, 0, 0, tzinfo=UTC), "zone_inferred"),  # CET, +01:00
        (2, datetime(2025, 6, 2, 10, 0, 0, tzinfo=UTC), "zone_inferred"),  # CEST, +02:00
    ]
    assert rows(out, "n5/kern.log") == [(1, datetime(2025, 6, 2, 10, 0, 0, tzinfo=UTC), "year_inferred")]
    assert any("converted from zone Europe/Berlin" in n for n in notes)


def _zone_rows(node: str, zone: str) -> pl.DataFrame:
    tz = {"node": [node], "component": ["node"], "attribute": ["timezone"], "value": [zone], "source": ["timedatectl"],
          "file": [f"{node}/timedatectl"], "line": [4]}
    return conform(pl.DataFrame(tz), "inventory")


def _scenarios() -> list[dict[str, pl.DataFrame]]:
    """Every fix of `anchor` at once: line pairs across a reboot, a recorded boot time and a crash record, a
    syslog's boot time, a zone offset seen on copies of lines, recorded zones (one not a zone), nothing to do."""
    raw = f"[ 5000.000000] {XID79}\n[ 5001.500000] {LINK}\n[   10.000000] Linux version 6.8.0\n[   20.000000] {LINK}\n"
    pstore = "dmesg-erst-1:\nPanic#1 Part1\n<0>[ 30.0] Kernel panic - not syncing: x\n"
    everything = tables(
        ("n1/dmesg", "n1", raw),
        ("n1/journal", "n1", f"2025-06-02T10:00:00.000000+00:00 n1 kernel: {XID79}\n"),
        ("n2/dmesg", "n2", f"[ 100.0] {LINK}\n"),
        ("n2/pstore", "n2", pstore),
        ("n3/kern.log", "n3", "Mar  3 10:00:00 n3 kernel: [ 1000.000000] usb 1-1: reset\n"),
        ("n3/dmesg", "n3", f"[ 1500.0] {LINK}\n"),
        ("n4/dmesg-T", "n4", f"[Mon Jun  2 12:00:03 2025] {XID79}\n[Mon Jun  2 12:05:00 2025] {LINK}\n"),
        ("n4/journal", "n4", f"2025-06-02T12:00:00.000000+02:00 n4 kernel: {XID79}\n"),
        ("n5/dmesg-T", "n5", f"[Mon Jan  6 12:00:00 2025] {XID79}\n[Mon Jun  2 12:00:00 2025] {LINK}\n"),
        ("n5/kern.log", "n5", f"Jun  2 12:00:00 n5 kernel: {LINK}\n"),
        ("n6/dmesg-T", "n6", f"[Mon Jun  2 12:00:03 2025] {XID79}\n"),
        boot_rows=[("n2", "2025-06-01T00:00:00Z")],
    )
    everything["inventory"] = pl.concat(
        [everything["inventory"], _zone_rows("n5", "Europe/Berlin"), _zone_rows("n6", "Mars/Olympus_Mons")]
    )
    return [everything, tables(("n1/dmesg-T", "n1", f"[Mon Jun  2 12:00:03 2025] {XID79}\n"))]


@pytest.mark.parametrize("which", [0, 1])
def test_events_too_large_to_hold_are_fixed_lazily_as_held(which: int) -> None:
    """The ingest's parent hands `anchor` the events as a LazyFrame when they are too large to hold: the fixes
    are the same, row for row and note for note, and the result stays lazy."""
    held = _scenarios()[which]
    want, want_notes = timebase.anchor(held)
    got, notes = timebase.anchor({**held, "events": held["events"].lazy()})
    assert isinstance(got["events"], pl.LazyFrame)
    assert got["events"].collect().equals(want["events"]) and notes == want_notes
    if which == 0:
        q = dict(want["events"].group_by("ts_quality").len().iter_rows())
        assert q["boot_anchored"] >= 4 and q["zone_inferred"] == 4 and q["unanchored"] == 2 and q["local_assumed_utc"] == 1
        assert any("zone 'Mars/Olympus_Mons' not understood" in n for n in notes)
    else:
        assert notes == [] and want["events"].equals(held["events"])
