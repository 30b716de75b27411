"""The simulated fleet: platforms, hosts, GPUs, HCAs, software versions and bundle layout.

Everything is drawn from `random.Random` streams keyed by (seed, purpose[, node]) so a node can be
rebuilt on its own (in a worker process) and come out identical.
"""

from __future__ import annotations

import random
import uuid as _uuid
from dataclasses import dataclass, field

GPU_PLATFORMS: dict[str, dict] = {
    "h100": {
        "name": "NVIDIA H100 80GB HBM3",
        "short": "h100",
        "arch": "Hopper",
        "buses": [0x18, 0x2A, 0x3A, 0x5D, 0x9A, 0xAB, 0xBA, 0xDB],
        "module_ids": [2, 4, 3, 1, 7, 5, 8, 6],
        "device_id": "0x233010DE",
        "subsys": "0x16C110DE",
        "pcie_gen": 5,
        "mem_total": 81559,
        "mem_reserved": 551,
        "tdp": 700.0,
        "min_power": 200.0,
        "idle_power": 70.0,
        "sm_max": 1980,
        "sm_idle": 345,
        "mem_clock": 2619,
        "video_clock": 1545,
        "vbios": "96.00.99.00.01",
        "vbios_alt": "96.00.74.00.01",
        "board_part": "692-2G520-0200-000",
        "gpu_part": "2330-885-A1",
        "inforom": "G520.0200.00.05",
        "ecc_obj": "7.16",
        "drivers": ["535.183.01", "550.127.05", "550.90.07"],
        "hca_type": "MT4129",
        "hca_fw": "28.39.1002",
        "hca_fw_alt": "28.36.1010",
        "hca_rate": 400,
        "hca_buses": [0x1A, 0x3C, 0x4D, 0x5E, 0x9C, 0xBC, 0xCC, 0xDC],
        "hca_pcie": ("504.112 Gb/s", "32.0 GT/s", 16),
        "margins": True,
        "nccltest_busbw": 188.0,
    },
    "a100": {
        "name": "NVIDIA A100-SXM4-80GB",
        "short": "a100",
        "arch": "Ampere",
        "buses": [0x07, 0x0F, 0x47, 0x4E, 0x87, 0x90, 0xB7, 0xBD],
        "module_ids": [3, 1, 4, 2, 7, 5, 8, 6],
        "device_id": "0x20B210DE",
        "subsys": "0x147F10DE",
        "pcie_gen": 4,
        "mem_total": 81920,
        "mem_reserved": 608,
        "tdp": 400.0,
        "min_power": 100.0,
        "idle_power": 60.0,
        "sm_max": 1410,
        "sm_idle": 210,
        "mem_clock": 1593,
        "video_clock": 1290,
        "vbios": "92.00.36.00.02",
        "vbios_alt": "92.00.19.00.10",
        "board_part": "692-2G506-0210-002",
        "gpu_part": "20B2-895-A1",
        "inforom": "G506.0210.00.04",
        "ecc_obj": "6.16",
        "drivers": ["535.161.08", "525.147.05"],
        "hca_type": "MT4123",
        "hca_fw": "20.37.1014",
        "hca_fw_alt": "20.31.1014",
        "hca_rate": 200,
        "hca_buses": [0x0C, 0x12, 0x4B, 0x54, 0x8D, 0x94, 0xBA, 0xCC],
        "hca_pcie": ("252.048 Gb/s", "16.0 GT/s", 16),
        "margins": False,
        "nccltest_busbw": 94.0,
    },
}

CUDA_OF_DRIVER = {"525": ("12.0", 12000), "535": ("12.2", 12020), "550": ("12.4", 12040)}
NCCL_VERSIONS = [("2.18.5", "12.2"), ("2.21.5", "12.4"), ("2.23.4", "12.4")]
# The node that drifted loads another NCCL; only >= 2.23 prints "NCCL version" on every rank (older
# releases print it once, from rank 0), so the drifted library is one that says so on each rank.
NCCL_DRIFT = {"2.18.5": "2.23.4", "2.21.5": "2.23.4", "2.23.4": "2.26.2", "2.26.2": "2.23.4"}
KERNEL_STYLES = ("dmesg_T", "dmesg_raw", "dmesg_iso", "dmesg_decode_iso", "journal_iso", "kern_log")
KERNEL_VERSIONS = ["5.15.0-119-generic", "6.8.0-45-generic", "5.14.0-427.22.1.el9_4.x86_64"]


def rng_for(seed: int, *key: object) -> random.Random:
    """A deterministic stream for one purpose (string seeds are hashed with SHA-512 by CPython)."""
    return random.Random("|".join([str(seed), *map(str, key)]))


def fake_uuid(r: random.Random) -> str:
    return str(_uuid.UUID(int=r.getrandbits(128), version=4))


@dataclass
class Gpu:
    index: int
    bus: int
    serial: str
    uuid: str
    module_id: int

    @property
    def smi_bus(self) -> str:  # nvidia-smi / DCGM form
        return f"00000000:{self.bus:02X}:00.0"

    @property
    def xid_bus(self) -> str:  # NVRM Xid form (no function)
        return f"0000:{self.bus:02x}:00"

    @property
    def pci(self) -> str:  # lspci/AER form
        return f"0000:{self.bus:02x}:00.0"

    @property
    def nccl_bus(self) -> str:  # NCCL busId: hex digits of dddd:bb:dd.f without leading zeros
        return f"{self.bus:x}000"


@dataclass
class Hca:
    index: int
    name: str
    bus: int
    guid: str
    lid: int
    fw: str


@dataclass
class Node:
    idx: int
    host: str
    ip: str
    gpus: list[Gpu]
    hcas: list[Hca]
    driver: str
    vbios: str
    nccl: str
    kernel: str
    kernel_style: str
    smi_xml: bool
    boot: float
    pid: int
    paths: dict[str, str] = field(default_factory=dict)

    @property
    def cuda(self) -> tuple[str, int]:
        return CUDA_OF_DRIVER[self.driver.split(".")[0]]


@dataclass
class FleetStyle:
    """Per-job choices shared by every node (one collection script, one image)."""

    platform: dict
    host_scheme: int
    layout: int
    kernel_style: str
    alt_kernel_style: str
    telemetry: str  # "csv" or "dmon"
    csv_units: bool
    telemetry_period: int
    driver: str
    nccl: tuple[str, str]
    net_prefix: tuple[int, int]
    framework: str  # megatron | deepspeed | torchtitan
    launcher_prefix: str  # none | tee | srun
    perfquery_ext: bool
    job_id: int


def fleet_style(seed: int, nodes: int) -> FleetStyle:
    r = rng_for(seed, "style")
    plat = GPU_PLATFORMS[r.choice(["h100", "h100", "a100"])]
    ks = r.choice(KERNEL_STYLES)
    return FleetStyle(
        platform=plat,
        host_scheme=r.randrange(5),
        layout=r.randrange(3),
        kernel_style=ks,
        alt_kernel_style=r.choice([s for s in KERNEL_STYLES if s != ks]),
        telemetry="dmon" if r.random() < 0.25 else "csv",
        csv_units=r.random() < 0.6,
        telemetry_period=r.choice([30, 30, 45, 60]),
        driver=r.choice(plat["drivers"][:2]),
        nccl=r.choice(NCCL_VERSIONS),
        net_prefix=(r.randrange(0, 250), r.randrange(0, 200)),
        framework=r.choice(["megatron", "deepspeed", "torchtitan"]),
        launcher_prefix=r.choice(["none", "tee", "srun"]),
        perfquery_ext=r.random() < 0.5,
        job_id=r.randrange(100000, 9999999),
    )


def host_name(style: FleetStyle, i: int, nodes: int) -> str:
    w = max(2, len(str(nodes)))
    s = style.platform["short"]
    return [
        f"node-{i + 1:03d}",
        f"gpu-{s}-{i + 1:0{w}d}",
        f"hgx-{s}-{i + 1:04d}",
        f"r{i // 16 + 1:02d}n{i % 16 + 1:02d}",
        f"{s}-worker-{i}",
    ][style.host_scheme]


NODE_FILES = (
    "kernel",
    "smi_start",
    "smi_end",
    "telemetry",
    "worker",
    "ibstat_start",
    "ibstat_end",
    "perf_start",
    "perf_end",
    "nvlink_end",
)


def node_paths(style: FleetStyle, node: Node) -> dict[str, str]:
    h = node.host
    smi_ext = "xml" if node.smi_xml else "txt"
    kern = {
        "dmesg_T": "dmesg-T.log",
        "dmesg_raw": "dmesg.log",
        "dmesg_iso": "dmesg.log",
        "dmesg_decode_iso": "dmesg.log",
        "journal_iso": "journalctl-k.log",
        "kern_log": "kern.log",
    }[node.kernel_style]
    tel = "nvidia-smi-dmon.log" if style.telemetry == "dmon" else "nvidia-smi-query.csv"
    if style.layout == 0:
        base = f"{h}/"
        return {
            "kernel": base + kern,
            "smi_start": base + f"nvidia-smi-q.start.{smi_ext}",
            "smi_end": base + f"nvidia-smi-q.end.{smi_ext}",
            "telemetry": base + tel,
            "worker": base + "worker.log",
            "ranklog": base + "train_rank{rank}.log",
            "ibstat_start": base + "ibstat.start.txt",
            "ibstat_end": base + "ibstat.end.txt",
            "perf_start": base + "perfquery.start.txt",
            "perf_end": base + "perfquery.end.txt",
            "nvlink_end": base + "nvidia-smi-nvlink-e.txt",
        }
    if style.layout == 1:
        base = f"{h}/"
        kpath = "var/log/kern.log" if node.kernel_style == "kern_log" else f"var/log/{kern}"
        return {
            "kernel": base + kpath,
            "smi_start": base + f"nvidia/smi_before.{smi_ext}",
            "smi_end": base + f"nvidia/smi_after.{smi_ext}",
            "telemetry": base + f"nvidia/{tel}",
            "worker": base + f"job/rank_logs/{h}.out",
            "ranklog": base + "job/rank_logs/" + h + ".rank{rank}.log",
            "ibstat_start": base + "ib/ibstat_before.txt",
            "ibstat_end": base + "ib/ibstat_after.txt",
            "perf_start": base + "ib/perfquery_before.txt",
            "perf_end": base + "ib/perfquery_after.txt",
            "nvlink_end": base + "nvidia/nvlink_errors.txt",
        }
    base = "logs/"
    return {
        "kernel": base + f"{h}_{kern}",
        "smi_start": base + f"{h}_nvidia-smi.start.{smi_ext}",
        "smi_end": base + f"{h}_nvidia-smi.{smi_ext}",
        "telemetry": base + f"{h}_{tel}",
        "worker": base + f"{h}_train.log",
        "ranklog": base + h + "_rank{rank}.log",
        "ibstat_start": base + f"{h}_ibstat.0.txt",
        "ibstat_end": base + f"{h}_ibstat.1.txt",
        "perf_start": base + f"{h}_perfquery.0.txt",
        "perf_end": base + f"{h}_perfquery.1.txt",
        "nvlink_end": base + f"{h}_nvlink-e.txt",
    }


def job_paths(style: FleetStyle) -> dict[str, str]:
    if style.layout == 0:
        return {"train": "job/train.log", "nccltests": "job/nccl-tests/"}
    if style.layout == 1:
        return {"train": f"slurm-{style.job_id}.out", "nccltests": "preflight/"}
    return {"train": "logs/rank0.log", "nccltests": "logs/nccl-tests/"}


def build_node(seed: int, style: FleetStyle, i: int, nodes: int, gpus_per_node: int, job_start: float) -> Node:
    r = rng_for(seed, "node", i)
    plat = style.platform
    buses = list(plat["buses"])
    while len(buses) < gpus_per_node:  # more than 8 GPUs: synthesise further buses
        buses.append(0xE0 + len(buses))
    gpus = [
        Gpu(
            index=g,
            bus=buses[g],
            serial=str(1650000000000 + r.randrange(10**9)),
            uuid="GPU-" + fake_uuid(r),
            module_id=plat["module_ids"][g] if g < len(plat["module_ids"]) else g + 1,
        )
        for g in range(gpus_per_node)
    ]
    n_hca = min(8, max(1, gpus_per_node))
    hbuses = plat["hca_buses"]
    hcas = []
    for k in range(n_hca):
        g = f"0x{r.getrandbits(64) & 0x0000FFFFFFFFFFFF | 0x946DAE0000000000:016x}"
        hcas.append(Hca(index=k, name=f"mlx5_{k}", bus=hbuses[k % len(hbuses)], guid=g,
                        lid=(i * n_hca + k) + 11, fw=plat["hca_fw"]))
    a, b = style.net_prefix
    host = host_name(style, i, nodes)
    ip_n = i + 11
    node = Node(
        idx=i,
        host=host,
        ip=f"10.{a}.{b + ip_n // 250}.{ip_n % 250 + 1}",
        gpus=gpus,
        hcas=hcas,
        driver=style.driver,
        vbios=plat["vbios"],
        nccl=style.nccl[0],
        kernel=KERNEL_VERSIONS[0 if plat["short"] == "h100" else 2],
        kernel_style=style.alt_kernel_style if r.random() < 0.15 else style.kernel_style,
        smi_xml=r.random() < 0.2,
        boot=job_start - r.uniform(2.0, 25.0) * 86400.0,
        pid=r.randrange(20000, 3900000),
    )
    node.paths = node_paths(style, node)
    return node
