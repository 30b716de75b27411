"""Kernel log of one node since boot, in one of the real timestamp styles (FORMATS.md §1.3, §2)."""

from __future__ import annotations

import time
from collections.abc import Iterator

from forensics.simulate.fleet import Node, rng_for
from forensics.simulate.job import Sim

# (t epoch, level, message); level: info|warn|err|notice
Event = tuple[float, str, str]

DRIVER_BUILD = {
    "535.183.01": "Sun May 12 19:39:15 UTC 2024",
    "535.161.08": "Tue Mar  5 22:42:15 UTC 2024",
    "535.129.03": "Thu Oct 19 18:56:32 UTC 2023",
    "525.147.05": "Wed Oct 25 20:27:35 UTC 2023",
    "550.127.05": "Tue Oct  8 03:22:07 UTC 2024",
    "550.90.07": "Fri May 31 09:35:42 UTC 2024",
}


def _xid(g, code: int, rest: str, pid: int | None = None, name: str | None = None) -> str:
    ctx = f"pid={pid}, name={name}" if pid is not None else "pid='<unknown>', name=<unknown>"
    return f"NVRM: Xid (PCI:{g.xid_bus}): {code}, {ctx}, {rest}"


def _identity(node: Node, g) -> list[str]:
    out = [f"NVRM: GPU at PCI:{g.xid_bus}: {g.uuid}"]
    if not node.driver.startswith(("525", "535")):
        out.append(f"NVRM: GPU Board Serial Number: {g.serial}")
    return out


def node_events(sim: Sim, node: Node) -> list[Event]:
    r = rng_for(sim.seed, "kernel", node.idx)
    plat = sim.style.platform
    b = node.boot
    ev: list[Event] = []

    def add(t: float, msg: str, level: str = "info") -> None:
        ev.append((t, level, msg))

    ubuild = r.randrange(100, 140)
    add(b, f"Linux version {node.kernel} (buildd@lcy02-amd64-{r.randrange(10, 120):03d}) "
        "(x86_64-linux-gnu-gcc-12 (Ubuntu 12.3.0-1ubuntu1~22.04) 12.3.0, GNU ld (GNU Binutils for "
        f"Ubuntu) 2.38) #{ubuild}-Ubuntu SMP PREEMPT_DYNAMIC Fri Aug  9 13:13:06 UTC 2024", "notice")
    add(b + 0.000001, f"Command line: BOOT_IMAGE=/vmlinuz-{node.kernel} root=UUID="
        f"{rng_for(sim.seed, 'rootfs', node.idx).getrandbits(64):016x} ro iommu=pt pci=realloc=off")
    rtc = b + 1.52 + r.random() * 0.3
    rtc_wall = rtc + sim.skew(node.idx)  # the node's own clock
    add(rtc, "rtc_cmos 00:02: setting system clock to "
        f"{time.strftime('%Y-%m-%dT%H:%M:%S', time.gmtime(int(rtc_wall)))} UTC ({int(rtc_wall)})")
    bw, gts, w = plat["hca_pcie"]
    for k, h in enumerate(node.hcas):
        t = b + 6.1 + 0.31 * k
        add(t, f"mlx5_core 0000:{h.bus:02x}:00.0: firmware version: {h.fw}")
        add(t + 0.0004, f"mlx5_core 0000:{h.bus:02x}:00.0: {bw} available PCIe bandwidth "
            f"({gts} PCIe x{w} link)")
    add(b + 11.4, "nvidia: loading out-of-tree module taints kernel.", "warn")
    add(b + 11.5, "nvidia-nvlink: Nvlink Core is being initialized, major device number 509")
    kind = "" if node.driver.startswith("525") else "Open Kernel Module for "
    add(b + 11.7, f"NVRM: loading NVIDIA UNIX {kind}x86_64  {node.driver}  Release Build  "
        f"(dvs-builder@U16-I3-B03-4-3)  {DRIVER_BUILD.get(node.driver, 'Mon Jan  8 12:00:00 UTC 2024')}")
    for k, h in enumerate(node.hcas):
        add(b + 24.0 + 0.2 * k, f"mlx5_core 0000:{h.bus:02x}:00.0 {h.name}: Port: 1 Link ACTIVE")

    # Benign history: an application's Xid 13/43 days before this job on one node of the fleet.
    if node.idx == rng_for(sim.seed, "benign").randrange(sim.nodes):
        t = max(b + 3600, sim.job_start - r.uniform(1.5, 6.0) * 86400)
        g = node.gpus[r.randrange(len(node.gpus))]
        pid = r.randrange(100000, 999999)
        for line in _identity(node, g):
            add(t, line, "warn")
        gpc, tpc = r.randrange(8), r.randrange(9)
        add(t, _xid(g, 13, f"Graphics SM Warp Exception on (GPC {gpc}, TPC {tpc}, SM 0): "
                    "Out Of Range Address", pid, "python3"), "warn")
        add(t + 0.0001, _xid(g, 13, f"Graphics SM Global Exception on (GPC {gpc}, TPC {tpc}, SM 0): "
                             "Multiple Warp Errors", pid, "python3"), "warn")
        add(t + 0.0002, _xid(g, 13, f"Graphics Exception: ESR 0x{0x50e000 + gpc * 0x8000:x}=0x1"
                             f"{r.randrange(0x1000000):06x}e 0x{0x50e004 + gpc * 0x8000:x}=0x24",
                             pid, "python3"), "warn")
        add(t + 0.05, _xid(g, 43, "Ch 00000008", pid, "python3"), "warn")
    if r.random() < 0.3:
        add(sim.job_start - r.uniform(600, 40000), "perf: interrupt took too long (2503 > 2500), "
            "lowering kernel.perf_event_max_sample_rate to 79750")

    pid = node.pid
    for f in sim.faults:
        if f.node is not None and f.node != node.idx:
            continue
        g = node.gpus[f.gpu] if f.gpu is not None else None
        t = f.t
        if f.kind == "gpu_lost":
            for line in _identity(node, g):
                add(t, line, "warn")
            add(t, _xid(g, 79, "GPU has fallen off the bus."), "warn")
            add(t + 0.00002, f"NVRM: GPU {g.pci}: GPU has fallen off the bus.", "err")
            add(t + 0.3, "NVRM: A GPU crash dump has been created. If possible, please run", "err")
            add(t + 0.3, "NVRM: nvidia-bug-report.sh as root to collect this data before", "err")
            add(t + 0.3, "NVRM: the NVIDIA kernel module is unloaded.", "err")
        elif f.kind == "ecc_dbe":
            addr = f.extra["addr"]
            for line in _identity(node, g):
                add(t, line, "warn")
            add(t, _xid(g, 48, "An uncorrectable double bit error (DBE) has been detected on GPU in the "
                        f"framebuffer at physAddr 0x{addr:x} partition {r.randrange(4)}, subpartition "
                        f"{r.randrange(2)}."), "warn")
            add(t + 0.028, _xid(g, 63, f"Row Remapper: New row (0x{addr:016x}) marked for remapping, "
                                "reset gpu to activate."), "warn")
            if f.extra.get("remap_failed"):
                add(t + 0.031, _xid(g, 64, f"Row Remapper Error: (0x{addr:016x}) - All reserved rows for "
                                    "bank are remapped"), "warn")
            add(t + 0.036, _xid(g, 94, "Contained: SM (0x1). RST: No, D-RST: No"), "warn")
            for ch in range(8, 12):
                add(t + 0.05 + 0.009 * ch, _xid(g, 94, f"Ch {ch:08x}", pid + f.gpu, "python3"), "warn")
        elif f.kind == "ecc_sbe_storm":
            for line in _identity(node, g):
                add(t, line, "warn")
            tt = t
            while tt < sim.window_end - 60:
                add(tt, _xid(g, 92, "High single-bit ECC error rate"), "warn")
                tt += r.uniform(240, 720)
        elif f.kind == "nvlink":
            link = f.extra["link"]
            for line in _identity(node, g):
                add(t, line, "warn")
            add(t, _xid(g, 74, f"NVLink: fatal error detected on link {link}(0x0, 0x0, 0x10000, 0x0, "
                        "0x0, 0x0, 0x0)"), "warn")
            add(t + 0.4, _xid(g, 45, "Ch 00000010", pid + f.gpu, "python3"), "warn")
        elif f.kind == "pcie_degraded":
            port = f"0000:{g.bus - 1:02x}:01.0"
            six = node.kernel.startswith("6.")
            tt, n = t - 240, 0
            while tt < min(sim.window_end - 30, t + 1800):
                head = (f"pcieport {port}: AER: Correctable error message received from {g.pci}" if six
                        else f"pcieport {port}: AER: Corrected error received: {g.pci}")
                add(tt, head, "err")
                add(tt + 0.00001, f"nvidia {g.pci}: PCIe Bus Error: severity=Corrected, type=Physical "
                    "Layer, (Receiver ID)", "err")
                dev = plat["device_id"][6:10].lower()
                add(tt + 0.00002, f"nvidia {g.pci}:   device [10de:{dev.lower()}] error status/mask="
                    "00000001/0000e000", "err")
                add(tt + 0.00003, f"nvidia {g.pci}:    [ 0] RxErr                  (First)", "err")
                n += 1
                tt += r.uniform(2, 20) if tt < t else r.uniform(60, 400)
        elif f.kind == "ib_flap":
            h = node.hcas[f.extra["hca"] % len(node.hcas)]
            dev = f"mlx5_core 0000:{h.bus:02x}:00.0 {h.name}: Port: 1 Link"
            for down, init, active in f.extra["flap_times"]:
                add(down, f"{dev} DOWN")
                add(init, f"{dev} INIT")
                add(active, f"{dev} ACTIVE")
        elif f.kind == "app_bug":
            for g in node.gpus:
                tt = t + r.uniform(0.0, 1.8)
                gpc, tpc = r.randrange(8), r.randrange(9)
                p = pid + g.index
                for line in _identity(node, g):
                    add(tt, line, "warn")
                add(tt, _xid(g, 13, f"Graphics SM Warp Exception on (GPC {gpc}, TPC {tpc}, SM 1): "
                             "Out Of Range Address", p, "pt_main_thread"), "warn")
                add(tt + 0.0001, _xid(g, 13, f"Graphics SM Global Exception on (GPC {gpc}, TPC {tpc}, "
                                      "SM 1): Multiple Warp Errors", p, "pt_main_thread"), "warn")
                add(tt + 0.0002, _xid(g, 13, "Graphics Exception: ESR "
                                      f"0x{0x50e648 + gpc * 0x8000:x}=0x{r.randrange(1 << 24):x} "
                                      f"0x{0x50e64c + gpc * 0x8000:x}=0x0", p, "pt_main_thread"), "warn")
                add(tt + 0.02, _xid(g, 43, "Ch 00000008", p, "pt_main_thread"), "warn")

    # Consequences of the job's end: channel clean-ups and GPUDirect teardown.
    ef = sim.end_fault
    if ef is not None and sim.end_kind in ("hang", "crash"):
        t_abort = sim.job_end - r.uniform(2.0, 6.0)
        if ef.node == node.idx:
            for g in node.gpus:
                if g.index == ef.gpu:
                    continue
                for ch in (8, 9):
                    add(t_abort + 0.01 * g.index, _xid(g, 45, f"Ch {ch:08x}", pid + g.index, "python3"),
                        "warn")
        for k in range(r.randrange(3, 12)):
            add(t_abort + 0.2 + 0.011 * k, "nvidia-peermem nv_get_p2p_free_callback:127 ERROR detected "
                "invalid context, skipping further processing", "err")
    ev = [e for e in ev if e[0] <= sim.window_end - 5]
    ev.sort(key=lambda e: e[0])
    return ev


def _frac(t: float) -> int:
    return int(round((t - int(t)) * 1e6)) % 1000000


def format_kernel(node: Node, events: list[Event], skew: float = 0.0) -> Iterator[str]:
    """Format events (true times) with this node's wall clock (true time + skew)."""
    style = node.kernel_style
    b = node.boot
    host = node.host
    for t0, level, msg in events:
        t = t0 + skew
        sec = int(t)
        us = _frac(t)
        if us == 0 and t - sec > 0.5:
            sec += 1
        mono = t0 - b
        ms, mus = int(mono), _frac(mono)
        if style == "dmesg_raw":
            yield f"[{ms:5d}.{mus:06d}] {msg}"
        elif style == "dmesg_T":
            yield f"[{time.strftime('%a %b %e %H:%M:%S %Y', time.gmtime(sec))}] {msg}"
        elif style == "dmesg_iso":
            yield f"{time.strftime('%Y-%m-%dT%H:%M:%S', time.gmtime(sec))},{us:06d}+00:00 {msg}"
        elif style == "dmesg_decode_iso":
            yield (f"kern  :{level.ljust(6)}: {time.strftime('%Y-%m-%dT%H:%M:%S', time.gmtime(sec))}"
                   f",{us:06d}+00:00 {msg}")
        elif style == "journal_iso":
            yield f"{time.strftime('%Y-%m-%dT%H:%M:%S', time.gmtime(sec))}+0000 {host} kernel: {msg}"
        else:  # kern_log: syslog with printk time
            yield f"{time.strftime('%b %e %H:%M:%S', time.gmtime(sec))} {host} kernel: [{ms:5d}.{mus:06d}] {msg}"
