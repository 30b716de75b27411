"""Training step logs: Megatron-LM (rank-0/last-rank log with timers and the straggler detector),
DeepSpeed (log_dist step, throughput and wall-clock breakdown), torchtitan (`[rankN]:[titan]`)."""

from __future__ import annotations

import math
import time
from collections.abc import Iterator

import numpy as np

from forensics.simulate.fleet import rng_for
from forensics.simulate.job import Sim
from forensics.simulate.net import Rec


PEAK_TF = {"h100": 989.0, "a100": 312.0}


def _dt(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(t))


def _dt_ms(t: float) -> str:
    return _dt(t) + f",{int((t % 1) * 1000):03d}"


def intervals(sim: Sim) -> Iterator[tuple[int, int]]:
    """Logged intervals [s0, s1) of completed steps (iteration numbers are 1-based: s1)."""
    li = sim.log_interval
    for s1 in range(li, sim.n_done + 1, li):
        yield s1 - li, s1


def _loss(s: int, r) -> float:
    return 2.1 + 8.6 * math.exp(-s / 900.0) + r.gauss(0, 0.035)


def _slowest(sim: Sim, t: float) -> tuple[int, float]:
    """(global rank, factor) of the slowest GPU at time t (rank chosen by seed when all healthy)."""
    best, fac = None, 1.0
    for f in sim.faults:
        if f.node is not None and f.factor > fac and t >= f.t:
            g = f.gpu if f.gpu is not None else rng_for(sim.seed, "slowgpu", f.node).randrange(sim.gpus_per_node)
            best, fac = sim.global_rank(f.node, g), f.factor
    return (best if best is not None else -1), fac


def _interval_means(sim: Sim) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per logged interval: s0, s1, mean step time, mean compute base, mean communication."""
    li = sim.log_interval
    n = (sim.n_done // li) * li
    if n == 0:
        e = np.zeros(0)
        return e.astype(int), e.astype(int), e, e, e
    s0 = np.arange(0, n, li)

    def m(a: np.ndarray) -> np.ndarray:
        return a[:n].reshape(-1, li).mean(axis=1)

    return s0, s0 + li, m(sim.step_dur), m(sim.comp_base), m(sim.comm)


def _hiccup_by_interval(sim: Sim, node: int | None) -> dict[int, float]:
    """Interval index -> summed (node given) or largest (node None) data-loader stall, in seconds."""
    out: dict[int, float] = {}
    for s, (n, e) in sim.hiccups.items():
        k = s // sim.log_interval
        if node is None:
            out[k] = max(out.get(k, 0.0), e)
        elif n == node:
            out[k] = out.get(k, 0.0) + e
    return out


def node_step_records(sim: Sim, node: int) -> list[Rec]:
    """Per-node timing lines (local rank 0 of the node) for DeepSpeed and torchtitan jobs."""
    fw = sim.style.framework
    if fw == "megatron" or not sim.n_done:
        return []
    r = rng_for(sim.seed, "nodesteps", node)
    R = sim.global_rank(node, 0)
    out: list[Rec] = []
    s0s, s1s, Ts, bases, _comms = _interval_means(sim)
    hics = _hiccup_by_interval(sim, node)
    li = sim.log_interval
    peak = PEAK_TF[sim.style.platform["short"]]
    skew = sim.skew(node)
    for k in range(len(s0s)):
        s0, s1, T, base = int(s0s[k]), int(s1s[k]), float(Ts[k]), float(bases[k])
        t_end = float(sim.step_start[s1 - 1] + sim.step_dur[s1 - 1])
        comp = base * sim.gpu_factor(node, 0, float(sim.step_start[s0])) * r.uniform(0.996, 1.004)
        hic = hics.get(k, 0.0) / li
        if fw == "deepspeed":
            opt = 0.03 * sim.baseline
            fwd = comp * 0.33 + hic
            bwd_inner = comp * 0.67 - opt
            allreduce = max(0.02 * sim.baseline, T - fwd - bwd_inner - opt)
            text = (f"[{_dt_ms(t_end + skew)}] [INFO] [logging.py:96:log_dist] [Rank {R}] time (ms) | "
                    f"fwd: {fwd * 1000:.2f} | bwd: {(bwd_inner + allreduce) * 1000:.2f} | "
                    f"bwd_inner: {bwd_inner * 1000:.2f} | bwd_allreduce: {allreduce * 1000:.2f} | "
                    f"step: {opt * 1000:.2f}")
        else:  # torchtitan: every rank logs; tps is the same on all ranks (synchronous steps)
            tfl = peak * 0.38 * sim.baseline / T * r.uniform(0.998, 1.002)
            tps = int(tfl * 1e12 / (6 * 8e9))
            # torchtitan's launcher (torchrun --role rank --tee 3) prefixes the LOCAL rank: [rank0]:
            text = (f"[rank0]:[titan] {_dt_ms(t_end + skew)} - root - INFO - step: {s1}  loss: "
                    f"{_loss(s1, r):7.4f}  grad_norm: {abs(r.gauss(0.8, 0.15)):.4f}  memory: 61.42GiB(77.64%)  "
                    f"tps: {tps:,}  tflops: {tfl:.2f}  mfu: {tfl / peak * 100:.2f}%")
        out.append((t_end + 0.002, 2000 + k, 0, text))
    return out


def train_log(sim: Sim) -> Iterator[str]:
    fw = sim.style.framework
    if fw == "megatron":
        yield from _megatron(sim)
    elif fw == "deepspeed":
        yield from _deepspeed(sim)
    else:
        yield from _titan(sim)


def _megatron(sim: Sim) -> Iterator[str]:
    r = rng_for(sim.seed, "megatron")
    G, N = sim.gpus_per_node, sim.nodes * sim.gpus_per_node
    plat = sim.style.platform
    train_iters = max(sim.n_done * 3, 250000)
    gbs = 8 * N
    yield "> initializing torch distributed ..."
    yield f"> initialized tensor model parallel with size {min(8, G)}"
    yield "> initialized pipeline model parallel with size 1"
    yield f"[after model, optimizer, and learning rate scheduler are built] datetime: {_dt(sim.job_start + 40)} "
    yield f"[after dataloaders are built] datetime: {_dt(sim.train_start - 5)} "
    yield "done with setup ..."
    yield "(min, max) time across ranks (ms):"
    yield f"    {'model-and-optimizer-setup '.ljust(48, '.')}: ({r.uniform(8000, 9000):.2f}, {r.uniform(9000, 9100):.2f})"
    yield f"    {'train/valid/test-data-iterators-setup '.ljust(48, '.')}: ({r.uniform(60, 80):.2f}, {r.uniform(80, 120):.2f})"
    yield "training ..."
    yield f"[before the start of training step] datetime: {_dt(sim.train_start)} "
    ckpts = set(int(c) for c in sim.ckpt_steps)
    s0s, s1s, Ts, bases, comms = _interval_means(sim)
    hics = _hiccup_by_interval(sim, None)
    for k in range(len(s0s)):
        s0, s1, T, base, comm = int(s0s[k]), int(s1s[k]), float(Ts[k]), float(bases[k]), float(comms[k])
        t_end = float(sim.step_start[s1 - 1] + sim.step_dur[s1 - 1])
        tflops = PEAK_TF[plat["short"]] * 0.41 * sim.baseline / T
        lr = 3e-4 * min(1.0, s1 / 2000.0)
        line = (f" [{_dt(t_end)}] iteration {s1:8d}/{train_iters:8d} | consumed samples: {s1 * gbs:12d} | "
                f"elapsed time per iteration (ms): {T * 1000:.1f} | throughput per GPU (TFLOP/s/GPU): "
                f"{tflops:.1f} | learning rate: {lr:.6E} | global batch size: {gbs:5d} | lm loss: "
                f"{_loss(s1, r):.6E} | loss scale: 1.0 | grad norm: {abs(r.gauss(0.9, 0.2)):.3f} | "
                "number of skipped iterations:   0 | number of nan iterations:   0 |")
        yield line
        if s0 == 0:
            yield (f"[Rank {N - 1}] (after {s1} iterations) memory (MB) | allocated: 41289.22 | max allocated: "
                   "63815.71 | reserved: 66112.0 | max reserved: 66112.0")
        t_mid = float(sim.step_start[s0])
        slow_rank, fac = _slowest(sim, t_mid)
        hic_max = hics.get(k, 0.0) / (s1 - s0)
        fc_min, fc_max = base * 0.33 * 0.992, base * 0.33 * fac * 1.006
        bc_min, bc_max = base * 0.64 * 0.992, base * 0.64 * fac * 1.006
        bg_min, bg_max = 0.0021 * T, 0.0062 * T + hic_max
        timers = [
            ("forward-backward", T - 0.04 * sim.baseline - 0.004, T - 0.04 * sim.baseline),
            ("forward-compute", fc_min, fc_max),
            ("backward-compute", bc_min, bc_max),
            ("batch-generator", bg_min, bg_max),
            ("layernorm-grads-all-reduce", 0.00002, 0.00003),
            ("embedding-grads-all-reduce", 0.00002, 0.00004),
            ("all-grads-sync", comm * 0.4, comm * 0.4 + (fc_max - fc_min) + (bc_max - bc_min)),
            ("optimizer-copy-to-main-grad", 0.004 * sim.baseline, 0.0045 * sim.baseline),
            ("optimizer-inner-step", 0.02 * sim.baseline, 0.021 * sim.baseline),
            ("optimizer-copy-main-to-model-params", 0.005 * sim.baseline, 0.0052 * sim.baseline),
            ("optimizer", 0.031 * sim.baseline, 0.0325 * sim.baseline),
        ]
        yield "(min, max) time across ranks (ms):"
        for name, lo, hi in timers:
            yield f"    {(name + ' ').ljust(48, '.')}: ({lo * 1000:.2f}, {hi * 1000:.2f})"
        # StragglerDetector (--log-straggler): the slowest rank has the largest Rtt, lowest Etpt.
        rr = r.randrange(N)
        slow = slow_rank if slow_rank >= 0 else r.randrange(N)
        fast = (slow + 1 + r.randrange(N - 1)) % N if N > 1 else 0
        rtt_lo, rtt_hi = base * 1000 * 0.99, base * 1000 * (fac if slow_rank >= 0 else 1.012)
        et_hi = tflops * 1.01  # estimated TFLOP/s of the fastest rank
        tmp, clk, pwr = _telemetry_extremes(sim, t_mid, r)
        yield (f"[{_dt(t_end)}] | MnRtt/Rnk: {rtt_lo:.2f}ms/{fast} | MxRtt/Rnk: {rtt_hi:.2f}ms/{slow} | "
               f"MnPwr/Rnk: {pwr[0] * 1000:.2f}W/{pwr[1]} | MxPwr/Rnk: {plat['tdp'] * 0.95 * 1000:.2f}W/{rr} | "
               f"MnTmp/Rnk: {r.randint(48, 54):.2f}C/{(rr + 3) % N} | MxTmp/Rnk: {tmp[0]:.2f}C/{tmp[1]} | "
               f"MnUtl/Rnk: {r.randint(88, 94):.2f}%/{fast} | MxUtl/Rnk: 100.00%/{slow} | "
               f"MnClk/Rnk: {clk[0]:.2f}MHz/{clk[1]} | MxClk/Rnk: {plat['sm_max']:.2f}MHz/{(rr + 5) % N} | "
               f"MnDRtt/Rnk: {r.uniform(1.0, 1.6):.2f}ms/{(rr + 7) % N} | "
               f"MxDRtt/Rnk: {bg_max * 1000:.2f}ms/{(rr + 11) % N} | "
               f"MnEtpt/Rnk: {et_hi / (fac if slow_rank >= 0 else 1.012):.2f}TF/{slow} | "
               f"MxEtpt/Rnk: {et_hi:.2f}TF/{fast}")
        for c in sorted(x for x in ckpts if s0 < x <= s1):
            yield f"saving checkpoint at iteration {c:7d} to {sim.ckpt_dir} in torch_dist format"
            yield (f"  successfully saved checkpoint from iteration {c:7d} to {sim.ckpt_dir} "
                   "[ t 1/8, p 1/1 ]")


def _telemetry_extremes(sim: Sim, t: float, r) -> tuple[tuple[float, int], tuple[float, int], tuple[float, int]]:
    """(MxTmp, rank), (MnClk, rank), (MnPwr, rank) as the straggler detector would read them."""
    plat = sim.style.platform
    N = sim.nodes * sim.gpus_per_node
    tmp = (float(r.randint(64, 71)), r.randrange(N))
    clk = (float(plat["sm_max"] - 15 * r.randrange(0, 4)), r.randrange(N))
    pwr = (plat["tdp"] * r.uniform(0.78, 0.85), r.randrange(N))
    for f in sim.faults:
        if f.node is None or t < f.t:
            continue
        g = f.gpu if f.gpu is not None else 0
        rank = sim.global_rank(f.node, g)
        if f.kind == "thermal":
            tmp = (float(r.randint(87, 90)), rank)
            clk = (float(int(plat["sm_max"] / f.factor / 15) * 15), rank)
        elif f.kind == "power_brake":
            clk = (float(int(plat["sm_max"] / f.factor / 15) * 15), rank)
            pwr = (plat["tdp"] * 0.43, rank)
    return tmp, clk, pwr


def _deepspeed(sim: Sim) -> Iterator[str]:
    N = sim.nodes * sim.gpus_per_node
    gbs = 4 * N
    yield f"[{_dt_ms(sim.job_start + 30.412)}] [INFO] [comm.py:637:init_distributed] cdb=None"
    yield (f"[{_dt_ms(sim.job_start + 31.087)}] [INFO] [comm.py:668:init_distributed] Initializing TorchBackend in "
           "DeepSpeed with backend nccl")
    yield (f"[{_dt_ms(sim.job_start + 52.633)}] [INFO] [logging.py:96:log_dist] [Rank 0] DeepSpeed info: "
           "version=0.14.4, git-hash=unknown, git-branch=unknown")
    yield (f"[{_dt_ms(sim.train_start - 2.871)}] [INFO] [config.py:1000:print] DeepSpeedEngine configuration:")
    yield (f"[{_dt_ms(sim.train_start - 2.871)}] [INFO] [config.py:1004:print]   steps_per_print .............. "
           f"{sim.log_interval}")
    yield (f"[{_dt_ms(sim.train_start - 2.871)}] [INFO] [config.py:1004:print]   wall_clock_breakdown ......... True")
    ckpts = set(int(c) for c in sim.ckpt_steps)
    running = 0.0
    for k, (s0, s1) in enumerate(intervals(sim)):
        t_end = float(sim.step_start[s1 - 1] + sim.step_dur[s1 - 1])
        T = float(np.mean(sim.step_dur[s0:s1]))
        last = float(sim.step_dur[s1 - 1])
        running = (running * k + gbs / T) / (k + 1)
        lr = 3e-4 * min(1.0, s1 / 2000.0)
        yield (f"[{_dt_ms(t_end)}] [INFO] [logging.py:96:log_dist] [Rank 0] step={s1}, skipped=0, "
               f"lr=[{lr:.12g}], mom=[(0.9, 0.95)]")
        yield (f"[{_dt_ms(t_end + 0.001)}] [INFO] [timer.py:260:stop] epoch=0/micro_step={s1 * 4}/global_step={s1}, "
               f"RunningAvgSamplesPerSec={running:.9f}, CurrSamplesPerSec={gbs / last:.9f}, "
               "MemAllocated=38.14GB, MaxMemAllocated=61.3GB")
        base = float(np.mean(sim.comp_base[s0:s1]))
        opt = 0.03 * sim.baseline
        fwd, bwd_inner = base * 0.33, base * 0.67 - opt
        allreduce = max(0.02 * sim.baseline, T - fwd - bwd_inner - opt)
        yield (f"[{_dt_ms(t_end + 0.002)}] [INFO] [logging.py:96:log_dist] [Rank 0] time (ms) | "
               f"fwd: {fwd * 1000:.2f} | bwd: {(bwd_inner + allreduce) * 1000:.2f} | bwd_inner: "
               f"{bwd_inner * 1000:.2f} | bwd_allreduce: {allreduce * 1000:.2f} | step: {opt * 1000:.2f}")
        for c in sorted(x for x in ckpts if s0 < x <= s1):
            yield (f"[{_dt_ms(t_end + 0.5)}] [INFO] [logging.py:96:log_dist] [Rank 0] Saving model checkpoint: "
                   f"{sim.ckpt_dir}/global_step{c}/mp_rank_00_model_states.pt")
            yield (f"[{_dt_ms(t_end + 0.6)}] [INFO] [torch_checkpoint_engine.py:33:commit] [Torch] Checkpoint "
                   f"global_step{c} is ready now!")


def _titan(sim: Sim) -> Iterator[str]:
    r = rng_for(sim.seed, "titan")
    N = sim.nodes * sim.gpus_per_node

    def log(t: float, msg: str) -> str:
        return f"[rank0]:[titan] {_dt_ms(t)} - root - INFO - {msg}"

    yield log(sim.job_start + 25.318, "Starting job: Llama 3 8B training")
    yield log(sim.job_start + 26.024, f"Building 1-D device mesh with ['dp_shard'], [{N}]")
    yield log(sim.job_start + 58.771, "CUDA capacity: NVIDIA H100 80GB HBM3 with 79.11GiB memory"
              if sim.style.platform["short"] == "h100" else "CUDA capacity: NVIDIA A100-SXM4-80GB with 79.15GiB memory")
    yield log(sim.train_start - 0.806, f"Training starts at step 1, with local batch size 4, global batch size {4 * N}, "
              f"sequence length 8192, total steps {max(sim.n_done * 3, 100000)} (warmup 2000)")
    ckpts = set(int(c) for c in sim.ckpt_steps)
    for s0, s1 in intervals(sim):
        t_end = float(sim.step_start[s1 - 1] + sim.step_dur[s1 - 1])
        T = float(np.mean(sim.step_dur[s0:s1]))
        peak = PEAK_TF[sim.style.platform["short"]]
        tfl = peak * 0.38 * sim.baseline / T * r.uniform(0.998, 1.002)
        tps = int(tfl * 1e12 / (6 * 8e9))
        yield log(t_end, f"step: {s1}  loss: {_loss(s1, r):7.4f}  grad_norm: {abs(r.gauss(0.8, 0.15)):.4f}  "
                         f"memory: 61.42GiB(77.64%)  tps: {tps:,}  tflops: {tfl:.2f}  mfu: {tfl / peak * 100:.2f}%")
        if s1 % 50 == 0:
            yield log(t_end + 0.3, "[GC] Peforming periodical GC collection. 0.06 seconds.")
        for c in sorted(x for x in ckpts if s0 < x <= s1):
            yield log(t_end + 0.5, "Saving the checkpoint (or staging if async is enabled).")
            yield log(t_end + 0.5 + float(sim.step_dur[c - 1]) - sim.baseline,
                      "[GC] GC collection invoked by checkpointer. 0.05 seconds.")
            yield log(t_end + 0.6 + float(sim.step_dur[c - 1]) - sim.baseline,
                      f"Finished saving the checkpoint (or staging if async is enabled)in "
                      f"{float(sim.step_dur[c - 1]) - sim.baseline:.2f} seconds.")
