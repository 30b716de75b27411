"""nvidia-smi outputs: `-q` text, `-q -x` XML, `--query-gpu` CSV loop, `dmon -o DT`, `nvlink -e`."""

from __future__ import annotations

import time
from collections.abc import Iterator

from forensics.simulate.fleet import Node
from forensics.simulate.job import Sim
from forensics.simulate.state import (
    HW_POWER_BRAKE,
    HW_SLOWDOWN,
    HW_THERMAL,
    IDLE,
    SW_POWER_CAP,
    SW_THERMAL,
    GpuState,
    NodeState,
)


def ctime(t: float) -> str:
    return time.strftime("%a %b %d %H:%M:%S %Y", time.gmtime(t))


def _act(flag: bool) -> str:
    return "Active" if flag else "Not Active"


def _q_lines(sim: Sim, node: Node, ns: NodeState, t: float) -> Iterator[str]:
    plat = sim.style.platform
    old = node.driver.startswith("525")
    cuda = node.cuda[0]
    states = [ns.state(g.index, t) for g in node.gpus]
    for g, s in zip(node.gpus, states, strict=True):
        if s.lost:
            yield f"Unable to determine the device handle for GPU{g.smi_bus[4:]}: Unknown Error"
    yield "==============NVSMI LOG=============="
    yield ""
    yield f"{'Timestamp'.ljust(42)}: {ctime(t + ns.skew)}"
    yield f"{'Driver Version'.ljust(42)}: {node.driver}"
    yield f"{'CUDA Version'.ljust(42)}: {cuda}"
    yield ""
    yield f"{'Attached GPUs'.ljust(42)}: {len(node.gpus)}"
    for g, s in zip(node.gpus, states, strict=True):
        if s.lost:
            continue
        yield f"GPU {g.smi_bus}"
        yield from _q_gpu(plat, node, g, s, old)
        yield ""


def _q_gpu(plat: dict, node: Node, g, s: GpuState, old: bool) -> Iterator[str]:
    def kv(level: int, key: str, value: object) -> str:
        return " " * (4 * level) + key.ljust(42 - 4 * level) + f": {value}"

    def hd(level: int, key: str) -> str:
        return " " * (4 * level) + key

    yield kv(1, "Product Name", plat["name"])
    yield kv(1, "Product Brand", "NVIDIA")
    yield kv(1, "Product Architecture", plat["arch"])
    yield kv(1, "Display Mode", "Disabled")
    yield kv(1, "Display Active", "Disabled")
    yield kv(1, "Persistence Mode", "Enabled")
    if not old:
        yield kv(1, "Addressing Mode", "None")
    yield hd(1, "MIG Mode")
    yield kv(2, "Current", "Disabled")
    yield kv(2, "Pending", "Disabled")
    yield kv(1, "Accounting Mode", "Disabled")
    yield kv(1, "Accounting Mode Buffer Size", 4000)
    yield hd(1, "Driver Model")
    yield kv(2, "Current", "N/A")
    yield kv(2, "Pending", "N/A")
    yield kv(1, "Serial Number", g.serial)
    yield kv(1, "GPU UUID", g.uuid)
    yield kv(1, "Minor Number", g.index)
    yield kv(1, "VBIOS Version", node.vbios)
    yield kv(1, "MultiGPU Board", "No")
    yield kv(1, "Board ID", f"0x{g.bus:x}00")
    yield kv(1, "Board Part Number", plat["board_part"])
    yield kv(1, "GPU Part Number", plat["gpu_part"])
    yield kv(1, "FRU Part Number", "N/A")
    yield kv(1, "Module ID", g.module_id)
    yield hd(1, "Inforom Version")
    yield kv(2, "Image Version", plat["inforom"])
    yield kv(2, "OEM Object", "2.1")
    yield kv(2, "ECC Object", plat["ecc_obj"])
    yield kv(2, "Power Management Object", "N/A")
    yield hd(1, "GPU Operation Mode")
    yield kv(2, "Current", "N/A")
    yield kv(2, "Pending", "N/A")
    yield kv(1, "GSP Firmware Version", node.driver)
    yield hd(1, "GPU Virtualization Mode")
    yield kv(2, "Virtualization Mode", "None")
    yield kv(2, "Host VGPU Mode", "N/A")
    if not old:
        yield hd(1, "GPU Reset Status")
        yield kv(2, "Reset Required", "Yes" if s.remap_pending else "No")
        yield kv(2, "Drain and Reset Recommended", "Yes" if s.remap_failure else "No")
    yield hd(1, "IBMNPU")
    yield kv(2, "Relaxed Ordering Mode", "N/A")
    yield hd(1, "PCI")
    yield kv(2, "Bus", f"0x{g.bus:02X}")
    yield kv(2, "Device", "0x00")
    yield kv(2, "Domain", "0x0000")
    yield kv(2, "Device Id", plat["device_id"])
    yield kv(2, "Bus Id", g.smi_bus)
    yield kv(2, "Sub System Id", plat["subsys"])
    yield hd(2, "GPU Link Info")
    yield hd(3, "PCIe Generation")
    yield kv(4, "Max", plat["pcie_gen"])
    yield kv(4, "Current", s.pcie_gen)
    if not old:
        yield kv(4, "Device Current", s.pcie_gen)
        yield kv(4, "Device Max", plat["pcie_gen"])
        yield kv(4, "Host Max", plat["pcie_gen"])
    yield hd(3, "Link Width")
    yield kv(4, "Max", "16x")
    yield kv(4, "Current", f"{s.pcie_width}x")
    yield hd(2, "Bridge Chip")
    yield kv(3, "Type", "N/A")
    yield kv(3, "Firmware", "N/A")
    yield kv(2, "Replays Since Reset", s.replays)
    yield kv(2, "Replay Number Rollovers", 0)
    yield kv(2, "Tx Throughput", f"{s.util * 4100} KB/s")
    yield kv(2, "Rx Throughput", f"{s.util * 3900} KB/s")
    yield kv(2, "Atomic Caps Inbound", "N/A")
    yield kv(2, "Atomic Caps Outbound", "N/A")
    yield kv(1, "Fan Speed", "N/A")
    yield kv(1, "Performance State", s.perf_state)
    r = s.reasons
    yield hd(1, "Clocks Throttle Reasons" if old else "Clocks Event Reasons")
    yield kv(2, "Idle", _act(r & IDLE))
    yield kv(2, "Applications Clocks Setting", "Not Active")
    yield kv(2, "SW Power Cap", _act(r & SW_POWER_CAP))
    yield kv(2, "HW Slowdown", _act(r & HW_SLOWDOWN))
    yield kv(3, "HW Thermal Slowdown", _act(r & HW_THERMAL))
    yield kv(3, "HW Power Brake Slowdown", _act(r & HW_POWER_BRAKE))
    yield kv(2, "Sync Boost", "Not Active")
    yield kv(2, "SW Thermal Slowdown", _act(r & SW_THERMAL))
    yield kv(2, "Display Clock Setting", "Not Active")
    yield kv(1, "Sparse Operation Mode", "Disabled")
    total, res = plat["mem_total"], plat["mem_reserved"]
    yield hd(1, "FB Memory Usage")
    yield kv(2, "Total", f"{total} MiB")
    yield kv(2, "Reserved", f"{res} MiB")
    yield kv(2, "Used", f"{s.mem_used} MiB")
    yield kv(2, "Free", f"{total - res - s.mem_used} MiB")
    yield hd(1, "BAR1 Memory Usage")
    yield kv(2, "Total", "131072 MiB")
    yield kv(2, "Used", "1 MiB" if not s.util else "37 MiB")
    yield kv(2, "Free", "131071 MiB" if not s.util else "131035 MiB")
    if not old:
        yield hd(1, "Conf Compute Protected Memory Usage")
        yield kv(2, "Total", "0 MiB")
        yield kv(2, "Used", "0 MiB")
        yield kv(2, "Free", "0 MiB")
    yield kv(1, "Compute Mode", "Default")
    yield hd(1, "Utilization")
    yield kv(2, "Gpu", f"{s.util} %")
    yield kv(2, "Memory", f"{s.mem_util} %")
    yield kv(2, "Encoder", "0 %")
    yield kv(2, "Decoder", "0 %")
    if not old:
        yield kv(2, "JPEG", "0 %")
        yield kv(2, "OFA", "0 %")
    yield hd(1, "Encoder Stats")
    yield kv(2, "Active Sessions", 0)
    yield kv(2, "Average FPS", 0)
    yield kv(2, "Average Latency", 0)
    yield hd(1, "FBC Stats")
    yield kv(2, "Active Sessions", 0)
    yield kv(2, "Average FPS", 0)
    yield kv(2, "Average Latency", 0)
    yield hd(1, "ECC Mode")
    yield kv(2, "Current", "Enabled")
    yield kv(2, "Pending", "Enabled")
    yield hd(1, "ECC Errors")
    yield hd(2, "Volatile")
    yield kv(3, "SRAM Correctable", 0)
    yield kv(3, "SRAM Uncorrectable Parity", 0)
    yield kv(3, "SRAM Uncorrectable SEC-DED", 0)
    yield kv(3, "DRAM Correctable", s.ecc_corr_vol)
    yield kv(3, "DRAM Uncorrectable", s.ecc_uncorr_vol)
    yield hd(2, "Aggregate")
    yield kv(3, "SRAM Correctable", s.sram_corr_agg)
    yield kv(3, "SRAM Uncorrectable Parity", 0)
    yield kv(3, "SRAM Uncorrectable SEC-DED", 0)
    yield kv(3, "DRAM Correctable", s.ecc_corr_agg)
    yield kv(3, "DRAM Uncorrectable", s.ecc_uncorr_agg)
    yield kv(3, "SRAM Threshold Exceeded", "No")
    yield hd(2, "Aggregate Uncorrectable SRAM Sources")
    for src in ("SRAM L2", "SRAM SM", "SRAM Microcontroller", "SRAM PCIE", "SRAM Other"):
        yield kv(3, src, 0)
    yield hd(1, "Retired Pages")
    yield kv(2, "Single Bit ECC", "N/A")
    yield kv(2, "Double Bit ECC", "N/A")
    yield kv(2, "Pending Page Blacklist", "N/A")
    yield hd(1, "Remapped Rows")
    yield kv(2, "Correctable Error", s.remap_corr)
    yield kv(2, "Uncorrectable Error", s.remap_uncorr)
    yield kv(2, "Pending", "Yes" if s.remap_pending else "No")
    yield kv(2, "Remapping Failure Occurred", "Yes" if s.remap_failure else "No")
    yield hd(2, "Bank Remap Availability Histogram")
    banks = 2560 if plat["short"] == "h100" else 640
    used = s.remap_corr + s.remap_uncorr
    yield kv(3, "Max", f"{banks - used} bank(s)")
    yield kv(3, "High", f"{used} bank(s)")
    yield kv(3, "Partial", "0 bank(s)")
    yield kv(3, "Low", "0 bank(s)")
    yield kv(3, "None", "0 bank(s)")
    yield hd(1, "Temperature")
    yield kv(2, "GPU Current Temp", f"{s.temp} C")
    if plat["margins"]:
        yield kv(2, "GPU T.Limit Temp", f"{max(1, 87 - s.temp)} C")
        yield kv(2, "GPU Shutdown T.Limit Temp", "-8 C")
        yield kv(2, "GPU Slowdown T.Limit Temp", "-2 C")
        yield kv(2, "GPU Max Operating T.Limit Temp", "0 C")
    else:
        yield kv(2, "GPU Shutdown Temp", "92 C")
        yield kv(2, "GPU Slowdown Temp", "89 C")
        yield kv(2, "GPU Max Operating Temp", "85 C")
    yield kv(2, "GPU Target Temperature", "N/A")
    yield kv(2, "Memory Current Temp", f"{s.mem_temp} C")
    yield kv(2, "Memory Max Operating T.Limit Temp" if plat["margins"] else "Memory Max Operating Temp",
             "0 C" if plat["margins"] else "95 C")
    tdp = plat["tdp"]
    yield hd(1, "Power Readings" if old else "GPU Power Readings")
    yield kv(2, "Power Draw", f"{s.power:.2f} W")
    yield kv(2, "Current Power Limit", f"{tdp:.2f} W")
    yield kv(2, "Requested Power Limit", f"{tdp:.2f} W")
    yield kv(2, "Default Power Limit", f"{tdp:.2f} W")
    yield kv(2, "Min Power Limit", f"{plat['min_power']:.2f} W")
    yield kv(2, "Max Power Limit", f"{tdp:.2f} W")
    if not old:
        yield hd(1, "Module Power Readings")
        for k in ("Power Draw", "Current Power Limit", "Requested Power Limit", "Default Power Limit",
                  "Min Power Limit", "Max Power Limit"):
            yield kv(2, k, "N/A")
    yield hd(1, "Clocks")
    yield kv(2, "Graphics", f"{s.sm_clock} MHz")
    yield kv(2, "SM", f"{s.sm_clock} MHz")
    yield kv(2, "Memory", f"{s.mem_clock} MHz")
    yield kv(2, "Video", f"{plat['video_clock'] if s.util else 765} MHz")
    yield hd(1, "Applications Clocks")
    yield kv(2, "Graphics", f"{plat['sm_max']} MHz")
    yield kv(2, "Memory", f"{plat['mem_clock']} MHz")
    yield hd(1, "Default Applications Clocks")
    yield kv(2, "Graphics", f"{plat['sm_max']} MHz")
    yield kv(2, "Memory", f"{plat['mem_clock']} MHz")
    yield hd(1, "Deferred Clocks")
    yield kv(2, "Memory", "N/A")
    yield hd(1, "Max Clocks")
    yield kv(2, "Graphics", f"{plat['sm_max']} MHz")
    yield kv(2, "SM", f"{plat['sm_max']} MHz")
    yield kv(2, "Memory", f"{plat['mem_clock']} MHz")
    yield kv(2, "Video", f"{plat['video_clock']} MHz")
    yield hd(1, "Max Customer Boost Clocks")
    yield kv(2, "Graphics", f"{plat['sm_max']} MHz")
    yield hd(1, "Clock Policy")
    yield kv(2, "Auto Boost", "N/A")
    yield kv(2, "Auto Boost Default", "N/A")
    yield hd(1, "Voltage")
    yield kv(2, "Graphics", "875.000 mV" if s.util else "665.000 mV")
    yield hd(1, "Fabric")
    yield kv(2, "State", "Completed")
    yield kv(2, "Status", "Success")
    yield kv(1, "Processes", "None")


def q_text(sim: Sim, node: Node, ns: NodeState, t: float) -> str:
    return "\n".join(_q_lines(sim, node, ns, t)) + "\n"


def q_xml(sim: Sim, node: Node, ns: NodeState, t: float) -> str:
    plat = sim.style.platform
    old = node.driver.startswith("525")
    pre = "throttle" if old else "event"
    dtd = "nvsmi_device_v11.dtd" if old else "nvsmi_device_v12.dtd"
    out = ['<?xml version="1.0" ?>', f'<!DOCTYPE nvidia_smi_log SYSTEM "{dtd}">', "<nvidia_smi_log>"]
    out.append(f"\t<timestamp>{ctime(t + ns.skew)}</timestamp>")
    out.append(f"\t<driver_version>{node.driver}</driver_version>")
    out.append(f"\t<cuda_version>{node.cuda[0]}</cuda_version>")
    out.append(f"\t<attached_gpus>{len(node.gpus)}</attached_gpus>")
    for g in node.gpus:
        s = ns.state(g.index, t)
        if s.lost:
            continue
        r = s.reasons
        total, res = plat["mem_total"], plat["mem_reserved"]
        tags = [
            ("product_name", plat["name"]), ("product_brand", "NVIDIA"),
            ("product_architecture", plat["arch"]), ("display_mode", "Disabled"),
            ("display_active", "Disabled"), ("persistence_mode", "Enabled"),
            ("mig_mode", [("current_mig", "Disabled"), ("pending_mig", "Disabled")]),
            ("mig_devices", "\n\t\t\tNone\n\t\t"),
            ("accounting_mode", "Disabled"), ("accounting_mode_buffer_size", "4000"),
            ("serial", g.serial), ("uuid", g.uuid), ("minor_number", str(g.index)),
            ("vbios_version", node.vbios), ("multigpu_board", "No"), ("board_id", f"0x{g.bus:x}00"),
            ("board_part_number", plat["board_part"]), ("gpu_part_number", plat["gpu_part"]),
            ("gpu_module_id", str(g.module_id)),
            ("inforom_version", [("img_version", plat["inforom"]), ("oem_object", "2.1"),
                                 ("ecc_object", plat["ecc_obj"]), ("pwr_object", "N/A")]),
            ("gsp_firmware_version", node.driver),
            ("pci", [
                ("pci_bus", f"{g.bus:02X}"), ("pci_device", "00"), ("pci_domain", "0000"),
                ("pci_device_id", plat["device_id"][2:]), ("pci_bus_id", g.smi_bus),
                ("pci_sub_system_id", plat["subsys"][2:]),
                ("pci_gpu_link_info", [
                    ("pcie_gen", [("max_link_gen", str(plat["pcie_gen"])),
                                  ("current_link_gen", str(s.pcie_gen))]),
                    ("link_widths", [("max_link_width", "16x"),
                                     ("current_link_width", f"{s.pcie_width}x")]),
                ]),
                ("replay_counter", str(s.replays)), ("replay_rollover_counter", "0"),
                ("tx_util", f"{s.util * 4100} KB/s"), ("rx_util", f"{s.util * 3900} KB/s"),
            ]),
            ("fan_speed", "N/A"), ("performance_state", s.perf_state),
            (f"clocks_{pre}_reasons", [
                (f"clocks_{pre}_reason_gpu_idle", _act(r & IDLE)),
                (f"clocks_{pre}_reason_applications_clocks_setting", "Not Active"),
                (f"clocks_{pre}_reason_sw_power_cap", _act(r & SW_POWER_CAP)),
                (f"clocks_{pre}_reason_hw_slowdown", _act(r & HW_SLOWDOWN)),
                (f"clocks_{pre}_reason_hw_thermal_slowdown", _act(r & HW_THERMAL)),
                (f"clocks_{pre}_reason_hw_power_brake_slowdown", _act(r & HW_POWER_BRAKE)),
                (f"clocks_{pre}_reason_sync_boost", "Not Active"),
                (f"clocks_{pre}_reason_sw_thermal_slowdown", _act(r & SW_THERMAL)),
                (f"clocks_{pre}_reason_display_clocks_setting", "Not Active"),
            ]),
            ("fb_memory_usage", [("total", f"{total} MiB"), ("reserved", f"{res} MiB"),
                                 ("used", f"{s.mem_used} MiB"),
                                 ("free", f"{total - res - s.mem_used} MiB")]),
            ("compute_mode", "Default"),
            ("utilization", [("gpu_util", f"{s.util} %"), ("memory_util", f"{s.mem_util} %"),
                             ("encoder_util", "0 %"), ("decoder_util", "0 %")]),
            ("ecc_mode", [("current_ecc", "Enabled"), ("pending_ecc", "Enabled")]),
            ("ecc_errors", [
                ("volatile", [("sram_correctable", "0"), ("sram_uncorrectable", "0"),
                              ("dram_correctable", str(s.ecc_corr_vol)),
                              ("dram_uncorrectable", str(s.ecc_uncorr_vol))]),
                ("aggregate", [("sram_correctable", str(s.sram_corr_agg)), ("sram_uncorrectable", "0"),
                               ("dram_correctable", str(s.ecc_corr_agg)),
                               ("dram_uncorrectable", str(s.ecc_uncorr_agg))]),
            ]),
            ("retired_pages", [("multiple_single_bit_retirement", [("retired_count", "N/A"),
                                                                  ("retired_pagelist", "N/A")]),
                               ("double_bit_retirement", [("retired_count", "N/A"),
                                                          ("retired_pagelist", "N/A")]),
                               ("pending_blacklist", "N/A"), ("pending_retirement", "N/A")]),
            ("remapped_rows", [("remapped_row_corr", str(s.remap_corr)),
                               ("remapped_row_unc", str(s.remap_uncorr)),
                               ("remapped_row_pending", "Yes" if s.remap_pending else "No"),
                               ("remapped_row_failure", "Yes" if s.remap_failure else "No")]),
            ("temperature", [("gpu_temp", f"{s.temp} C"),
                             ("gpu_temp_max_threshold", "92 C"), ("gpu_temp_slow_threshold", "89 C"),
                             ("gpu_temp_max_gpu_threshold", "85 C"),
                             ("gpu_target_temperature", "N/A"), ("memory_temp", f"{s.mem_temp} C"),
                             ("gpu_temp_max_mem_threshold", "95 C")]),
            ("power_readings" if old else "gpu_power_readings", [
                ("power_state", s.perf_state), ("power_draw", f"{s.power:.2f} W"),
                ("current_power_limit", f"{plat['tdp']:.2f} W"),
                ("requested_power_limit", f"{plat['tdp']:.2f} W"),
                ("default_power_limit", f"{plat['tdp']:.2f} W"),
                ("min_power_limit", f"{plat['min_power']:.2f} W"),
                ("max_power_limit", f"{plat['tdp']:.2f} W")]),
            ("clocks", [("graphics_clock", f"{s.sm_clock} MHz"), ("sm_clock", f"{s.sm_clock} MHz"),
                        ("mem_clock", f"{s.mem_clock} MHz"), ("video_clock", "1545 MHz")]),
            ("max_clocks", [("graphics_clock", f"{plat['sm_max']} MHz"),
                            ("sm_clock", f"{plat['sm_max']} MHz"),
                            ("mem_clock", f"{plat['mem_clock']} MHz"),
                            ("video_clock", f"{plat['video_clock']} MHz")]),
            ("fabric", [("state", "Completed"), ("status", "Success")]),
            ("processes", "\n\t\t"),
        ]
        out.append(f'\t<gpu id="{g.smi_bus}">')
        _xml(out, tags, 2)
        out.append("\t</gpu>")
        out.append("")
    out.append("</nvidia_smi_log>")
    return "\n".join(out) + "\n"


def _xml(out: list[str], tags, level: int) -> None:
    pad = "\t" * level
    for name, val in tags:
        if isinstance(val, list):
            out.append(f"{pad}<{name}>")
            _xml(out, val, level + 1)
            out.append(f"{pad}</{name}>")
        else:
            out.append(f"{pad}<{name}>{val}</{name}>")


CSV_FIELDS = [
    ("timestamp", None), ("name", None), ("pci.bus_id", None), ("index", None),
    ("utilization.gpu", "%"), ("utilization.memory", "%"), ("memory.used", "MiB"),
    ("temperature.gpu", None), ("temperature.memory", None), ("power.draw", "W"),
    ("clocks.sm", "MHz"), ("clocks.mem", "MHz"), ("clocks_event_reasons.active", None),
    ("clocks_event_reasons.sw_power_cap", None), ("clocks_event_reasons.hw_slowdown", None),
    ("clocks_event_reasons.hw_thermal_slowdown", None),
    ("clocks_event_reasons.hw_power_brake_slowdown", None),
    ("clocks_event_reasons.sw_thermal_slowdown", None),
    ("ecc.errors.corrected.volatile.total", None), ("ecc.errors.uncorrected.volatile.total", None),
    ("pcie.link.gen.current", None), ("pcie.link.width.current", None),
]


def csv_header(old: bool) -> str:
    cols = []
    for name, unit in CSV_FIELDS:
        if old:
            name = name.replace("clocks_event_reasons", "clocks_throttle_reasons")
        cols.append(f"{name} [{unit}]" if unit else name)
    return ", ".join(cols)


def csv_rows(sim: Sim, node: Node, ns: NodeState, t: float, units: bool) -> Iterator[str]:
    plat = sim.style.platform
    tw = t + ns.skew
    ts = time.strftime("%Y/%m/%d %H:%M:%S", time.gmtime(tw)) + f".{int((tw % 1) * 1000):03d}"
    u = (lambda v, s: f"{v} {s}") if units else (lambda v, s: f"{v}")
    for g in node.gpus:
        s = ns.state(g.index, t)
        if s.lost:
            yield f"Unable to determine the device handle for GPU{g.smi_bus[4:]}: Unknown Error"
            continue
        r = s.reasons
        yield ", ".join((
            ts, plat["name"], g.smi_bus, str(g.index), u(s.util, "%"), u(s.mem_util, "%"),
            u(s.mem_used, "MiB"), str(s.temp), str(s.mem_temp), u(f"{s.power:.2f}", "W"),
            u(s.sm_clock, "MHz"), u(s.mem_clock, "MHz"), f"0x{r:016x}",
            _act(r & SW_POWER_CAP), _act(r & HW_SLOWDOWN), _act(r & HW_THERMAL),
            _act(r & HW_POWER_BRAKE), _act(r & SW_THERMAL), str(s.ecc_corr_vol), str(s.ecc_uncorr_vol),
            str(s.pcie_gen), str(s.pcie_width),
        ))


DMON_HEAD = (
    "#Date       Time        gpu    pwr  gtemp  mtemp     sm    mem    enc    dec    jpg    ofa   mclk   pclk ",
    "#YYYYMMDD   HH:MM:SS    Idx      W      C      C      %      %      %      %      %      %    MHz    MHz ",
)


def dmon_rows(sim: Sim, node: Node, ns: NodeState, t: float) -> Iterator[str]:
    d = time.strftime("%Y%m%d   %H:%M:%S", time.gmtime(t + ns.skew))
    for g in node.gpus:
        s = ns.state(g.index, t)
        if s.lost:  # the GPU is gone: dmon prints no row for it any more
            continue
        yield (f" {d}  {g.index:>5}  {int(round(s.power)):>5}  {s.temp:>5}  {s.mem_temp:>5}  "
               f"{s.util:>5}  {s.mem_util:>5}      0      0      0      0  {s.mem_clock:>5}  "
               f"{s.sm_clock:>5} ")


def nvlink_errors(sim: Sim, node: Node) -> str:
    """`nvidia-smi nvlink -e` at collection time."""
    plat = sim.style.platform
    links = 18 if plat["short"] == "h100" else 12
    faults = [f for f in sim.faults if f.node == node.idx and f.kind in ("nvlink", "gpu_lost")]
    out = []
    for g in node.gpus:
        if any(f.kind == "gpu_lost" and f.gpu == g.index for f in faults):
            out.append(f"Unable to determine the device handle for GPU{g.smi_bus[4:]}: Unknown Error")
            continue
        out.append(f"GPU {g.index}: {plat['name']} (UUID: {g.uuid})")
        bad = next((f for f in faults if f.kind == "nvlink" and f.gpu == g.index), None)
        for k in range(links):
            rep = rec = crc = 0
            if bad is not None and bad.extra.get("link") == k:
                rep, rec, crc = 1873, 12, 4411
            out.append(f"\t Link {k}: Replay Errors: {rep}")
            out.append(f"\t Link {k}: Recovery Errors: {rec}")
            out.append(f"\t Link {k}: CRC Errors: {crc}")
    return "\n".join(out) + "\n"
