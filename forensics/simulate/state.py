"""What one GPU reports at a moment: utilisation, power, clocks, reasons, ECC, PCIe.

Shared by the telemetry loops (CSV, dmon) and the `nvidia-smi -q` snapshots so they agree.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from forensics.simulate.fleet import rng_for
from forensics.simulate.job import Sim, procs_end

IDLE, SW_POWER_CAP, HW_SLOWDOWN, SW_THERMAL, HW_THERMAL, HW_POWER_BRAKE = 0x1, 0x4, 0x8, 0x20, 0x40, 0x80


@dataclass
class GpuState:
    lost: bool
    util: int
    mem_util: int
    mem_used: int
    temp: int
    mem_temp: int
    power: float
    sm_clock: int
    mem_clock: int
    reasons: int
    ecc_corr_vol: int
    ecc_uncorr_vol: int
    ecc_corr_agg: int
    ecc_uncorr_agg: int
    sram_corr_agg: int
    remap_corr: int
    remap_uncorr: int
    remap_pending: bool
    remap_failure: bool
    pcie_gen: int
    pcie_width: int
    replays: int
    perf_state: str


class NodeState:
    """Per-node static draws (benign history) and the per-moment GPU state function."""

    def __init__(self, sim: Sim, node: int) -> None:
        self.sim = sim
        self.node = node
        self.plat = sim.style.platform
        r = rng_for(sim.seed, "gpustatic", node)
        g = sim.gpus_per_node
        self.hist_sram = [r.choice([0, 0, 0, 0, 1, 2, 3]) for _ in range(g)]
        self.hist_dram = [r.choice([0, 0, 0, 0, 0, 1, 4]) for _ in range(g)]
        self.vol_corr = [r.choice([0, 0, 0, 1]) for _ in range(g)]
        self.temp_off = [r.uniform(-3.0, 4.0) for _ in range(g)]
        self.mem_used = [int(self.plat["mem_total"] * r.uniform(0.82, 0.9)) for _ in range(g)]
        self.replays = [r.choice([0, 0, 0, 2, 7, 120]) for _ in range(g)]
        self.faults = [f for f in sim.faults if f.node == node or f.node is None]
        self.proc_end = procs_end(sim, node)
        self.noise = random.Random(f"{sim.seed}|noise|{node}")
        self.skew = sim.skew(node)

        self.kinds = {f.kind for f in self.faults}
        self._t = None
        self._busy_step: tuple[int, float, float, float] | None = None

    def _fault(self, kind: str, gpu: int, t: float):
        if kind not in self.kinds:
            return None
        for f in self.faults:
            if f.kind == kind and t >= f.t and (f.gpu is None or f.gpu == gpu):
                return f
        return None

    def _busy(self, gpu: int, t: float) -> float:
        """sim.busy, with the per-moment lookups shared by the GPUs of one sample."""
        sim = self.sim
        if self._t != t:
            self._t = t
            n = len(sim.step_dur)
            s = min(max(sim.step_at(t), 0), n - 1) if n else 0
            self._busy_step = (s, float(sim.comp_base[s]), float(sim.comm[s]), float(sim.step_dur[s])) if n else None
            self._maxf = sim.max_factor(t)
        if self._busy_step is None:
            return 0.0
        _s, comp, comm, dur = self._busy_step
        return min(1.0, (comp * sim.gpu_factor(self.node, gpu, t) + 0.35 * comm) / dur)

    def state(self, gpu: int, t: float) -> GpuState:
        sim, plat, nz = self.sim, self.plat, self.noise
        lost = self._fault("gpu_lost", gpu, t) is not None
        dbe = self._fault("ecc_dbe", gpu, t)
        # (`proc_end`: the job's end, or the crash or application error that ended this node's processes)
        running = sim.train_start - 40 <= t < self.proc_end and not lost and not (dbe and t > dbe.t + 2)
        tdp, idle = plat["tdp"], plat["idle_power"]
        reasons = 0
        if running:
            busy = self._busy(gpu, t) if t >= sim.train_start else 0.3
            # NCCL kernels spinning while a GPU waits for the slowest rank count as "utilised": the
            # waiting GPUs read a little lower than the straggler, which reads ~100 %.
            if self._t != t:
                self._busy(gpu, t)
            rel = sim.gpu_factor(self.node, gpu, t) / self._maxf
            util = int(min(100, round(100 - (1.0 - rel) * 40 + nz.uniform(-1.4, 0.6))))
            mem_util = int(round(28 + 30 * busy + nz.uniform(-2, 2)))
            power = idle + (tdp * 0.93 - idle) * busy ** 1.3 * nz.uniform(0.97, 1.02)
            temp = 36 + 30 * busy + self.temp_off[gpu] + nz.uniform(-0.8, 0.8)
            sm = plat["sm_max"]
            if power > 0.95 * tdp:
                reasons |= SW_POWER_CAP
                sm -= 15 * nz.randrange(0, 5)
            mem_used = self.mem_used[gpu]
            pstate = "P0"
        else:
            util, mem_util = 0, 0
            power = idle * nz.uniform(0.96, 1.05)
            temp = 33 + self.temp_off[gpu] + nz.uniform(-0.5, 0.5)
            sm = plat["sm_idle"]
            reasons |= IDLE
            mem_used = 0 if t >= self.proc_end or t < sim.train_start - 40 else self.mem_used[gpu]
            pstate = "P0"
        ef = sim.end_fault
        if running and ef is not None and sim.end_kind in ("hang", "crash") and t >= ef.t:
            # hung in a collective: NCCL kernels spin (100 % "utilisation") at low power, no memory traffic
            util, mem_util = 100, 0
            power = idle + (tdp - idle) * nz.uniform(0.16, 0.2)
            temp = 36 + 8 + self.temp_off[gpu] + nz.uniform(-0.8, 0.8)
            sm = plat["sm_max"]
            reasons &= ~SW_POWER_CAP
        th = self._fault("thermal", gpu, t)
        if th is not None and running:
            temp = 87 + nz.uniform(0, 3.4)
            sm = int(plat["sm_max"] / th.factor / 15) * 15 - 15 * nz.randrange(0, 3)
            power = power / th.factor
            reasons = (reasons & ~SW_POWER_CAP) | HW_SLOWDOWN | HW_THERMAL
        elif th is not None:
            temp = max(temp, 52 + nz.uniform(0, 3))
        pb = self._fault("power_brake", gpu, t)
        if pb is not None and running:
            sm = int(plat["sm_max"] / pb.factor / 15) * 15 - 15 * nz.randrange(0, 3)
            power = tdp * nz.uniform(0.40, 0.47)
            temp = temp - 8
            reasons = (reasons & ~SW_POWER_CAP) | HW_SLOWDOWN | HW_POWER_BRAKE
        corr_vol = self.vol_corr[gpu]
        sb = self._fault("ecc_sbe_storm", gpu, t)
        if sb is not None:
            corr_vol += int((t - sb.t) / 60.0 * 137) + 40
        uncorr_vol = 1 if dbe is not None else 0
        width = 16
        pc = self._fault("pcie_degraded", gpu, t)
        if pc is not None:
            width = 8
        gen = plat["pcie_gen"] if running or pc is not None else 1
        replays = self.replays[gpu] + (int((t - pc.t) / 30.0) * 3 + 25 if pc is not None else 0)
        return GpuState(
            lost=lost, util=max(0, util), mem_util=max(0, mem_util), mem_used=mem_used,
            temp=int(round(temp)), mem_temp=int(round(temp + 7 + (2 if running else 0))),
            power=round(power, 2), sm_clock=int(sm), mem_clock=plat["mem_clock"], reasons=reasons,
            ecc_corr_vol=corr_vol, ecc_uncorr_vol=uncorr_vol,
            ecc_corr_agg=self.hist_dram[gpu] + corr_vol, ecc_uncorr_agg=uncorr_vol,
            sram_corr_agg=self.hist_sram[gpu],
            remap_corr=1 if sb is not None and t > sb.t + 900 else 0,
            remap_uncorr=1 if dbe is not None else 0,
            remap_pending=dbe is not None,
            remap_failure=bool(dbe is not None and dbe.extra.get("remap_failed")),
            pcie_gen=gen, pcie_width=width, replays=replays, perf_state=pstate,
        )
