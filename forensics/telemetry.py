"""GPU telemetry against the fleet: throttling, PCIe links below max, ECC growth, per-GPU outliers.

Method: per GPU, the median of each reading and the share of samples with each throttle reason active,
over the job's window when known; each GPU is then compared with the fleet at the same time by a robust
z-score (forensics/robust.py). Throttle reasons count only when they are hardware- or thermal-driven
(`SW Power Cap` at the power limit is normal) and active on this GPU far more than on the fleet; when
all GPUs of a node throttle together the cause is the chassis (cooling, PSU), reported per node.
PCIe: width below max always counts; generation below max only under load (idle GPUs downshift).
"""

from __future__ import annotations

from datetime import datetime

import polars as pl

from forensics.findings import Category, Evidence, Severity, iso
from forensics.hardware import Candidate
from forensics.robust import robust_z

THROTTLE_REASONS = {
    "throttle_hw_thermal_slowdown": "HW thermal slowdown",
    "throttle_sw_thermal_slowdown": "SW thermal slowdown",
    "throttle_hw_power_brake_slowdown": "HW power brake slowdown",
    "throttle_hw_slowdown": "HW slowdown",
}
THROTTLE_SHARE = 0.2
"""A GPU throttling in ≥ 20% of its samples (and far more than the fleet's median GPU) is a finding."""
METRICS = ("sm_clock_mhz", "power_w", "utilization_pct", "temperature_c")
OUTLIER_Z = 5.0
OUTLIER_REL = 0.08
"""An outlier must be both ≥ 5 robust z and ≥ 8% away from the fleet median."""


def in_window(samples: pl.DataFrame, start: datetime | None, end: datetime | None) -> pl.DataFrame:
    """Samples inside [start, end] (rows without time are kept: a snapshot is better than nothing)."""
    if start is None or end is None:
        return samples
    return samples.filter(pl.col("ts").is_null() | pl.col("ts").is_between(start, end))


def gpu_readings(samples: pl.DataFrame, start: datetime | None, end: datetime | None) -> pl.DataFrame:
    """The per-GPU readings timed inside [start, end] (none without a window; unlike `in_window`, rows without
    time or GPU are left out)."""
    if samples.height == 0 or start is None or end is None:
        return samples.clear()
    return samples.filter(pl.col("ts").is_between(start, end) & pl.col("gpu_index").is_not_null())


def gpu_profile(samples: pl.DataFrame) -> pl.DataFrame:
    """Per (node, gpu_index): medians of METRICS, throttle shares, PCIe and ECC extremes, first/last time."""
    if samples.height == 0:
        return pl.DataFrame()
    s = samples.filter(pl.col("gpu_index").is_not_null())
    aggs = [pl.col(m).median().alias(m) for m in METRICS]
    aggs += [pl.col(c).cast(pl.Float64).mean().alias(c) for c in THROTTLE_REASONS]
    aggs += [
        pl.len().alias("samples"),
        pl.col("pcie_width").min().alias("pcie_width_min"),
        pl.col("pcie_width_max").max().alias("pcie_width_max"),
        pl.col("pcie_gen").filter(pl.col("utilization_pct").fill_null(100) > 20).min().alias("pcie_gen_busy_min"),
        pl.col("pcie_gen_max").max().alias("pcie_gen_max"),
        (pl.col("ecc_corrected_volatile").max() - pl.col("ecc_corrected_volatile").min()).alias("ecc_corrected_growth"),
        pl.col("ecc_uncorrected_volatile").max().alias("ecc_uncorrected_max"),
        pl.col("ts").min().alias("first_ts"),
        pl.col("ts").max().alias("last_ts"),
        pl.col("gpu_bus_id").drop_nulls().first().alias("gpu_bus_id"),
    ]
    return s.group_by("node", "gpu_index").agg(aggs).sort("node", "gpu_index")


def outliers(profile: pl.DataFrame) -> pl.DataFrame:
    """Long-form (node, gpu_index, metric, value, baseline, z) for GPUs far from the fleet."""
    if profile.height < 4:
        return pl.DataFrame()
    frames = []
    for m in METRICS:
        if m not in profile.columns or profile[m].null_count() == profile.height:
            continue
        f = profile.select("node", "gpu_index", pl.col(m).alias("value")).drop_nulls("value").with_columns(
            baseline=pl.col("value").median(), z=robust_z("value"), metric=pl.lit(m)
        )
        frames.append(
            f.filter(
                (pl.col("z").abs() >= OUTLIER_Z)
                & ((pl.col("value") - pl.col("baseline")).abs() >= OUTLIER_REL * pl.col("baseline").abs())
            )
        )
    return pl.concat(frames) if frames else pl.DataFrame()


def _sample_evidence(samples: pl.DataFrame, node: str, gpu: int, col: str, limit: int = 3) -> list[Evidence]:
    rows = samples.filter((pl.col("node") == node) & (pl.col("gpu_index") == gpu) & pl.col(col).fill_null(False))
    rows = rows.sort("ts", nulls_last=True)
    picked = pl.concat([rows.head(limit - 1), rows.tail(1)]).unique(subset=["file", "line"], maintain_order=True)
    out = []
    for r in picked.iter_rows(named=True):
        vals = ", ".join(
            f"{k}={r[k]}" for k in ("sm_clock_mhz", "temperature_c", "power_w", "utilization_pct") if r.get(k) is not None
        )
        out.append(
            Evidence(
                source=r["source"],
                file=r["file"],
                line=r["line"],
                ts=iso(r["ts"]),
                text=f"GPU {gpu} {col.removeprefix('throttle_').replace('_', ' ')} active; {vals}",
            )
        )
    return out


HOT_MIN_C = 80.0
"""A GPU whose clocks sit far below the fleet's while its temperature sits far above it, at this or more, is
taken for a thermal slowdown where the telemetry has no throttle reasons (`dmon`)."""


def hot_clock_candidates(samples: pl.DataFrame, start: datetime | None, end: datetime | None) -> list[Candidate]:
    """Thermal slowdowns the telemetry shows without naming them: within [start, end] (a stretch of one level
    of the job, e.g. a slow regime), GPUs whose SM clock is a low outlier (`outliers`) while their temperature
    is a high one at HOT_MIN_C or more. `nvidia-smi dmon` reports clocks and temperatures but no throttle
    reasons; the GPU's own slowdown (HW slowdown at its thermal limit) is what lowers the clock of a hot GPU.
    Medium: the slowdown it explains raises it (analyze.attribute_slowdowns)."""
    window = gpu_readings(samples, start, end)
    if window.height == 0:
        return []
    out = outliers(gpu_profile(window))
    if out.height == 0:
        return []
    low = out.filter((pl.col("metric") == "sm_clock_mhz") & (pl.col("z") < 0))
    hot = out.filter((pl.col("metric") == "temperature_c") & (pl.col("z") > 0) & (pl.col("value") >= HOT_MIN_C))
    both = low.join(hot, on=["node", "gpu_index"], suffix="_t")
    cands = []
    for r in both.iter_rows(named=True):
        node, gpu = r["node"], int(r["gpu_index"])
        rows = window.filter((pl.col("node") == node) & (pl.col("gpu_index") == gpu)).sort("ts")
        # from the first reading both down and hot (halfway from the fleet's to the GPU's median) to the last
        mid_clock, mid_temp = (r["value"] + r["baseline"]) / 2, (r["value_t"] + r["baseline_t"]) / 2
        down = rows.filter((pl.col("sm_clock_mhz") <= mid_clock) & (pl.col("temperature_c") >= mid_temp))
        if down.height == 0:
            continue
        picked = pl.concat([down.head(2), down.tail(1)]).unique(subset=["file", "line"], maintain_order=True)
        where = f"{node} GPU {gpu}"
        cands.append(
            Candidate(
                category=Category.THERMAL_POWER,
                severity=Severity.MEDIUM,
                node=node,
                gpu_index=gpu,
                gpu_bus_id=down["gpu_bus_id"].drop_nulls().first() if "gpu_bus_id" in down.columns else None,
                title=f"Thermal slowdown on {where}: SM clock down at {r['value_t']:.0f} °C",
                summary=(
                    f"{where} ran at a median SM clock of {r['value']:.0f} MHz against the fleet's {r['baseline']:.0f} "
                    f"MHz, at {r['value_t']:.0f} °C against the fleet's {r['baseline_t']:.0f} °C, in {down.height} "
                    f"readings from {iso(down['ts'].min())} to {iso(down['ts'].max())}. The telemetry names no throttle "
                    "reason (nvidia-smi dmon has none): a GPU this hot with its clocks down is in thermal slowdown."
                ),
                first_seen=down["ts"].min(),  # type: ignore[arg-type]
                last_seen=down["ts"].max(),  # type: ignore[arg-type]
                evidence=[
                    Evidence(source=x["source"], file=x["file"], line=x["line"], ts=iso(x["ts"]),
                             text=f"GPU {gpu} SM clock {x['sm_clock_mhz']:.0f} MHz at {x['temperature_c']:.0f} °C "
                                  f"(fleet median {r['baseline']:.0f} MHz, {r['baseline_t']:.0f} °C)")
                    for x in picked.iter_rows(named=True)
                ],
                action=(
                    "Check the node's cooling (fans, airflow, inlet temperature, heatsink contact); run `nvidia-smi -q -d "
                    "PERFORMANCE` on the GPU to see its clocks event reasons; reset it; if it recurs under normal inlet "
                    "temperature, RMA."
                ),
                confidence=0.75,
                kinds={"telemetry:hot_clock_down"},
            )
        )
    return cands


def candidates(samples: pl.DataFrame, profile: pl.DataFrame) -> list[Candidate]:
    """Throttling and PCIe candidates from the telemetry (see module docstring)."""
    if profile.height == 0:
        return []
    out: list[Candidate] = []
    for col, label in THROTTLE_REASONS.items():
        if col not in profile.columns:
            continue
        fleet = float(profile[col].fill_null(0).median() or 0.0)  # type: ignore[arg-type]
        hot = profile.filter((pl.col(col).fill_null(0) >= THROTTLE_SHARE) & (pl.col(col) >= fleet + THROTTLE_SHARE))
        if hot.height == 0:
            continue
        for node, gpus in hot.group_by("node", maintain_order=True):
            node_gpus = profile.filter(pl.col("node") == node[0]).height
            whole_node = gpus.height == node_gpus and node_gpus > 1
            targets = [(None, gpus)] if whole_node else [(g["gpu_index"], gpus.filter(pl.col("gpu_index") == g["gpu_index"])) for g in gpus.iter_rows(named=True)]
            for gpu, rows in targets:
                r = rows.row(0, named=True)
                first_gpu = int(r["gpu_index"])
                share = float(rows[col].mean())  # type: ignore[arg-type]
                where = f"{node[0]}" + (f" GPU {gpu}" if gpu is not None else f" (all {node_gpus} GPUs)")
                clock = r.get("sm_clock_mhz")
                fleet_clock = profile["sm_clock_mhz"].median() if "sm_clock_mhz" in profile.columns else None
                clock_txt = (
                    f"; median SM clock {clock:.0f} MHz vs fleet {fleet_clock:.0f} MHz"
                    if clock is not None and fleet_clock is not None
                    else ""
                )
                active = samples.filter(
                    (pl.col("node") == node[0])
                    & (pl.col("gpu_index").is_in(rows["gpu_index"].to_list()))
                    & pl.col(col).fill_null(False)
                )["ts"]
                out.append(
                    Candidate(
                        category=Category.THERMAL_POWER,
                        severity=Severity.MEDIUM,
                        node=node[0],
                        gpu_index=gpu,
                        gpu_bus_id=r["gpu_bus_id"] if gpu is not None else None,
                        title=f"{label} on {where}",
                        summary=(
                            f"{label} was active in {share:.0%} of the telemetry samples of {where} "
                            f"(fleet median GPU: {fleet:.0%}){clock_txt}."
                            + (" All GPUs of the node together point to the chassis (cooling, power supply)." if whole_node else "")
                        ),
                        first_seen=active.min() if active.len() else rows["first_ts"].min(),  # type: ignore[arg-type]
                        last_seen=active.max() if active.len() else rows["last_ts"].max(),  # type: ignore[arg-type]
                        evidence=_sample_evidence(samples, node[0], first_gpu, col),
                        action=(
                            "Check the node's cooling (fans, airflow, inlet temperature, heatsink contact) and power "
                            "delivery; reset the GPU; if it recurs under normal inlet temperature, RMA."
                        ),
                        confidence=0.8,
                        kinds={f"telemetry:{col}"},
                    )
                )
    # PCIe width below max
    if {"pcie_width_min", "pcie_width_max"} <= set(profile.columns):
        narrow = profile.filter(
            pl.col("pcie_width_min").is_not_null()
            & pl.col("pcie_width_max").is_not_null()
            & (pl.col("pcie_width_min") < pl.col("pcie_width_max"))
        )
        for r in narrow.iter_rows(named=True):
            rows = samples.filter(
                (pl.col("node") == r["node"]) & (pl.col("gpu_index") == r["gpu_index"]) & (pl.col("pcie_width") < pl.col("pcie_width_max"))
            ).sort("ts", nulls_last=True)
            ev = [
                Evidence(
                    source=x["source"], file=x["file"], line=x["line"],
                    ts=iso(x["ts"]),
                    text=f"GPU {r['gpu_index']} PCIe link x{x['pcie_width']} (max x{x['pcie_width_max']}), gen {x['pcie_gen']} (max {x['pcie_gen_max']})",
                )
                for x in rows.head(2).iter_rows(named=True)
            ]
            out.append(
                Candidate(
                    category=Category.PCIE,
                    severity=Severity.MEDIUM,
                    node=r["node"],
                    gpu_index=int(r["gpu_index"]),
                    gpu_bus_id=r["gpu_bus_id"],
                    title=f"PCIe link of {r['node']} GPU {r['gpu_index']} trained at x{r['pcie_width_min']} (max x{r['pcie_width_max']})",
                    summary=(
                        f"The GPU's PCIe link runs at x{r['pcie_width_min']} instead of x{r['pcie_width_max']}: half or less of "
                        "its host bandwidth, which slows data loading, checkpoints and GPUDirect traffic."
                    ),
                    first_seen=rows["ts"].min() if rows.height else r["first_ts"],  # type: ignore[arg-type]
                    last_seen=rows["ts"].max() if rows.height else r["last_ts"],  # type: ignore[arg-type]
                    evidence=ev,
                    action="Reseat the GPU / riser / cable, check the slot; if the link still trains narrow, RMA the board.",
                    confidence=0.85,
                    kinds={"telemetry:pcie_width"},
                )
            )
    return out
