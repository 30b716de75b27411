"""A realistic large NCCL debug log (one multi-node training job's combined stdout), for parse-speed benchmarks.

`write(path, mb, seed)` streams about `mb` MB of text (bounded memory, deterministic for a seed). The
shape follows FORMATS.md §6 and the samples in shared/real-logs/nccl:

- 4 nodes x 8 GPUs (32 ranks), NCCL 2.21.5 (seed 0) or 2.26.2 (timestamped WARNs), IB with 8 HCAs;
- per rank and communicator an init block (version, bootstrap, plugin, env echoes, NET/IB, Init START,
  the 2.20+ `nRanks nNodes localRanks` line, affinity, ring orders `Channel NN/24 :  0 1 ...`, `Trees`,
  per-channel connection lines `Channel 03/0 : 5[5] -> 13[5] [send] via NET/IB/5/GDRDMA` and
  `... via P2P/CUMEM/read`, `Connected all rings/trees`, thresholds, channel counts, Init COMPLETE,
  Init timings); communicators: world, tensor-parallel (per node), data-parallel (per local rank), made
  again from time to time (ncclCommSplit after an elastic restart of a group, `Destroy COMPLETE` lines);
- NCCL_DEBUG_SUBSYS=COLL (even seeds): per training step every rank's AllReduce (TP), ReduceScatter and
  AllGather (DP), Send/Recv (pipeline peers), with per-communicator hex opCounts; these dominate the volume
  (~85 %), connection/channel lines most of the rest; odd seeds: no COLL lines, the volume is init and
  connection lines of communicators re-made over and over (a job that restarts / splits a lot);
- lines of different processes interleaved, launcher prefixes by seed: srun `-l` (`12: `), none, or
  Open MPI `--tag-output` (`[1,12]<stdout>:`);
- rare trouble: IB completion errors (status 12/5, peer, GIDs, hca) after an empty line plus their
  unwind INFO lines, `Call to ibv_modify_qp failed`, async port events, connection closed, proxy errors,
  PyTorch watchdog lines (`[rankN]:[E...] ... Watchdog caught collective operation timeout`), a few
  Python warnings (unrecognized lines); WARN timestamps advance (2.26).

Seeds: `seed % 2 == 0` COLL on; `(seed // 2) % 3` = prefix style 0 srun, 1 none, 2 Open MPI.
"""

from __future__ import annotations

import random
import sys
import time
from collections.abc import Iterator
from pathlib import Path

NODES = 4
GPUS = 8
HCAS = 8
_OPS = ("AllReduce", "ReduceScatter", "AllGather")


class _Job:
    def __init__(self, seed: int) -> None:
        self.r = random.Random(seed)
        r = self.r
        self.coll = seed % 2 == 0
        self.style = (seed // 2) % 3
        self.ver = "2.21.5" if seed % 4 in (0, 1) else "2.26.2"
        self.major = tuple(int(x) for x in self.ver.split(".")[:2])
        self.t = 1772438400.0 + r.uniform(0, 86400)  # 2026-03-02 + some hours
        self.hosts = [f"gpu-{chr(ord('a') + k // 2)}{r.randrange(1, 40):02d}" for k in range(NODES)]
        self.ips = [
            f"10.{r.randrange(1, 250)}.{r.randrange(0, 250)}.{r.randrange(2, 250)}" for _ in range(NODES)
        ]
        self.pids = [[r.randrange(20000, 3000000) for _ in range(GPUS)] for _ in range(NODES)]
        self.bus = [f"{b:x}000" for b in (0x18, 0x2A, 0x3A, 0x5D, 0x9A, 0xAB, 0xBA, 0xDB)]
        self.world = NODES * GPUS
        self.opc: dict[int, int] = {}
        self.comm_seq = 0
        self.step = 0

    # ----------------------------------------------------------------- helpers
    def pre(self, rank: int, tid_off: int = 0) -> str:
        n, lr = divmod(rank, GPUS)
        pid = self.pids[n][lr]
        head = f"{self.hosts[n]}:{pid}:{pid + tid_off} [{lr}]"
        if self.style == 0:
            w = len(str(self.world - 1))
            return f"{rank:>{w}}: {head}"
        if self.style == 2:
            return f"[1,{rank}]<stdout>:{head}"
        return head

    def env(self, rank: int) -> str:
        if self.style == 0:
            return f"{rank:>{len(str(self.world - 1))}}: "
        if self.style == 2:
            return f"[1,{rank}]<stderr>:"
        return ""

    def new_comm(self) -> int:
        self.comm_seq += 1
        return 0x55D0E0000000 + (self.r.getrandbits(28) << 4) + self.comm_seq

    def interleave(self, per_rank: list[list[str]]) -> list[str]:
        """Lines of several processes as a shared stdout mixes them: each keeps its order, runs of 1-6."""
        r = self.r
        idx = [0] * len(per_rank)
        live = [k for k, p in enumerate(per_rank) if p]
        out: list[str] = []
        while live:
            k = live[r.randrange(len(live))]
            n = r.randint(1, 6)
            p = per_rank[k]
            out.extend(p[idx[k] : idx[k] + n])
            idx[k] += n
            if idx[k] >= len(p):
                live.remove(k)
        return out

    # ----------------------------------------------------------------- init blocks
    def startup(self) -> list[str]:
        per_rank = []
        for rank in range(self.world):
            n, lr = divmod(rank, GPUS)
            p = self.pre(rank) + " NCCL INFO "
            pt = self.pre(rank, 71 + lr) + " NCCL INFO "
            ls = []
            if self.major >= (2, 23):
                ls.append(p + f"NCCL version {self.ver}+cuda12.4")
            ls.append(p + f"Bootstrap : Using bond0:{self.ips[n]}<0>")
            ls.append(p + "cudaDriverVersion 12040")
            if rank == 0 and self.major < (2, 23):  # <= 2.21: bare, rank 0 only
                ls.append(self.env(0) + f"NCCL version {self.ver}+cuda12.4")
            ls.append(p + "NCCL_SOCKET_IFNAME set by environment to bond0")
            ls.append(
                p
                + "NCCL_IB_HCA set by environment to mlx5_0,mlx5_1,mlx5_2,mlx5_3,mlx5_4,mlx5_5,mlx5_6,mlx5_7"
            )
            ls.append(p + "NCCL_IB_GID_INDEX set by environment to 3.")
            ls.append(p + "NET/Plugin: Could not find: libnccl-net.so. Using internal network plugin.")
            ls.append(
                pt
                + "NET/IB : Using "
                + " ".join(f"[{k}]mlx5_{k}:1/RoCE" for k in range(HCAS))
                + f" [RO]; OOB bond0:{self.ips[n]}<0>"
            )
            ls.append(pt + "Using network IB")
            ls.append(pt + "DMA-BUF is available on GPU device " + str(lr))
            per_rank.append(ls)
        return self.interleave(per_rank)

    def comm_init(self, members: list[int], nchan: int, split: bool) -> tuple[list[str], dict[int, int]]:
        """Init lines of one communicator over global ranks `members`; returns (lines, comm pointer per rank)."""
        r = self.r
        size = len(members)
        commid = r.getrandbits(64)
        nodes = sorted({m // GPUS for m in members})
        comms = {m: self.new_comm() for m in members}
        per_rank = []
        for cr, g in enumerate(members):
            n, lr = divmod(g, GPUS)
            pt = self.pre(g, 71 + lr) + " NCCL INFO "
            comm = comms[g]
            fn = "ncclCommSplit" if split else "ncclCommInitRank"
            init = (
                f"{fn} comm 0x{comm:x} rank {cr} nranks {size} cudaDev {lr} nvmlDev {lr} busId {self.bus[lr]} "
                f"commId 0x{commid:x}"
            )
            ls = [pt + init + " - Init START"]
            ls.append(
                pt
                + f"Setting affinity for GPU {lr} to {'ffffffff,00000000' if lr < 4 else '00000000,ffffffff'}"
            )
            ls.append(pt + "NVLS multicast support is not available on dev " + str(lr))
            ls.append(
                pt + f"comm 0x{comm:x} rank {cr} nRanks {size} nNodes {len(nodes)} localRanks "
                f"{sum(1 for m in members if m // GPUS == n)} localRank {lr if size > len(nodes) else 0} MNNVL 0"
            )
            if cr == 0:
                order = "".join(f"{k:>4}" for k in r.sample(range(size), size))
                ls.extend(pt + f"Channel {ch:02d}/{nchan:02d} :{order}" for ch in range(nchan))
            nxt, prv = members[(cr + 1) % size], members[(cr - 1) % size]
            up = -1 if cr == 0 else (cr - 1) // 2
            kids = [c for c in (2 * cr + 1, 2 * cr + 2) if c < size] + [-1, -1, -1]
            trees = " ".join(
                f"[{ch}] {kids[0]}/{kids[1]}/{kids[2]}->{cr}->{up}" for ch in range(min(nchan, 8))
            )
            ls.append(pt + "Trees " + trees)
            ls.append(pt + "P2P Chunksize set to 131072")
            if size > 1:
                for ch in range(nchan):
                    for peer, how in ((nxt, "send"), (prv, "receive")):
                        pn, pl_ = divmod(peer, GPUS)
                        a, b = (g, peer) if how == "send" else (peer, g)
                        an, bn = divmod(a, GPUS)[1], divmod(b, GPUS)[1]
                        ar, br = members.index(a), members.index(b)
                        if pn == n:
                            if how == "send":
                                ls.append(
                                    pt + f"Channel {ch:02d}/0 : {ar}[{an}] -> {br}[{bn}] via P2P/CUMEM/read"
                                )
                        else:
                            ls.append(
                                pt + f"Channel {ch:02d}/0 : {ar}[{an}] -> {br}[{bn}] [{how}] via "
                                f"NET/IB/{lr}/GDRDMA"
                            )
            ls.append(pt + "Connected all rings")
            if size > 1:
                for ch in range(0, nchan, 2):
                    for k in kids[:2]:
                        if k >= 0:
                            kg = members[k]
                            ls.append(
                                pt
                                + f"Channel {ch:02d}/0 : {members.index(kg)}[{kg % GPUS}] -> {cr}[{lr}] via "
                                + ("P2P/CUMEM/read" if kg // GPUS == n else f"NET/IB/{lr}/GDRDMA")
                            )
            ls.append(pt + "Connected all trees")
            ls.append(pt + "threadThresholds 8/8/64 | 256/8/64 | 512 | 512")
            ls.append(
                pt
                + f"{nchan} coll channels, {nchan} collnet channels, 0 nvls channels, {nchan} p2p channels, "
                f"{max(1, nchan // 8)} p2p channels per peer"
            )
            ls.append(pt + "CC Off, Multi-GPU CC Off, workFifoBytes 1048576")
            ls.append(pt + init + " - Init COMPLETE")
            ls.append(
                pt
                + f"Init timings - {fn}: rank {cr} nranks {size} total {r.uniform(0.4, 3):.2f} (kernels 0.14, "
                f"alloc 0.01, bootstrap {r.uniform(0.01, 0.9):.2f}, allgathers 0.02, topo 0.31, graphs 0.01, "
                f"connections {r.uniform(0.05, 0.6):.2f}, rest 0.01)"
            )
            per_rank.append(ls)
        for m in members:
            self.opc[comms[m]] = 0
        return self.interleave(per_rank), comms

    def destroy(self, comms: dict[int, int], members: list[int]) -> list[str]:
        out = []
        for cr, g in enumerate(members):
            lr = g % GPUS
            out.append(
                self.pre(g, 71 + lr) + f" NCCL INFO comm 0x{comms[g]:x} rank {cr} nranks {len(members)} "
                f"cudaDev {lr} busId {self.bus[lr]} - Destroy COMPLETE"
            )
        return out

    # ----------------------------------------------------------------- trouble
    def ts(self) -> str:
        return time.strftime("[%Y-%m-%d %H:%M:%S] ", time.gmtime(self.t))

    def trouble(self) -> list[str]:
        r = self.r
        g = r.randrange(self.world)
        n, lr = divmod(g, GPUS)
        peer = r.randrange(NODES)
        head = self.pre(g, 112 + lr)
        wts = self.ts() if self.major >= (2, 26) else ""
        env = self.env(g)
        if wts:  # the timestamp goes after the launcher prefix
            head = env + wts + head[len(env) :]
        k = r.random()
        if k < 0.35:
            st = 12 if r.random() < 0.6 else 5
            w = (
                f"{head} transport/net_ib.cc:2244 NCCL WARN NET/IB: Got completion from peer "
                f"{self.ips[peer]}<{r.randrange(32768, 60999)}> with status={st} opcode=129 len=0 vendor err "
                f"{129 if st == 12 else 249} (Recv) localGid ::ffff:{self.ips[n]} remoteGids::ffff:{self.ips[peer]}"
                f" hca mlx5_{lr}"
            )
            p = self.pre(g, 112 + lr) + " NCCL INFO "
            return [
                env,
                w,
                p + "transport/net.cc:1362 -> 6",
                p + "proxy.cc:726 -> 6",
                p + "proxy.cc:910 -> 6 [Progress Thread]",
            ]
        if k < 0.5:
            return [
                env,
                f"{head} misc/ibvwrap.cc:190 NCCL WARN Call to ibv_modify_qp failed with error Network is "
                "unreachable",
                self.pre(g, 112 + lr) + " NCCL INFO transport/net_ib.cc:1062 -> 2",
            ]
        if k < 0.65:
            return [
                f"{head} transport/net_ib.cc:125 NCCL WARN NET/IB : mlx5_{lr}:1 Got async event : port error"
            ]
        if k < 0.75:
            return [
                env,
                f"{head} misc/socket.cc:49 NCCL WARN socketProgress: Connection closed by remote peer "
                f"{self.hosts[peer]}<{r.randrange(32768, 60999)}>",
            ]
        if k < 0.85:
            return [
                env,
                f"{head} proxy.cc:1523 NCCL WARN [Proxy Service {g}] Failed to execute operation Connect "
                f"from rank {r.randrange(self.world)}, retcode 3",
            ]
        if k < 0.93:
            dt = time.strftime("%m%d %H:%M:%S", time.gmtime(self.t)) + f".{r.randrange(10**6):06d}"
            return [
                f"{env}[rank{g}]:[E{dt} {self.pids[n][lr]} ProcessGroupNCCL.cpp:616] [Rank {g}] Watchdog caught "
                f"collective operation timeout: WorkNCCL(SeqNum={self.step * 4}, OpType=ALLREDUCE, NumelIn=4194304, "
                f"NumelOut=4194304, Timeout(ms)=600000) ran for 600023 milliseconds before timing out."
            ]
        return [
            f"{env}/usr/local/lib/python3.10/dist-packages/torch/distributed/fsdp/_init_utils.py:441: UserWarning: "
            "FSDP is switching to use `NO_SHARD` instead of ShardingStrategy.FULL_SHARD since the world size is 1."
        ]

    # ----------------------------------------------------------------- training
    def coll_step(self, tp: dict[int, int], dp: dict[int, int], sizes: list[int]) -> list[str]:
        r = self.r
        per_rank = []
        for g in range(self.world):
            n, lr = divmod(g, GPUS)
            p = self.pre(g) + " NCCL INFO "
            ls = []
            for c, nr, ops in (
                (tp[g], GPUS, ("AllReduce", "AllReduce", "AllReduce", "AllReduce")),
                (dp[g], NODES, ("ReduceScatter", "AllGather")),
            ):
                for op in ops:
                    opc = self.opc[c]
                    self.opc[c] = opc + 1
                    cnt = sizes[len(ls) % len(sizes)]
                    ls.append(
                        p + f"{op}: opCount {opc:x} sendbuff 0x7f{r.getrandbits(40):010x} recvbuff "
                        f"0x7f{r.getrandbits(40):010x} count {cnt} datatype {9 if op != 'AllReduce' else 7} op 0 "
                        f"root 0 comm 0x{c:x} [nranks={nr}] stream 0x{0x55D0F0000000 + g * 0x1000:x}"
                    )
            # pipeline-style p2p between neighbouring nodes on the DP communicator
            if NODES > 1:
                c = dp[g]
                opc = self.opc[c]
                self.opc[c] = opc + 1
                peer = (n + 1) % NODES if n % 2 == 0 else (n - 1) % NODES
                for op in ("Send", "Recv"):
                    sb = f"0x7f{r.getrandbits(40):010x}" if op == "Send" else "(nil)"
                    rb = "(nil)" if op == "Send" else f"0x7f{r.getrandbits(40):010x}"
                    ls.append(
                        p
                        + f"{op}: opCount {opc:x} sendbuff {sb} recvbuff {rb} count 1048576 datatype 9 op 0 "
                        f"root {peer} comm 0x{c:x} [nranks={NODES}] stream 0x{0x55D0F0000000 + g * 0x1000:x}"
                    )
            per_rank.append(ls)
        return self.interleave(per_rank)

    def lines(self) -> Iterator[list[str]]:
        r = self.r
        yield self.startup()
        world = list(range(self.world))
        blk, _ = self.comm_init(world, 24, False)
        yield blk
        while True:
            tp, dp = {}, {}
            tp_groups = [[n * GPUS + k for k in range(GPUS)] for n in range(NODES)]
            dp_groups = [[n * GPUS + lr for n in range(NODES)] for lr in range(GPUS)]
            for grp in tp_groups:
                blk, c = self.comm_init(grp, 16, True)
                tp.update(c)
                yield blk
            for grp in dp_groups:
                blk, c = self.comm_init(grp, 8, True)
                dp.update(c)
                yield blk
            sizes = [r.choice((1048576, 4194304, 16777216, 262144, 33554432)) for _ in range(6)]
            steps = r.randint(60, 200) if self.coll else r.randint(0, 2)
            for _ in range(steps):
                self.step += 1
                self.t += r.uniform(0.2, 1.5)
                if self.coll:
                    yield self.coll_step(tp, dp, sizes)
                if r.random() < 0.01:
                    yield self.trouble()
            self.t += r.uniform(5, 60)
            if r.random() < 0.3:
                yield self.trouble()
            out = []
            for grp in tp_groups:
                out += self.destroy(tp, grp)
            for grp in dp_groups:
                out += self.destroy(dp, grp)
            yield out


def write(path: Path, mb: float, seed: int = 0) -> None:
    """Write about `mb` MB (10^6 bytes) of a multi-node job's NCCL log to `path` (streamed, deterministic)."""
    target = int(mb * 1e6)
    done = 0
    with open(path, "w", encoding="utf-8", newline="\n", buffering=1 << 20) as f:
        for blk in _Job(seed).lines():
            text = "\n".join(blk) + "\n"
            if done + len(text) > target:
                # cut at a line end so the file stays whole lines
                cut = text.rfind("\n", 0, max(0, target - done))
                if cut >= 0:
                    f.write(text[: cut + 1])
                return
            f.write(text)
            done += len(text)


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit("usage: big_nccl.py OUT MB [SEED]")
    write(Path(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]) if len(sys.argv) > 3 else 0)
