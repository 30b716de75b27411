"""A synthetic OUT folder (tables, manifest.json, findings.json) for the report tests, any fleet size.

Built directly with numpy/polars so a 1,000-node OUT takes about a second. The story: a job runs at
~1.0 s/step; at step `incident_step` GPU `bad_gpu` of `bad` logs an XID 79 (its message carries a
`<script>` tag), its SM clock drops, every step gets slower and every other node logs an NCCL timeout
30 s later.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest

from forensics.findings import FINDINGS_SCHEMA_VERSION
from forensics.outputs import write_json, write_table
from forensics.schema import conform

T0 = datetime(2026, 3, 1, 10, 0, 0, tzinfo=UTC)
XSS = "<script>alert('xss')</script>"
XID_LINE = (
    "[Sun Mar  1 10:02:00 2026] NVRM: Xid (PCI:0000:9b:00): 79, pid=4242, GPU has fallen off the bus. " + XSS
)
UNREC_CLOSE = "weird line </script><img src=x onerror=alert(1)>"


def _iso(d: datetime) -> str:
    return d.isoformat().replace("+00:00", "Z")


def build_out(
    root: Path,
    nodes: int = 8,
    gpus: int = 8,
    steps: int = 200,
    incident_step: int = 120,
    samples: int = 40,
    with_impact: bool = True,
    minor_findings: int = 0,
    seed: int = 7,
) -> dict[str, Any]:
    """Write a synthetic OUT under `root`; return the facts a test checks against."""
    rng = np.random.default_rng(seed)
    names = [f"gpu-node-{i:04d}" for i in range(nodes)]
    bad = names[min(3, nodes - 1)]
    bad_i = names.index(bad)
    bad_gpu = 5 % gpus
    out = root / "out"
    tables = out / "tables"

    # steps: one row per node (its rank 0) per step
    base = np.where(np.arange(steps) < incident_step, 1.0, 1.18)
    step_ts = T0 + np.cumsum(np.concatenate([[0.0], base[:-1]])) * timedelta(seconds=1)
    incident_ts = step_ts[incident_step]
    st = np.tile(base, nodes) * (1 + rng.normal(0, 0.01, nodes * steps))
    node_col = np.repeat(np.array(names), steps)
    after = np.tile(np.arange(steps) >= incident_step, nodes)
    st = np.where((node_col == bad) & after, st * 1.08, st)
    steps_df = conform(
        pl.DataFrame(
            {
                "ts": np.tile(np.array([d.replace(tzinfo=None) for d in step_ts], dtype="datetime64[us]"), nodes),
                "ts_quality": "exact",
                "node": node_col,
                "rank": np.repeat(np.arange(nodes) * gpus, steps).astype(np.int32),
                "step": np.tile(np.arange(steps), nodes),
                "step_time_s": st,
                "framework": "megatron",
                "file": np.char.add(node_col, "/train.log"),
                "line": np.tile(np.arange(steps) + 1, nodes),
            }
        ).with_columns(pl.col("ts").dt.replace_time_zone("UTC")),
        "steps",
    )

    # telemetry: `samples` samples per GPU over the job
    span = (step_ts[-1] - T0).total_seconds()
    sts = np.array(
        [T0.replace(tzinfo=None) + timedelta(seconds=span * k / (samples - 1)) for k in range(samples)], dtype="datetime64[us]"
    )
    n = nodes * gpus * samples
    s_node = np.repeat(np.array(names), gpus * samples)
    s_gpu = np.tile(np.repeat(np.arange(gpus), samples), nodes).astype(np.int32)
    s_ts = np.tile(sts, nodes * gpus)
    hit = (s_node == bad) & (s_gpu == bad_gpu) & (s_ts >= np.datetime64(incident_ts.replace(tzinfo=None), "us"))
    clock = np.where(hit, 1350.0, 1980.0) + rng.normal(0, 8, n)
    samples_df = conform(
        pl.DataFrame(
            {
                "ts": s_ts,
                "ts_quality": "exact",
                "node": s_node,
                "gpu_index": s_gpu,
                "gpu_bus_id": np.char.add("0000:", np.char.add(np.char.zfill((s_gpu * 16 + 0x1B).astype("U2"), 2), ":00.0")),
                "utilization_pct": np.where(hit, 60.0, 98.0) + rng.normal(0, 1, n),
                "temperature_c": np.where(hit, 88.0, 61.0) + rng.normal(0, 1.5, n),
                "power_w": np.where(hit, 380.0, 640.0) + rng.normal(0, 15, n),
                "sm_clock_mhz": clock,
                "throttle_hw_thermal_slowdown": hit,
                "throttle_sw_power_cap": np.zeros(n, dtype=bool),
                "ecc_corrected_volatile": np.where(hit, 12, 0),
                "ecc_uncorrected_volatile": np.where(hit, 2, 0),
                "remapped_rows_correctable": np.zeros(n, dtype=np.int64),
                "remapped_rows_uncorrectable": np.where(hit, 3, 0),
                "remap_pending": hit,
                "remap_failure": hit,
                "pcie_gen": np.where(hit, 4, 5).astype(np.int32),
                "pcie_width": np.full(n, 16, dtype=np.int32),
                "pcie_gen_max": np.full(n, 5, dtype=np.int32),
                "pcie_width_max": np.full(n, 16, dtype=np.int32),
                "source": "nvidia-smi-csv",
                "file": np.char.add(s_node, "/nvidia-smi.csv"),
                "line": np.arange(n) % (gpus * samples) + 2,
            }
        ).with_columns(pl.col("ts").dt.replace_time_zone("UTC")),
        "gpu_samples",
    )

    # inventory (vectorised: one row per node x GPU x attribute)
    g_idx = np.arange(gpus)
    gi = pl.DataFrame({"node": np.repeat(np.array(names), gpus), "i": np.repeat(np.arange(nodes), gpus),
                       "gpu_index": np.tile(g_idx, nodes).astype(np.int32)}).with_columns(
        gpu_bus_id=pl.lit("0000:") + (pl.col("gpu_index") * 16 + 0x1B).map_elements(lambda v: f"{v:02x}", return_dtype=pl.String)
        + pl.lit(":00.0"),
        serial=pl.lit("16549") + pl.col("i").cast(pl.String).str.zfill(4) + pl.col("gpu_index").cast(pl.String).str.zfill(4),
        uuid=pl.lit("GPU-") + pl.col("i").map_elements(lambda v: f"{v:08x}", return_dtype=pl.String) + pl.lit("-")
        + pl.col("gpu_index").map_elements(lambda v: f"{v:04x}", return_dtype=pl.String) + pl.lit("-4e91-8b3a-33386720f7bb"),
        name=pl.lit("NVIDIA H100 80GB HBM3"),
        vbios=pl.lit("96.00.74.00.01"),
    ).with_columns(bus_id=pl.col("gpu_bus_id"))
    gpu_inv = gi.unpivot(["name", "serial", "uuid", "bus_id", "vbios"], index=["node", "gpu_index", "gpu_bus_id"],
                         variable_name="attribute", value_name="value").with_columns(component=pl.lit("gpu"))
    node_inv = pl.DataFrame({"node": np.array(names)}).join(
        pl.DataFrame({"component": ["node", "node", "nic"], "device": [None, None, "mlx5_0"],
                      "attribute": ["driver_version", "cuda_version", "fw_ver"],
                      "value": ["535.183.01", "12.2", "28.39.1002"]}), how="cross")
    inv_df = conform(
        pl.concat([gpu_inv, node_inv], how="diagonal").with_columns(
            source=pl.lit("nvidia-smi-q"), file=pl.col("node") + "/nvidia-smi-q.txt", line=pl.lit(1)
        ),
        "inventory",
    )
    bad_bus = f"0000:{bad_gpu * 16 + 0x1B:02x}:00.0"
    bad_serial = f"16549{bad_i:04d}{bad_gpu:04d}"
    bad_uuid = f"GPU-{bad_i:08x}-{bad_gpu:04x}-4e91-8b3a-33386720f7bb"

    # events
    ev: list[dict[str, Any]] = [
        {"ts": incident_ts, "node": bad, "gpu_index": bad_gpu, "gpu_bus_id": bad_bus, "source": "kernel", "kind": "xid",
         "code": "79", "severity": "critical", "message": XID_LINE, "file": f"{bad}/dmesg.log", "line": 812},
        {"ts": incident_ts + timedelta(seconds=2), "node": bad, "gpu_index": bad_gpu, "gpu_bus_id": bad_bus,
         "source": "kernel", "kind": "pcie_aer", "severity": "medium",
         "message": f"pcieport {bad_bus}: AER: Uncorrected (Fatal) error received", "file": f"{bad}/dmesg.log", "line": 813},
        {"ts": incident_ts + timedelta(seconds=300), "node": bad, "source": "dcgm", "kind": "dcgm_diag", "code": "fail",
         "severity": "high", "message": "| Memory                    | Fail - GPU 5: row remapping failure        |",
         "file": f"{bad}/dcgmi-diag.txt", "line": 14},
    ]
    for i, nd in enumerate(names):
        if nd != bad:
            ev.append(
                {"ts": incident_ts + timedelta(seconds=30 + i % 20), "node": nd, "source": "nccl", "kind": "nccl_timeout",
                 "severity": "high", "file": f"{nd}/train.log", "line": 5000 + i,
                 "message": f"{nd}:{1000 + i}:{1100 + i} [0] NCCL WARN Watchdog caught collective operation timeout: "
                 f"WorkNCCL(SeqNum=4711, OpType=ALLREDUCE) ran for 600000 milliseconds before timing out. peer 10.0.{i // 250}.{i % 250}"}
            )
    ev_df = conform(
        pl.DataFrame(ev).with_columns(ts_quality=pl.lit("exact")).with_columns(
            pl.when(pl.col("source") == "nccl").then(pl.lit("inherited")).otherwise("ts_quality").alias("ts_quality")
        ),
        "events",
    )

    anomalies = conform(
        pl.DataFrame(
            [
                {"kind": "step_regression", "metric": "step_time_s", "start": incident_ts, "end": step_ts[-1],
                 "step_start": incident_step, "step_end": steps - 1, "value": 1.18, "baseline": 1.0, "deviation": 0.18,
                 "score": 9.0, "detail": "change point"},
                {"kind": "straggler", "node": bad, "metric": "step_time_s", "start": incident_ts, "end": step_ts[-1],
                 "step_start": incident_step, "step_end": steps - 1, "value": 1.27, "baseline": 1.18, "deviation": 6.5,
                 "score": 6.5, "detail": "robust z"},
            ]
        ),
        "anomalies",
    )

    # files / manifest
    mfiles = []
    for i, nd in enumerate(names):
        for fn, fmt in (("dmesg.log", "kernel-log"), ("nvidia-smi.csv", "nvidia-smi-csv"), ("train.log", "megatron")):
            path = f"{nd}/{fn}"
            unrec = 3 if fn == "train.log" else 0
            f = {"path": path, "node": nd, "node_source": "path", "format": fmt, "parser": f"parsers.{fmt}",
                 "score": 1.0, "bytes": 1000 + i, "lines": 100, "parsed": 100 - unrec, "unrecognized": unrec,
                 "status": "ok", "sha256": hashlib.sha256(path.encode()).hexdigest()}
            mf = dict(f)
            if unrec:
                mf["unrecognized_examples"] = [
                    [10, f"{nd}:{1000 + i}:{1100 + i} [3] NCCL WARN Call to ibv_reg_mr failed: {12 + i % 3}"],
                    [11, f"user=alice ran /home/alice/run_{i}.sh from 192.168.{i % 200}.7"],
                ]
            mfiles.append(mf)
    mfiles.append({"path": f"{bad}/core.dump", "node": bad, "format": None, "bytes": 10, "lines": 0, "parsed": 0,
                   "unrecognized": 0, "status": "skipped: binary file", "sha256": "0" * 64})
    mfiles.append({"path": f"{bad}/odd.log", "node": bad, "format": None, "bytes": 10, "lines": 1, "parsed": 0,
                   "unrecognized": 1, "status": "skipped: format not recognised", "sha256": "1" * 64,
                   "unrecognized_examples": [[1, UNREC_CLOSE]]})
    files_df = conform(pl.DataFrame([{k: v for k, v in f.items() if k != "unrecognized_examples"} for f in mfiles]), "files")

    for name, df in (("steps", steps_df), ("gpu_samples", samples_df), ("inventory", inv_df), ("events", ev_df),
                     ("anomalies", anomalies), ("files", files_df), ("comms", None)):
        if df is None:
            from forensics.schema import empty

            df = empty(name)
        write_table(df, name, tables)
    write_json(out / "manifest.json", {"schema_version": 1, "bundle": str(root / "bundle"), "files": mfiles,
                                       "notes": ["clock of gpu-node-0001 is 3 s ahead (NTP) in logs/gpu-node-0001_dmesg.log"]})
    impact = {"step_time_slowdown_pct": 18.0, "lost_gpu_hours": 12.5} if with_impact else {}
    findings = [
        {"id": "F1", "rank": 1, "severity": "critical", "confidence": 0.92, "category": "gpu_hardware", "node": bad,
         "gpu_index": bad_gpu, "gpu_bus_id": bad_bus, "gpu_serial": bad_serial, "gpu_uuid": bad_uuid,
         "title": f"XID 79 (GPU has fallen off the bus) on {bad} GPU {bad_gpu}",
         "summary": f"GPU {bad_gpu} of {bad} fell off the bus; every other rank then timed out in NCCL.",
         "first_seen": _iso(incident_ts), "last_seen": _iso(incident_ts + timedelta(seconds=300)),
         "impact": impact,
         "evidence": [{"source": "kernel", "file": f"{bad}/dmesg.log", "line": 812, "ts": _iso(incident_ts), "text": XID_LINE}],
         "consequences": [f"{nodes - 1} nccl timeout event(s) on {nodes - 1} node(s) after {_iso(incident_ts)}"],
         "recommended_action": "Drain the node and RMA the GPU (serial above).",
         "alternatives": ["Network fault: ranked lower, the NCCL timeouts start 30 s after the XID and hit every node.",
                          "Application bug <in kernel>: ranked lower, only one GPU reported an XID."]},
        {"id": "F2", "rank": 2, "severity": "info", "confidence": 0.5, "category": "network", "node": None,
         "gpu_index": None, "gpu_bus_id": None, "gpu_serial": None, "gpu_uuid": None,
         "title": "NCCL timeouts on every node (consequence of F1)", "summary": "Consequence.",
         "first_seen": _iso(incident_ts + timedelta(seconds=30)), "last_seen": None, "impact": {},
         "evidence": [], "consequences": [], "recommended_action": "None beyond F1.", "alternatives": []},
    ]
    findings += [
        {"id": f"F{3 + k}", "rank": 3 + k, "severity": "info", "confidence": 0.9, "category": "network",
         "node": names[k % nodes], "gpu_index": None, "gpu_bus_id": None, "gpu_serial": None, "gpu_uuid": None,
         "title": f"nic link on {names[k % nodes]} (0000:1a:00.0)", "summary": "Boot-time link up.",
         "first_seen": _iso(T0 - timedelta(days=3)), "last_seen": None, "impact": {},
         "evidence": [{"source": "kernel", "file": f"{names[k % nodes]}/dmesg.log", "line": 100 + k,
                       "ts": _iso(T0 - timedelta(days=3)), "text": "mlx5_core 0000:1a:00.0 enp26s0np0: Link up"}],
         "consequences": [], "recommended_action": "None.", "alternatives": []}
        for k in range(minor_findings)
    ]
    write_json(out / "findings.json", {
        "schema_version": FINDINGS_SCHEMA_VERSION, "bundle": str(root / "bundle"), "generated_at": _iso(T0),
        "tool_version": "test",
        "job": {"nodes": nodes, "gpus": nodes * gpus, "start": _iso(T0), "end": _iso(step_ts[-1]),
                "step_time_baseline_s": 1.0},
        "findings": findings,
        "coverage": {"files": len(mfiles), "parsed_lines": 1000, "unrecognized_lines": nodes * 3 + 1,
                     "skipped_files": 2, "error_files": 0,
                     "by_format": {"kernel-log": {"files": nodes, "parsed_lines": 100 * nodes, "unrecognized_lines": 0}}},
    })
    return {"out": out, "bad": bad, "bad_gpu": bad_gpu, "bus": bad_bus, "serial": bad_serial, "uuid": bad_uuid,
            "names": names}


@pytest.fixture
def synth_out(tmp_path: Path) -> Callable[..., dict[str, Any]]:
    """Factory: synth_out(nodes=..., ...) builds a synthetic OUT in a fresh folder."""
    counter = iter(range(1000))

    def make(**kw: Any) -> dict[str, Any]:
        return build_out(tmp_path / f"s{next(counter)}", **kw)

    return make
