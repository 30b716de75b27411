"""A realistic large training log (stdout/stderr of a multi-rank job) for parser throughput benchmarks.

`write(path, mb, seed)` streams about `mb` MB of one job's combined output. The seed picks the job's
framework and launcher (seed % 4) and drives every random choice (deterministic, bounded memory):

- 0 Megatron-LM/Core under `srun -l` (` 7: ` prefixes), 4 nodes x 8 ranks: the last rank prints the
  timestamped `iteration N/M |` line and a `(min, max) time across ranks` timer block every iteration;
  memory report, validation and checkpoint blocks, StragglerDetector reports from rank 0 every 100
  iterations; every rank's Python warnings, c10 `[rankN]:[W…]` warnings, NCCL INFO lines of new
  communicators, a rare NCCL WARN, dataloader tracebacks and a watchdog timeout with its aftermath.
- 1 DeepSpeed under `torchrun --tee 3` (`[default3]:` prefixes), 8 local ranks on one node: rank 0's
  log_dist `step=`, wall_clock_breakdown `time (ms) |` lines of every rank, ThroughputTimer lines,
  `[Rank N]` memory chatter, warnings and c10 lines.
- 2 torchtitan under `torchrun --role rank --tee 3` (`[rank3]:` prefixes, no rank filter): every rank's
  `[titan] date - root - INFO - step: N  loss: …` line, GC/profiler/checkpoint chatter, warnings.
- 3 Hugging Face Trainer / accelerate on one node (8 ranks, only rank 0 prints the bar): tqdm redraws
  separated by `\\r` inside physical lines, logged dicts every `logging_steps`, evaluation bars and dicts,
  `[INFO|trainer.py:N] date >>` headers, and warnings/tracebacks of the other ranks under a pdsh `host: ` prefix.

Proportions follow what such jobs print: step and timer lines plus their framework's chatter dominate;
warnings, NCCL lines and tracebacks are a few percent; errors are rare (per mille and below).

Usage: `python bench/big_steps.py OUT MB [SEED]`.
"""

from __future__ import annotations

import random
import re
import sys
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from pathlib import Path

_FLUSH = 1 << 20

_PY_WARNINGS = (
    (
        "/usr/local/lib/python3.10/dist-packages/torch/utils/checkpoint.py:464: UserWarning: torch.utils.checkpoint: "
        "the use_reentrant parameter should be passed explicitly. In version 2.4 we will raise an exception if "
        "use_reentrant is not passed. use_reentrant=False is recommended, but if you need to preserve the current "
        "default behavior, you can pass use_reentrant=True. Refer to docs for more details on the differences "
        "between the two variants.",
        "  return fn(*args, **kwargs)",
    ),
    (
        "/usr/local/lib/python3.10/dist-packages/transformer_engine/pytorch/module/base.py:630: UserWarning: "
        "Recipe has changed from DelayedScaling to Float8CurrentScaling, resetting quantizers",
        "  warnings.warn(",
    ),
    (
        "/opt/megatron-lm/megatron/core/tensor_parallel/layers.py:280: UserWarning: async_grad_allreduce is "
        "deprecated, not in use anymore and will be removed in Megatron Core v0.12.0. Please use "
        "allreduce_dgrad instead.",
        "  warnings.warn(",
    ),
    (
        "/usr/local/lib/python3.10/dist-packages/torch/distributed/c10d_logger.py:79: FutureWarning: "
        "`torch.distributed._reduce_scatter_base` is a private function and will be deprecated. Please use "
        "`torch.distributed.reduce_scatter_tensor` instead.",
        "  return func(*args, **kwargs)",
    ),
    (
        "/usr/local/lib/python3.10/dist-packages/torch/_dynamo/variables/functions.py:663: UserWarning: Graph break "
        "due to unsupported builtin torch._C._distributed_c10d.PyCapsule._broadcast_coalesced.",
        "  torch._dynamo.utils.warn_once(msg)",
    ),
)

_C10_WARNINGS = (
    "ProcessGroupNCCL.cpp:4115] [PG ID 0 PG GUID 0 Rank {rank}]  using GPU {gpu} to perform barrier as devices used "
    "by this process are currently unknown. This can potentially cause a hang if this rank to GPU mapping is "
    "incorrect.Specify device_ids in barrier() to force use of a particular device,or call init_process_group() "
    "with a device_id.",
    "ProcessGroupNCCL.cpp:1692] Warning: TORCH_NCCL_AVOID_RECORD_STREAMS=1 has no effect for point-to-point "
    "collectives. (function operator())",
    "CUDAAllocatorConfig.h:28] Warning: expandable_segments not supported on this platform (function operator())",
    "socket.cpp:752] [c10d] The client socket has failed to connect to [{host}]:29500 (errno: 111 - Connection "
    "refused).",
)

_TRACEBACK = (
    "Traceback (most recent call last):",
    '  File "/usr/lib/python3.10/multiprocessing/queues.py", line 244, in _feed',
    "    obj = _ForkingPickler.dumps(obj)",
    '  File "/usr/lib/python3.10/multiprocessing/reduction.py", line 51, in dumps',
    "    cls(buf, protocol).dump(obj)",
    '  File "/usr/local/lib/python3.10/dist-packages/torch/multiprocessing/reductions.py", line 568, in reduce_storage',
    "    fd, size = storage._share_fd_cpu_()",
    "RuntimeError: unable to write to file </torch_3712_2316631285_1>: No space left on device (28)",
)


def _ts(t: datetime, sep: str = " ", frac: str = ",", digits: int = 3) -> str:
    base = t.strftime(f"%Y-%m-%d{sep}%H:%M:%S")
    return base if digits == 0 else f"{base}{frac}{t.microsecond // 10 ** (6 - digits):0{digits}d}"


def _c10(t: datetime, sev: str = "W") -> str:
    """c10 glog time `W0601 10:00:05.123456789` (no year)."""
    return f"{sev}{t:%m%d %H:%M:%S}.{t.microsecond:06d}{t.microsecond % 997:03d}"


class _Job:
    """Shared state of a generated job: clock, randomness, hosts and ranks."""

    def __init__(self, seed: int, nodes: int, gpus: int) -> None:
        self.rng = random.Random(seed)
        self.t = datetime(2025, 3, 1 + seed % 27, 6 + seed % 12, 0, 0, 123456)
        self.nodes, self.gpus = nodes, gpus
        self.hosts = [f"gpu-node-{self.rng.randrange(100, 900):03d}" for _ in range(nodes)]
        self.world = nodes * gpus
        self.slow_rank = self.rng.randrange(self.world)

    def tick(self, seconds: float) -> None:
        self.t += timedelta(seconds=max(seconds, 1e-6))

    def nccl_info(self, rank: int, what: str) -> str:
        host, gpu = self.hosts[rank // self.gpus], rank % self.gpus
        pid = 201_000 + rank * 17
        return f"{host}:{pid}:{pid + 61} [{gpu}] NCCL INFO {what}"

    def nccl_comm_lines(self, rank: int, nranks: int) -> list[str]:
        """NCCL INFO lines of one communicator's set-up on one rank (NCCL_DEBUG=INFO jobs)."""
        gpu = rank % self.gpus
        comm = f"0x{self.rng.getrandbits(44):x}"
        nxt, prv = (rank + 1) % nranks, (rank - 1) % nranks
        out = [
            f"ncclCommInitRank comm {comm} rank {rank % nranks} nranks {nranks} cudaDev {gpu} nvmlDev {gpu} "
            f"busId {0x18000 + 0x11000 * gpu:x} commId 0x{self.rng.getrandbits(64):x} - Init START",
            f"Setting affinity for GPU {gpu} to ffffffff,00000000,ffffffff",
            f"comm {comm} rank {rank % nranks} nRanks {nranks} nNodes {self.nodes} localRanks {self.gpus} "
            f"localRank {gpu} MNNVL 0",
        ]
        for c in range(self.rng.choice((2, 4, 8))):
            out.append(f"Channel {c:02d}/0 : {rank % nranks}[{gpu}] -> {nxt}[{nxt % self.gpus}] via P2P/CUMEM/read")
            if self.nodes > 1 and gpu == 0:
                out.append(f"Channel {c:02d}/0 : {prv}[{prv % self.gpus}] -> {rank % nranks}[{gpu}] [receive] via NET/IB/{c % 8}/GDRDMA")
        out += [
            "Connected all rings",
            "Connected all trees",
            f"ncclCommInitRank comm {comm} rank {rank % nranks} nranks {nranks} cudaDev {gpu} nvmlDev {gpu} "
            f"busId {0x18000 + 0x11000 * gpu:x} commId 0x{self.rng.getrandbits(64):x} - Init COMPLETE",
        ]
        return [self.nccl_info(rank, s) for s in out]

    def step_time(self, base: float) -> float:
        """A step duration: jitter, a rare slow step, a slow phase now and then (straggler)."""
        r = self.rng.random()
        factor = 1.0 + self.rng.gauss(0.0, 0.02)
        if r < 0.002:
            factor *= self.rng.uniform(3.0, 12.0)  # checkpoint/GC/network hiccup
        elif r < 0.02:
            factor *= self.rng.uniform(1.1, 1.6)
        return base * max(factor, 0.5)


# ----------------------------------------------------------------------------- Megatron under srun -l


def _megatron(job: _Job) -> Iterator[str]:
    rng = job.rng
    width = len(str(job.world - 1))
    last = job.world - 1

    def p(rank: int, s: str) -> str:
        return f"{rank:>{width}}: {s}"

    # preamble (rank 0) and start-up chatter of every rank
    yield p(0, "using world size: %d, data-parallel size: %d, context-parallel size: 1, tensor-model-parallel size: 8, "
            "pipeline-model-parallel size: 1" % (job.world, job.world // 8))
    yield p(0, "------------------------ arguments ------------------------")
    for i in range(120):
        yield p(0, f"  arg_{i:03d} {'.' * (40 - len(str(i)))} {rng.choice(['None', 'True', 'False', str(rng.randrange(1, 9999))])}")
    yield p(0, "-------------------- end of arguments ---------------------")
    yield p(0, "> building GPT2BPETokenizer tokenizer ...")
    yield p(0, "> initializing torch distributed ...")
    for r in range(job.world):
        w = _PY_WARNINGS[3]
        yield p(r, w[0])
        yield p(r, w[1])
    yield p(0, "> initialized tensor model parallel with size 8")
    yield p(0, "> setting random seeds to 1234 ...")
    yield p(0, "> compiling dataset index builder ...")
    for r in range(job.world):
        yield p(r, f"[rank{r}]:[{_c10(job.t)} {_C10_WARNINGS[0].format(rank=r, gpu=r % 8, host=job.hosts[0])}")
    yield p(0, f"[after model, optimizer, and learning rate scheduler are built] datetime: {_ts(job.t, digits=0)} ")
    yield p(0, "(min, max) time across ranks (ms):")
    yield p(0, "    model-and-optimizer-setup ......................: (%.2f, %.2f)" % (2231.5, 2290.1))
    yield p(0, "    train/valid/test-data-iterators-setup ..........: (%.2f, %.2f)" % (14590.46, 14646.38))
    yield p(0, "training ...")
    yield p(0, f"[before the start of training step] datetime: {_ts(job.t, digits=0)} ")

    total = 500_000
    base = rng.uniform(2.0, 6.0)
    gbs = 1024
    lr = 3e-4
    phases = ("forward-backward", "forward-compute", "backward-compute", "batch-generator", "layernorm-grads-all-reduce",
              "embedding-grads-all-reduce", "all-grads-sync", "params-all-gather", "optimizer-copy-to-main-grad",
              "optimizer-clip-main-grad", "optimizer-count-zeros", "optimizer-inner-step", "optimizer-copy-main-to-model-params",
              "optimizer")
    it = 0
    while True:
        it += 1
        dt = job.step_time(base)
        job.tick(dt)
        loss = 2.0 + 8.0 / (1 + it / 300) + rng.gauss(0, 0.03)
        skipped = 1 if rng.random() < 0.001 else 0
        yield p(
            last,
            f" [{_ts(job.t, digits=0)}] iteration {it:>8}/{total:>8} | consumed samples: {it * gbs:>12} | "
            f"elapsed time per iteration (ms): {dt * 1000:.1f} | throughput per GPU (TFLOP/s/GPU): {412.0 * base / dt:.1f} | "
            f"learning rate: {lr * min(1.0, it / 2000):.6E} | global batch size: {gbs:>5} | lm loss: {loss:.6E} | "
            f"loss scale: 1.0 | grad norm: {abs(rng.gauss(0.9, 0.2)):.3f} | number of skipped iterations: {skipped:>3} | "
            f"number of nan iterations:   0 |",
        )
        if it == 1 or it % 1000 == 0:
            for r in range(0, job.world, 8):
                yield p(r, f"[Rank {r}] (after {it} iterations) memory (MB) | allocated: {41234.5 + r:.4f} | max allocated: "
                        f"{61234.25 + r:.4f} | reserved: 70412.0 | max reserved: 70412.0")
        yield p(last, "(min, max) time across ranks (ms):")
        fb = dt * 1000 * 0.93
        for name in phases:
            lo = fb * rng.uniform(0.02, 0.4) if name != "forward-backward" else fb
            hi = lo * (1.0 + abs(rng.gauss(0, 0.01)))
            if name in ("forward-compute", "all-grads-sync") and rng.random() < 0.05:
                hi = lo * rng.uniform(1.2, 2.0)  # one rank late: straggler evidence
            yield p(last, f"    {name} {'.' * max(3, 48 - len(name))}: ({lo:.2f}, {hi:.2f})")
        # chatter of other ranks while training
        if rng.random() < 0.08:
            r = rng.randrange(job.world)
            w = rng.choice(_PY_WARNINGS)
            yield p(r, w[0])
            yield p(r, w[1])
        if rng.random() < 0.02:
            r = rng.randrange(job.world)
            yield p(r, f"[rank{r}]:[{_c10(job.t)} {rng.choice(_C10_WARNINGS[1:]).format(rank=r, gpu=r % 8, host=job.hosts[0])}")
        if rng.random() < 0.01:  # a new communicator (NCCL_DEBUG=INFO): every rank of a small group logs its set-up
            g0 = rng.randrange(0, job.world, 8)
            for r in range(g0, g0 + 8):
                for line in job.nccl_comm_lines(r, 8):
                    yield p(r, line)
        if it % 100 == 0:
            lo_r, hi_r = job.slow_rank, rng.randrange(job.world)
            yield p(
                0,
                f"INFO:megatron.core.utils:[{_ts(job.t, digits=0)}] | MnRtt/Rnk: {dt * 900:.2f}ms/{hi_r} | MxRtt/Rnk: "
                f"{dt * 1100:.2f}ms/{lo_r} | MnPwr/Rnk: 612000W/{lo_r} | MxPwr/Rnk: 700000W/{hi_r} | MnTmp/Rnk: 50C/{hi_r} | "
                f"MxTmp/Rnk: 83C/{lo_r} | MnUtl/Rnk: 88%/{lo_r} | MxUtl/Rnk: 100%/{hi_r} | MnClk/Rnk: 1410MHz/{lo_r} | "
                f"MxClk/Rnk: 1980MHz/{hi_r} | MnDRtt/Rnk: 1.10ms/{hi_r} | MxDRtt/Rnk: 95.60ms/{lo_r} | "
                f"MnEtpt/Rnk: 280.02TF/{lo_r} | MxEtpt/Rnk: 410.32TF/{hi_r}",
            )
            yield p(0, f"INFO:megatron.core.utils:^^^^ Bottom 2 Ranks with lowest  Etpt(TF): 280.02/{lo_r}, 399.17/{(lo_r + 1) % job.world},")
            yield p(0, f"INFO:megatron.core.utils:^^^^ Top    2 Ranks with highest Etpt(TF): 409.28/{hi_r}, 410.32/{(hi_r + 3) % job.world},")
        if it % 500 == 0:
            dash = "-" * 100
            yield p(last, dash)
            yield p(last, f" validation loss at iteration {it} | lm loss value: {loss + 0.05:.6E} | lm loss PPL: {2.718 ** (loss + 0.05):.6E} | ")
            yield p(last, dash)
        if it % 2000 == 0:
            yield p(0, f"saving checkpoint at iteration {it:>7} to /lustre/ckpt/gpt-175b in torch_dist format")
            job.tick(rng.uniform(20, 60))
            yield p(0, f"  successfully saved checkpoint from iteration {it:>7} to /lustre/ckpt/gpt-175b [ t 1/8, p 1/1 ]")
            yield p(0, "(min, max) time across ranks (ms):")
            yield p(0, "    save-checkpoint ................................: (%.2f, %.2f)" % (21234.5, 21301.7))
        if rng.random() < 0.0005:  # a dataloader worker dies and is restarted: traceback on one rank
            r = rng.randrange(job.world)
            for line in _TRACEBACK:
                yield p(r, line)
        if rng.random() < 0.0002:  # an NCCL WARN (recovered) on one rank
            r = rng.randrange(job.world)
            yield p(r, job.nccl_info(r, "").replace("NCCL INFO ", "NCCL WARN ")
                    + "NET/IB : Got async event : port error")
        if rng.random() < 0.00005:  # watchdog timeout on a few ranks, restart by the launcher
            seq = it * 37
            for r in rng.sample(range(job.world), 4):
                yield p(r, f"[rank{r}]:[{_c10(job.t, 'E')} ProcessGroupNCCL.cpp:632] [Rank {r}] Watchdog caught collective "
                        f"operation timeout: WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, NumelIn=1048576, NumelOut=1048576, "
                        f"Timeout(ms)=600000) ran for 600023 milliseconds before timing out.")
                yield p(r, f"[rank{r}]:[{_c10(job.t, 'E')} ProcessGroupNCCL.cpp:2168] [PG ID 0 PG GUID 0(default_pg) Rank {r}] "
                        f"Timeout at NCCL work: {seq}, last enqueued NCCL work: {seq}, last completed NCCL work: {seq - 1}.")
            job.tick(600)


# ----------------------------------------------------------------------------- DeepSpeed under torchrun --tee 3


def _deepspeed(job: _Job) -> Iterator[str]:
    rng = job.rng
    host = job.hosts[0]

    def p(rank: int, s: str) -> str:
        return f"[default{rank}]:{s}"

    def head(t: datetime, where: str = "logging.py:96:log_dist") -> str:
        return f"[{_ts(t)}] [INFO] [{where}]"

    for r in range(job.gpus):
        yield p(r, f"{head(job.t, 'comm.py:637:init_distributed')} cdb=None")
    yield p(0, f"{head(job.t, 'comm.py:668:init_distributed')} Initializing TorchBackend in DeepSpeed with backend nccl")
    yield p(0, f"{head(job.t)} [Rank 0] DeepSpeed info: version=0.14.4, git-hash=unknown, git-branch=unknown")
    yield p(0, f"{head(job.t, 'config.py:1000:print')} DeepSpeedEngine configuration:")
    for i in range(90):
        yield p(0, f"{head(job.t, 'config.py:1004:print')}   option_{i:02d} {'.' * 14} {rng.randrange(0, 5000)}")
    for r in range(job.gpus):
        yield p(r, f"[rank{r}]:[{_c10(job.t)} {_C10_WARNINGS[0].format(rank=r, gpu=r, host=host)}")
    base = rng.uniform(0.4, 2.5)
    step = 0
    while True:
        step += 1
        dt = job.step_time(base)
        job.tick(dt)
        yield p(0, f"{head(job.t)} [Rank 0] step={step}, skipped=0, lr=[{3e-4 * min(1, step / 500):.6g}], mom=[(0.9, 0.95)]")
        for r in range(job.gpus):
            fwd = dt * 1000 * rng.uniform(0.28, 0.31)
            bwd_in = dt * 1000 * rng.uniform(0.48, 0.52)
            ar = dt * 1000 * (0.1 if r != job.slow_rank % job.gpus or rng.random() > 0.05 else 0.4)
            yield p(r, f"{head(job.t)} [Rank {r}] time (ms) | fwd_microstep: {fwd:.2f} | bwd_microstep: {bwd_in + ar:.2f} | "
                    f"bwd_inner_microstep: {bwd_in:.2f} | bwd_allreduce_microstep: {ar:.2f} | step_microstep: {dt * 80:.2f}")
            yield p(r, f"{head(job.t)} [Rank {r}] time (ms) | fwd: {fwd:.2f} | bwd: {bwd_in + ar:.2f} | bwd_inner: {bwd_in:.2f} | "
                    f"bwd_allreduce: {ar:.2f} | step: {dt * 80:.2f}")
        yield p(0, f"{head(job.t, 'timer.py:260:stop')} epoch=0/micro_step={step * 4}/global_step={step}, "
                f"RunningAvgSamplesPerSec={256 / base:.6f}, CurrSamplesPerSec={256 / dt:.6f}, MemAllocated=10.5GB, "
                f"MaxMemAllocated=20.1GB")
        if rng.random() < 0.06:
            r = rng.randrange(job.gpus)
            w = rng.choice(_PY_WARNINGS)
            yield p(r, w[0])
            yield p(r, w[1])
        if rng.random() < 0.02:
            r = rng.randrange(job.gpus)
            yield p(r, f"[rank{r}]:[{_c10(job.t)} {rng.choice(_C10_WARNINGS).format(rank=r, gpu=r, host=host)}")
        if step % 1000 == 0:
            yield p(0, f"{head(job.t, 'engine.py:3478:_save_zero_checkpoint')} zero checkpoint saved /ckpt/global_step{step}/zero_pp_rank_0_mp_rank_00_optim_states.pt")
            yield p(0, f"{head(job.t, 'torch_checkpoint_engine.py:33:commit')} [Torch] Checkpoint global_step{step} is ready now!")
        if rng.random() < 0.0005:
            r = rng.randrange(job.gpus)
            for line in _TRACEBACK:
                yield p(r, line)
        if rng.random() < 0.0001:
            r = rng.randrange(job.gpus)
            yield p(r, f"[rank{r}]:[{_c10(job.t, 'E')} ProcessGroupNCCL.cpp:1895] [PG ID 0 PG GUID 0(default_pg) Rank {r}] "
                    "Process group watchdog thread terminated with exception: NCCL error: remote process exited or there "
                    "was a network error, NCCL version 2.21.5")
            yield p(r, "ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely.")
            yield p(r, "Last error:")
            yield p(r, f"NET/IB : Got completion from peer {job.hosts[0]}<{33000 + r}> with status=12 opcode=0 len=0 vendor err 129 (Send) localGid ::ffff:10.0.0.{r}")


# ----------------------------------------------------------------------------- torchtitan, every rank


def _torchtitan(job: _Job) -> Iterator[str]:
    rng = job.rng

    def p(rank: int, s: str) -> str:
        return f"[rank{rank}]:{s}"

    def head(rank: int, lvl: str = "INFO") -> str:
        return f"[titan] {_ts(job.t)} - root - {lvl} - "

    for r in range(job.gpus):
        yield p(r, head(r) + "Starting job: Llama 3 8B training")
        yield p(r, head(r) + f"Building 1-D device mesh with ['dp_shard'], [{job.gpus}]")
        yield p(r, head(r) + f"[GC] Initial GC collection. 0.00 seconds.")
        yield p(r, head(r) + "CUDA capacity: NVIDIA H100 80GB HBM3 with 79.11GiB memory")
        yield p(r, head(r) + "Model llama3 8B size: 8,030,261,248 total parameters")
        yield p(r, head(r) + "Applied FSDP to the model")
        yield p(r, head(r) + "Training starts at step 1.")
    base = rng.uniform(0.8, 3.0)
    step = 0
    while True:
        step += 1
        dt = job.step_time(base)
        job.tick(dt)
        for r in range(job.gpus):
            loss = 2.0 + 8.0 / (1 + step / 200) + rng.gauss(0, 0.02)
            tps = 8192 * 2 / dt * rng.uniform(0.99, 1.01)
            yield p(r, head(r) + f"step: {step:2}  loss: {loss:8.5f}  grad_norm: {abs(rng.gauss(1.0, 0.2)):7.4f}  "
                    f"memory: 63.{r}4GiB(79.98%)  tps: {tps:,.0f}  tflops: {tps * 6 * 8.03e9 / 1e12:.2f}  "
                    f"mfu: {tps * 6 * 8.03e9 / 1e12 / 9.89:.2f}%")
            job.tick(rng.uniform(0.0001, 0.002))
        if step % 50 == 0:
            for r in range(job.gpus):
                yield p(r, head(r) + f"[GC] Performing periodical GC collection 0.{rng.randrange(10, 99)} seconds")
        if step % 500 == 0:
            for r in range(job.gpus):
                yield p(r, head(r) + f"Saving the checkpoint (or staging if async is enabled).")
                yield p(r, head(r) + f"[GC] GC collection invoked by checkpointer. 0.0{rng.randrange(10, 99)} seconds")
                yield p(r, head(r) + f"Finished saving the checkpoint (or staging if async is enabled)in {rng.uniform(5, 30):.2f} seconds.")
        if rng.random() < 0.05:
            r = rng.randrange(job.gpus)
            w = rng.choice(_PY_WARNINGS)
            yield p(r, w[0])
            yield p(r, w[1])
        if rng.random() < 0.01:
            r = rng.randrange(job.gpus)
            yield p(r, head(r, "WARNING") + "Dataset c4 is being re-looped")
        if rng.random() < 0.0005:
            r = rng.randrange(job.gpus)
            for line in _TRACEBACK:
                yield p(r, line)


# ----------------------------------------------------------------------------- HF Trainer with tqdm


def _hf(job: _Job) -> Iterator[str]:
    rng = job.rng
    total = 200_000
    logging_steps = rng.choice((5, 10, 25))

    def info(where: str, msg: str) -> str:
        return f"[INFO|{where}] {_ts(job.t)} >> {msg}"

    for r in range(1, job.gpus):
        yield f"{job.hosts[0]}: [WARNING|modeling_utils.py:4172] {_ts(job.t)} >> Some weights were not initialized from the model checkpoint"
    yield info("trainer.py:2128", "***** Running training *****")
    yield info("trainer.py:2129", "  Num examples = 12,800,000")
    yield info("trainer.py:2130", "  Num Epochs = 1")
    yield info("trainer.py:2131", "  Instantaneous batch size per device = 8")
    yield info("trainer.py:2134", "  Total train batch size (w. parallel, distributed & accumulation) = 64")
    yield info("trainer.py:2135", "  Gradient Accumulation steps = 1")
    yield info("trainer.py:2136", f"  Total optimization steps = {total:,}")
    yield info("trainer.py:2137", "  Number of trainable parameters = 6,738,415,616")
    base = rng.uniform(0.3, 1.5)
    step = 0
    elapsed = 0.0
    bar = f"\r  0%|          | 0/{total} [00:00<?, ?it/s]"

    def fmt(sec: float) -> str:
        sec = int(sec)
        return f"{sec // 3600:d}:{sec // 60 % 60:02d}:{sec % 60:02d}" if sec >= 3600 else f"{sec // 60:02d}:{sec % 60:02d}"

    parts = [bar]
    while True:
        step += 1
        dt = job.step_time(base)
        job.tick(dt)
        elapsed += dt
        pct = 100 * step // total
        rate = f"{dt:.2f}s/it" if dt >= 1 else f"{1 / dt:.2f}it/s"
        filled = "█" * (pct // 10)
        parts.append(f"\r{pct:3d}%|{filled:<10}| {step}/{total} [{fmt(elapsed)}<{fmt((total - step) * base)}, {rate}]")
        if step % logging_steps == 0:
            loss = 1.0 + 3.0 / (1 + step / 500) + rng.gauss(0, 0.02)
            parts.append("\r" + " " * 40 + "\r" + "{" + f"'loss': {loss:.4f}, 'grad_norm': {abs(rng.gauss(1.2, 0.3)):.6f}, "
                         f"'learning_rate': {2e-5 * (1 - step / total):.6e}, 'epoch': {step / total:.4f}" + "}")
            yield "".join(parts)
            parts = [f"\r{pct:3d}%|{filled:<10}| {step}/{total} [{fmt(elapsed)}<{fmt((total - step) * base)}, {rate}]"]
        if step % 2000 == 0:
            yield "".join(parts)
            eval_total = 250
            ev = [f"\r  0%|          | 0/{eval_total} [00:00<?, ?it/s]"]
            for i in range(1, eval_total + 1, 7):
                ev.append(f"\r{100 * i // eval_total:3d}%|{'█' * (i * 10 // eval_total):<10}| {i}/{eval_total} [00:{i // 10:02d}<00:10, {rng.uniform(20, 30):.2f}it/s]")
            yield "".join(ev)
            yield "{" + f"'eval_loss': {1.1 + rng.random():.4f}, 'eval_runtime': 61.2, 'eval_samples_per_second': 32.6, 'eval_steps_per_second': 4.08, 'epoch': {step / total:.4f}" + "}"
            yield info("trainer.py:3410", f"Saving model checkpoint to /out/checkpoint-{step}")
            yield info("configuration_utils.py:472", f"Configuration saved in /out/checkpoint-{step}/config.json")
            parts = [f"\r{pct:3d}%|{filled:<10}| {step}/{total} [{fmt(elapsed)}<{fmt((total - step) * base)}, {rate}]"]
        if rng.random() < 0.004:
            yield "".join(parts)
            parts = []
            w = rng.choice(_PY_WARNINGS)
            yield f"{job.hosts[0]}: {w[0]}"
            yield f"{job.hosts[0]}: {w[1]}"
        if rng.random() < 0.0002:
            yield "".join(parts)
            parts = []
            for line in _TRACEBACK:
                yield f"{job.hosts[0]}: {line}"


_PROFILES: tuple[tuple[Callable[[_Job], Iterator[str]], int, int], ...] = (
    (_megatron, 4, 8),
    (_deepspeed, 1, 8),
    (_torchtitan, 1, 8),
    (_hf, 2, 8),
)


_SRUN_ENVELOPE = re.compile(r"^\s*[0-9]+: ")


def write(path: Path, mb: float, seed: int = 0, srun: bool = True) -> None:
    """Write about `mb` MB of one job's training log to `path` (framework chosen by `seed % 4`). `srun` False
    (Megatron): the job launched without `srun -l`, its ranks' output without the ` 7: ` envelopes, in one
    stream (the memory reports and every rank's chatter between the last rank's iteration lines and
    blocks)."""
    gen, nodes, gpus = _PROFILES[seed % len(_PROFILES)]
    job = _Job(seed, nodes, gpus)
    limit = int(mb * 1_000_000)
    written = 0
    buf: list[str] = []
    size = 0
    bare = not srun and gen is _megatron
    with open(path, "wb") as fh:
        for line in gen(job):
            if bare:
                line = _SRUN_ENVELOPE.sub("", line, count=1)
            buf.append(line)
            size += len(line) + 1
            if size >= min(_FLUSH, limit - written):
                data = ("\n".join(buf) + "\n").encode()
                fh.write(data)
                written += len(data)
                buf, size = [], 0
                if written >= limit:
                    return
        if buf:  # generators are endless; kept for completeness
            fh.write(("\n".join(buf) + "\n").encode())


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4):
        sys.exit("usage: python bench/big_steps.py OUT MB [SEED]")
    write(Path(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]) if len(sys.argv) == 4 else 0)
