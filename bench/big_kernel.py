"""A realistic large kernel/system log for the kernel-log parser's throughput (issue 10).

What a day of a GPU node's (or a syslog server's) log looks like: almost every line is ordinary
(systemd units and sessions, kubelet/containerd chatter, sshd/CRON, kernel noise: UFW blocks, audit,
calico veth link-ready lines, mlx5 informational lines, EXT4, nvidia-peermem bursts), with rare hardware
events sprinkled in (NVRM Xid with identity lines, NVSwitch SXid with continuation lines, PCIe AER
blocks, mlx5 IB port Link DOWN/ACTIVE, IPoIB carrier lost, OOM kills, hung tasks, segfaults in
libnccl, CPU thermal throttling, EDAC CE) — about 1 line in 2,000.

`write(path, mb, seed, style)` streams lines (bounded memory, deterministic for a seed). Styles
(FORMATS.md §1.3): `syslog` (default: RFC 3164 `Mon DD HH:MM:SS host tag[pid]:` from 8 hosts
interleaved, as a central rsyslog file; Ubuntu-style `kernel: [uptime]` on some hosts), `journal_iso`
(`journalctl -o short-iso`, one host), `journal_precise` (`short-precise`), `dmesg_raw` (`[ secs]`,
kernel lines only), `dmesg_ctime` (`dmesg -T`), `dmesg_iso` (`dmesg --time-format=iso`), `rfc5424`.

    python bench/big_kernel.py OUT MB [SEED] [STYLE]
"""

from __future__ import annotations

import pathlib
import random
import sys
from datetime import UTC, datetime, timedelta

STYLES = ("syslog", "journal_iso", "journal_precise", "dmesg_raw", "dmesg_ctime", "dmesg_iso", "rfc5424")
KERNEL_ONLY = ("dmesg_raw", "dmesg_ctime", "dmesg_iso")
MONTHS = "Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split()
WDAYS = "Mon Tue Wed Thu Fri Sat Sun".split()

GPU_BUSES = (
    "0000:18:00",
    "0000:2a:00",
    "0000:3a:00",
    "0000:5d:00",
    "0000:9a:00",
    "0000:ab:00",
    "0000:ba:00",
    "0000:db:00",
)
NIC_BUSES = (
    "0000:1a:00.0",
    "0000:2c:00.0",
    "0000:3c:00.0",
    "0000:5e:00.0",
    "0000:9c:00.0",
    "0000:ad:00.0",
    "0000:bc:00.0",
    "0000:dc:00.0",
)
PORTS = (
    "0000:17:01.0",
    "0000:29:01.0",
    "0000:39:01.0",
    "0000:5c:01.0",
    "0000:99:01.0",
    "0000:aa:01.0",
    "0000:b9:01.0",
    "0000:da:01.0",
)
UNITS = (
    "systemd-tmpfiles-clean.service",
    "logrotate.service",
    "man-db.service",
    "apt-daily.service",
    "fwupd-refresh.service",
    "motd-news.service",
    "sysstat-collect.service",
    "nvidia-dcgm-exporter.service",
    "prometheus-node-exporter.service",
    "phpsessionclean.service",
)
PODS = (
    "train-llm-0",
    "train-llm-1",
    "dcgm-exporter-x7k2p",
    "node-exporter-4f9zq",
    "calico-node-tx8vd",
    "nvidia-device-plugin-ds-2mc8l",
)


def _hex(rng: random.Random, n: int) -> str:
    return "".join(rng.choice("0123456789abcdef") for _ in range(n))


class _Host:
    def __init__(self, name: str, rng: random.Random, boot_offset: float) -> None:
        self.name = name
        self.uptime0 = boot_offset
        self.pids = {
            t: rng.randint(800, 60000)
            for t in (
                "kubelet",
                "containerd",
                "dockerd",
                "sshd",
                "CRON",
                "systemd-logind",
                "rsyslogd",
                "nvidia-persistenced",
                "nv-hostengine",
            )
        }
        self.session = rng.randint(1000, 5000)
        self.identity_done = False


def _noise(rng: random.Random, h: _Host, kernel_only: bool) -> tuple[str, str]:
    """One ordinary line: (tag, message)."""
    r = rng.random()
    if kernel_only:
        r = 0.55 + r * 0.45  # kernel share only
    if r < 0.17:
        pid = h.pids["kubelet"]
        ts = f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}.{rng.randint(0, 999999):06d}"
        pod = rng.choice(PODS)
        msg = rng.choice(
            (
                f'I1129 {ts}    {pid} kubelet.go:2453] "SyncLoop (probe)" probe="readiness" status="ready" pod="kube-system/{pod}"',
                f'I1129 {ts}    {pid} prober.go:107] "Probe failed" probeType="Liveness" pod="default/{pod}" podUID="{_hex(rng, 8)}-{_hex(rng, 4)}-{_hex(rng, 4)}" containerName="main" probeResult="failure" output="Get \\"http://10.{rng.randint(0, 255)}.{rng.randint(0, 255)}.{rng.randint(1, 254)}:8080/healthz\\": context deadline exceeded"',
                f'I1129 {ts}    {pid} reconciler_common.go:258] "operationExecutor.VerifyControllerAttachedVolume started for volume \\"kube-api-access-{_hex(rng, 5)}\\" (UniqueName: \\"kubernetes.io/projected/{_hex(rng, 8)}-kube-api-access\\") pod \\"{pod}\\""',
                f'E1129 {ts}    {pid} pod_workers.go:1298] "Error syncing pod, skipping" err="failed to \\"StartContainer\\" for \\"main\\" with CrashLoopBackOff" pod="default/{pod}"',
            )
        )
        return f"kubelet[{pid}]", msg
    if r < 0.27:
        pid = h.pids["containerd"]
        msg = rng.choice(
            (
                f'time="2025-11-29T{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}.{rng.randint(0, 999999999):09d}Z" level=info msg="shim disconnected" id={_hex(rng, 64)} namespace=k8s.io',
                f'time="2025-11-29T{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}.{rng.randint(0, 999999999):09d}Z" level=info msg="ImageCreate event name:\\"nvcr.io/nvidia/pytorch:24.{rng.randint(1, 12):02d}-py3\\""',
                f'time="2025-11-29T{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}.{rng.randint(0, 999999999):09d}Z" level=warning msg="cleaning up after shim disconnected" id={_hex(rng, 64)} namespace=k8s.io',
            )
        )
        return f"containerd[{pid}]", msg
    if r < 0.42:
        unit = rng.choice(UNITS)
        h.session += rng.random() < 0.2
        msg = rng.choice(
            (
                f"Starting {unit} - {unit.split('.')[0].replace('-', ' ').title()}...",
                f"{unit}: Deactivated successfully.",
                f"Finished {unit} - {unit.split('.')[0].replace('-', ' ').title()}.",
                f"Started session-{h.session}.scope - Session {h.session} of User ubuntu.",
                f"session-{h.session}.scope: Deactivated successfully.",
                f"Created slice user-{rng.randint(1000, 1010)}.slice - User Slice of UID {rng.randint(1000, 1010)}.",
                f"Started cri-containerd-{_hex(rng, 64)}.scope - libcontainer container {_hex(rng, 64)}.",
            )
        )
        return "systemd[1]", msg
    if r < 0.50:
        name = rng.choice(
            ("sshd", "CRON", "systemd-logind", "rsyslogd", "nvidia-persistenced", "nv-hostengine")
        )
        pid = h.pids[name] + (rng.randint(0, 5000) if name in ("sshd", "CRON") else 0)
        msg = {
            "sshd": rng.choice(
                (
                    f"Accepted publickey for ubuntu from 10.0.{rng.randint(0, 255)}.{rng.randint(1, 254)} port {rng.randint(30000, 65000)} ssh2: ED25519 SHA256:{_hex(rng, 43)}",
                    "pam_unix(sshd:session): session opened for user ubuntu(uid=1000) by (uid=0)",
                    f"Received disconnect from 10.0.{rng.randint(0, 255)}.{rng.randint(1, 254)} port {rng.randint(30000, 65000)}:11: disconnected by user",
                )
            ),
            "CRON": "(root) CMD (/usr/local/bin/gpu-health-check.sh >/dev/null 2>&1)",
            "systemd-logind": f"New session {h.session} of user ubuntu.",
            "rsyslogd": "imjournal: journal files changed, reloading...  [v8.2112.0 try https://www.rsyslog.com/e/0 ]",
            "nvidia-persistenced": f"device {rng.choice(GPU_BUSES)}.0 - persistence mode enabled.",
            "nv-hostengine": f"DCGM field watch updated: {rng.randint(1, 40)} fields, update interval {rng.choice((100000, 1000000))} us",
        }[name]
        return f"{name}[{pid}]", msg
    # kernel
    k = rng.random()
    if k < 0.22:
        msg = (
            f"[UFW BLOCK] IN=eth0 OUT= MAC={_hex(rng, 2)}:{_hex(rng, 2)}:{_hex(rng, 2)}:{_hex(rng, 2)}:{_hex(rng, 2)}:{_hex(rng, 2)}:"
            f"{_hex(rng, 2)}:{_hex(rng, 2)}:{_hex(rng, 2)}:{_hex(rng, 2)}:{_hex(rng, 2)}:{_hex(rng, 2)}:08:00 SRC=10.{rng.randint(0, 255)}.{rng.randint(0, 255)}.{rng.randint(1, 254)} "
            f"DST=10.0.{rng.randint(0, 255)}.{rng.randint(1, 254)} LEN={rng.randint(40, 1500)} TOS=0x00 PREC=0x00 TTL=64 ID={rng.randint(0, 65535)} DF PROTO=TCP "
            f"SPT={rng.randint(1024, 65535)} DPT={rng.choice((22, 443, 9100, 10250, 2379))} WINDOW=64240 RES=0x00 SYN URGP=0"
        )
    elif k < 0.36:
        msg = (
            f'audit: type=1400 audit({1764374400 + rng.randint(0, 86400)}.{rng.randint(0, 999):03d}:{rng.randint(100, 99999)}): apparmor="DENIED" '
            f'operation="open" class="file" profile="cri-containerd.apparmor.d" name="/proc/sys/kernel/{rng.choice(("shmmax", "perf_event_paranoid", "yama/ptrace_scope"))}" '
            f'pid={rng.randint(1000, 99999)} comm="python3" requested_mask="r" denied_mask="r" fsuid=0 ouid=0'
        )
    elif k < 0.50:
        cali = f"cali{_hex(rng, 11)}"
        msg = rng.choice(
            (
                f"IPv6: ADDRCONF(NETDEV_CHANGE): {cali}: link becomes ready",
                f"{cali}: entered promiscuous mode",
                f"{cali}: left promiscuous mode",
                f"eth0: renamed from tmp{_hex(rng, 5)}",
            )
        )
    elif k < 0.64:
        nic = rng.randrange(8)
        msg = rng.choice(
            (
                f"mlx5_core {NIC_BUSES[nic]}: mlx5_fw_tracer_handle_traces:{rng.randint(700, 800)}:(pid {rng.randint(100, 9999)}): FW tracer: [{_hex(rng, 8)}] DEBUG_LEVEL cmd_if: 0x{_hex(rng, 4)} tx_sq_exp",
                f"mlx5_core {NIC_BUSES[nic]}: mlx5_cmd_out_err:{rng.randint(800, 840)}:(pid {rng.randint(100, 9999)}): QUERY_VUID(0x{_hex(rng, 3)}) op_mod(0x0) failed, status bad parameter(0x3), syndrome (0x{_hex(rng, 6)}), err(-22)",
                f"mlx5_ib: mlx5_ib_event:{rng.randint(2900, 3000)}:(pid {rng.randint(100, 9999)}): mlx5_{nic}: port {1} changed LID",
                f"mlx5_core {NIC_BUSES[nic]}: poll_health:{rng.randint(800, 900)}:(pid 0): device's health compromised - reached miss count",
            )
        )
    elif k < 0.74:
        msg = rng.choice(
            (
                f"EXT4-fs (nvme{rng.randint(0, 7)}n1p1): mounted filesystem {_hex(rng, 8)}-{_hex(rng, 4)}-{_hex(rng, 4)}-{_hex(rng, 4)}-{_hex(rng, 12)} r/w with ordered data mode. Quota mode: none.",
                "overlayfs: upperdir is in-use as upperdir/workdir of another mount, accessing files from both mounts will result in undefined behavior.",
                f"perf: interrupt took too long ({rng.randint(2500, 9000)} > {rng.randint(2500, 9000)}), lowering kernel.perf_event_max_sample_rate to {rng.randint(20000, 80000)}",
                f"TCP: request_sock_TCP: Possible SYN flooding on port 0.0.0.0:{rng.choice((29500, 6379))}. Sending cookies.  Check SNMP counters.",
                f"workqueue: ib_cache_event_task [ib_core] hogged CPU for >10000us {rng.randint(4, 64)} times, consider switching to WQ_UNBOUND",
                f"nfs: server 10.0.0.{rng.randint(1, 9)} OK",
                f"cgroup: fork rejected by pids controller in /kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{_hex(rng, 8)}.slice",
            )
        )
    elif k < 0.84:
        msg = "nvidia-peermem nv_get_p2p_free_callback:127 ERROR detected invalid context, skipping further processing"
    elif k < 0.92:
        msg = rng.choice(
            (
                f"docker0: port {rng.randint(1, 8)}(veth{_hex(rng, 7)}) entered {rng.choice(('blocking', 'forwarding', 'disabled'))} state",
                f"veth{_hex(rng, 7)}: entered allmulticast mode",
                f"IPVS: rr: TCP 10.96.{rng.randint(0, 255)}.{rng.randint(1, 254)}:443 - no destination available",
            )
        )
    else:
        msg = rng.choice(
            (
                f"nvidia-uvm: Loaded the UVM driver, major device number {rng.randint(500, 511)}.",
                "Lockdown: modprobe: unsigned module loading is restricted; see man kernel_lockdown.7",
                f"hrtimer: interrupt took {rng.randint(10000, 900000)} ns",
                f"x86/split lock detection: #AC: python3/{rng.randint(1000, 99999)} took a split_lock trap at address: 0x{_hex(rng, 12)}",
            )
        )
    return "kernel", msg


def _events(rng: random.Random, h: _Host) -> list[tuple[str, str]]:
    """A rare hardware/host event: one or several kernel lines (tag, message)."""
    gpu = rng.randrange(8)
    bus = GPU_BUSES[gpu]
    nic = rng.randrange(8)
    k = rng.random()
    out: list[str] = []
    if not h.identity_done or k < 0.04:
        h.identity_done = True
        out.append("NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.144.03  Mon Dec 30 17:44:08 UTC 2024")
        for i, b in enumerate(GPU_BUSES):
            out.append(
                f"NVRM: GPU at PCI:{b}: GPU-{_hex(rng, 8)}-{_hex(rng, 4)}-{_hex(rng, 4)}-{_hex(rng, 4)}-{_hex(rng, 12)}"
            )
            out.append(f"NVRM: GPU Board Serial Number: 16521230{i:05d}")
        for b in NIC_BUSES[:2]:
            out.append(f"mlx5_core {b}: firmware version: 28.39.1002")
            out.append(f"mlx5_core {b}: 504.112 Gb/s available PCIe bandwidth (32.0 GT/s PCIe x16 link)")
    elif k < 0.25:
        code = rng.choice((13, 31, 43, 45, 48, 63, 74, 79, 94, 109, 119))
        text = {
            13: "Graphics SM Warp Exception on (GPC 8, TPC 5, SM 0): Out Of Range Address",
            31: f"Ch 0000{_hex(rng, 4)}, intr 10000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_0 faulted @ 0x7f_{_hex(rng, 8)}. Fault is of type FAULT_PDE ACCESS_TYPE_READ",
            43: f"Ch 0000{_hex(rng, 4)}",
            45: f"Ch 0000{_hex(rng, 4)}",
            48: f"An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at physAddr 0x{_hex(rng, 10)} partition 2, subpartition 1.",
            63: f"Row Remapper: New row (0x0000{_hex(rng, 12)}) marked for remapping, reset gpu to activate.",
            74: f"NVLink: fatal error detected on link {rng.randint(0, 17)}(0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)",
            79: "GPU has fallen off the bus.",
            94: "Contained: SM (0x1). RST: No, D-RST: No",
            109: f"Ch 0000{_hex(rng, 4)}, errorString CTX SWITCH TIMEOUT, Info 0x{_hex(rng, 5)}",
            119: f"Timeout after 6s of waiting for RPC response from GPU{gpu} GSP! Expected function 103 (GSP_RM_ALLOC) (0x2081 0x4).",
        }[code]
        who = rng.choice(
            (
                "pid=" + str(rng.randint(1000, 3000000)) + ", name=pt_main_thread, ",
                "pid='<unknown>', name=<unknown>, ",
            )
        )
        for _ in range(rng.choice((1, 1, 1, 3, 8))):
            out.append(f"NVRM: Xid (PCI:{bus}): {code}, {who}{text}")
    elif k < 0.32:
        sw = rng.randrange(4)
        sbus = f"0000:{0x86 + sw:02x}:00.0"
        out.append(
            f"nvidia-nvswitch{sw}: SXid (PCI:{sbus}): 12028, Non-fatal, Link {rng.randint(0, 63)} egress non-posted PRIV error (First)"
        )
        out.append(
            f"nvidia-nvswitch{sw}: SXid (PCI:{sbus}): 12028, Severity 0 Engine instance {rng.randint(0, 63)} Sub-engine instance 00"
        )
        out.append(
            f"nvidia-nvswitch{sw}: SXid (PCI:{sbus}): 12028, Data {{0x00000000, 0x00000080, 0x00000000, 0x00000000}}"
        )
    elif k < 0.50:
        port, dev = PORTS[gpu], bus + ".0"
        out.append(f"pcieport {port}: AER: Correctable error message received from {dev}")
        out.append(f"nvidia {dev}: PCIe Bus Error: severity=Correctable, type=Physical Layer, (Receiver ID)")
        out.append(f"nvidia {dev}:   device [10de:2330] error status/mask=00000001/0000e000")
        out.append(f"nvidia {dev}:    [ 0] RxErr                  (First)")
    elif k < 0.65:
        state = rng.choice(("DOWN", "INIT", "ACTIVE"))
        out.append(f"mlx5_core {NIC_BUSES[nic]} mlx5_{nic}: Port: 1 Link {state}")
        if state == "DOWN" and rng.random() < 0.5:
            out.append(f"ib{nic}: carrier lost")
    elif k < 0.72:
        pid = rng.randint(1000, 3000000)
        out.append(
            f"Memory cgroup out of memory: Killed process {pid} (python3) total-vm:{rng.randint(10**7, 10**8)}kB, anon-rss:{rng.randint(10**6, 10**8)}kB, "
            f"file-rss:{rng.randint(10**4, 10**6)}kB, shmem-rss:0kB, UID:0 pgtables:{rng.randint(10**4, 10**6)}kB oom_score_adj:-997"
        )
    elif k < 0.78:
        out.append(
            f"INFO: task pt_main_thread:{rng.randint(1000, 3000000)} blocked for more than 122 seconds."
        )
        out.append('"echo 0 > /proc/sys/kernel/hung_task_timeout_secs" disables this message.')
    elif k < 0.85:
        out.append(
            f"pt_main_thread[{rng.randint(1000, 3000000)}]: segfault at 0 ip 00007f{_hex(rng, 8)} sp 00007ff{_hex(rng, 9)} error 4 in libnccl.so.2[7f{_hex(rng, 8)}+{_hex(rng, 7)}]"
        )
    elif k < 0.93:
        cpu = rng.randint(0, 223)
        out.append(
            f"CPU{cpu}: Package temperature above threshold, cpu clock throttled (total events = {rng.randint(1, 90000)})"
        )
        out.append(f"CPU{cpu}: Package temperature/speed normal")
    else:
        out.append(
            f"EDAC MC{rng.randint(0, 7)}: 1 CE memory read error on CPU_SrcID#0_Ha#0_Chan#{rng.randint(0, 3)}_DIMM#0 (channel:0 slot:0 page:0x{_hex(rng, 6)} offset:0x0 grain:32 syndrome:0x0)"
        )
    return [("kernel", m) for m in out]


def _prefix(style: str, when: datetime, uptime: float, host: str, tag: str, embed: bool) -> str:
    if style == "syslog":
        k = f"[{uptime:12.6f}] " if embed and tag == "kernel" else ""
        return f"{MONTHS[when.month - 1]} {when.day:2d} {when:%H:%M:%S} {host} {tag}: {k}"
    if style == "journal_iso":
        return f"{when:%Y-%m-%dT%H:%M:%S}+0000 {host} {tag}: "
    if style == "journal_precise":
        return f"{MONTHS[when.month - 1]} {when.day:02d} {when:%H:%M:%S.%f} {host} {tag}: "
    if style == "rfc5424":
        name, _, pid = tag.partition("[")
        return f"<{30 if tag != 'kernel' else 4}>1 {when:%Y-%m-%dT%H:%M:%S.%f}+00:00 {host} {name} {pid.rstrip(']') or '-'} - - "
    if style == "dmesg_raw":
        return f"[{uptime:12.6f}] "
    if style == "dmesg_ctime":
        return f"[{WDAYS[when.weekday()]} {MONTHS[when.month - 1]} {when.day:2d} {when:%H:%M:%S %Y}] "
    if style == "dmesg_iso":
        return f"{when:%Y-%m-%dT%H:%M:%S,%f}+00:00 "
    raise ValueError(f"unknown style {style!r}; one of {STYLES}")


def write(path: pathlib.Path, mb: float, seed: int = 0, style: str = "syslog") -> None:
    """Write about `mb` MB of a realistic kernel/system log of `style` to `path` (streamed, deterministic)."""
    if style not in STYLES:
        raise ValueError(f"unknown style {style!r}; one of {STYLES}")
    rng = random.Random(seed)
    target = int(mb * 1_000_000)
    kernel_only = style in KERNEL_ONLY
    n_hosts = 8 if style == "syslog" else 1
    hosts = [
        _Host(f"gpu-{rng.randint(100, 999)}-{i:02d}.cluster.local", rng, rng.uniform(100, 5000))
        for i in range(n_hosts)
    ]
    embed = {h.name: i % 2 == 1 for i, h in enumerate(hosts)}  # Ubuntu kern.log style on half of them
    # a day of log: the time step follows the size (~160 bytes a line)
    est_lines = max(1, target // 160)
    step = 86400.0 / est_lines
    start = (
        datetime(2025, 11, 28, 23, 50, 0, tzinfo=UTC)
        if style == "syslog"
        else datetime(2025, 11, 29, 0, 0, 0, tzinfo=UTC)
    )
    t = 0.0
    written = 0
    buf: list[str] = []
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        while written < target:
            t += rng.expovariate(1.0 / step)
            h = hosts[rng.randrange(n_hosts)]
            when = start + timedelta(seconds=t)
            uptime = h.uptime0 + t
            items = (
                _events(rng, h)
                if (rng.random() < 1 / 2000 or not h.identity_done)
                else [_noise(rng, h, kernel_only)]
            )
            for tag, msg in items:
                line = (
                    _prefix(
                        style,
                        when,
                        uptime,
                        h.name.split(".")[0] if style != "rfc5424" else h.name,
                        tag,
                        embed[h.name],
                    )
                    + msg
                    + "\n"
                )
                buf.append(line)
                written += len(line)
            if len(buf) >= 4096:
                f.write("".join(buf))
                buf.clear()
        f.write("".join(buf))


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    write(
        pathlib.Path(sys.argv[1]),
        float(sys.argv[2]),
        int(sys.argv[3]) if len(sys.argv) > 3 else 0,
        sys.argv[4] if len(sys.argv) > 4 else "syslog",
    )
