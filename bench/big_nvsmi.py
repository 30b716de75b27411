"""Realistic large nvidia-smi monitoring / IB counter logs for the nvsmi parsers' throughput (issue 10).

What a day-long monitoring loop on an 8-GPU node leaves behind (FORMATS.md §3, §4):

- `dmon` (default): `nvidia-smi dmon -s pucm -o DT -d 1` — a `#Date Time gpu pwr ...` names line and a
  `#YYYYMMDD HH:MM:SS Idx W C ...` units line, repeated every 10 intervals as dmon does, then one row per GPU
  per second (`-` for N/A). The collector is restarted now and then, sometimes with another selection
  (`-s pe` without `-o`: no date/time columns). Rare: a GPU at 0 % with the clock dropped (HW slowdown), a
  double-bit ECC count, a memory temperature going `-`.
- `csv`: `nvidia-smi --query-gpu=timestamp,name,pci.bus_id,index,... --format=csv -l 1` (the simulator's
  field list): one header per run, a row per GPU per second, runs restarted every ~1-2 h (header
  repeated). Rare: `[Unknown Error]`/`[N/A]` cells, an HW-slowdown mask (0x...88), ECC counts.
- `q`: `nvidia-smi -q -l 60`: full `-q` dumps of 8 H100s (the GPU block of the real 535 sample in
  tests/fixtures as the template) with advancing `Timestamp`s and varying telemetry; rare HW slowdown.
- `bugreport`: an `nvidia-bug-report.log` of a node that ran for weeks: prologue, `/proc/driver/nvidia/*`
  files, `lspci -vvv` (no parser claims it), one `nvidia-smi -q` of 8 H100s, `nvidia-smi topo -m`, then
  the bulk: `dmesg` (~55 %) and `journalctl -b -0` (~35 %) sections made by `bench/big_kernel.py` (ordinary
  lines with rare Xid/AER/link events), as nvidia-bug-report.sh lays them out.
- `table`: `nvidia-smi -l 1 > smi.log`: the default table of 8 H100s every second (the 550-driver 89-column
  layout of tests/fixtures/nvidia-smi-table, time on its first line), a training process per GPU in the
  process table; rare HW slowdown (the GPU idle, its clock down) and an uncorrectable ECC count.
- `xml`: `nvidia-smi -q -x -l 60`: XML dumps (the first GPU block of the real-shaped 535 sample in
  tests/fixtures/nvidia-smi-xml as the template) of 8 H100s with advancing `<timestamp>`s and varying
  telemetry.
- `ib`: a perfquery loop (`date` line, then `perfquery -x -C mlx5_N -P 1` per HCA every 10 s, extended
  counters growing), with an `ibstat` dump every hour; rare symbol errors / link-downed increments and an
  HCA port going Down in one ibstat dump.

`write(path, mb, seed, kind)` streams lines (bounded memory, deterministic for a seed and kind).

    python bench/big_nvsmi.py OUT MB [SEED] [KIND]
"""

from __future__ import annotations

import pathlib
import random
import re
import sys
from datetime import datetime, timedelta

KINDS = ("dmon", "csv", "q", "table", "xml", "ib", "bugreport")
BUSES = ("18", "2A", "3A", "5D", "9A", "AB", "BA", "DB")
START = datetime(2026, 11, 28, 0, 0, 0)
_TEMPLATE = (
    pathlib.Path(__file__).resolve().parent.parent
    / "tests/fixtures/nvidia-smi/q_h100_535_hw_power_brake_active.txt"
)


class _Gpu:
    def __init__(self, i: int, rng: random.Random) -> None:
        self.i = i
        self.temp = rng.randint(40, 50)
        self.power = rng.uniform(600, 690)
        self.util = 98
        self.ecc_dbe = 0
        self.ecc_sbe = rng.choice((0, 0, 0, 1))
        self.slow = 0  # seconds of HW slowdown left
        self.serial = 1652923034000 + rng.randint(0, 999)
        a, b, c, d, e = (rng.getrandbits(n) for n in (32, 16, 16, 16, 48))
        self.uuid = f"GPU-{a:08x}-{b:04x}-{c:04x}-{d:04x}-{e:012x}"

    def step(self, rng: random.Random) -> None:
        """Advance one second: a busy training GPU, rare slowdowns and ECC events."""
        self.temp = max(35, min(88, self.temp + rng.choice((-1, 0, 0, 1))))
        self.power = max(90.0, min(700.0, self.power + rng.uniform(-15, 15)))
        self.util = rng.choice((97, 98, 99, 100, 100))
        if self.slow:
            self.slow -= 1
        elif rng.random() < 0.00005:
            self.slow = rng.randint(5, 60)
        if rng.random() < 0.00003:
            self.ecc_dbe += 1
        if rng.random() < 0.0001:
            self.ecc_sbe += 1


class _Out:
    """Buffered writer that stops at the byte budget."""

    def __init__(self, fh, limit: int) -> None:
        self.fh, self.limit, self.n, self.buf = fh, limit, 0, []

    def line(self, s: str) -> None:
        self.buf.append(s)
        self.n += len(s) + 1
        if len(self.buf) >= 4096:
            self.flush()

    def flush(self) -> None:
        if self.buf:
            self.fh.write("\n".join(self.buf) + "\n")
            self.buf = []

    @property
    def full(self) -> bool:
        return self.n >= self.limit


class _Lines(_Out):
    """Collects lines in memory (a budget of one byte: loops stop after their first round)."""

    def __init__(self) -> None:
        super().__init__(None, 1)
        self.lines: list[str] = []

    def line(self, s: str) -> None:
        self.lines.append(s)
        self.n += len(s) + 1


# ----------------------------------------------------------------------------- dmon

_DMON_DT = (
    "#Date       Time        gpu    pwr  gtemp  mtemp     sm    mem    enc    dec    jpg    ofa   mclk   pclk",
    "#YYYYMMDD   HH:MM:SS    Idx      W      C      C      %      %      %      %      %      %    MHz    MHz",
)
_DMON_PE = (
    "# gpu   pwr gtemp mtemp sbecc dbecc   pci",
    "# Idx     W     C     C  errs  errs  errs",
)


def _dmon(out: _Out, rng: random.Random) -> None:
    gpus = [_Gpu(i, rng) for i in range(8)]
    t = START
    while not out.full:
        style = "pe" if rng.random() < 0.2 else "dt"
        hdr = _DMON_PE if style == "pe" else _DMON_DT
        run = rng.randint(600, 7200)  # seconds until the collector is restarted
        for k in range(run):
            if k % 10 == 0:
                out.line(hdr[0])
                out.line(hdr[1])
            d, tm = t.strftime("%Y%m%d"), t.strftime("%H:%M:%S")
            for g in gpus:
                g.step(rng)
                pclk = 1980 if not g.slow else rng.choice((1410, 1395, 1005))
                mtemp = "-" if rng.random() < 0.0005 else str(g.temp + 8)
                if style == "pe":
                    out.line(
                        f"{g.i:>5} {int(g.power):>5} {g.temp:>5} {mtemp:>5} {g.ecc_sbe:>5} {g.ecc_dbe:>5} {0:>5}"
                    )
                else:
                    sm = g.util if not g.slow else rng.randint(0, 40)
                    out.line(
                        f" {d}   {tm}   {g.i:>4} {int(g.power):>6} {g.temp:>6} {mtemp:>6} {sm:>6} {rng.randint(30, 45):>6}"
                        f" {0:>6} {0:>6} {0:>6} {0:>6} {2619:>6} {pclk:>6}"
                    )
            t += timedelta(seconds=1)
            if out.full:
                return
        t += timedelta(seconds=rng.randint(5, 300))
        if rng.random() < 0.3:  # a note the collector script printed between runs
            out.line(f"# restarted by collector at {t:%Y-%m-%d %H:%M:%S}")


# ----------------------------------------------------------------------------- csv

_CSV_HEADER = (
    "timestamp, name, pci.bus_id, index, utilization.gpu [%], utilization.memory [%], memory.used [MiB], "
    "temperature.gpu, temperature.memory, power.draw [W], clocks.sm [MHz], clocks.mem [MHz], "
    "clocks_event_reasons.active, clocks_event_reasons.sw_power_cap, clocks_event_reasons.hw_slowdown, "
    "clocks_event_reasons.hw_thermal_slowdown, clocks_event_reasons.hw_power_brake_slowdown, "
    "clocks_event_reasons.sw_thermal_slowdown, ecc.errors.corrected.volatile.total, "
    "ecc.errors.uncorrected.volatile.total, pcie.link.gen.current, pcie.link.width.current"
)


def _csv(out: _Out, rng: random.Random) -> None:
    gpus = [_Gpu(i, rng) for i in range(8)]
    t = START
    while not out.full:
        out.line(_CSV_HEADER)
        for _ in range(rng.randint(3600, 7200)):
            for g in gpus:
                g.step(rng)
                ts = (t + timedelta(milliseconds=g.i + rng.randint(0, 3))).strftime("%Y/%m/%d %H:%M:%S.%f")[
                    :-3
                ]
                mask = "0x0000000000000088" if g.slow else "0x0000000000000000"
                hw = "Active" if g.slow else "Not Active"
                power = "[Unknown Error]" if rng.random() < 0.00002 else f"{g.power:.2f} W"
                mtemp = "[N/A]" if rng.random() < 0.0002 else str(g.temp + 8)
                clk = rng.choice((1410, 1395)) if g.slow else 1980
                out.line(
                    f"{ts}, NVIDIA H100 80GB HBM3, 00000000:{BUSES[g.i]}:00.0, {g.i}, {g.util} %, "
                    f"{rng.randint(30, 45)} %, {rng.randint(70000, 71000)} MiB, {g.temp}, {mtemp}, {power}, "
                    f"{clk} MHz, 2619 MHz, {mask}, Not Active, {hw}, {hw}, Not Active, Not Active, "
                    f"{g.ecc_sbe}, {g.ecc_dbe}, 5, 16"
                )
            t += timedelta(seconds=1)
            if out.full:
                return
        t += timedelta(seconds=rng.randint(5, 300))


# ----------------------------------------------------------------------------- -q


def _q_template() -> list[str]:
    lines = _TEMPLATE.read_text().splitlines()
    starts = [i for i, ln in enumerate(lines) if ln.startswith("GPU 0000")]
    return lines[starts[0] : starts[1]]


_Q_SUBS = {
    "Serial Number": "serial",
    "GPU UUID": "uuid",
    "Bus Id": "bus",
    "GPU Current Temp": "temp",
    "Memory Current Temp": "mtemp",
    "Power Draw": "power",
    "Gpu": "util",
    "Idle": "idle",
    "HW Slowdown": "hw",
    "HW Thermal Slowdown": "hw",
    "Performance State": "pstate",
}
_KEY = re.compile(r"^(\s*)(\S.*?)(\s*: )(.*)$")


def _q(out: _Out, rng: random.Random) -> None:
    tmpl = []
    for ln in _q_template():
        m = _KEY.match(ln)
        tmpl.append((ln, m.groups() if m and m.group(2) in _Q_SUBS else None))
    gpus = [_Gpu(i, rng) for i in range(8)]
    t = START
    while not out.full:
        out.line("==============NVSMI LOG==============")
        out.line("")
        out.line(f"Timestamp                                 : {t:%a %b %d %H:%M:%S %Y}")
        out.line("Driver Version                            : 535.183.01")
        out.line("CUDA Version                              : 12.2")
        out.line("")
        out.line("Attached GPUs                             : 8")
        for g in gpus:
            for _ in range(60):
                g.step(rng)
            bus = f"00000000:{BUSES[g.i]}:00.0"
            vals = {
                "serial": str(g.serial), "uuid": g.uuid, "bus": bus, "temp": f"{g.temp} C", "mtemp": f"{g.temp + 8} C",
                "power": f"{g.power:.2f} W", "util": f"{g.util} %", "idle": "Not Active",
                "hw": "Active" if g.slow else "Not Active", "pstate": "P0",
            }  # fmt: skip
            power_seen = False
            for ln, grp in tmpl:
                if ln.startswith("GPU 0000"):
                    out.line(f"GPU {bus}")
                elif grp is None:
                    out.line(ln)
                else:
                    ind, key, sep, old = grp
                    what = _Q_SUBS[key]
                    if what == "power":  # the module power reading stays N/A
                        if power_seen:
                            out.line(ln)
                            continue
                        power_seen = True
                    out.line(f"{ind}{key}{sep}{vals[what]}")
        out.line("")
        t += timedelta(seconds=60)


# ----------------------------------------------------------------------------- table

_TABLE_HEAD = (
    "+-----------------------------------------------------------------------------------------+",
    "| NVIDIA-SMI 550.90.07              Driver Version: 550.90.07      CUDA Version: 12.4     |",
    "|-----------------------------------------+------------------------+----------------------+",
    "| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |",
    "| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |",
    "|                                         |                        |               MIG M. |",
    "|=========================================+========================+======================|",
)
_TABLE_RULE = "+-----------------------------------------+------------------------+----------------------+"
_TABLE_PROCS = (
    "",
    "+-----------------------------------------------------------------------------------------+",
    "| Processes:                                                                              |",
    "|  GPU   GI   CI        PID   Type   Process name                              GPU Memory |",
    "|        ID   ID                                                               Usage      |",
    "|=========================================================================================|",
)


def _table(out: _Out, rng: random.Random) -> None:
    gpus = [_Gpu(i, rng) for i in range(8)]
    pids = [rng.randint(100000, 999999) for _ in gpus]
    t = START
    while not out.full:
        out.line(f"{t:%a %b %d %H:%M:%S %Y}")
        for ln in _TABLE_HEAD:
            out.line(ln)
        for g in gpus:
            g.step(rng)
            used = 70000 + rng.randint(0, 9000) if not g.slow else 1
            util = 0 if g.slow else g.util
            ecc = str(g.ecc_dbe)
            out.line(f"| {g.i:3d}  NVIDIA H100 80GB HBM3          On  |   00000000:{BUSES[g.i]}:00.0 Off | {ecc:>20} |")
            out.line(
                f"| N/A   {g.temp:2d}C    P0 {round(g.power):>14}W /  700W | {used:>7}MiB /  81559MiB "
                f"| {util:>6}%      Default |"
            )
            out.line("|                                         |                        |             Disabled |")
            out.line(_TABLE_RULE)
        for ln in _TABLE_PROCS:
            out.line(ln)
        for g, pid in zip(gpus, pids, strict=True):
            out.line(f"| {g.i:4d}   N/A  N/A {pid:>9}      C   /usr/bin/python3{'':28}{69000:>5}MiB |")
        out.line("+-----------------------------------------------------------------------------------------+")
        t += timedelta(seconds=1)


# ----------------------------------------------------------------------------- xml

_XML_TEMPLATE = (
    pathlib.Path(__file__).resolve().parent.parent
    / "tests/fixtures/nvidia-smi-xml/qx_h100_535_v12_event_reasons_remap_pending.xml"
)
_XML_SUBS = {
    "serial": "serial", "uuid": "uuid", "gpu_util": "util", "gpu_temp": "temp", "memory_temp": "mtemp",
    "power_draw": "power", "used": "used",
}  # fmt: skip
_XML_TAG = re.compile(r"^(\s*)<(\w+)>(.*)</\2>$")


def _xml_template() -> tuple[list[str], list[str]]:
    """The sample's lines before its first `<gpu ...>` (without the comment) and its first GPU block."""
    lines = [ln for ln in _XML_TEMPLATE.read_text().splitlines() if "#SOURCE" not in ln]
    starts = [i for i, ln in enumerate(lines) if ln.strip().startswith("<gpu id=")]
    return lines[: starts[0]], lines[starts[0] : starts[1]]


def _xml(out: _Out, rng: random.Random) -> None:
    head, block = _xml_template()
    head = [ln for ln in head if "<timestamp>" not in ln and "<attached_gpus>" not in ln]
    tmpl = []
    for ln in block:
        m = _XML_TAG.match(ln)
        tmpl.append((ln, m.groups() if m and m.group(2) in _XML_SUBS else None))
    gpus = [_Gpu(i, rng) for i in range(8)]
    t = START
    while not out.full:
        for ln in head:
            out.line(ln)
            if ln.strip() == "<nvidia_smi_log>":
                out.line(f"\t<timestamp>{t:%a %b %d %H:%M:%S %Y}</timestamp>")
        out.line("\t<attached_gpus>8</attached_gpus>")
        for g in gpus:
            for _ in range(60):
                g.step(rng)
            vals = {
                "serial": str(g.serial), "uuid": g.uuid, "util": f"{g.util} %", "temp": f"{g.temp} C",
                "mtemp": f"{g.temp + 8} C", "power": f"{g.power:.2f} W", "used": f"{70000 + g.i} MiB",
            }  # fmt: skip
            for ln, grp in tmpl:
                if ln.strip().startswith("<gpu id="):
                    out.line(f'\t<gpu id="00000000:{BUSES[g.i]}:00.0">')
                elif grp is None:
                    out.line(ln)
                else:
                    ind, tag, _old = grp
                    out.line(f"{ind}<{tag}>{vals[_XML_SUBS[tag]]}</{tag}>")
        out.line("</nvidia_smi_log>")
        t += timedelta(seconds=60)


# ----------------------------------------------------------------------------- ib

_PQX = ("PortXmitData", "PortRcvData", "PortXmitPkts", "PortRcvPkts", "PortUnicastXmitPkts", "PortUnicastRcvPkts",
        "PortMulticastXmitPkts", "PortMulticastRcvPkts")  # fmt: skip


def _ib(out: _Out, rng: random.Random) -> None:
    ctr = [{k: rng.randint(10**9, 10**10) for k in _PQX} for _ in range(8)]
    errs = [{"SymbolErrorCounter": 0, "LinkDownedCounter": 0, "PortRcvErrors": 0} for _ in range(8)]
    guids = [rng.getrandbits(64) for _ in range(8)]
    t = START
    k = 0
    while not out.full:
        if k % 360 == 0:
            out.line(f"{t:%a %b %d %H:%M:%S} UTC {t:%Y}")
            out.line("$ ibstat")
            down = rng.randrange(8) if rng.random() < 0.2 else -1
            for d in range(8):
                g = f"0x{guids[d]:016x}"
                out.line(f"CA 'mlx5_{d}'")
                for ln in ("CA type: MT4129", "Number of ports: 1", "Firmware version: 28.39.1002", "Hardware version: 0",
                           f"Node GUID: {g}", f"System image GUID: {g}", "Port 1:"):  # fmt: skip
                    out.line("\t" + ln)
                st, ph = ("Down", "Polling") if d == down else ("Active", "LinkUp")
                for ln in (f"State: {st}", f"Physical state: {ph}", "Rate: 400", f"Base lid: {11 + d}", "LMC: 0",
                           "SM lid: 1", "Capability mask: 0xa751e848", f"Port GUID: {g}", "Link layer: InfiniBand"):  # fmt: skip
                    out.line("\t\t" + ln)
        out.line(f"{t:%a %b %d %H:%M:%S} UTC {t:%Y}")
        for d in range(8):
            out.line(f"$ perfquery -x -C mlx5_{d} -P 1")
            out.line(f"# Port extended counters: Lid {11 + d} port 1 (CapMask: 0x5A00)")
            out.line("PortSelect:......................1")
            out.line("CounterSelect:...................0x0000")
            c = ctr[d]
            for name in _PQX:
                if "Multicast" not in name:
                    c[name] += rng.randint(10**6, 10**8) if "Data" in name else rng.randint(10**4, 10**6)
                out.line(f"{name + ':':.<33}{c[name]}")
            if rng.random() < 0.001:
                errs[d]["SymbolErrorCounter"] += rng.randint(1, 50)
            if rng.random() < 0.0001:
                errs[d]["LinkDownedCounter"] += 1
            out.line(f"$ perfquery -C mlx5_{d} -P 1")
            out.line(f"# Port counters: Lid {11 + d} port 1 (CapMask: 0x5A00)")
            for name, v in errs[d].items():
                out.line(f"{name + ':':.<33}{v}")
        t += timedelta(seconds=10)
        k += 1


_SEP = "____________________________________________"


def _bugreport(out: _Out, rng: random.Random) -> None:
    import importlib.util
    import tempfile

    spec = importlib.util.spec_from_file_location(
        "_big_kernel", pathlib.Path(__file__).with_name("big_kernel.py")
    )
    assert spec is not None and spec.loader is not None
    big_kernel = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(big_kernel)

    def section(title: list[str], body: list[str]) -> None:
        for ln in ("", _SEP, "", *title, "", *body):
            out.line(ln)

    for ln in (_SEP, "", "Start of NVIDIA bug report log file.  Please include this file, along",
               "with a detailed description of your problem, when reporting a graphics",
               "driver bug via the NVIDIA Linux forum (see forums.developer.nvidia.com)",
               "or by sending email to 'linux-bugs@nvidia.com'.", "", "nvidia-bug-report.sh Version: 34597158", "",
               f"Date: {START + timedelta(days=21):%a %b %d %H:%M:%S} UTC {START:%Y}",
               "uname: Linux gpu-node-17.cluster.local 6.8.0-45-generic #45-Ubuntu SMP PREEMPT_DYNAMIC x86_64 x86_64 x86_64 GNU/Linux",
               "command line flags: "):  # fmt: skip
        out.line(ln)
    section(
        ["*** /proc/driver/nvidia/version", "*** ls: -r--r--r-- 1 root root 0 2026-11-28 10:14:02.512345678 +0000 /proc/driver/nvidia/version"],
        ["NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.183.01  Sun May 12 19:39:15 UTC 2024",
         "GCC version:  gcc version 12.3.0 (Ubuntu 12.3.0-1ubuntu1~22.04)"],
    )  # fmt: skip
    for i, bus in enumerate(BUSES):
        section(
            [f"*** /proc/driver/nvidia/gpus/0000:{bus.lower()}:00.0/information"],
            ["Model: \t\t NVIDIA H100 80GB HBM3", "IRQ:   \t\t 0", f"GPU UUID: \t GPU-{i:08x}-0000-0000-0000-000000000000",
             "Video BIOS: \t 96.00.99.00.01", "Bus Type: \t PCIe", "DMA Size: \t 52 bits", f"Bus Location: \t 0000:{bus.lower()}:00.0"],
        )  # fmt: skip
    lspci = []
    while len(lspci) < 3000:
        b = rng.choice(BUSES).lower()
        lspci += [f"{b}:00.0 3D controller: NVIDIA Corporation GH100 [H100 SXM5 80GB] (rev a1)",
                  "\tSubsystem: NVIDIA Corporation GH100 [H100 SXM5 80GB]",
                  "\tFlags: bus master, fast devsel, latency 0, IRQ 16, NUMA node 0, IOMMU group 22",
                  f"\tMemory at {rng.getrandbits(32):08x} (32-bit, non-prefetchable) [size=16M]",
                  "\tCapabilities: [60] Power Management version 3", "\tKernel driver in use: nvidia", ""]  # fmt: skip
    section(['/sbin/lspci -d "10de:*" -v -xxx'], lspci)
    one = _Lines()
    _q(one, rng)  # one full dump (the 1-byte budget ends the loop after it)
    section(["/usr/bin/nvidia-smi --query"], one.lines)
    for title, share, style in (("dmesg:", 0.6, "dmesg_raw"), ("journalctl -b -0:", 1.0, "journal_iso")):
        out.flush()
        with tempfile.TemporaryDirectory() as d:
            tmp = pathlib.Path(d) / "k.log"
            big_kernel.write(tmp, max(0.01, (out.limit - out.n) / 1e6 * share), rng.randrange(1 << 30), style)
            out.line("")
            out.line(_SEP)
            out.line("")
            out.line(title)
            out.line("")
            out.flush()
            with open(tmp, encoding="utf-8") as fh:
                for ln in fh:
                    out.line(ln.rstrip("\n"))
                    if out.full:
                        break
    if not out.full:
        section(["/usr/bin/nvidia-smi topo -m"], ["\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID",
                "GPU0\t X \tNV18\t0-55\t0\t\tN/A", "GPU1\tNV18\t X \t0-55\t0\t\tN/A"])  # fmt: skip


def write(path: pathlib.Path, mb: float, seed: int = 0, kind: str = "dmon") -> None:
    """Write about `mb` MB of `kind` (one of KINDS) monitoring output to `path`."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}")
    rng = random.Random(f"{seed}:{kind}")
    with open(path, "w", encoding="utf-8", newline="\n") as fh:
        out = _Out(fh, int(mb * 1e6))
        if kind == "bugreport":
            _bugreport(out, rng)
        else:
            {"dmon": _dmon, "csv": _csv, "q": _q, "table": _table, "xml": _xml, "ib": _ib}[kind](out, rng)
        out.flush()


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit("usage: big_nvsmi.py OUT MB [SEED] [KIND: " + "|".join(KINDS) + "]")
    write(
        pathlib.Path(sys.argv[1]),
        float(sys.argv[2]),
        int(sys.argv[3]) if len(sys.argv) > 3 else 0,
        sys.argv[4] if len(sys.argv) > 4 else "dmon",
    )
