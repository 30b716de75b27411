"""Per-node worker output (NCCL INFO/WARN, PyTorch watchdog, torchrun), IB state and counters,
and nccl-tests results."""

from __future__ import annotations

import time
from collections.abc import Iterator

from forensics.simulate.fleet import Node, rng_for
from forensics.simulate.job import WATCHDOG_MS, Sim

# Worker-log record: (t, seq, local_rank or -1 for the launcher, text). Untimed lines (NCCL INFO)
# still carry the time they were printed so the file is in order.
Rec = tuple[float, int, int, str]


def glog_ts(t: float, ns: bool = True) -> str:
    frac = f"{int((t % 1) * 1e9):09d}" if ns else f"{int((t % 1) * 1e6):06d}"
    return time.strftime("%m%d %H:%M:%S", time.gmtime(t)) + "." + frac


def prefix(sim: Sim, node: Node, local: int) -> str:
    lp = sim.style.launcher_prefix
    if lp == "tee" and local >= 0:  # torchrun --tee 3: role + local rank (torchtitan runs --role rank)
        return f"[rank{local}]:" if sim.style.framework == "torchtitan" else f"[default{local}]:"
    if lp == "srun":
        w = len(str(sim.nodes - 1))
        return f"{node.idx:>{w}}: "
    return ""


def nccl_init(sim: Sim, node: Node) -> list[Rec]:
    r = rng_for(sim.seed, "nccl", node.idx)
    ver = node.nccl
    major = tuple(int(x) for x in ver.split(".")[:2])
    cuda_drv = node.cuda[1]
    cuda_lib = sim.style.nccl[1]
    G, N = sim.gpus_per_node, sim.nodes * sim.gpus_per_node
    t0 = sim.job_start + 20.0 + r.uniform(0, 3)
    host = node.host
    commid = rng_for(sim.seed, "commid").getrandbits(64)
    ib = " ".join(f"[{k}]{hc.name}:1/IB" for k, hc in enumerate(node.hcas))
    out: list[Rec] = []
    seq = 0
    for lr in range(G):
        pid = node.pid + lr
        tid = pid + 74 + lr
        R = sim.global_rank(node.idx, lr)
        g = node.gpus[lr]
        tt = t0 + 0.01 * lr
        pre = f"{host}:{pid}:{pid} [{lr}] NCCL INFO "
        pre_t = f"{host}:{pid}:{tid} [{lr}] NCCL INFO "
        lines = []
        if major >= (2, 23):
            lines.append(pre + f"NCCL version {ver}+cuda{cuda_lib}")
        lines.append(pre + f"Bootstrap : Using bond0:{node.ip}<0>")
        if major >= (2, 19):
            lines.append(pre + "NET/Plugin: Could not find: libnccl-net.so. Using internal network plugin.")
        else:
            lines.append(pre + "NET/Plugin : Plugin load (libnccl-net.so) returned 2 : libnccl-net.so: "
                               "cannot open shared object file: No such file or directory")
            lines.append(pre + "NET/Plugin : No plugin found, using internal implementation")
        lines.append(pre + f"cudaDriverVersion {cuda_drv}")
        if R == 0 and major < (2, 23):
            lines.append(f"NCCL version {ver}+cuda{cuda_lib}")
        lines.append(pre_t + f"NET/IB : Using {ib} [RO]; OOB bond0:{node.ip}<0>")
        lines.append(pre_t + "Using network IB")
        comm = 0x55D0E0000000 + (r.getrandbits(28) << 4)
        init = (f"ncclCommInitRank comm 0x{comm:x} rank {R} nranks {N} cudaDev {lr} nvmlDev {lr} "
                f"busId {g.nccl_bus} commId 0x{commid:x}")
        lines.append(pre_t + init + " - Init START")
        if major >= (2, 20):
            lines.append(pre_t + f"comm 0x{comm:x} rank {R} nRanks {N} nNodes {sim.nodes} localRanks {G} "
                                 f"localRank {lr} MNNVL 0")
        mask = ",".join(["ffffffff" if lr < G // 2 else "00000000", "00000000" if lr < G // 2 else "ffffffff"])
        lines.append(pre_t + f"Setting affinity for GPU {lr} to {mask}")
        if R == 0:  # the ring order, printed once by rank 0 per channel (rail-aligned rings)
            order = "".join(f"{k:>4}" for k in range(N))
            for ch in range(2):
                lines.append(pre_t + f"Channel {ch:02d}/02 :{order}")
        tree_up = -1 if node.idx == 0 else ((node.idx - 1) // 2) * G + lr
        kids = [c * G + lr for c in (2 * node.idx + 1, 2 * node.idx + 2) if c < sim.nodes]
        down = "/".join(str(k) for k in (kids + [-1, -1, -1])[:3])
        lines.append(pre_t + f"Trees [0] {down}->{R}->{tree_up} [1] {down}->{R}->{tree_up}")
        lines.append(pre_t + "P2P Chunksize set to 131072")
        if G > 1:
            peer = lr + 1 if lr + 1 < G else 0
            p2p = "P2P/CUMEM/read" if major >= (2, 19) else "P2P/IPC/read"
            dev = f"{R}[{lr}] -> {R - lr + peer}[{peer}]" if major >= (2, 19) else \
                f"{R}[{g.nccl_bus}] -> {R - lr + peer}[{node.gpus[peer].nccl_bus}]"
            lines.append(pre_t + f"Channel 00{'/0' if major >= (2, 19) else ''} : {dev} via {p2p}")
        if sim.nodes > 1:
            nxt = ((node.idx + 1) % sim.nodes) * G + lr
            prv = ((node.idx - 1) % sim.nodes) * G + lr
            for ch in (0, 1):
                if major >= (2, 19):
                    lines.append(pre_t + f"Channel {ch:02d}/0 : {prv}[{lr}] -> {R}[{lr}] [receive] via "
                                         f"NET/IB/{lr % len(node.hcas)}/GDRDMA")
                    lines.append(pre_t + f"Channel {ch:02d}/0 : {R}[{lr}] -> {nxt}[{lr}] [send] via "
                                         f"NET/IB/{lr % len(node.hcas)}/GDRDMA")
                else:
                    lines.append(pre_t + f"Channel {ch:02d} : {prv}[{g.nccl_bus}] -> {R}[{g.nccl_bus}] "
                                         f"[receive] via NET/IB/{lr % len(node.hcas)}/GDRDMA")
                    lines.append(pre_t + f"Channel {ch:02d} : {R}[{g.nccl_bus}] -> {nxt}[{g.nccl_bus}] "
                                         f"[send] via NET/IB/{lr % len(node.hcas)}/GDRDMA")
        lines.append(pre_t + "Connected all rings")
        lines.append(pre_t + "Connected all trees")
        lines.append(pre_t + "threadThresholds 8/8/64 | 256/8/64 | 512 | 512")
        lines.append(pre_t + "2 coll channels, 2 collnet channels, 0 nvls channels, 2 p2p channels, 2 p2p channels per peer")
        lines.append(pre_t + init + " - Init COMPLETE")
        if major >= (2, 22):
            lines.append(pre_t + f"Init timings: rank {R} nranks {N} total {r.uniform(0.8, 2.5):.2f} "
                                 f"(kernels 0.14, alloc 0.01, bootstrap {r.uniform(0.05, 0.9):.2f}, "
                                 f"allgathers 0.02, topo 0.31, graphs 0.01, connections 0.18, rest 0.01)")
        for k, line in enumerate(lines):
            out.append((tt + 0.001 * k, seq, lr, line))
            seq += 1
    return out


def ib_warn(sim: Sim, node: Node, lr: int, t: float, peer_ip: str, hca: str, seq: int) -> list[Rec]:
    """One NCCL IB completion error (status 12) on local rank lr of `node`, naming the peer."""
    r = rng_for(sim.seed, "ibwarn", node.idx, lr, int(t))
    ver = node.nccl
    major = tuple(int(x) for x in ver.split(".")[:2])
    pid = node.pid + lr
    tid = pid + 112 + lr
    port = r.randrange(32768, 60999)
    head = f"{node.host}:{pid}:{tid} [{lr}]"
    if major >= (2, 20):
        w = (f"{head} transport/net_ib.cc:2244 NCCL WARN NET/IB: Got completion from peer {peer_ip}<{port}> "
             f"with status=12 opcode=129 len=0 vendor err 129 (Recv) localGid ::ffff:{node.ip} "
             f"remoteGids::ffff:{peer_ip}" + (f" hca {hca}" if major >= (2, 23) else ""))
        unwind = ["transport/net.cc:1362 -> 6", "proxy.cc:726 -> 6", "proxy.cc:910 -> 6 [Progress Thread]"]
    else:
        w = (f"{head} transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer {peer_ip}<{port}> "
             f"with error 12, opcode 0, len 0, vendor err 129 (Recv) localGid ::ffff:{node.ip} "
             f"remoteGid ::ffff:{peer_ip}")
        unwind = ["transport/net.cc:1169 -> 6", "proxy.cc:679 -> 6", "proxy.cc:858 -> 6 [Proxy Thread]"]
    if major >= (2, 26):  # WARN lines carry a local timestamp from 2.26 on
        w = time.strftime("[%Y-%m-%d %H:%M:%S] ", time.gmtime(t + sim.skew(node.idx))) + w
    out = [(t, seq, lr, ""), (t, seq + 1, lr, w)]
    for k, u in enumerate(unwind):
        out.append((t + 0.0001 * (k + 1), seq + 2 + k, lr, f"{head} NCCL INFO {u}"))
    return out


def _torch_abort(sim: Sim, node: Node, lr: int, t: float, seqnum: int, op: str, numel: int,
                 enq: int) -> list[Rec]:
    R = sim.global_rank(node.idx, lr)
    skew = sim.skew(node.idx)
    pg = f"[PG 0 (default_pg) Rank {R}]"
    ran = int((t - (sim.end_fault.extra["watchdog_t"] - WATCHDOG_MS / 1000.0)) * 1000)
    work = (f"WorkNCCL(SeqNum={seqnum}, OpType={op}, NumelIn={numel}, NumelOut={numel}, "
            f"Timeout(ms)={WATCHDOG_MS})")
    caught = f"[Rank {R}] Watchdog caught collective operation timeout: {work} ran for {ran} milliseconds before timing out."

    def e(dt: float, src: int, msg: str) -> str:
        return f"[rank{R}]:[E{glog_ts(t + dt + skew)} ProcessGroupNCCL.cpp:{src}] {msg}"

    lines = [
        e(0, 607, caught),
        e(0.0003, 1664, f"{pg} Exception (either an error or timeout) detected by watchdog at work: "
                        f"{seqnum}, last enqueued NCCL work: {enq}, last completed NCCL work: {seqnum - 1}."),
        e(4.2, 1709, f"{pg} Timeout at NCCL work: {seqnum}, last enqueued NCCL work: {enq}, "
                     f"last completed NCCL work: {seqnum - 1}."),
        e(4.2001, 621, f"[Rank {R}] Some NCCL operations have failed or timed out. Due to the asynchronous "
                       "nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data."),
        e(4.2002, 627, f"[Rank {R}] To avoid data inconsistency, we are taking the entire process down."),
        e(4.2004, 1515, f"{pg} Process group watchdog thread terminated with exception: {caught}"),
        "terminate called after throwing an instance of 'c10::DistBackendError'",
        f"  what():  {pg} Process group watchdog thread terminated with exception: {caught}",
        "Exception raised from checkTimeout at ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:609 "
        "(most recent call first):",
        "frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x96 (0x7f3c2e96c446 in "
        "/usr/local/lib/python3.10/dist-packages/torch/lib/libc10.so)",
        "frame #1: c10d::ProcessGroupNCCL::WorkNCCL::checkTimeout(std::optional<std::chrono::duration<long, "
        "std::ratio<1l, 1000l> > >) + 0x282 (0x7f3bdc6a3772 in "
        "/usr/local/lib/python3.10/dist-packages/torch/lib/libtorch_cuda.so)",
        "frame #2: c10d::ProcessGroupNCCL::watchdogHandler() + 0x233 (0x7f3bdc6aa1b3 in "
        "/usr/local/lib/python3.10/dist-packages/torch/lib/libtorch_cuda.so)",
    ]
    return [(t + 0.0001 * k + (4.2 if k >= 2 else 0), k, lr, line) for k, line in enumerate(lines)]


def _traceback(sim: Sim, R: int, err: str) -> list[str]:
    p = f"[rank{R}]: "
    script = {"megatron": "pretrain_gpt.py", "deepspeed": "train.py", "torchtitan": "torchtitan/train.py"}[
        sim.style.framework]
    return [
        p + "Traceback (most recent call last):",
        p + f'  File "/workspace/{script}", line 231, in <module>',
        p + "    main()",
        p + f'  File "/workspace/{script}", line 187, in main',
        p + "    loss.backward()",
        p + '  File "/usr/local/lib/python3.10/dist-packages/torch/_tensor.py", line 581, in backward',
        p + "    torch.autograd.backward(",
        p + f"RuntimeError: CUDA error: {err}",
        p + "CUDA kernel errors might be asynchronously reported at some other API call, so the "
            "stacktrace below might be incorrect.",
        p + "For debugging consider passing CUDA_LAUNCH_BLOCKING=1",
        p + "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.",
    ]


def _torchrun_fail(sim: Sim, node: Node, t: float, lr: int, code: int, others: list[int]) -> list[Rec]:
    agent = node.pid - 40
    R = sim.global_rank(node.idx, lr)
    skew = sim.skew(node.idx)
    lines = []
    for o in others:
        lines.append(f"W{glog_ts(t + skew, ns=False)} {agent} torch/distributed/elastic/multiprocessing/api.py:897] "
                     f"Sending process {node.pid + o} closing signal SIGTERM")
    t2 = t + 1.2
    lines.append(f"E{glog_ts(t2 + skew, ns=False)} {agent} torch/distributed/elastic/multiprocessing/api.py:869] "
                 f"failed (exitcode: {code}) local_rank: {lr} (pid: {node.pid + lr}) of binary: /usr/bin/python3")
    script = {"megatron": "pretrain_gpt.py", "deepspeed": "train.py", "torchtitan": "torchtitan/train.py"}[
        sim.style.framework]
    tb = (f"Signal {-code} (SIGABRT) received by PID {node.pid + lr}" if code < 0 else
          "To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html")
    lines += [
        "Traceback (most recent call last):",
        '  File "/usr/local/bin/torchrun", line 8, in <module>',
        "    sys.exit(main())",
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
        "============================================================",
        f"{script} FAILED",
        "------------------------------------------------------------",
        "Failures:",
        "  <NO_OTHER_FAILURES>",
        "------------------------------------------------------------",
        "Root Cause (first observed failure):",
        "[0]:",
        f"  time      : {time.strftime('%Y-%m-%d_%H:%M:%S', time.gmtime(t2 + skew))}",
        f"  host      : {node.host}",
        f"  rank      : {R} (local_rank: {lr})",
        f"  exitcode  : {code} (pid: {node.pid + lr})",
        "  error_file: <N/A>",
        f"  traceback : {tb}",
        "============================================================",
    ]
    return [(t + (1.2 if k >= len(others) else 0) + 0.0001 * k, 900 + k, -1, line)
            for k, line in enumerate(lines)]


def job_end_records(sim: Sim, node: Node) -> list[Rec]:
    """What the workers and the agent print when the job dies (hang, crash, application error)."""
    ef = sim.end_fault
    if ef is None:
        return []
    r = rng_for(sim.seed, "end", node.idx)
    G = sim.gpus_per_node
    out: list[Rec] = []
    seq_step = min(sim.n_done, len(sim.step_start) - 1)
    seqnum = sim.seq_offset + seq_step * sim.colls_per_step + 1
    numel = {"megatron": 1048576 * 64, "deepspeed": 500000000, "torchtitan": 134217728}[sim.style.framework]
    op = {"megatron": "_REDUCE_SCATTER_BASE", "deepspeed": "ALLREDUCE", "torchtitan": "_ALLGATHER_BASE"}[
        sim.style.framework]
    if sim.end_kind == "app_exit":
        for lr in range(G):
            t = ef.t + r.uniform(0.1, 2.0)
            R = sim.global_rank(node.idx, lr)
            out += [(t + 0.0001 * k, 500 + k, lr, line)
                    for k, line in enumerate(_traceback(sim, R, "an illegal memory access was encountered"))]
        out += _torchrun_fail(sim, node, ef.t + 3.0, 0, 1, [])
        return out
    wd = ef.extra["watchdog_t"]
    culprit = ef.node == node.idx
    if sim.end_kind == "crash" and culprit:
        R = sim.global_rank(node.idx, ef.gpu)
        err = ("uncorrectable ECC error encountered" if ef.kind == "ecc_dbe"
               else "uncorrectable NVLink error detected during the execution")
        t = ef.t + r.uniform(0.05, 0.6)
        out += [(t + 0.0001 * k, 500 + k, ef.gpu, line) for k, line in enumerate(_traceback(sim, R, err))]
        out += _torchrun_fail(sim, node, ef.t + 1.0, ef.gpu, 1, [g for g in range(G) if g != ef.gpu])
        return out
    for lr in range(G):
        if culprit and sim.end_kind == "hang" and lr == ef.gpu:
            continue  # the rank on the lost GPU is stuck in a CUDA call and prints nothing
        out += _torch_abort(sim, node, lr, wd + r.uniform(0.0, 1.4), seqnum, op, numel,
                            seqnum + r.choice([1, 2, 2, 3]))
    first = 0 if not (culprit and ef.gpu == 0) else 1
    out += _torchrun_fail(sim, node, wd + 5.5 + r.uniform(0, 0.5), first, -6,
                          [g for g in range(G) if g != first])
    return out


def peer_warns(sim: Sim, node: Node, start_seq: int) -> list[Rec]:
    """NCCL IB errors on this node caused by a fault elsewhere (names the faulty node's IP)."""
    out: list[Rec] = []
    seq = start_seq
    if sim.nodes < 2:
        return out
    neighbours = lambda n: {(n - 1) % sim.nodes, (n + 1) % sim.nodes} - {n}  # noqa: E731
    for f in sim.faults:
        if f.kind == "ib_flap" and f.node == node.idx:
            # the flapping HCA's own ranks lose their QPs to the next node on that rail too
            k = f.extra["hca"] % len(node.hcas)
            other = sim.node((node.idx + 1) % sim.nodes)
            r = rng_for(sim.seed, "selfwarn", node.idx)
            for down, _init, _act in f.extra["flap_times"]:
                if down >= sim.job_end:
                    break
                out += ib_warn(sim, node, k, down + r.uniform(4, 9), other.ip, node.hcas[k].name, seq)
                seq += 10
            continue
        if f.node is None or node.idx not in neighbours(f.node):
            continue
        peer = sim.node(f.node)
        r = rng_for(sim.seed, "peerwarn", node.idx, f.kind)
        if f.kind in ("gpu_lost", "ecc_dbe", "nvlink") and sim.end_fault is f:
            lr = f.gpu
            t = f.t + (r.uniform(18, 40) if f.kind == "gpu_lost" else r.uniform(3, 12))
            hca = node.hcas[lr % len(node.hcas)].name
            out += ib_warn(sim, node, lr, t, peer.ip, hca, seq)
            seq += 10
        elif f.kind == "ib_flap":
            k = f.extra["hca"] % len(node.hcas)
            for down, _init, _act in f.extra["flap_times"]:
                if down >= sim.job_end:
                    break
                out += ib_warn(sim, node, k, down + r.uniform(4, 9), peer.ip, node.hcas[k].name, seq)
                seq += 10
    return out


def worker_log(sim: Sim, node: Node, step_recs: list[Rec]) -> Iterator[str]:
    recs = nccl_init(sim, node) + step_recs + peer_warns(sim, node, 10**6) + job_end_records(sim, node)
    recs = [x for x in recs if x[0] <= sim.window_end]
    recs.sort(key=lambda x: (x[0], x[1]))
    tee = sim.style.launcher_prefix == "tee"
    for _t, _s, lr, text in recs:
        if tee and text.startswith("[rank0]:[titan]"):
            text = text[8:]  # that [rank0]: is the tee prefix itself
        yield prefix(sim, node, lr) + text if text or sim.style.launcher_prefix != "none" else text


# -- InfiniBand ---------------------------------------------------------------------------------

def ibstat(sim: Sim, node: Node) -> str:
    plat = sim.style.platform
    out = []
    for h in node.hcas:
        out += [
            f"CA '{h.name}'",
            f"\tCA type: {plat['hca_type']}",
            "\tNumber of ports: 1",
            f"\tFirmware version: {h.fw}",
            "\tHardware version: 0",
            f"\tNode GUID: {h.guid}",
            f"\tSystem image GUID: {h.guid}",
            "\tPort 1:",
            "\t\tState: Active",
            "\t\tPhysical state: LinkUp",
            f"\t\tRate: {plat['hca_rate']}",
            f"\t\tBase lid: {h.lid}",
            "\t\tLMC: 0",
            "\t\tSM lid: 1",
            "\t\tCapability mask: 0xa751e848",
            f"\t\tPort GUID: {h.guid}",
            "\t\tLink layer: InfiniBand",
        ]
    return "\n".join(out) + "\n"


PERF_PLAIN = ["SymbolErrorCounter", "LinkErrorRecoveryCounter", "LinkDownedCounter", "PortRcvErrors",
              "PortRcvRemotePhysicalErrors", "PortRcvSwitchRelayErrors", "PortXmitDiscards",
              "PortXmitConstraintErrors", "PortRcvConstraintErrors", "CounterSelect2",
              "LocalLinkIntegrityErrors", "ExcessiveBufferOverrunErrors", "QP1Dropped", "VL15Dropped",
              "PortXmitData", "PortRcvData", "PortXmitPkts", "PortRcvPkts", "PortXmitWait"]
PERF_EXT = ["PortXmitData", "PortRcvData", "PortXmitPkts", "PortRcvPkts", "PortUnicastXmitPkts",
            "PortUnicastRcvPkts", "PortMulticastXmitPkts", "PortMulticastRcvPkts", "SymbolErrorCounter",
            "LinkErrorRecoveryCounter", "LinkDownedCounter", "PortRcvErrors", "PortRcvRemotePhysicalErrors",
            "PortRcvSwitchRelayErrors", "PortXmitDiscards", "PortXmitConstraintErrors",
            "PortRcvConstraintErrors", "LocalLinkIntegrityErrors", "ExcessiveBufferOverrunErrors",
            "VL15Dropped", "PortXmitWait", "QP1Dropped"]


def perfquery(sim: Sim, node: Node, t: float) -> str:
    ext = sim.style.perfquery_ext
    out = []
    for h in node.hcas:
        r = rng_for(sim.seed, "perf", node.idx, h.index)
        base_sym = r.choice([0, 0, 0, 0, 1, 3, 12])
        base_rcv = r.choice([0, 0, 0, 2, 14])
        up = node.boot
        words = lambda rate: int(max(0.0, min(t, sim.job_end) - up) * rate)  # noqa: E731
        active = max(0.0, min(t, sim.job_end) - sim.train_start)
        c = {
            "SymbolErrorCounter": base_sym, "LinkErrorRecoveryCounter": 0, "LinkDownedCounter": 0,
            "PortRcvErrors": base_rcv, "PortRcvRemotePhysicalErrors": 0, "PortRcvSwitchRelayErrors": 0,
            "PortXmitDiscards": r.choice([0, 0, 3]), "PortXmitConstraintErrors": 0,
            "PortRcvConstraintErrors": 0, "LocalLinkIntegrityErrors": 0,
            "ExcessiveBufferOverrunErrors": 0, "QP1Dropped": 0, "VL15Dropped": 0,
            "PortXmitWait": int(active * r.uniform(2e4, 6e4)) + r.randrange(10**6),
            "PortXmitData": words(1e3) + int(active * 1.2e9), "PortRcvData": words(1e3) + int(active * 1.2e9),
            "PortXmitPkts": words(5.0) + int(active * 3.1e5), "PortRcvPkts": words(5.0) + int(active * 3.1e5),
        }
        c["PortUnicastXmitPkts"], c["PortUnicastRcvPkts"] = c["PortXmitPkts"], c["PortRcvPkts"]
        c["PortMulticastXmitPkts"] = c["PortMulticastRcvPkts"] = r.randrange(50, 400)
        for f in sim.faults:
            if f.kind == "ib_flap" and f.node == node.idx and f.extra["hca"] % len(node.hcas) == h.index:
                n = sum(1 for d, _i, _a in f.extra["flap_times"] if d <= t)
                c["SymbolErrorCounter"] += n * 9000 + (r.randrange(1000, 30000) if n else 0)
                c["LinkDownedCounter"] += n
                c["LinkErrorRecoveryCounter"] += 2 * n
                c["PortRcvErrors"] += n * 41
        if not ext:
            for k in ("PortXmitData", "PortRcvData", "PortXmitPkts", "PortRcvPkts"):
                c[k] = min(c[k], 4294967295)
            c["SymbolErrorCounter"] = min(c["SymbolErrorCounter"], 65535)
            c["LinkDownedCounter"] = min(c["LinkDownedCounter"], 255)
        out.append(f"# Port {'extended ' if ext else ''}counters: Lid {h.lid} port 1 (CapMask: 0x5A00)")
        out.append("PortSelect:".ljust(33, ".") + "1")
        out.append("CounterSelect:".ljust(33, ".") + "0x0000" if ext else "CounterSelect:".ljust(33, ".") + "0x1b01")
        for k in PERF_EXT if ext else PERF_PLAIN:
            v = "0x00" if k == "CounterSelect2" else c[k]
            out.append(f"{k}:".ljust(33, ".") + str(v))
    return "\n".join(out) + "\n"


# -- nccl-tests ---------------------------------------------------------------------------------

NCCLTEST_HEAD = (
    "#\n"
    "#                                                              out-of-place                       in-place          \n"
    "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n"
    "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       \n"
)


def _t(v: float) -> str:
    return f"{v:7.0f}" if v >= 10000 else f"{v:7.1f}" if v >= 100 else f"{v:7.2f}"


def nccl_test(sim: Sim, pair: list[Node], t: float) -> str:
    plat = sim.style.platform
    G = sim.gpus_per_node
    n = len(pair) * G
    r = rng_for(sim.seed, "nccltest", *[p.idx for p in pair])
    peak = plat["nccltest_busbw"] if len(pair) > 1 else plat["nccltest_busbw"] * 2.4
    for node in pair:
        for f in sim.faults:
            if f.node == node.idx and f.t <= max(t, sim.job_start):
                if f.kind in ("slow_node", "drift_nic_fw", "drift_nccl"):
                    peak *= {"slow_node": 0.9, "drift_nic_fw": 0.74, "drift_nccl": 0.8}[f.kind]
                if f.kind == "pcie_degraded":
                    peak *= 0.62
    lines = [
        "# nThread 1 nGpus 1 minBytes 8388608 maxBytes 8589934592 step: 2(factor) warmup iters: 5 iters: 20 "
        "agg iters: 1 validation: 1 graph: 0",
        "#",
        "# Using devices",
    ]
    k = 0
    for node in pair:
        for g in node.gpus:
            lines.append(f"#  Rank {k:2d} Group  0 Pid {node.pid - 9000 + g.index:6d} on {node.host:>10} device "
                         f"{g.index:2d} [0x{g.bus:02x}] {plat['name']}")
            k += 1
    body = "\n".join(lines) + "\n" + NCCLTEST_HEAD
    size = 8388608
    total = 0.0
    rows = 0
    factor = 2.0 * (n - 1) / n
    while size <= 8589934592:
        count = size // 4
        row = f"{size:12d}  {count:12d}  {'float':>8}  {'sum':>6}  {-1:6d}"
        for _ in range(2):
            busbw = peak * size / (size + 24e6) * r.uniform(0.985, 1.01)
            algbw = busbw / factor
            tus = size / (algbw * 1e3)
            row += f"  {_t(tus)}  {algbw:6.2f}  {busbw:6.2f}  {0:5d}"
            total += busbw
        rows += 2
        body += row + "\n"
        size *= 2
    body += "# Out of bounds values : 0 OK\n"
    body += f"# Avg bus bandwidth    : {total / rows:.5g} \n#\n"
    return body
