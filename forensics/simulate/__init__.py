"""`forensics simulate`: realistic incident bundles with injected faults and their ground truth.

The simulator models one synchronous data-parallel training job (every step lasts as long as the
slowest rank) on N nodes × G GPUs and writes, file by file, what a collection script would gather
after the incident: kernel logs, nvidia-smi snapshots and telemetry loops, NCCL/PyTorch output of
every node, the framework's step log, InfiniBand state and counters, nccl-tests run before the job.
Faults change what they change in reality (step time, the culprit GPU's clocks/temperature/
counters, kernel log, NCCL warnings on peers, watchdog timeouts after a hang) and `truth.json`
records where and when they were injected (and, as `"observable": false` with the reason, a fault that
left no trace: one seen only under load, begun after the job was gone).

Public API (used by `forensics/cli.py`):

    FAULT_KINDS, FaultSpec, parse_fault("gpu_lost@3:5+0.6"), simulate(out_dir, nodes=..., ...)

Fault spec grammar: ``KIND[@NODE[:GPU]][+START]``

* ``NODE``: node index (0-based) or a host name of the simulated fleet; omitted = chosen by seed.
* ``GPU``: GPU index on that node (for ``ib_flap``: the HCA/rail index); omitted = chosen by seed.
* ``START``: a bare number in [0, 1] is a fraction of the run (``+0.6``); a number with a unit
  ``h``, ``m`` or ``s`` is a time after job start (``+2.5h``, ``+40m``). Omitted = chosen by seed
  between 30 % and 70 % of the run. Configuration drift (``drift_*``) exists from the start
  whatever START says (the node was installed that way); ``START`` is ignored for it.

Bundle content, per node (paths vary with the seed: ``node-017/dmesg.log``,
``gpu-a100-03/var/log/kern.log``, ``logs/hgx-h100-0012_nvidia-smi.txt`` ...):

* kernel log since boot in one of six styles (``dmesg`` raw with the ``rtc_cmos ... setting system
  clock`` boot anchor, ``dmesg -T``, ``dmesg --time-format iso`` with or without ``--decode``,
  ``journalctl -k -o short-iso``, syslog ``kern.log`` with printk times); most nodes share the job's
  style, some use a second one (mixed OS images);
* ``nvidia-smi -q`` snapshots before the job and at collection (``-q -x`` XML on ~20 % of nodes;
  535+/550 layout, ``Clocks Throttle Reasons`` on 525), ``nvidia-smi nvlink -e`` at collection;
* a telemetry loop every 30–60 s per GPU: ``--query-gpu ... --format=csv[,nounits] -l N`` or
  ``dmon -o DT`` (one choice per job);
* the worker log of the node's torchrun (NCCL INFO/WARN, PyTorch watchdog and tracebacks, torchrun
  failures), with no launcher prefix, ``--tee`` ``[defaultN]:`` or ``srun -l`` prefixes;
* for DeepSpeed and torchtitan jobs, the framework log of the node's first rank (per-rank timing:
  DeepSpeed's ``fwd``/``bwd_inner``/``bwd_allreduce`` breakdown shows the slow node computing while
  the others wait);
* ``ibstat`` and ``perfquery`` (plain or ``-x``) at job start and at collection.

Job level: the step log (Megatron last rank with ``(min, max) time across ranks`` timers and the
straggler detector, DeepSpeed rank 0, or torchtitan ``[rank0]:``; one framework per job), and
``all_reduce_perf`` results per node pair run before the job.

Volume: one step-log line every ``log_interval`` steps (1, 5 or 10; steps take 1.5–6 s), telemetry
every 30–60 s: about 4 MB per node-day, i.e. ~4 GB for 1,000 nodes × 8 GPUs × 24 h. Nodes are
written one at a time (in a process pool when there are many), streaming line by line; nothing is
held in memory beyond one node's small files. File mtimes are set to the collection time.

Determinism: everything derives from ``seed`` through ``random.Random`` streams keyed by purpose
and node; no wall clock is read. The same arguments give the same bytes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from forensics.errors import UsageError

FAULT_KINDS: tuple[str, ...] = (
    "none",
    "gpu_lost",
    "ecc_dbe",
    "ecc_sbe_storm",
    "nvlink",
    "thermal",
    "power_brake",
    "pcie_degraded",
    "ib_flap",
    "drift_driver",
    "drift_vbios",
    "drift_nic_fw",
    "drift_nccl",
    "slow_node",
    "app_bug",
)

CATEGORY: dict[str, str] = {
    "gpu_lost": "gpu_hardware",
    "ecc_dbe": "gpu_memory",
    "ecc_sbe_storm": "gpu_memory",
    "nvlink": "nvlink",
    "thermal": "thermal_power",
    "power_brake": "thermal_power",
    "pcie_degraded": "pcie",
    "ib_flap": "network",
    "drift_driver": "config_drift",
    "drift_vbios": "config_drift",
    "drift_nic_fw": "config_drift",
    "drift_nccl": "config_drift",
    "slow_node": "straggler",
    "app_bug": "software",
}


@dataclass(frozen=True)
class FaultSpec:
    """One fault to inject.

    kind: one of FAULT_KINDS. node: index (int) or host name (str), None = chosen by seed.
    gpu: GPU index on the node (HCA index for ib_flap), None = chosen by seed.
    start: fraction of the run when 0 <= start <= 1 and `start_unit` is None; else seconds after
    the job start (parse_fault converts ``h``/``m``/``s`` to seconds and sets start_unit="s").
    """

    kind: str
    node: int | str | None = None
    gpu: int | None = None
    start: float | None = None
    start_unit: str | None = None


_SPEC = re.compile(
    r"^(?P<kind>[a-z0-9_]+)"
    r"(?:@(?P<node>[A-Za-z0-9][\w.-]*?)(?::(?P<gpu>\d+))?)?"
    r"(?:\+(?P<start>\d+(?:\.\d*)?|\.\d+)(?P<unit>[hms])?)?$"
)


def parse_fault(spec: str) -> FaultSpec:
    """Parse ``KIND[@NODE[:GPU]][+START]`` (see the module docstring); raise UsageError if bad."""
    text = spec.strip()
    m = _SPEC.match(text)
    kind = (m.group("kind") if m else text.split("@")[0].split("+")[0]).strip()
    if kind not in FAULT_KINDS:
        raise UsageError(f"unknown fault kind {kind!r}; known: {', '.join(FAULT_KINDS)}")
    if m is None:
        raise UsageError(
            f"bad fault spec {spec!r}; expected KIND[@NODE[:GPU]][+START], e.g. gpu_lost@3:5+0.6"
        )
    node: int | str | None = m.group("node")
    if node is not None and node.isdigit():
        node = int(node)
    gpu = int(m.group("gpu")) if m.group("gpu") is not None else None
    start: float | None = None
    unit = m.group("unit")
    if m.group("start") is not None:
        start = float(m.group("start"))
        if unit is None:
            if start > 1.0:
                raise UsageError(
                    f"bad fault start in {spec!r}: a bare number is a fraction of the run (0..1); "
                    "use a unit for times, e.g. +2.5h, +40m, +90s"
                )
        else:
            start = start * {"h": 3600.0, "m": 60.0, "s": 1.0}[unit]
            unit = "s"
    return FaultSpec(kind=kind, node=node, gpu=gpu, start=start, start_unit=unit)


from forensics.simulate.job import simulate  # noqa: E402  (API re-export after the types it uses)

__all__ = ["CATEGORY", "FAULT_KINDS", "FaultSpec", "parse_fault", "simulate"]
