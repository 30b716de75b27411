"""Write one node's files, and the job-level files, streaming (one file open at a time)."""

from __future__ import annotations

import gzip
from collections.abc import Iterable
from pathlib import Path

from forensics.simulate import kernel, net, smi, steps
from forensics.simulate.fleet import rng_for
from forensics.simulate.job import Sim
from forensics.simulate.state import NodeState

CHUNK = 4096


def _write_lines(path: Path, lines: Iterable[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    buf: list[str] = []
    with path.open("w", encoding="utf-8", newline="\n") as fh:
        for line in lines:
            buf.append(line)
            if len(buf) >= CHUNK:
                fh.write("\n".join(buf) + "\n")
                buf.clear()
        if buf:
            fh.write("\n".join(buf) + "\n")


def _write_text(path: Path, text: str, gz: bool = False) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if gz:  # deterministic gzip: no name, no mtime
        with (path.with_name(path.name + ".gz")).open("wb") as raw, \
                gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as fh:
            fh.write(text.encode("utf-8"))
        return
    with path.open("w", encoding="utf-8", newline="\n") as fh:
        fh.write(text)


def telemetry(sim: Sim, node, ns: NodeState) -> Iterable[str]:
    r = rng_for(sim.seed, "tel", node.idx)
    period = sim.style.telemetry_period
    t = sim.job_start - period * r.randint(2, 6) + r.uniform(0, 1)
    end = sim.window_end - 10
    old = node.driver.startswith("525")
    if sim.style.telemetry == "dmon":
        header_every = 20  # dmon repeats its header like the real tool
        k = 0
        while t < end:
            if k % header_every == 0:
                yield from smi.DMON_HEAD
            yield from smi.dmon_rows(sim, node, ns, t)
            t += period
            k += 1
    else:
        yield smi.csv_header(old)
        while t < end:
            yield from smi.csv_rows(sim, node, ns, t, sim.style.csv_units)
            t += period + r.uniform(-0.004, 0.012)


def write_node(sim: Sim, out: Path, i: int, gzip_snapshots: bool = False) -> None:
    node = sim.node(i)
    p = node.paths
    ns = NodeState(sim, i)
    r = rng_for(sim.seed, "snap", i)
    t_start = sim.job_start - r.uniform(60, 180)
    t_end = sim.window_end - r.uniform(5, 60)
    _write_lines(out / p["kernel"], kernel.format_kernel(node, kernel.node_events(sim, node), sim.skew(i)))
    if node.smi_xml:
        _write_text(out / p["smi_start"], smi.q_xml(sim, node, ns, t_start), gzip_snapshots)
        _write_text(out / p["smi_end"], smi.q_xml(sim, node, ns, t_end), gzip_snapshots)
    else:
        _write_text(out / p["smi_start"], smi.q_text(sim, node, ns, t_start), gzip_snapshots)
        _write_text(out / p["smi_end"], smi.q_text(sim, node, ns, t_end), gzip_snapshots)
    _write_lines(out / p["telemetry"], telemetry(sim, node, NodeState(sim, i)))
    recs = steps.node_step_records(sim, i)
    _write_lines(out / p["worker"], net.worker_log(sim, node, recs if sim.mixed_logs else []))
    if recs and not sim.mixed_logs:  # the framework's own log file of the node's first rank
        path = p["ranklog"].format(rank=sim.global_rank(i, 0))
        _write_lines(out / path, (text for _t, _s, _lr, text in recs))
    _write_text(out / p["ibstat_start"], net.ibstat(sim, node))
    _write_text(out / p["ibstat_end"], net.ibstat(sim, node))
    _write_text(out / p["perf_start"], net.perfquery(sim, node, t_start))
    _write_text(out / p["perf_end"], net.perfquery(sim, node, t_end))
    _write_text(out / p["nvlink_end"], smi.nvlink_errors(sim, node))


def write_job(sim: Sim, out: Path) -> None:
    from forensics.simulate.fleet import job_paths

    jp = job_paths(sim.style)
    _write_lines(out / jp["train"], steps.train_log(sim))
    # nccl-tests all_reduce_perf across node pairs, run before the job.
    n = sim.nodes
    t0 = sim.job_start - 1500
    pairs = [[i, i + 1] for i in range(0, n - 1, 2)]
    if n % 2 == 1:
        pairs.append([n - 1, 0] if n > 1 else [0])
    for k, pair in enumerate(pairs):
        nodes = [sim.node(i) for i in pair]
        name = "_".join(x.host for x in nodes)
        _write_text(out / f"{jp['nccltests']}all_reduce_perf.{name}.log",
                    net.nccl_test(sim, nodes, t0 + 30 * k))
