"""Analysis functions on small tables built in the test: timeline, stragglers, drift, IB counters, ranking."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import numpy as np
import polars as pl

from forensics import drift, network, stragglers, telemetry, timing
from forensics.analyze import (
    attribute_hang,
    attribute_slowdowns,
    demote_history,
    fold_fleet,
    merge,
    rank_candidates,
)
from forensics.findings import Category, Evidence, Severity
from forensics.hardware import Candidate, candidates_from_events
from forensics.schema import conform

T0 = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)


def steps_frame(times: list[float], nodes: int = 1, ranks_per_node: int = 1, slow: dict | None = None) -> pl.DataFrame:
    """Steps of a job: every rank logs every step; `slow` maps node index → extra compute seconds."""
    rows = []
    t = T0
    for i, st in enumerate(times):
        t += timedelta(seconds=st)
        for n in range(nodes):
            for r in range(ranks_per_node):
                extra = (slow or {}).get(n, 0.0)
                compute = 0.6 * st + extra if slow else None
                rows.append(
                    {
                        "ts": t,
                        "node": f"node-{n:02d}",
                        "rank": n * ranks_per_node + r,
                        "step": i + 1,
                        "step_time_s": st,
                        "forward_s": compute / 2 if compute else None,
                        "backward_s": compute / 2 if compute else None,
                        "framework": "megatron",
                        "file": f"node-{n:02d}/train.log",
                        "line": i + 1,
                    }
                )
    return conform(pl.DataFrame(rows), "steps")


def test_timeline_finds_lasting_slowdown_not_checkpoints() -> None:
    rng = np.random.default_rng(0)
    times = list(2.0 + rng.normal(0, 0.03, 300))
    for i in range(50, 300, 50):
        times[i] = 9.0  # checkpoint stalls
    for i in range(200, 300):
        times[i] *= 1.25
    tl = timing.timeline(steps_frame(times))
    assert tl.baseline_s is not None and abs(tl.baseline_s - 2.0) < 0.05
    assert len(tl.slow) == 1
    r = tl.slow[0]
    assert 195 <= r.step_start <= 205 and r.step_end == 300
    assert abs(r.level_s / tl.baseline_s - 1.25) < 0.05
    assert tl.periodic_stall_period == 50


def test_timeline_healthy_has_no_regime_and_hang_detected() -> None:
    rng = np.random.default_rng(1)
    times = list(3.0 + rng.normal(0, 0.05, 200))
    s = steps_frame(times)
    last = s["ts"].max()
    tl = timing.timeline(s, end_of_evidence=last + timedelta(minutes=30))
    assert tl.slow == []
    assert tl.hang is not None and tl.hang["last_step"] == 200
    assert timing.timeline(s, end_of_evidence=last + timedelta(seconds=20)).hang is None


def test_rank_lateness_names_the_slow_node() -> None:
    rng = np.random.default_rng(2)
    times = list(2.0 + rng.normal(0, 0.02, 60))
    s = steps_frame(times, nodes=8, ranks_per_node=2, slow={5: 0.4})
    late = stragglers.rank_lateness(s)
    flagged = stragglers.flag_stragglers(late, pl.DataFrame())
    assert flagged["node"].to_list() == ["node-05"]


def test_drift_names_the_odd_node() -> None:
    rows = [
        {"node": f"node-{i:02d}", "component": "node", "attribute": "driver_version", "value": "550.54.15" if i != 3 else "535.183.01", "source": "nvidia-smi", "file": f"node-{i:02d}/smi.txt", "line": 5}
        for i in range(6)
    ]
    inv = conform(pl.DataFrame(rows), "inventory")
    c = drift.candidates(inv)
    assert [(x.node, x.category) for x in c] == [("node-03", Category.CONFIG_DRIFT)]
    assert "535.183.01" in c[0].summary and "550.54.15" in c[0].summary


def test_ib_counter_growth_flags_flapping_port_only() -> None:
    rows = []
    for node, downs in (("node-00", (0, 0)), ("node-01", (1, 4)), ("node-02", (3, 3))):
        for k, (ts, v) in enumerate(((T0, downs[0]), (T0 + timedelta(hours=1), downs[1]))):
            rows.append({"record": "ib_counter", "ts": ts, "node": node, "device": "mlx5_0", "port": 1, "counter": "LinkDownedCounter", "value": float(v), "file": f"{node}/perfquery.txt", "line": 3 + k})
    g = network.counter_growth(conform(pl.DataFrame(rows), "comms"))
    c = network.counter_candidates(g)
    assert [(x.node, x.severity) for x in c] == [("node-01", Severity.HIGH)]


def xid_events(rows: list[tuple[str, str, str, datetime]]) -> pl.DataFrame:
    return conform(
        pl.DataFrame(
            [
                {"ts": ts, "node": node, "gpu_bus_id": bus, "source": "kernel", "kind": "xid", "code": code, "severity": "unknown",
                 "message": f"NVRM: Xid (PCI:{bus[:-2]}): {code}, ...", "file": f"{node}/dmesg.log", "line": i + 1}
                for i, (node, bus, code, ts) in enumerate(rows)
            ]
        ),
        "events",
    )


def test_fleet_wide_app_xids_are_one_software_finding() -> None:
    ev = xid_events([(f"node-{i:02d}", "0000:3b:00.0", c, T0 + timedelta(seconds=i)) for i in range(6) for c in ("13", "43")])
    cands = candidates_from_events(ev, [f"node-{i:02d}" for i in range(6)])
    assert len(cands) == 1
    assert cands[0].category == Category.SOFTWARE and cands[0].node is None


def test_single_gpu_xid79_is_critical_and_history_is_info() -> None:
    ev = xid_events([("node-01", "0000:3b:00.0", "79", T0), ("node-02", "0000:3b:00.0", "13", T0 - timedelta(days=3))])
    cands = merge(candidates_from_events(ev, ["node-01", "node-02", "node-03"]))
    cands = demote_history(cands, T0 - timedelta(minutes=30))
    by_node = {c.node: c for c in cands}
    assert by_node["node-01"].severity == Severity.CRITICAL
    assert by_node["node-02"].severity == Severity.INFO


def test_nodes_that_drift_alike_are_one_finding() -> None:
    """Five nodes left on the old driver (a rolling upgrade half-done) are one finding naming them; a node that
    differs in its own way, and two that differ alike, keep a finding each."""
    values = {3: "535.183.01", 5: "535.183.01", 7: "535.183.01", 11: "535.183.01", 13: "535.183.01", 2: "550.90.07",
              4: "470.1", 6: "470.1"}
    rows = [
        {"node": f"node-{i:02d}", "component": "node", "attribute": "driver_version", "value": values.get(i, "550.54.15"),
         "source": "nvidia-smi", "file": f"node-{i:02d}/smi.txt", "line": 5}
        for i in range(40)
    ]
    c = drift.candidates(conform(pl.DataFrame(rows), "inventory"))
    assert sorted(x.node or "" for x in c) == ["", "node-02", "node-04", "node-06"]
    group = next(x for x in c if x.node is None)
    assert group.title == "5 nodes run a different NVIDIA driver than the fleet"
    assert group.summary.startswith("5 nodes (node-03, node-05, node-07, node-11, node-13) differ from the rest")
    assert "NVIDIA driver 535.183.01 (fleet: 550.54.15 on 32 of 40 nodes)" in group.summary
    assert [e.file for e in group.evidence] == [f"node-{i:02d}/smi.txt" for i in (3, 5, 7, 11, 13)]


def test_a_gpu_with_only_consequence_xids_is_info_and_app_xids_on_one_gpu_are_low() -> None:
    ev = xid_events(
        [("node-01", "0000:3b:00.0", "45", T0 + timedelta(seconds=i)) for i in range(3)]
        + [("node-02", "0000:3b:00.0", c, T0 + timedelta(seconds=i)) for i in range(40) for c in ("13", "43", "45")]
        + [("node-03", "0000:3b:00.0", c, T0) for c in ("45", "79")]
    )
    by_node = {c.node: c for c in candidates_from_events(ev, [f"node-{i:02d}" for i in range(10)])}
    assert by_node["node-01"].severity == Severity.INFO
    assert by_node["node-02"].severity == Severity.LOW
    assert by_node["node-02"].summary.startswith("XID 13 ") and "120 event(s)" in by_node["node-02"].summary
    assert "together with XID 43" in by_node["node-02"].summary and "XID 45" in by_node["node-02"].summary
    assert by_node["node-03"].severity == Severity.CRITICAL and "xid:79" in by_node["node-03"].kinds


def ib_error_events(rows: list[tuple[str, str | None, str]]) -> pl.DataFrame:
    """nccl_ib_error events: (reporting node, detail JSON or None, message)."""
    return conform(
        pl.DataFrame(
            [
                {"ts": T0 + timedelta(seconds=i), "node": node, "source": "nccl", "kind": "nccl_ib_error",
                 "severity": "high", "message": msg, "detail": detail, "file": f"{node}/nccl.log", "line": i + 1}
                for i, (node, detail, msg) in enumerate(rows)
            ]
        ),
        "events",
    )


def test_ib_errors_naming_one_peer_from_several_nodes_name_that_peer() -> None:
    """The peer comes from the detail's `peer` (its `<port>` cut off), else its `peer_ip`, else the message;
    a peer named from one node only is no finding; a peer's address resolves to the node the inventory
    gives it (the last row naming it)."""
    msg = "NET/IB : Got completion from peer {} with error 12"
    ev = ib_error_events(
        [
            ("node-01", '{"peer": "10.0.0.7<46532>"}', msg.format("10.0.0.7<46532>")),
            ("node-02", '{"peer": "", "peer_ip": "10.0.0.7"}', "NET/IB : completion error"),
            ("node-03", None, msg.format("10.0.0.7<1>")),
            ("node-03", "not json", msg.format("10.0.0.7<2>")),
            ("node-04", '{"peer": "10.0.0.9<1>"}', msg.format("10.0.0.9<1>")),  # one reporter only
            ("node-05", '{"status": 12}', "NET/IB : no peer here"),  # names no peer
        ]
        + [(f"node-{i:02d}", '{"peer_ip": "10.0.0.8"}', "x") for i in (6, 7) for _ in range(500)]
    )
    inv = pl.DataFrame(
        {"node": ["node-99", "node-07", "node-01"], "attribute": ["ip", "ip", "hostname"],
         "value": ["10.0.0.7", "10.0.0.7", "10.0.0.8"]}
    )
    cands = {c.title: c for c in network.peer_candidates(ev, inv)}
    assert set(cands) == {
        "NCCL InfiniBand errors from 3 nodes all name peer node-07",
        "NCCL InfiniBand errors from 2 nodes all name peer 10.0.0.8",
    }
    seven = cands["NCCL InfiniBand errors from 3 nodes all name peer node-07"]
    assert seven.node == "node-07" and seven.summary.startswith("4 NCCL transport error(s) on 3 node(s)")
    assert [e.line for e in seven.evidence] == [1, 2, 3] and seven.confidence == 0.7
    eight = cands["NCCL InfiniBand errors from 2 nodes all name peer 10.0.0.8"]
    assert eight.node is None and "1000 NCCL transport error(s)" in eight.summary and eight.confidence == 0.5
    assert network.peer_candidates(ib_error_events([("node-05", None, "no address")]), inv) == []


def _flap(node: str, minute: int, severity: Severity = Severity.HIGH) -> Candidate:
    return Candidate(
        category=Category.NETWORK,
        severity=severity,
        node=node,
        gpu_index=None,
        gpu_bus_id=None,
        title=f"ib0 link went down 3 time(s) on {node}",
        summary=f"NIC link state changes on {node} (ib0): 6 event(s)",
        first_seen=T0 + timedelta(minutes=minute),
        last_seen=T0 + timedelta(minutes=minute + 5),
        evidence=[Evidence(source="kernel", file=f"{node}/dmesg.log", line=7, ts=None, text="ib0: link down")],
        action="Reseat the cable.",
        confidence=0.9,
        kinds={"nic_link"},
    )


def test_the_same_finding_on_most_nodes_is_one_fleet_wide_finding() -> None:
    nodes = [f"node-{i:02d}" for i in range(10)]
    xid = candidates_from_events(xid_events([("node-09", "0000:3b:00.0", "79", T0)]), nodes)
    flaps = [_flap(n, 10 - i) for i, n in enumerate(nodes[:6])]
    slow = replace(_flap("node-06", 30), impact={"step_time_slowdown_pct": 12.0})  # a slowdown put on it
    low = _flap("node-07", 31, Severity.MEDIUM)  # another severity: its own group
    out = fold_fleet([*flaps, *xid, slow, low], nodes)
    fleet = [c for c in out if c.node is None]
    assert len(fleet) == 1 and len(out) == 4
    f = fleet[0]
    assert f.title == "ib0 link went down 3 time(s): on 6 of 10 nodes" and f.severity == Severity.HIGH
    assert f.first_seen == T0 + timedelta(minutes=5) and f.last_seen == T0 + timedelta(minutes=15)
    assert "node-00, node-01, node-02, node-03, node-04, node-05" in f.summary
    assert [e.file for e in f.evidence] == [f"node-0{i}/dmesg.log" for i in (5, 4, 3, 2, 1, 0)]
    assert {c.node for c in out if c.node} == {"node-09", "node-06", "node-07"}
    # fewer than half the nodes, or a bundle of few nodes: one finding a node
    assert fold_fleet(flaps[:4], nodes) == flaps[:4]
    assert fold_fleet(flaps[:3], nodes[:3]) == flaps[:3]


def test_hang_is_attributed_to_the_fatal_event_and_slowdown_to_the_straggler() -> None:
    rng = np.random.default_rng(3)
    times = list(2.0 + rng.normal(0, 0.02, 100))
    s = steps_frame(times)
    last = s["ts"].max()
    ev = xid_events([("node-01", "0000:3b:00.0", "79", last + timedelta(seconds=5))])
    wd = conform(
        pl.DataFrame([{"ts": last + timedelta(minutes=10), "node": n, "source": "torch", "kind": "watchdog_timeout", "severity": "high", "message": "Watchdog caught collective operation timeout", "file": f"{n}/train.log", "line": 9} for n in ("node-00", "node-02")]),
        "events",
    )
    events = pl.concat([ev, wd])
    tl = timing.timeline(s, end_of_evidence=last + timedelta(minutes=11))
    cands = candidates_from_events(events, ["node-00", "node-01", "node-02"])
    cands, info = attribute_hang(cands, tl, events, 24, ["node-00", "node-01", "node-02"])
    top = rank_candidates(cands)[0]
    assert (top.node, top.category, top.severity) == ("node-01", Category.GPU_HARDWARE, Severity.CRITICAL)
    assert info is not None and info["silent"] == ["node-01"]
    assert any("watchdog" in c for c in top.consequences)
    assert top.impact["lost_gpu_hours"] is not None and top.impact["lost_gpu_hours"] > 0


def test_unexplained_slowdown_with_localised_node_is_a_straggler() -> None:
    rng = np.random.default_rng(4)
    times = list(2.0 + rng.normal(0, 0.02, 120))
    for i in range(60, 120):
        times[i] = 2.4 + rng.normal(0, 0.02)
    s = steps_frame(times, nodes=6, ranks_per_node=2, slow={4: 0.0})
    # node-04 is only slow from step 61: rebuild its compute times
    s = s.with_columns(
        forward_s=pl.when((pl.col("node") == "node-04") & (pl.col("step") > 60)).then(pl.col("forward_s") + 0.3).otherwise(pl.col("forward_s"))
    )
    tl = timing.timeline(s)
    slow = stragglers.flag_stragglers(stragglers.rank_lateness(s.filter(pl.col("step") > 60)), pl.DataFrame())
    cands = attribute_slowdowns([], tl, slow, 48)
    assert len(cands) == 1
    c = cands[0]
    assert (c.node, c.category, c.severity) == ("node-04", Category.STRAGGLER, Severity.HIGH)
    assert 15 <= c.impact["step_time_slowdown_pct"] <= 25


def test_throttled_gpu_is_thermal_candidate() -> None:
    rows = []
    for n in range(4):
        for g in range(8):
            for k in range(10):
                hot = n == 2 and g == 5
                rows.append({"ts": T0 + timedelta(minutes=k), "node": f"node-{n:02d}", "gpu_index": g, "sm_clock_mhz": 1100.0 if hot else 1980.0,
                             "temperature_c": 91.0 if hot else 65.0, "throttle_hw_thermal_slowdown": hot, "source": "nvidia-smi-csv",
                             "file": f"node-{n:02d}/smi.csv", "line": k * 8 + g + 2})
    samples = conform(pl.DataFrame(rows), "gpu_samples")
    prof = telemetry.gpu_profile(samples)
    c = telemetry.candidates(samples, prof)
    assert [(x.node, x.gpu_index, x.category) for x in c] == [("node-02", 5, Category.THERMAL_POWER)]
    out = telemetry.outliers(prof)
    assert set(out["node"].to_list()) == {"node-02"}


def _fleet_readings(
    phase: dict[int, int], busy: dict[int, float], shift_at: int = 30, busy_from: int = 0, busy_until: int = 60
) -> pl.DataFrame:
    """12 nodes × 8 GPUs read every minute for an hour; the fleet drops from 520 W and 100 % to 355 W and 86 %
    at minute `shift_at` (the job slowed: everyone waits on one node). `phase`: nodes whose sampler started
    that many samples late; `busy`: nodes drawing that much more than the fleet from minute `busy_from` to
    `busy_until`."""
    rng = np.random.default_rng(9)
    rows = []
    for n in range(12):
        for g in range(8):
            for k in range(phase.get(n, 0), 60):
                hi = k < shift_at
                f = busy.get(n, 1.0) if busy_from <= k < busy_until else 1.0
                rows.append({"ts": T0 + timedelta(minutes=k, seconds=7 * n), "node": f"node-{n:02d}", "gpu_index": g,
                             "power_w": (520.0 if hi else 355.0) * f + rng.normal(0, 6),
                             "utilization_pct": min(100.0, (100.0 if hi else 86.0) * f + rng.normal(0, 0.8)),
                             "sm_clock_mhz": 1980.0, "source": "nvidia-smi-csv", "file": f"node-{n:02d}/smi.csv", "line": k * 8 + g + 2})
    return conform(pl.DataFrame(rows), "gpu_samples")


def test_a_fleet_level_change_makes_no_straggler_of_a_sampler_started_late() -> None:
    """Half the window at one level, half at another: a node whose sampler missed the first minute has its
    GPUs' medians over the window at the lower level, the fleet's between the two. Compared bucket by bucket
    it is where the fleet is; a node drawing 14 % more all along stands apart either way."""
    samples = _fleet_readings(phase={3: 1}, busy={7: 1.14})
    got = stragglers.telemetry_lateness(samples, T0, T0 + timedelta(hours=1))
    assert got["node"].to_list() == ["node-07"], got
    assert 0.05 < got["rel"][0] < 0.2
    assert stragglers.telemetry_lateness(_fleet_readings(phase={3: 1, 5: 2}, busy={}), T0, T0 + timedelta(hours=1)).height == 0


def test_a_node_turned_slow_part_way_is_found_where_it_stood_apart() -> None:
    """node-05 draws 12 % more from minute 35 on (it turned slow; the job's step time hardly showed it): over
    the whole hour it stands apart too seldom, over the stretch `telemetry_onsets` finds it does. Ten minutes
    apart (a long checkpoint), or a sampler started late across a fleet level change, make no stretch."""
    hour = (T0, T0 + timedelta(hours=1))
    late = _fleet_readings(phase={3: 1}, busy={5: 1.12}, shift_at=20, busy_from=35)
    whole = stragglers.telemetry_lateness(late, *hour)
    assert whole.height == 0 or "node-05" not in whole["node"].to_list()
    onsets = stragglers.telemetry_onsets(late, *hour)
    # (buckets of 3 minutes: three readings of a GPU; the first that holds the change holds two before it)
    assert len(onsets) == 1 and T0 + timedelta(minutes=35) <= onsets[0][0] <= T0 + timedelta(minutes=38), onsets
    assert onsets[0][1] == hour[1], onsets
    assert stragglers.telemetry_lateness(late, *onsets[0])["node"].to_list() == ["node-05"]
    assert stragglers.telemetry_onsets(_fleet_readings(phase={3: 1}, busy={5: 1.12}, busy_from=35, busy_until=45), *hour) == []
    assert stragglers.telemetry_onsets(_fleet_readings(phase={3: 1, 6: 2}, busy={}), *hour) == []


def test_merge_pools_evidence_of_one_gpu() -> None:
    a = Candidate(Category.GPU_MEMORY, Severity.CRITICAL, "n1", 3, None, "XID 48", "s", T0, T0, [], "act", 0.9)
    b = Candidate(Category.GPU_MEMORY, Severity.HIGH, "n1", 3, "0000:3b:00.0", "remap pending", "s", T0 - timedelta(minutes=1), T0, [], "act", 0.8)
    m = merge([a, b])
    assert len(m) == 1 and m[0].severity == Severity.CRITICAL and m[0].gpu_bus_id == "0000:3b:00.0"
    assert m[0].first_seen == T0 - timedelta(minutes=1)


def test_clock_offsets_from_watchdog_anchors() -> None:
    from forensics import clocks

    rows = [
        {"ts": T0 + timedelta(seconds=s + (120 if n == 3 else 0)), "node": f"node-{n:02d}", "source": "torch", "kind": "watchdog_timeout",
         "severity": "high", "message": f"WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE)", "file": "x", "line": 1}
        for seq, s in ((41, 0), (97, 600))
        for n in range(5)
    ]
    ev = conform(pl.DataFrame(rows), "events")
    off = clocks.estimate_offsets(ev, conform(pl.DataFrame({"record": ["rank"], "file": ["x"]}), "comms"))
    got = dict(off.select("node", "offset_s").iter_rows())
    assert abs(got["node-03"] - 120) < 1e-6 and abs(got["node-00"]) < 1e-6
    fixed = clocks.correct(ev, off)
    assert fixed.filter(pl.col("node") == "node-03")["ts"].min() == T0


def test_year_less_file_moves_to_the_bundles_year() -> None:
    from forensics import years

    dated = {"ts": datetime(2025, 3, 27, 3, 0, tzinfo=UTC), "ts_quality": "exact", "node": "a", "source": "kernel", "kind": "xid",
             "severity": "high", "message": "m", "file": "a/dmesg.log", "line": 1}
    wrong = [{**dated, "ts": datetime(2026, m, 27, 3, 5, tzinfo=UTC), "ts_quality": "year_inferred", "file": "b/worker.log", "line": i}
             for i, m in enumerate((3, 3))]
    ev = conform(pl.DataFrame([dated, *wrong]), "events")
    fixed, notes = years.reconcile({"events": ev})
    got = fixed["events"].filter(pl.col("file") == "b/worker.log")["ts"].to_list()
    assert all(t.year == 2025 and t.month == 3 for t in got)
    assert notes == ["b/worker.log: year-less times moved -1 year(s) to match the bundle's dated lines (events)"]
    same, notes2 = years.reconcile({"events": conform(pl.DataFrame([dated]), "events")})
    assert notes2 == []
