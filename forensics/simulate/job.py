"""The job model (step times, fault timeline, consequences) and the `simulate` entry point."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from forensics.errors import UsageError
from forensics.simulate.fleet import (
    NCCL_DRIFT,
    FleetStyle,
    Node,
    build_node,
    fleet_style,
    rng_for,
)

WATCHDOG_MS = 600000
SLOWDOWN_RANGE = {  # multiplier on the compute part of a step for the node (or GPU) at fault
    "thermal": (1.30, 1.42),
    "power_brake": (1.45, 1.65),
    "pcie_degraded": (1.08, 1.13),
    "drift_driver": (1.06, 1.10),
    "drift_vbios": (1.05, 1.09),
    "drift_nic_fw": (1.0, 1.0),  # network: acts on the communication part
    "drift_nccl": (1.0, 1.0),
    "slow_node": (1.12, 1.22),
    "ecc_sbe_storm": (1.03, 1.06),
}
COMM_RANGE = {"ib_flap": (1.5, 1.9), "drift_nic_fw": (1.25, 1.4), "drift_nccl": (1.2, 1.35)}
TERMINAL = {"gpu_lost": "hang", "ecc_dbe": "crash", "nvlink": "crash", "app_bug": "app_exit"}
LOAD_BOUND = ("thermal", "power_brake", "slow_node")
"""Faults seen only while the job runs on the GPUs (clocks and throttling under load, step times): one that
begins after its node's training processes are gone leaves no trace (`truth.json` says so)."""
DRIFT = ("drift_driver", "drift_vbios", "drift_nic_fw", "drift_nccl")


@dataclass
class Fault:
    kind: str
    node: int | None
    gpu: int | None
    t: float  # epoch seconds
    category: str
    factor: float = 1.0
    comm_factor: float = 1.0
    description: str = ""
    extra: dict = field(default_factory=dict)


@dataclass
class Sim:
    """Everything a node writer needs; picklable so workers can rebuild their node."""

    seed: int
    nodes: int
    gpus_per_node: int
    style: FleetStyle
    job_start: float
    window_end: float
    train_start: float
    baseline: float
    log_interval: int
    colls_per_step: int
    seq_offset: int
    step_start: np.ndarray
    step_dur: np.ndarray
    comp_base: np.ndarray  # per step, without node factors
    comm: np.ndarray  # per step communication part
    ckpt_steps: np.ndarray
    hiccups: dict  # step -> (node, extra seconds)
    faults: list[Fault]
    end_kind: str | None
    end_fault: Fault | None
    n_done: int  # completed steps
    job_end: float  # when the training processes are gone
    ckpt_dir: str
    fleet_ver: dict  # driver, vbios, nic_fw, nccl as the fleet has them
    mixed_logs: bool = False  # per-node framework lines inside the worker log (one stdout per node)

    # -- helpers used by the writers ------------------------------------------------------------
    def node(self, i: int) -> Node:
        n = build_node(self.seed, self.style, i, self.nodes, self.gpus_per_node, self.job_start)
        for f in self.faults:
            if f.node != i:
                continue
            if f.kind == "drift_driver":
                n.driver = f.extra["version"]
            elif f.kind == "drift_vbios":
                n.vbios = f.extra["version"]
            elif f.kind == "drift_nic_fw":
                for h in n.hcas:
                    h.fw = f.extra["version"]
            elif f.kind == "drift_nccl":
                n.nccl = f.extra["version"]
        return n

    def skew(self, node: int) -> float:
        """Seconds this node's wall clock is ahead of true time (NTP jitter; ~10 % of nodes drifted by
        seconds). Nodes 0 and N-1, which print the job-level logs, are the reference (0)."""
        if node in (0, self.nodes - 1):
            return 0.0
        r = rng_for(self.seed, "skew", node)
        if r.random() < 0.1:
            return round(r.uniform(2.0, 9.0) * r.choice([-1.0, 1.0]), 3)
        return round(r.gauss(0.0, 0.25), 3)

    def gpu_factor(self, node: int, gpu: int, t: float) -> float:
        """Compute slowdown of one GPU at time t (1.0 = healthy)."""
        f = 1.0
        for x in self.faults:
            if x.node == node and x.factor > 1.0 and t >= x.t and (x.gpu is None or x.gpu == gpu):
                f = max(f, x.factor)
        return f

    def node_factor(self, node: int, t: float) -> float:
        return max(self.gpu_factor(node, g, t) for g in range(self.gpus_per_node))

    def max_factor(self, t: float) -> float:
        """The slowest GPU's compute slowdown at time t over the whole job (what every step waits for)."""
        return max([1.0] + [x.factor for x in self.faults if x.factor > 1.0 and t >= x.t])

    def running(self, t: float) -> bool:
        return self.train_start - 60 <= t < self.job_end

    def step_at(self, t: float) -> int:
        return int(np.searchsorted(self.step_start, t, side="right")) - 1

    def busy(self, node: int, gpu: int, t: float) -> float:
        """Fraction of a step this GPU computes (the rest it waits in NCCL for the slowest rank)."""
        s = min(max(self.step_at(t), 0), len(self.step_dur) - 1) if len(self.step_dur) else 0
        if not len(self.step_dur):
            return 0.0
        comp = self.comp_base[s] * self.gpu_factor(node, gpu, t)
        return float(min(1.0, (comp + 0.35 * self.comm[s]) / self.step_dur[s]))

    def fault_of(self, kind: str, node: int | None = None) -> list[Fault]:
        return [f for f in self.faults if f.kind == kind and (node is None or f.node == node)]

    def global_rank(self, node: int, gpu: int) -> int:
        return node * self.gpus_per_node + gpu


def iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).isoformat(timespec="seconds")


def _resolve_faults(specs: Sequence, seed: int, nodes: int, gpus: int, hours: float,
                    job_start: float, style: FleetStyle) -> list[Fault]:
    from forensics.simulate import CATEGORY, FaultSpec
    from forensics.simulate.fleet import host_name

    hosts = [host_name(style, i, nodes) for i in range(nodes)]
    out: list[Fault] = []
    used_nodes: set[int] = set()
    for k, spec in enumerate(specs):
        if not isinstance(spec, FaultSpec):
            raise UsageError(f"not a FaultSpec: {spec!r}")
        if spec.kind == "none":
            continue
        r = rng_for(seed, "fault", k, spec.kind)
        if spec.node is None:
            choices = [i for i in range(nodes) if i not in used_nodes] or list(range(nodes))
            node = r.choice(choices)
        elif isinstance(spec.node, int):
            if not 0 <= spec.node < nodes:
                raise UsageError(f"fault {spec.kind}: node {spec.node} out of range 0..{nodes - 1}")
            node = spec.node
        else:
            if spec.node not in hosts:
                raise UsageError(f"fault {spec.kind}: no host {spec.node!r} (hosts: {hosts[0]} …)")
            node = hosts.index(spec.node)
        used_nodes.add(node)
        limit = min(8, gpus) if spec.kind == "ib_flap" else gpus  # ib_flap: HCA (rail) index
        if spec.gpu is not None and not 0 <= spec.gpu < limit:
            raise UsageError(f"fault {spec.kind}: gpu {spec.gpu} out of range 0..{limit - 1}")
        gpu = spec.gpu if spec.gpu is not None else r.randrange(limit)
        span = hours * 3600.0
        if spec.kind in DRIFT or (spec.kind == "slow_node" and spec.start is None):
            t = job_start  # installed that way / slow from the start (nccl-tests before the job see it)
        elif spec.start is None:
            t = job_start + r.uniform(0.3, 0.7) * span
        elif spec.start_unit == "s":
            t = job_start + min(spec.start, span * 0.98)
        else:
            t = job_start + max(0.02, min(spec.start, 0.98)) * span
        if t > job_start:
            t += r.random()  # events do not fall on whole seconds
        f = Fault(kind=spec.kind, node=node, gpu=gpu, t=t, category=CATEGORY[spec.kind])
        lo, hi = SLOWDOWN_RANGE.get(spec.kind, (1.0, 1.0))
        f.factor = round(r.uniform(lo, hi), 3)
        clo, chi = COMM_RANGE.get(spec.kind, (1.0, 1.0))
        f.comm_factor = round(r.uniform(clo, chi), 3)
        plat = style.platform
        if spec.kind == "power_brake" and spec.gpu is None:
            f.gpu = None  # a chassis/PSU signal: every GPU of the node
        if spec.kind in ("app_bug",):
            f.node, f.gpu = None, None
        if spec.kind in ("slow_node",) + DRIFT:
            f.gpu = None
        if spec.kind == "drift_driver":
            f.extra["version"] = next(d for d in plat["drivers"] if d != style.driver) \
                if len(set(plat["drivers"])) > 1 else "535.129.03"
            f.extra["fleet"] = style.driver
        elif spec.kind == "drift_vbios":
            f.extra["version"], f.extra["fleet"] = plat["vbios_alt"], plat["vbios"]
        elif spec.kind == "drift_nic_fw":
            f.extra["version"], f.extra["fleet"] = plat["hca_fw_alt"], plat["hca_fw"]
        elif spec.kind == "drift_nccl":
            f.extra["version"], f.extra["fleet"] = NCCL_DRIFT[style.nccl[0]], style.nccl[0]
        elif spec.kind == "ib_flap":
            f.extra["hca"] = gpu
            f.gpu = None
            flaps, tt = [], t
            for _ in range(r.randint(2, 5)):
                up = tt + r.uniform(2.0, 9.0)
                flaps.append((tt, up, up + r.uniform(0.5, 1.5)))
                tt = up + r.uniform(90, 600)
                if tt > job_start + span * 0.99:
                    break
            f.extra["flap_times"] = flaps
            f.extra["flaps"] = len(flaps)
        elif spec.kind == "ecc_dbe":
            f.extra["remap_failed"] = r.random() < 0.35
            f.extra["addr"] = r.randrange(0x100000000, 0x13FFFFFFFF) & ~0x1F
        elif spec.kind == "nvlink":
            f.extra["link"] = r.randrange(18 if plat["short"] == "h100" else 12)
        f.description = _describe(f, hosts, plat)
        out.append(f)
    out.sort(key=lambda x: x.t)
    return out


def _describe(f: Fault, hosts: list[str], plat: dict) -> str:
    h = hosts[f.node] if f.node is not None else "every node"
    g = f"GPU {f.gpu}" if f.gpu is not None else "all GPUs"
    bus = f"{plat['buses'][f.gpu]:02x}" if f.gpu is not None and f.gpu < len(plat["buses"]) else "?"
    return {
        "gpu_lost": f"{h} {g} (PCI 0000:{bus}:00) fell off the bus (Xid 79); the job hung and every "
                    "other rank's NCCL watchdog timed out",
        "ecc_dbe": f"{h} {g} (PCI 0000:{bus}:00) uncorrectable DRAM ECC error (Xid 48, row remap "
                   "Xid 63" + (" and remap failure Xid 64" if f.extra.get("remap_failed") else "")
                   + "); its rank crashed and the job was torn down by watchdog timeouts",
        "ecc_sbe_storm": f"{h} {g} (PCI 0000:{bus}:00) storm of corrected single-bit ECC errors "
                         f"(Xid 92), slight slowdown x{f.factor}",
        "nvlink": f"{h} {g} (PCI 0000:{bus}:00) fatal NVLink error on link {f.extra.get('link')} "
                  "(Xid 74); its rank crashed and the job was torn down",
        "thermal": f"{h} {g} (PCI 0000:{bus}:00) HW thermal slowdown, SM clock down, job step time "
                   f"x{f.factor}",
        "power_brake": f"{h} {g} HW power brake slowdown, job step time x{f.factor}",
        "pcie_degraded": f"{h} {g} (PCI 0000:{bus}:00) PCIe link retrained to x8 after corrected AER "
                         f"errors, job step time x{f.factor}",
        "ib_flap": f"{h} HCA mlx5_{f.extra.get('hca')} link flapped {f.extra.get('flaps')} times "
                   "(symbol errors, link downed), NCCL IB errors on peers, collectives "
                   f"x{f.comm_factor} slower",
        "drift_driver": f"{h} runs NVIDIA driver {f.extra.get('version')} (fleet "
                        f"{f.extra.get('fleet')}), step time x{f.factor}",
        "drift_vbios": f"{h} GPUs run VBIOS {f.extra.get('version')} (fleet {f.extra.get('fleet')}),"
                       f" step time x{f.factor}",
        "drift_nic_fw": f"{h} HCAs run firmware {f.extra.get('version')} (fleet "
                        f"{f.extra.get('fleet')}), collectives x{f.comm_factor} slower",
        "drift_nccl": f"{h} loads NCCL {f.extra.get('version')} (fleet {f.extra.get('fleet')}), "
                      f"collectives x{f.comm_factor} slower",
        "slow_node": f"{h} is slower (x{f.factor}) with no hardware trace",
        "app_bug": "application bug: Xid 13/43 on every GPU of every node at the same time, the job "
                   "exited",
    }[f.kind]


def _timeline(seed: int, nodes: int, hours: float, job_start: float, baseline: float,
              faults: list[Fault]) -> dict:
    rng = np.random.default_rng(abs(hash_seed(seed, "steps")))
    train_start = job_start + 75.0 + (seed % 7) * 6.0
    window_end = job_start + hours * 3600.0
    n_max = int((window_end - train_start) / (baseline * 0.8)) + 10
    n_max = max(n_max, 10)
    eps = rng.normal(0.0, 0.012, n_max)
    rot = np.abs(rng.normal(0.0, 0.008, n_max))  # max over ranks of rank jitter
    comp_base = 0.74 * baseline * (1.0 + eps + rot)
    comm = 0.26 * baseline * (1.0 + np.abs(rng.normal(0.0, 0.02, n_max)))
    warm = np.ones(n_max)
    wu = [3.6, 1.9, 1.3, 1.1, 1.04]
    warm[: min(5, n_max)] = wu[: min(5, n_max)]
    comp_base = comp_base * warm
    extra = np.zeros(n_max)
    ckpt_every = max(50, int(round(1800.0 / baseline / 50.0)) * 50)
    ckpt_steps = np.arange(ckpt_every, n_max, ckpt_every)
    extra[ckpt_steps - 1] += rng.uniform(18.0, 55.0, len(ckpt_steps))
    hic = rng.random(n_max) < 1.0 / 700.0
    hic[:5] = False
    hiccups = {}
    for s in np.nonzero(hic)[0]:
        e = float(rng.uniform(0.4, 2.5))
        hiccups[int(s)] = (int(rng.integers(0, nodes)), e)
        extra[s] += e
    fmax = np.ones(n_max)
    cmax = np.ones(n_max)

    def durations() -> np.ndarray:
        return comp_base * fmax + comm * cmax + extra

    for f in faults:
        if f.factor <= 1.0 and f.comm_factor <= 1.0:
            continue
        starts = train_start + np.concatenate(([0.0], np.cumsum(durations())[:-1]))
        idx = int(np.searchsorted(starts, f.t, side="left"))
        if f.factor > 1.0:
            fmax[idx:] = np.maximum(fmax[idx:], f.factor)
        if f.comm_factor > 1.0:
            cmax[idx:] = np.maximum(cmax[idx:], f.comm_factor)
    dur = durations()
    starts = train_start + np.concatenate(([0.0], np.cumsum(dur)[:-1]))
    ends = starts + dur
    return {"train_start": train_start, "window_end": window_end, "starts": starts, "dur": dur,
            "ends": ends, "comp_base": comp_base, "comm": comm * cmax, "ckpt_steps": ckpt_steps,
            "hiccups": hiccups}


def hash_seed(seed: int, key: str) -> int:
    return rng_for(seed, key).getrandbits(63)


def build_sim(seed: int, nodes: int, gpus_per_node: int, hours: float, faults: Sequence) -> Sim:
    if nodes < 1 or gpus_per_node < 1 or hours <= 0:
        raise UsageError("nodes, gpus-per-node and hours must be positive")
    if hours * 3600 < 180:
        raise UsageError("hours must cover at least 3 minutes (0.05 h) of job")
    style = fleet_style(seed, nodes)
    if any(getattr(f, "kind", None) == "drift_nccl" for f in faults) and style.nccl[0] < "2.23":
        # NCCL < 2.23 prints its version once, from rank 0: no node could be compared. A fleet where
        # library drift is visible runs a release that prints it on every rank.
        style.nccl = rng_for(seed, "ncclfleet").choice([("2.23.4", "12.4"), ("2.26.2", "12.8")])
    r = rng_for(seed, "job")
    # A fixed calendar (no wall clock): somewhere between 2024-03 and 2025-10, on the second.
    job_start = float(1709251200 + r.randrange(0, 580) * 86400 + r.randrange(0, 86400))
    baseline = round(r.uniform(1.5, 6.0), 3)
    fl = _resolve_faults(faults, seed, nodes, gpus_per_node, hours, job_start, style)
    tl = _timeline(seed, nodes, hours, job_start, baseline, fl)
    starts, ends = tl["starts"], tl["ends"]
    end_fault = next((f for f in fl if f.kind in TERMINAL and f.t > tl["train_start"]), None)
    end_kind = TERMINAL[end_fault.kind] if end_fault else None
    if end_fault is not None:
        n_done = int(np.searchsorted(ends, end_fault.t, side="right"))
        if end_kind == "app_exit":
            job_end = end_fault.t + 6.0
        else:
            coll_t = max(end_fault.t, starts[n_done] + 0.74 * baseline) if n_done < len(starts) \
                else end_fault.t
            job_end = min(tl["window_end"] - 1, coll_t + WATCHDOG_MS / 1000.0 + 8.0)
            end_fault.extra["watchdog_t"] = coll_t + WATCHDOG_MS / 1000.0
    else:
        # No terminal fault: the job is still running when the bundle is collected.
        n_done = int(np.searchsorted(ends, tl["window_end"] - 5.0, side="right"))
        job_end = tl["window_end"] + 3600.0
    plat = style.platform
    return Sim(
        seed=seed, nodes=nodes, gpus_per_node=gpus_per_node, style=style, job_start=job_start,
        window_end=tl["window_end"], train_start=tl["train_start"], baseline=baseline,
        log_interval=r.choice([1, 5, 10]), colls_per_step=r.choice([2, 3, 4]),
        seq_offset=r.randrange(3, 40), step_start=starts[: n_done + 1], step_dur=tl["dur"][: n_done + 1],
        comp_base=tl["comp_base"][: n_done + 1], comm=tl["comm"][: n_done + 1],
        ckpt_steps=tl["ckpt_steps"][tl["ckpt_steps"] <= n_done], hiccups=tl["hiccups"], faults=fl,
        end_kind=end_kind, end_fault=end_fault, n_done=n_done, job_end=job_end,
        ckpt_dir=r.choice(["/checkpoints/gpt-70b", "/lustre/ckpt/llama3-8b", "/mnt/ckpt/run-17"]),
        fleet_ver={"driver": style.driver, "vbios": plat["vbios"], "nic_fw": plat["hca_fw"],
                   "nccl": style.nccl[0]},
    )


def truth_of(sim: Sim) -> dict:
    from forensics.simulate.fleet import host_name

    hosts = [host_name(sim.style, i, sim.nodes) for i in range(sim.nodes)]
    return {
        "schema_version": 1,
        "seed": sim.seed,
        "nodes": hosts,
        "gpus_per_node": sim.gpus_per_node,
        "gpu_model": sim.style.platform["name"],
        "framework": sim.style.framework,
        "start": iso(sim.job_start),
        "end": iso(sim.window_end),
        "job_end": iso(sim.job_end),
        "step_time_baseline_s": sim.baseline,
        "clock_skew_s": {h: sim.skew(i) for i, h in enumerate(hosts) if sim.skew(i)},
        "faults": [
            {
                "kind": f.kind,
                "node": hosts[f.node] if f.node is not None else None,
                "gpu_index": f.gpu,
                "category": f.category,
                "start": iso(f.t),
                "description": f.description,
                **_unobservable(sim, f),
            }
            for f in sim.faults
        ],
    }


def procs_end(sim: Sim, node: int | None) -> float:
    """When the training processes of `node` (None: of the job) were gone: the job's end, earlier on a node
    whose GPU crashed them, or when an application error ended the job."""
    ef = sim.end_fault
    if ef is not None and sim.end_kind == "crash" and node is not None and ef.node == node:
        return min(sim.job_end, ef.t + 2.0)
    if ef is not None and sim.end_kind == "app_exit":
        return min(sim.job_end, ef.t + 3.0)
    return sim.job_end


def _unobservable(sim: Sim, f: Fault) -> dict:
    """`{"observable": False, "why": ...}` for a fault that left no trace in the bundle (`LOAD_BOUND`, begun
    after its node's processes were gone), else nothing: scoring does not count such a fault as missed."""
    gone = procs_end(sim, f.node)
    if f.kind not in LOAD_BOUND or f.t < gone:
        return {}
    return {
        "observable": False,
        "why": f"begins at {iso(f.t)}, after the training processes were gone ({iso(gone)}): it shows only under load",
    }


def _write_nodes(args: tuple[Sim, str, list[int], bool]) -> None:
    from forensics.simulate.writers import write_node

    sim, out, idxs, gz = args
    for i in idxs:
        write_node(sim, Path(out), i, gz)


def simulate(out_dir: Path, *, nodes: int = 4, gpus_per_node: int = 8, hours: float = 1.0,
             faults: Sequence = (), seed: int = 0, workers: int | None = None,
             gzip_snapshots: bool = False, mixed_logs: bool = False) -> dict:
    """Write a bundle into `out_dir` (created if missing) plus `out_dir/truth.json`; return the truth.

    `workers`: processes writing nodes in parallel (default: 1 below 64 nodes, else the CPU count).
    The output does not depend on it. `gzip_snapshots`: write the `nvidia-smi -q` snapshots as
    `.gz` (as collectors often do; used to keep the shipped samples small). `mixed_logs`: write the
    per-node framework lines (DeepSpeed, torchtitan) into the node's worker log, interleaved with the
    NCCL and PyTorch lines as one torchrun stdout holds them, instead of a per-rank file.
    """
    from forensics.simulate.writers import write_job

    out_dir = Path(out_dir)
    sim = build_sim(seed, nodes, gpus_per_node, hours, faults)
    sim.mixed_logs = mixed_logs
    out_dir.mkdir(parents=True, exist_ok=True)
    write_job(sim, out_dir)
    if workers is None:
        workers = 1 if nodes < 64 else max(1, os.cpu_count() or 1)
    if workers <= 1:
        _write_nodes((sim, str(out_dir), list(range(nodes)), gzip_snapshots))
    else:
        chunks = [list(range(i, nodes, workers * 4)) for i in range(workers * 4)]
        with ProcessPoolExecutor(max_workers=workers) as ex:
            list(ex.map(_write_nodes, [(sim, str(out_dir), c, gzip_snapshots) for c in chunks if c]))
    truth = truth_of(sim)
    (out_dir / "truth.json").write_text(json.dumps(truth, indent=2) + "\n")
    # Files carry the collection time as their mtime (as a tar of the collected logs would): readers
    # infer the year of year-less syslog stamps from it.
    collected = sim.window_end + 120.0
    for p in out_dir.rglob("*"):
        if p.is_file():
            os.utime(p, (collected, collected))
    return truth
