"""`nvidia-smi -q` text dumps (full or `-d ECC,PERFORMANCE,...`), one or many concatenated, any driver.

The dump is an indentation tree (4 spaces a level; leaves `Key<pad> : value`, headers without a colon).
Each `GPU 00000000:53:00.0` block becomes inventory rows (component 'gpu'), one gpu_samples row at the
dump's `Timestamp` (local time: ts_quality 'local_assumed_utc') and events for faults visible in the
snapshot (see `parsers._nvsmi_fields`). Key drift (`Clocks Throttle Reasons` -> `Clocks Event Reasons`,
`Retired Pages` -> `Remapped Rows`, `Power Readings` -> `GPU Power Readings`, ECC per structure vs
SRAM/DRAM) is absorbed by matching on the lower-cased key path.

NOTE: `-q` prints no GPU index; gpu_index is the block's position in its dump (nvidia-smi lists GPUs in
index order). A dump taken with `-i N` would thus number its only GPU 0.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from functools import lru_cache
from itertools import accumulate
from typing import Any

import polars as pl

from parsers import _nvsmi_fields as F
from parsers._common import repeated
from parsers._sniff import has_bytes
from parsers.base import FileContext, ParseResult, Tally

NAME = "nvidia-smi"
DESCRIPTION = "nvidia-smi -q text dumps (full, -d partial, concatenated; all driver generations)"
TABLES = ("inventory", "gpu_samples", "events")
FILENAME_HINTS = ("nvidia-smi*", "nvidia_smi*", "*smi*q*.txt", "*nvsmi*")
DETECTS = "the '==============NVSMI LOG==============' banner, or 'Driver Version :' plus 'GPU 0000xxxx:bb:dd.f' blocks"
PRIORITY = 20

BANNER = "NVSMI LOG"
RECORD_START = b"==============NVSMI LOG=============="
"""The line each dump of a `-q` loop (`nvidia-smi -q -l N`) opens with: a large file is read in chunks that
end before it (`forensics.bundle.ChunkReader`), never inside a dump."""
INVENTORY_KEY = F.INV_KEY
"""A file's inventory rows are unique on these columns (`_nvsmi_fields.frames`: repeated dumps restate the
same facts); the ingest keeps them so across the chunks of a large file."""
_KV = re.compile(r"^(?P<ind>[ \t]*)(?P<key>[^ \t:][^:]*?)[ \t]*:(?:[ \t](?P<val>.*))?$")
_HDR = re.compile(r"^(?P<ind>[ \t]*)(?P<key>[A-Za-z0-9][^:]*?)[ \t]*$")
_GPU = re.compile(r"^GPU (?P<bus>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\s*$")

# ----------------------------------------------------------------------------- key paths -> canonical

_INV = {
    "product name": "name",
    "product brand": "brand",
    "product architecture": "architecture",
    "serial number": "serial",
    "gpu uuid": "uuid",
    "pci/bus id": "bus_id",
    "vbios version": "vbios",
    "board part number": "board_part_number",
    "gpu part number": "gpu_part_number",
    "fru part number": "fru_part_number",
    "board id": "board_id",
    "module id": "module_id",
    "minor number": "minor_number",
    "multigpu board": "multigpu_board",
    "inforom version/image version": "inforom_image",
    "inforom version/oem object": "inforom_oem",
    "inforom version/ecc object": "inforom_ecc",
    "inforom version/power management object": "inforom_pwr",
    "gsp firmware version": "gsp_firmware",
    "pci/device id": "pci_device_id",
    "pci/sub system id": "pci_sub_system_id",
    "pci/gpu link info/pcie generation/max": "pcie_gen_max",
    "pci/gpu link info/pcie generation/device max": "pcie_gen_device_max",
    "pci/gpu link info/pcie generation/host max": "pcie_gen_host_max",
    "pci/gpu link info/link width/max": "pcie_width_max",
    "ecc mode/current": "ecc_mode",
    "ecc mode/pending": "ecc_mode_pending",
    "persistence mode": "persistence_mode",
    "mig mode/current": "mig_mode",
    "mig mode/pending": "mig_mode_pending",
    "compute mode": "compute_mode",
    "addressing mode": "addressing_mode",
    "gpu virtualization mode/virtualization mode": "virtualization_mode",
    "gpu reset status/reset required": "reset_required",
    "gpu reset status/drain and reset recommended": "drain_and_reset_recommended",
    "gpu recovery action": "gpu_recovery_action",
    "fabric/state": "fabric_state",
    "fabric/status": "fabric_status",
    "fabric/cliqueid": "fabric_clique_id",
    "fabric/clusteruuid": "fabric_cluster_uuid",
    "fabric/health/bandwidth": "fabric_health_bandwidth",
    "fb memory usage/total": "memory_total",
    "power readings/current power limit": "power_limit",
    "power readings/enforced power limit": "power_limit",
    "power readings/power limit": "power_limit",
    "power readings/default power limit": "default_power_limit",
    "power readings/max power limit": "max_power_limit",
    "max clocks/sm": "max_sm_clock",
    "max clocks/memory": "max_mem_clock",
    "applications clocks/graphics": "applications_clock_graphics",
    "applications clocks/memory": "applications_clock_memory",
}

# column -> [(path, priority)]; lower priority wins when several are present
_SAMPLE = {
    "utilization/gpu": ("utilization_pct", 0),
    "utilization/memory": ("mem_utilization_pct", 0),
    "fb memory usage/used": ("memory_used_mib", 0),
    "fb memory usage/total": ("memory_total_mib", 0),
    "temperature/gpu current temp": ("temperature_c", 0),
    "temperature/memory current temp": ("mem_temperature_c", 0),
    "temperature/gpu": ("temperature_c", 1),  # drivers before ~340
    "memory usage/used": ("memory_used_mib", 1),
    "memory usage/total": ("memory_total_mib", 1),
    "power readings/instantaneous power draw": ("power_w", 0),
    "power readings/power draw": ("power_w", 1),
    "power readings/average power draw": ("power_w", 2),
    "power readings/enforced power limit": ("power_limit_w", 0),
    "power readings/current power limit": ("power_limit_w", 1),
    "power readings/power limit": ("power_limit_w", 2),
    "clocks/sm": ("sm_clock_mhz", 0),
    "clocks/memory": ("mem_clock_mhz", 0),
    "retired pages/single bit ecc": ("retired_pages_sbe", 0),
    "retired pages/double bit ecc": ("retired_pages_dbe", 0),
    "retired pages/single bit ecc/count": ("retired_pages_sbe", 0),
    "retired pages/double bit ecc/count": ("retired_pages_dbe", 0),
    "retired pages/pending page blacklist": ("retired_pages_pending", 0),
    "retired pages/pending page retirement": ("retired_pages_pending", 1),
    "retired pages/pending": ("retired_pages_pending", 2),
    "remapped rows/correctable error": ("remapped_rows_correctable", 0),
    "remapped rows/uncorrectable error": ("remapped_rows_uncorrectable", 0),
    "remapped rows/pending": ("remap_pending", 0),
    "remapped rows/remapping failure occurred": ("remap_failure", 0),
    "pci/gpu link info/pcie generation/current": ("pcie_gen", 0),
    "pci/gpu link info/pcie generation/max": ("pcie_gen_max", 0),
    "pci/gpu link info/link width/current": ("pcie_width", 0),
    "pci/gpu link info/link width/max": ("pcie_width_max", 0),
}

_EXTRA = {
    "fan speed": "fan_speed",
    "power readings/average power draw": "power_draw_average",
    "power readings/instantaneous power draw": "power_draw_instant",
    "power readings/power draw": "power_draw",
    "performance state": "pstate",
    "pci/replays since reset": "pcie_replays",
    "pci/replay number rollovers": "pcie_replay_rollovers",
    "pci/tx throughput": "pcie_tx",
    "pci/rx throughput": "pcie_rx",
    "fb memory usage/reserved": "memory_reserved",
    "bar1 memory usage/used": "bar1_used",
    "clocks/graphics": "graphics_clock",
    "clocks/video": "video_clock",
    "utilization/encoder": "encoder_util",
    "utilization/decoder": "decoder_util",
    "voltage/graphics": "voltage_graphics",
    "temperature/gpu t.limit temp": "gpu_tlimit_temp",
    "temperature/gpu shutdown t.limit temp": "gpu_shutdown_tlimit_temp",
    "temperature/gpu slowdown t.limit temp": "gpu_slowdown_tlimit_temp",
    "temperature/gpu shutdown temp": "gpu_shutdown_temp",
    "temperature/gpu slowdown temp": "gpu_slowdown_temp",
    "ecc errors/aggregate/sram threshold exceeded": "sram_threshold_exceeded",
    "ecc errors/channel repair pending": "channel_repair_pending",
    "ecc errors/tpc repair pending": "tpc_repair_pending",
    "ecc errors/unrepairable memory": "unrepairable_memory",
}

_THROTTLE_PARENTS = ("clocks throttle reasons", "clocks event reasons", "clocks_throttle_reasons", "clocks_event_reasons")


def _canon_path(tokens: list[str]) -> str:
    p = "/".join(t.lower() for t in tokens)
    p = p.replace("gpu power readings/", "power readings/")
    return p


def map_leaf(snap: F.GpuSnapshot, tokens: list[str], value: str, line: int) -> None:
    """Route one `-q` leaf (key path relative to the GPU block) into the snapshot."""
    path = _canon_path(tokens)
    snap.note(value, line)
    if path in _INV:
        snap.put_inv(_INV[path], value, line)
    if path in _SAMPLE:
        col, pri = _SAMPLE[path]
        snap.put_sample(col, value, line, pri)
    if path in _EXTRA:
        snap.put_extra(_EXTRA[path], value, line)
    low = [t.lower() for t in tokens]
    if low[0] in _THROTTLE_PARENTS and len(low) >= 2:
        key = low[-1].replace(" ", "_")
        if key in F.THROTTLE_COLUMNS:
            snap.put_sample(F.THROTTLE_COLUMNS[key], value, line)
    elif low[0] == "clocks event reasons counters" and len(low) >= 2:
        snap.extra.setdefault("event_counter_" + low[-1].replace(" ", "_"), value.strip())
    elif low[0] == "ecc errors" and len(low) >= 3 and low[1] in ("volatile", "aggregate"):
        scope, rest = low[1], low[2:]
        if len(rest) == 1:
            k = rest[0]
            if "uncorrectable" in k:
                snap.parts.setdefault(f"ecc_uncorrected_{scope}", []).append((value, line))
            elif "correctable" in k:
                snap.parts.setdefault(f"ecc_corrected_{scope}", []).append((value, line))
        elif len(rest) == 2 and rest[1] == "total":
            if rest[0] == "single bit":
                snap.totals[f"ecc_corrected_{scope}"] = (value, line)
            elif rest[0] == "double bit":
                snap.totals[f"ecc_uncorrected_{scope}"] = (value, line)
    elif low[0] == "platform info" and len(low) == 2:
        snap.put_inv("platform_" + low[1].replace(" ", "_"), value, line)
        if low[1] == "module id":  # 560+ moved the HGX slot number here
            snap.put_inv("module_id", value, line)


@lru_cache(maxsize=4096)
def _leaf_plan(tokens: tuple[str, ...]) -> tuple[tuple[str, ...], ...]:
    """What `map_leaf` does with a leaf at this key path, as a list of steps (paths repeat in every dump)."""
    path = _canon_path(list(tokens))
    plan: list[tuple[str, ...]] = []
    if path in _INV:
        plan.append(("inv", _INV[path]))
    if path in _SAMPLE:
        col, pri = _SAMPLE[path]
        plan.append(("sample", col, str(pri)))
    if path in _EXTRA:
        plan.append(("extra", _EXTRA[path]))
    low = [t.lower() for t in tokens]
    if low[0] in _THROTTLE_PARENTS and len(low) >= 2:
        key = low[-1].replace(" ", "_")
        if key in F.THROTTLE_COLUMNS:
            plan.append(("sample", F.THROTTLE_COLUMNS[key], "0"))
    elif low[0] == "clocks event reasons counters" and len(low) >= 2:
        plan.append(("extra_default", "event_counter_" + low[-1].replace(" ", "_")))
    elif low[0] == "ecc errors" and len(low) >= 3 and low[1] in ("volatile", "aggregate"):
        scope, rest = low[1], low[2:]
        if len(rest) == 1:
            k = rest[0]
            if "uncorrectable" in k:
                plan.append(("part", f"ecc_uncorrected_{scope}"))
            elif "correctable" in k:
                plan.append(("part", f"ecc_corrected_{scope}"))
        elif len(rest) == 2 and rest[1] == "total":
            if rest[0] == "single bit":
                plan.append(("total", f"ecc_corrected_{scope}"))
            elif rest[0] == "double bit":
                plan.append(("total", f"ecc_uncorrected_{scope}"))
    elif low[0] == "platform info" and len(low) == 2:
        plan.append(("inv", "platform_" + low[1].replace(" ", "_")))
        if low[1] == "module id":  # 560+ moved the HGX slot number here
            plan.append(("inv", "module_id"))
    return tuple(plan)


_OPS = {"inv": 0, "sample": 1, "extra": 2, "extra_default": 3, "part": 4, "total": 5}


@lru_cache(maxsize=4096)
def _leaf_ops(tokens: tuple[str, ...]) -> tuple[tuple[int, str, int], ...]:
    """`_leaf_plan` as (operation number, argument, priority) triples for the walk's inlined dispatch."""
    return tuple((_OPS[st[0]], st[1], int(st[2]) if st[0] == "sample" else 0) for st in _leaf_plan(tokens))


_MARKERS = re.compile("|".join(re.escape(m) for m in F.ERROR_MARKERS))


def _classify(raw: str) -> tuple:  # type: ignore[type-arg]
    """What a line is, independent of the state of the walk (cached per distinct line: dumps repeat)."""
    text = raw.replace("\t", "    ").rstrip()
    if not text.strip():
        return ("blank",)
    if F.failure_event(text, 0, node="", path="") is not None:
        return ("fail", text)
    if BANNER in text and text.strip().startswith("="):
        return ("banner",)
    if (m := _GPU.match(text)) is not None:
        return ("gpu", m.group("bus"))
    m = _KV.match(text)
    h = _HDR.match(text) if m is None else None
    indent = len(text) - len(text.lstrip(" "))
    if m is not None:
        key, val = m.group("key").strip(), (m.group("val") or "").strip()
        if indent == 0:
            return ("top", key, val)
        return ("leaf", indent, key, val, _MARKERS.search(val) is not None, key.lower())
    if h is not None and indent > 0:
        key = h.group("key").strip()
        return ("header", indent, key, key.lower())
    return ("other",)


# ----------------------------------------------------------------------------- sniff / parse


def sniff(head: bytes, name: str) -> float:
    """1.0 on the NVSMI LOG banner near the top; 0.9 when it (or driver + GPU block lines) is in the head."""
    # (no decode for most heads)
    if not has_bytes(head, b"==NVSMI LOG==") and not has_bytes(head, b"Driver Version"):
        return 0.0
    text = head.decode("utf-8", "replace")
    first = "\n".join(ln for ln in text.splitlines()[:12] if not ln.startswith("#"))
    if "==NVSMI LOG==" in first:
        return 1.0
    if "==NVSMI LOG==" in text:
        return 0.9
    if re.search(r"^Driver Version\s+: ", text, re.M) and re.search(r"^GPU [0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:", text, re.M):
        return 0.8
    return 0.0


class _Dump:
    """One `-q` dump: top-level keys and GPU blocks."""

    def __init__(self, line: int) -> None:
        self.line = line
        self.top: dict[str, tuple[str, int]] = {}
        self.gpus: list[tuple[F.GpuSnapshot, list[str], int]] = []  # (snapshot, level-1 keys in order, last line)


PDSH_RE = re.compile(r"^(?P<host>(?:\d{1,3}\.){3}\d{1,3}|[A-Za-z][\w-]*\d[\w.-]*): ?(?P<rest>.*)$")


def parse(lines: pl.Series, ctx: FileContext) -> ParseResult:
    """Parse every dump in the file; see the module docstring.

    A pdsh/clush capture (`node01: GPU 00000000:53:00.0`, hosts' lines interleaved) is split per host
    first; each host's dumps are parsed on their own and their rows take that host as node.
    """
    with F.gc_paused():
        kept, banner_rows = _prepare(lines)
        rows, result = _parse(kept, banner_rows, ctx)
        return ParseResult(tables=F.frames(*rows, inv_tuples=True), **result)


def parse_many(items: Sequence[tuple[pl.Series, FileContext]]) -> list[ParseResult]:
    """`[parse(lines, ctx) for lines, ctx in items]`: the lines of all files checked in one pass, the tables
    of all files built in one construction per table (`F.frames_many`), cut back per file.

    A file is read into the kept walk of a file of the same *shape* (`_Template`: each line cut after its
    first ': ' — dumps of one machine type repeat it), not walked line by line: one polars pass over the batch
    checks each file against the template of the last file of its length (`_verify`), one gathers the values.
    A file of a new shape is walked, its shape kept (a probe); the next file of that shape is walked once
    more to make the template (so a bundle of shapes that do not repeat costs little more than walking).
    Files the shape cannot vouch for (tabs, error markers, failure lines, pdsh captures) are walked as
    `parse` walks them.
    """
    if not items:
        return []
    with F.gc_paused():
        text = pl.concat([lines.cast(pl.String) for lines, _ in items], how="vertical").fill_null("")
        sizes = [len(lines) for lines, _ in items]
        starts = list(accumulate(sizes, initial=0))
        keys = [(ctx.first_line, n) for (_l, ctx), n in zip(items, sizes, strict=True)]
        cands = [_CANDIDATES.get(key) for key in keys]
        bad, ok = _verify(text, sizes, cands)
        for k, n in enumerate(sizes):
            bad[k] = bad[k] or n > _TEMPLATE_LINES_MAX  # (a long file is walked: no template kept of it)
        plans: list[_Template | None] = [None] * len(items)
        new: dict[tuple[int, int], _Template] = {}  # (probes and templates made in this batch, by key)
        made: dict[tuple[int, int], _Template] = {}  # (templates made in this batch from a probe's shape)
        build: list[pl.DataFrame] = []  # (`_build_columns` of the batch for probes, once needed)

        def columns(k: int) -> pl.DataFrame:
            if not build:
                build.append(_build_columns(text, full=False))
            return build[0].slice(starts[k], sizes[k])

        def keep(key: tuple[int, int], tmpl: _Template) -> None:
            if len(_CANDIDATES) >= _CANDIDATES_MAX:
                _CANDIDATES.clear()
            _CANDIDATES[key] = new[key] = tmpl

        def adopt(k: int, c: _Template) -> _Template:
            """The template of file k, of the shape of `c`: `c`, or when `c` is a probe (the shape of a file
            walked before: the shape repeats) one made of file k."""
            if not c.probe:
                return c
            if keys[k] not in made:
                lines = text.slice(starts[k], sizes[k])
                kept, _banner_rows = _prepare(lines)
                made[keys[k]] = _template(kept, _build_columns(lines), items[k][1])
                keep(keys[k], made[keys[k]])
            return made[keys[k]]

        # A file of a length with no template of its shape is walked, its shape kept as a probe; a file of
        # the probe's shape is walked once more to make the template. The files of a length that got a probe
        # or template in this batch are checked against it in one more pass.
        pending = []
        for k, c in enumerate(cands):
            if bad[k]:
                continue
            if c is not None and ok[k]:
                plans[k] = adopt(k, c)
            elif keys[k] in new:
                pending.append(k)
            else:
                keep(keys[k], _probe(columns(k)))
        if pending:
            sub = pl.concat([text.slice(starts[k], sizes[k]) for k in pending])
            _bad, ok2 = _verify(sub, [sizes[k] for k in pending], [new[keys[k]] for k in pending])
            for k, o in zip(pending, ok2, strict=True):
                if o:
                    plans[k] = adopt(k, new[keys[k]])
        plans = [p if p is not None and p.valid else None for p in plans]
        # the values of the templated files' lines, in one pass
        values_s = pl.Series([], dtype=pl.String)
        used = [(starts[k], t) for k, t in enumerate(plans) if t is not None and t.cut]
        if used:
            pos = pl.concat([t.at for _s, t in used])
            at = pl.Series([s for s, _t in used], dtype=pl.Int64).repeat_by(
                pl.Series([len(t.cut) for _s, t in used], dtype=pl.UInt32)
            )
            cut = pl.concat([t.cuts for _s, t in used])
            values_s = text.gather(at.explode() + pos).str.slice(cut).str.strip_chars()
        values: list[str] = values_s.to_list()
        got: list[Any] = [None] * len(items)  # (rows, other ParseResult fields) per file
        at = 0
        inv_groups: dict[int, tuple[_Template, list[int], list[int]]] = {}  # id -> template, files, offsets
        for k, (_lines, ctx) in enumerate(items):
            tmpl = plans[k]
            if tmpl is not None:
                nd, nb = len(tmpl.dyn), len(tmpl.blanks)
                vals = values[at : at + nd]
                blanks = values[at + nd : at + nd + nb]
                at += nd + nb
                # (no value the template holds non-blank is blank here, and the reverse)
                if "" not in vals and blanks.count("") == nb:
                    got[k] = _instantiate(tmpl, vals, text, starts[k], ctx)
                    if tmpl.inventory is not None and tmpl.inventory.height:
                        g = inv_groups.setdefault(id(tmpl), (tmpl, [], []))
                        g[1].append(k)
                        g[2].append(at - nd - nb)
        walk = [k for k in range(len(items)) if got[k] is None]
        if walk:  # (the files walked: their lines prepared in one pass)
            kept, banner_rows = _prepare(pl.concat([text.slice(starts[k], sizes[k]) for k in walk]))
            begin = list(accumulate((sizes[k] for k in walk), initial=0))
            per_file: list[list[int]] = [[] for _ in walk]
            for i in banner_rows:
                w = bisect_right(begin, i) - 1
                per_file[w].append(i - begin[w])
            for w, k in enumerate(walk):
                got[k] = _parse(kept[begin[w] : begin[w + 1]], per_file[w], items[k][1])
        rows = [g[0] for g in got]
        results = [g[1] for g in got]
        tables = F.frames_many(rows, inv_tuples=True)
        for tmpl, ks, offsets in inv_groups.values():
            inv = _inventories(tmpl, values_s, offsets, [items[k][1] for k in ks])
            r = tmpl.inventory.height if tmpl.inventory is not None else 0
            for i, k in enumerate(ks):
                tables[k]["inventory"] = inv.slice(i * r, r)
        return [ParseResult(tables=t, **result) for t, result in zip(tables, results, strict=True)]


_BAD = re.compile(
    "[\t\x01\x1c-\x1f]|" + "|".join(re.escape(m) for m in (*F.ERROR_MARKERS, *F.FAILURE_LITERALS))
).pattern
"""A line matching this makes its file no template's: tabs (expanded in values), error markers and failure
literals (the walk reads the values), the separators Python strips and polars does not, the token mark.
(One regex: faster here than `contains_any` of the literals.)"""

_PREFIX, _WHOLE = 1, 2
"""The kinds of a template's lines (`_Template.kind`): a line whose value behind its first ': ' may differ; a
line that must be the same (no ': ', the banner literal, or blank)."""


def _verify(
    text: pl.Series, sizes: list[int], cands: list[_Template | None]
) -> tuple[list[bool], list[bool]]:
    """Per file of a batch (`text`: the files' lines, nulls as ""): whether a line matches `_BAD`, and whether
    the file has the shape of its candidate template (False without one): each line the same where the
    template's is `_WHOLE`, and where it is `_PREFIX`, starting with the template's line up to its first ': '
    (so its own first ': ' is there: the same key, indentation and kind of line; see `_template` for why a
    banner literal in the value changes nothing). Per-file counts from running sums (no group_by)."""
    t = pl.col("t")
    cols: dict[str, Any] = {"t": text}
    if any(c is not None for c in cands):
        shape, kind = [], []
        for c, n in zip(cands, sizes, strict=True):
            shape.append(c.shape if c is not None else repeated(None, n, pl.String))
            kind.append(c.kind if c is not None else repeated(None, n, pl.Int8))
        cols["s"] = pl.concat(shape, rechunk=True)
        cols["k"] = pl.concat(kind, rechunk=True)
        # (= the line starts with the shape's where it is `_PREFIX`, is it where `_WHOLE`: no when/then)
        ok = t.str.starts_with(pl.col("s")) & (
            (pl.col("k") == _PREFIX) | (t.str.len_bytes() == pl.col("s").str.len_bytes())
        )
        nok = (~ok).fill_null(True)
    else:
        nok = pl.lit(True)
    sums = pl.DataFrame(cols).select(
        bad=t.str.contains(_BAD).cast(pl.UInt32).cum_sum(), nok=nok.cast(pl.UInt32).cum_sum()
    )
    ends = [e - 1 for e in accumulate(sizes)]
    at_end = sums.select(pl.all().gather([max(e, 0) for e in ends])).rows() if ends else []
    bad, good = [False] * len(sizes), [False] * len(sizes)
    prev = (0, 0)
    for k, n in enumerate(sizes):
        if n:  # (a file of no lines: no template, nothing bad)
            b, o = at_end[k]
            bad[k], good[k] = b > prev[0], o == prev[1] and cands[k] is not None
            prev = (b, o)
    return bad, good


class _RecSnap(F.GpuSnapshot):
    """A template walk's snapshot: its `put_sample` calls (a column's later candidates) kept, not applied."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.later: list[tuple[str, str, int, int]] = []

    def put_sample(self, col: str, value: str, line: int, priority: int = 0) -> None:
        self.later.append((col, value, line, priority))


class _Template:
    """The walk of one file (`_template`), for the files of its shape (`shape`, `kind`: per line, what a
    file's line must be, see `_verify`; `valid`: False when the shape cannot promise the same walk, e.g. a
    pdsh capture; `probe`: only the shape of a file walked, see `parse_many`). Values are indices into a
    file's values: the values of the lines `dyn` (positions in the file; the value behind the first ': ',
    stripped: none blank) then, from the end, `statics` (values the shape fixes). The values of the lines
    `blanks` must be blank. `cut`: where the values of the lines `dyn` then `blanks` start (characters)."""

    __slots__ = (
        "shape", "kind", "valid", "probe", "dyn", "blanks", "cut", "at", "cuts", "statics", "dumps", "parsed",
        "unrecognized", "examples", "last_header_empty", "inventory",
    )  # fmt: skip

    def __init__(self, shape: pl.Series, kind: pl.Series) -> None:
        self.shape, self.kind, self.valid, self.probe = shape, kind, True, False
        self.dyn: list[int] = []
        self.blanks: list[int] = []
        self.cut: list[int] = []
        self.at = self.cuts = pl.Series([], dtype=pl.Int64)  # (`dyn` then `blanks`, and `cut`, as columns)
        self.statics: list[str] = []
        self.dumps: list[tuple[int, list[tuple[str, int, int]], list[tuple[Any, list[str], int]]]] = []
        self.parsed = 0
        self.unrecognized = 0
        self.examples: list[int] = []
        self.last_header_empty = False
        self.inventory: pl.DataFrame | None = None  # (`_inventory_layout`)


_CANDIDATES: dict[tuple[int, int], _Template] = {}
"""By (first line, number of lines): the template of the last file of that length seen."""
_CANDIDATES_MAX = 64
_TEMPLATE_LINES_MAX = 50_000
"""Files of more lines are walked (a `-q -l` loop's dumps, a chunk of one): their templates would take memory
and seldom serve again."""


def _build_columns(text: pl.Series, full: bool = True) -> pl.DataFrame:
    """Per line of a batch (nulls as ""), what `_template` needs (`full`; else what `_probe` needs): `shape`
    (the line up to its first ': ', inclusive, for a `_PREFIX` line: not blank, no banner literal; else the
    line), `kind`, `blank_value` (a `_PREFIX` line with nothing but blanks behind its first ': '), `banner`
    (holds the banner literal), `check` (a `_PREFIX` line not indented, or starting with '=' after blanks:
    `_template` looks at its key)."""
    t = pl.col("t")
    pos = t.str.find(": ", literal=True)
    banner = t.str.contains(BANNER, literal=True)
    prefix = pos.is_not_null() & ~banner & (t.str.strip_chars().str.len_bytes() > 0)
    cols = {
        # (`pos` counts bytes, slice characters: on a non-ASCII line the shape keeps more, never less)
        "shape": pl.when(prefix).then(t.str.slice(0, pos + 2)).otherwise(t),
        "kind": pl.when(prefix).then(pl.lit(_PREFIX, pl.Int8)).otherwise(pl.lit(_WHOLE, pl.Int8)),
    }
    if full:
        cols |= {
            "blank_value": prefix & (t.str.splitn(": ", 2).struct.field("field_1").str.strip_chars() == ""),
            "banner": banner,
            "check": prefix & (~t.str.starts_with(" ") | t.str.strip_chars_start().str.starts_with("=")),
        }
    return pl.DataFrame({"t": text}).lazy().select(**cols).collect()


def _probe(cols: pl.DataFrame) -> _Template:
    """A probe: the shape of a file (its `_build_columns`), no walk (`valid` False). (The columns copied: a
    slice would keep the whole batch's.)"""
    tm = _Template(
        pl.Series(cols.get_column("shape").to_list(), dtype=pl.String),
        pl.Series(cols.get_column("kind").to_list(), dtype=pl.Int8),
    )
    tm.valid, tm.probe = False, True
    return tm


def _template(kept: list[str | None], cols: pl.DataFrame, ctx: FileContext) -> _Template:
    """Walk one file (`kept`: its lines as `_prepare` keeps them, none of `_BAD`; `cols`: its
    `_build_columns`) and keep, for each value the walk stored, its line (every stored value is the value of
    the line it records): the value of a `_PREFIX` line is the file's own, any other a value of the shape.

    Another file of the shape (`_verify`) walks the same: `_classify` reads a `_PREFIX` line's part before
    its first ': ' the same, and its value is no error marker nor failure (`_BAD`); blank values are where
    they were (`blanks`, checked by `parse_many`), so the inventory's first non-blank value comes from the
    same line. A banner literal in a value changes nothing either: `_classify` takes a line for the banner
    only when it starts with '=', and `_parse` a file for a pdsh capture only when a banner line starts with
    a host name and ':' (the template is no valid one when a `_PREFIX` line does either)."""
    first = ctx.first_line
    tm = _probe(cols)
    tm.probe = False
    tm.blanks = cols.get_column("blank_value").arg_true().to_list()
    valid = True
    for i in cols.get_column("check").arg_true().to_list():
        t = kept[i] or ""
        if t.partition(": ")[0].lstrip().startswith("=") or PDSH_RE.match(t) is not None:
            valid = False
    for i in cols.get_column("banner").arg_true().to_list():
        t = kept[i]
        if t is not None and (m := PDSH_RE.match(t)) is not None and BANNER in m["rest"]:
            valid = False  # (a pdsh capture: `_parse` splits it by host)
    if not valid:
        tm.valid = False
        return tm
    tm.valid = True

    def orig(ln: int) -> str:
        t = kept[ln - first]
        return t if t is not None else ""

    dumps, failures, parsed, unrecognized, examples, last_header_empty = _walk(
        enumerate(kept, first), orig, ctx.node, ctx, _RecSnap
    )
    if failures:
        tm.valid = False
        return tm
    kinds: list[int] = tm.kind.to_list()
    blank_at = set(tm.blanks)
    where: dict[int, int] = {}
    static_at: dict[str, int] = {}

    def ref(v: str, ln: int) -> int:
        i = ln - first
        if kinds[i] == _PREFIX and i not in blank_at:
            j = where.get(i)
            if j is None:
                j = where[i] = len(tm.dyn)
                tm.dyn.append(i)
            return j
        j = static_at.get(v)
        if j is None:
            j = static_at[v] = -1 - len(tm.statics)
            tm.statics.append(v)
        return j

    for d in dumps:
        top = [(k, ref(v, ln), ln) for k, (v, ln) in d.top.items()]
        gpus = []
        for s, keys1, last in d.gpus:
            assert isinstance(s, _RecSnap)
            if s.errors:
                tm.valid = False
                return tm
            at = {**s.extra_default_lines, **s.extra_lines}
            spec = (
                s.index,
                s.bus_raw,
                s.line,
                [(a, ref(v, ln), ln) for a, (v, ln) in s.inv.items()],
                [(c, ref(v, ln), ln, p) for c, (v, ln, p) in s.sample.items()],
                [(c, ref(v, ln), ln, p) for c, v, ln, p in s.later],
                [(k, ref(v, at[k])) for k, v in s.extra.items()],
                dict(s.extra_lines),
                [(k, [(ref(v, ln), ln) for v, ln in lst]) for k, lst in s.parts.items()],
                [(k, ref(v, ln), ln) for k, (v, ln) in s.totals.items()],
            )
            gpus.append((spec, list(keys1), last))
        tm.dumps.append((d.line, top, gpus))
    tm.parsed, tm.unrecognized, tm.last_header_empty = parsed, unrecognized, last_header_empty
    tm.examples = [ln for ln, _t in examples]
    if len(tm.dumps) <= 1:
        tm.inventory = _inventory_layout(tm)
        # the inventory is the layout's: of a snapshot's inventory only what `_rows` reads is needed
        for _line, _top, gpus in tm.dumps:
            for g, (spec, keys1, last) in enumerate(gpus):
                inv = [x for x in spec[3] if x[0] in _INV_READ]
                gpus[g] = ((*spec[:3], inv, *spec[4:]), keys1, last)
    tm.statics.reverse()  # (static j: values[j] of values = dyn values + statics)
    # where each gathered line's value starts (characters): after the first ': '
    tm.cut = [len((kept[p] or "").partition(": ")[0]) + 2 for p in (*tm.dyn, *tm.blanks)]
    tm.at = pl.Series([*tm.dyn, *tm.blanks], dtype=pl.Int64)
    tm.cuts = pl.Series(tm.cut, dtype=pl.Int64)
    return tm


_INV_READ = frozenset(
    (
        "bus_id", "uuid", "reset_required", "drain_and_reset_recommended", "gpu_recovery_action",
        "fabric_status", "fabric_state",
    )
)  # fmt: skip
"""The inventory attributes of a snapshot that `_rows` and `F.snapshot_rows(..., inventory=False)` read."""

_NODE_KEYS = (
    ("Driver Version", "driver_version"), ("CUDA Version", "cuda_version"), ("Hostname", "hostname")
)  # fmt: skip
"""The top-level keys of a dump that make node inventory rows, and their attribute names."""


def _inventory_layout(tm: _Template) -> pl.DataFrame:
    """The inventory rows `_rows` makes of a template of one dump (or none), less node and file: per row its
    columns, the value as `_j` (index of a dyn value) or `_s` (the value the shape fixes). In one dump no row
    repeats another's key (GPUs by position, attributes by name), so none is dropped, by `F.Stated` or the
    deduplication of `F.frames_many`. (Before `statics` is reversed: static j is statics[-1 - j].)"""
    from forensics.schema import TABLES

    rows: list[tuple[int | None, str | None, str, str, int | None, str | None, int]] = []

    def add(index: int | None, bus: str | None, comp: str, attr: str, j: int, ln: int) -> None:
        if j >= 0:
            rows.append((index, bus, comp, attr, j, None, ln))
        elif (v := tm.statics[-1 - j].strip()) or comp == "gpu":  # (node rows: only with a value)
            rows.append((index, bus, comp, attr, None, v, ln))

    for _line, top, gpus in tm.dumps:
        topd = {k: (j, ln) for k, j, ln in top}
        for k, attr in _NODE_KEYS:
            if k in topd:
                add(None, None, "node", attr, *topd[k])
        for (index, bus, sline, inv, *_rest), _keys1, _last in gpus:
            for a, j, ln in inv:
                add(index, bus, "gpu", a, j, ln)
            if bus and all(a != "bus_id" for a, _j, _ln in inv):  # (= the put_inv of `_rows`)
                rows.append((index, bus, "gpu", "bus_id", None, bus.strip(), sline))
    schema = TABLES["inventory"]
    cols = list(zip(*rows, strict=True)) if rows else [[] for _ in range(7)]
    bus_norm = F._bus_ids_cached(list(cols[1]))
    return pl.DataFrame(
        {
            "gpu_index": pl.Series(cols[0], dtype=schema["gpu_index"], strict=False),
            "gpu_bus_id": pl.Series(cols[1] if bus_norm is None else bus_norm, dtype=schema["gpu_bus_id"]),
            "component": pl.Series(cols[2], dtype=schema["component"]),
            "attribute": pl.Series(cols[3], dtype=schema["attribute"]),
            "_j": pl.Series(cols[4], dtype=pl.Int64),
            "_s": pl.Series(cols[5], dtype=pl.String),
            "line": pl.Series(cols[6], dtype=schema["line"]),
        }
    )


def _inventories(
    tm: _Template, values: pl.Series, offsets: list[int], ctxs: list[FileContext]
) -> pl.DataFrame:
    """The conformed inventory of files of one template (`tm.inventory`), their rows in file order: `values`,
    the batch's gathered values, each file's dyn values from its offset."""
    from forensics.schema import TABLES, conform

    lay = tm.inventory
    assert lay is not None
    n, r = len(ctxs), lay.height
    fi = pl.select(pl.int_range(0, n, dtype=pl.Int64).repeat_by(r).explode()).to_series()
    big = pl.concat([lay] * n, how="vertical", rechunk=True)
    at = pl.Series(offsets, dtype=pl.Int64).gather(fi) + big.get_column("_j")
    schema = TABLES["inventory"]
    df = pl.DataFrame(
        {
            "node": pl.Series([c.node for c in ctxs], dtype=schema["node"]).gather(fi),
            "gpu_index": big.get_column("gpu_index"),
            "gpu_bus_id": big.get_column("gpu_bus_id"),
            "component": big.get_column("component"),
            "attribute": big.get_column("attribute"),
            "value": values.gather(at).fill_null(big.get_column("_s")),
            "source": repeated("nvidia-smi-q", n * r, schema["source"]),
            "file": pl.Series([c.path for c in ctxs], dtype=schema["file"]).gather(fi),
            "line": big.get_column("line"),
        }
    )
    return conform(df, "inventory")


def _instantiate(
    tm: _Template, dyn: list[str], text: pl.Series, start: int, ctx: FileContext
) -> tuple[tuple[list[Any], list[dict[str, Any]], list[dict[str, Any]]], dict[str, Any]]:
    """`_parse` of a file of the template's shape whose `dyn` values are these."""
    vals = dyn + tm.statics
    first = ctx.first_line
    dumps = []
    for line, top, gpus in tm.dumps:
        d = _Dump(line)
        d.top = {k: (vals[j], ln) for k, j, ln in top}
        for (index, bus, sline, inv, sample, later, extra, extra_lines, parts, totals), keys1, last in gpus:
            s = F.GpuSnapshot(
                index=index,
                bus_raw=bus,
                line=sline,
                inv={a: (vals[j], ln) for a, j, ln in inv},
                sample={c: (vals[j], ln, p) for c, j, ln, p in sample},
                parts={k: [(vals[j], ln) for j, ln in lst] for k, lst in parts},
                totals={k: (vals[j], ln) for k, j, ln in totals},
                extra={k: vals[j] for k, j in extra},  # (= value.strip(): the values are stripped)
                errors=[],
                extra_lines=dict(extra_lines),
            )
            for c, j, ln, p in later:
                s.put_sample(c, vals[j], ln, p)
            d.gpus.append((s, keys1, last))  # (keys1: read only)
        dumps.append(d)

    def orig(ln: int) -> str:
        return text[start + ln - first]

    examples = [(ln, orig(ln)[:500]) for ln in tm.examples]
    lhe, stated, inv = tm.last_header_empty, F.Stated(), tm.inventory is None
    p = _rows(dumps, [], tm.parsed, tm.unrecognized, examples, lhe, orig, ctx.node, ctx, stated, inv)
    return (p[0], p[1], p[2]), {
        "parsed": p[3],
        "unrecognized": p[4],
        "unrecognized_examples": sorted(p[5])[:20],
        "notes": p[6],
        "partial": p[7],
        "node": None,
    }


def _prepare(lines: pl.Series) -> tuple[list[str | None], list[int]]:
    """The lines as Python strings, None for a blank one (not parsed, not counted), and the positions of
    the lines holding the banner literal."""
    text = lines.cast(pl.String).fill_null("")
    blank_s = text.str.strip_chars().str.len_bytes() == 0  # = F.blank_flags
    kept: list[str | None] = pl.select(pl.when(blank_s).then(None).otherwise(text)).to_series().to_list()
    banner_rows = text.str.contains("NVSMI LOG", literal=True).arg_true().to_list()
    return kept, banner_rows


def _parse(
    kept: list[str | None], banner_rows: list[int], ctx: FileContext
) -> tuple[tuple[list[Any], list[dict[str, Any]], list[dict[str, Any]]], dict[str, Any]]:
    """The rows of the three tables and the other `ParseResult` fields of one file (`_prepare`'s output)."""
    first = ctx.first_line

    def orig(ln: int) -> str:
        t = kept[ln - first]
        return t if t is not None else ""

    groups: dict[str | None, Iterable[tuple[int, str | None]]] = {}
    # A capture needs a prefixed banner line: look at the few banner lines before matching every line.
    banner_prefixed = any(
        (t := kept[i]) is not None and (m := PDSH_RE.match(t)) is not None and "NVSMI LOG" in m.group("rest")
        for i in banner_rows
    )
    if banner_prefixed:
        items = [(first + i, t) for i, t in enumerate(kept) if t is not None]
        hosts = [PDSH_RE.match(t) for _, t in items]
        if items and sum(1 for m in hosts if m) * 2 >= len(items):
            split: dict[str | None, list[tuple[int, str]]] = {}
            for (ln, t), m in zip(items, hosts, strict=True):
                key = m.group("host").split(".")[0] if m else None
                split.setdefault(key, []).append((ln, m.group("rest") if m else t))
            groups.update(split)
        else:
            groups[None] = items
    else:
        groups[None] = enumerate(kept, first)  # (blank lines are None: skipped by the walk)
    # (the inventory facts stated so far in the file: its inventory rows are unique, see F.frames)
    seen = F.Stated()
    parts = [_parse_items(g, orig, host or ctx.node, ctx, seen) for host, g in groups.items()]
    inv = [r for p in parts for r in p[0]]
    samples = [r for p in parts for r in p[1]]
    events = [r for p in parts for r in p[2]]
    named = [h for h in groups if h is not None]
    return (inv, samples, events), {
        "parsed": sum(p[3] for p in parts),
        "unrecognized": sum(p[4] for p in parts),
        "unrecognized_examples": sorted(e for p in parts for e in p[5])[:20],
        "notes": [n for p in parts for n in p[6]],
        "partial": any(p[7] for p in parts),
        "node": named[0] if len(named) == 1 else None,
    }


_CLASSES: dict[str, tuple] = {}  # type: ignore[type-arg]
"""`_classify` of each line seen by this process (a pure function of the line)."""
_CLASSES_MAX = 100_000


class _KeyPath:
    """One key path of a GPU block (its header keys) and, by key, its child headers' paths and the leaf
    steps of its leaves (`_leaf_ops`, and whether the leaf is right under the GPU line): pure functions of
    the path, kept for the process (dumps repeat their paths)."""

    __slots__ = ("tokens", "sub", "leaves")

    def __init__(self, tokens: tuple[str, ...]) -> None:
        self.tokens = tokens
        self.sub: dict[str, _KeyPath] = {}
        self.leaves: dict[str, tuple[tuple[tuple[int, str, int], ...], bool]] = {}


_ROOT = [_KeyPath(())]
_PATHS = [0]
_PATHS_MAX = 100_000
"""The tree is started again (before a walk) once it holds this many paths and leaves."""


_HostRows = tuple[
    list[Any], list[dict[str, Any]], list[dict[str, Any]], int, int, list[tuple[int, str]], list[str], bool
]
"""What `_parse_items` returns: inventory, sample, event rows; parsed, unrecognized, examples; notes,
partial."""


def _parse_items(
    items: Iterable[tuple[int, str | None]],
    orig: Callable[[int], str],
    node: str,
    ctx: FileContext,
    seen_inv: F.Stated,
) -> _HostRows:
    """Parse the (line number, text) items of one host (None for a blank line); see `parse`. `seen_inv`: the
    inventory facts the file stated so far (GPU facts already stated by an earlier dump or host, node facts
    too): the rows repeating one are not built."""
    walked = _walk(items, orig, node, ctx)
    return _rows(*walked, orig, node, ctx, seen_inv)


_Walked = tuple[list[_Dump], list[dict[str, Any]], int, int, list[tuple[int, str]], bool]
"""What `_walk` returns: dumps, failure events, parsed and unrecognized counts, examples, ends on a header."""


def _walk(
    items: Iterable[tuple[int, str | None]],
    orig: Callable[[int], str],
    node: str,
    ctx: FileContext,
    snap_cls: type[F.GpuSnapshot] = F.GpuSnapshot,
    classes: dict[str, tuple] | None = None,  # type: ignore[type-arg]
) -> _Walked:
    """The line walk of `_parse_items`: the dumps and their GPU snapshots (`snap_cls`: their class; `classes`:
    the `_classify` of the lines, when not `_CLASSES`)."""
    dumps: list[_Dump] = []
    dump: _Dump | None = None
    snap: F.GpuSnapshot | None = None
    keys1: list[str] = []
    stack: list[tuple[int, _KeyPath]] = []  # (indent, key path) of the open headers
    tally = Tally()
    last_header_empty = False
    failures: list[dict[str, Any]] = []

    def close_gpu(last: int) -> None:
        nonlocal snap
        if snap is not None and dump is not None:
            dump.gpus.append((snap, list(keys1), last))
        snap = None

    if classes is None:
        classes = _CLASSES  # lines recur across files too (the same keys, mostly the same values)
        if len(classes) > _CLASSES_MAX:
            classes.clear()
    # The key paths of the open headers are on the stack (`root`: the path of leaves right under the GPU
    # line); each knows its children's paths and its leaves' steps by key.
    if _PATHS[0] > _PATHS_MAX:
        _ROOT[0], _PATHS[0] = _KeyPath(()), 0
    root = _ROOT[0]
    parsed = 0
    inv_d: dict[str, tuple[str, int]] = {}
    sample_d: dict[str, tuple[str, int, int]] = {}
    extra_d: dict[str, str] = {}
    ln: int | None = None
    for at, raw in items:
        if raw is None:  # a blank line (not parsed, not counted)
            continue
        ln = at  # (the last line number is used below)
        c = classes.get(raw)
        if c is None:
            c = classes[raw] = _classify(raw)
        kind = c[0]
        if kind == "leaf":
            if snap is not None:
                indent = c[1]
                while stack and stack[-1][0] >= indent:
                    stack.pop()
                key = c[2]
                path = stack[-1][1] if stack else root
                got = path.leaves.get(key)
                if got is None:
                    tokens = (*path.tokens, key)
                    got = path.leaves[key] = (_leaf_ops(tokens), len(tokens) == 1)
                    _PATHS[0] += 1
                ops, top = got
                if top:
                    keys1.append(c[5])
                if c[4]:
                    snap.errors.append((c[3], ln))  # = snap.note: the value holds an error marker
                if ops:
                    value = c[3]
                    for op, arg, pri in ops:
                        if op == 0:  # = snap.put_inv
                            if arg not in inv_d and value != "":
                                inv_d[arg] = (value, ln)
                        elif op == 1:
                            if arg in sample_d:
                                snap.put_sample(arg, value, ln, pri)
                            else:  # = snap.put_sample of a column not yet set
                                sample_d[arg] = (value, ln, pri)
                        elif op == 2:
                            if arg not in extra_d:  # = snap.put_extra
                                extra_d[arg] = value.strip()
                                snap.extra_lines[arg] = ln
                        elif op == 3:
                            if arg not in extra_d:  # (= setdefault)
                                extra_d[arg] = value.strip()
                                snap.extra_default_lines[arg] = ln
                        elif op == 4:
                            snap.parts.setdefault(arg, []).append((value, ln))
                        else:
                            snap.totals[arg] = (value, ln)
                last_header_empty = False
                parsed += 1
            else:
                tally.count(False, ln, orig(ln))
            continue
        ok = True
        if kind == "blank":  # also an empty line behind a host prefix
            pass
        elif kind == "fail":
            fe = F.failure_event(c[1], ln, node=node, path=ctx.path)
            assert fe is not None
            fe["message"] = orig(ln).strip()
            failures.append(fe)
        elif kind == "banner":
            close_gpu(ln - 1)
            dump = _Dump(ln)
            dumps.append(dump)
            stack = []
            last_header_empty = False
        elif kind == "gpu":
            if dump is None:
                dump = _Dump(ln)
                dumps.append(dump)
            close_gpu(ln - 1)
            snap = snap_cls(index=len(dump.gpus), bus_raw=c[1], line=ln)
            inv_d, sample_d, extra_d = snap.inv, snap.sample, snap.extra
            keys1 = []
            stack = []
            last_header_empty = False
        elif kind == "top":
            key, val = c[1], c[2]
            close_gpu(ln - 1)
            if key == "Timestamp" and dump is not None and ("Timestamp" in dump.top or dump.gpus):
                dump = None
            if dump is None:
                dump = _Dump(ln)
                dumps.append(dump)
            dump.top.setdefault(key, (val, ln))
            stack = []
            last_header_empty = False
        elif kind == "header" and snap is not None:
            indent, key = c[1], c[2]
            while stack and stack[-1][0] >= indent:
                stack.pop()
            if stack:
                path = stack[-1][1]
            else:
                path = root
                keys1.append(c[3])  # (a section right under the GPU line)
            sub = path.sub.get(key)
            if sub is None:
                sub = path.sub[key] = _KeyPath((*path.tokens, key))
                _PATHS[0] += 1
            stack.append((indent, sub))
            last_header_empty = True
        else:
            ok = False
        if ok:  # = tally.count(ok, ...)
            parsed += 1
        else:
            tally.count(False, ln, orig(ln))
    close_gpu(ln if ln is not None else ctx.first_line)
    return dumps, failures, tally.parsed + parsed, tally.unrecognized, tally.examples, last_header_empty


def _rows(
    dumps: list[_Dump],
    failures: list[dict[str, Any]],
    n_parsed: int,
    n_unrecognized: int,
    examples: list[tuple[int, str]],
    last_header_empty: bool,
    orig: Callable[[int], str],
    node: str,
    ctx: FileContext,
    seen_inv: F.Stated,
    inventory: bool = True,
) -> _HostRows:
    """The rows of `_walk`'s dumps (the tail of `_parse_items`); `inventory=False`: no inventory rows."""

    def text_of(line: int) -> str:
        return orig(line)

    inv: list[Any] = []  # (F.INV_TUPLE tuples)
    samples: list[dict[str, Any]] = []
    events: list[dict[str, Any]] = list(failures)
    partial = False
    notes: list[str] = []
    for d in dumps:
        ts_raw = d.top.get("Timestamp")
        ts: datetime | None = F.parse_local_ts(ts_raw[0]) if ts_raw else None
        node_attrs = [
            (attr, d.top[k][0], d.top[k][1])
            for k, attr in _NODE_KEYS
            if k in d.top
        ]
        if inventory:
            inv += F.new_node_rows(node_attrs, node=node, path=ctx.path, source="nvidia-smi-q", seen=seen_inv)
        for s, _k, _last in d.gpus:
            if "bus_id" not in s.inv and s.bus_raw:
                s.put_inv("bus_id", s.bus_raw, s.line)
            gi, row, ev = F.snapshot_rows(
                s,
                node=node,
                path=ctx.path,
                source="nvidia-smi-q",
                ts=ts,
                text_of=text_of,
                seen=seen_inv,
                tuples=True,
                inventory=inventory,
            )
            inv += gi
            samples.append(row)
            events += ev
    # A failure line (lost GPU, driver gone) takes the time of the dump it was printed with.
    stamps = []  # (only read for failures)
    if failures:
        stamps = [(d.line, F.parse_local_ts(d.top["Timestamp"][0])) for d in dumps if "Timestamp" in d.top]
    for e in failures:
        after = [t for ln0, t in stamps if ln0 > e["line"] and t is not None]
        before = [t for ln0, t in stamps if ln0 <= e["line"] and t is not None]
        t = after[0] if after else (before[-1] if before else None)
        if t is not None:
            e["ts"], e["ts_quality"] = t, "local_assumed_utc"
    # Truncation: the last GPU block of the last dump has fewer sections than its siblings, or a lone block
    # of a multi-GPU dump never reached its final 'Processes' section, or the file ends on a bare header.
    if dumps and dumps[-1].gpus:
        d = dumps[-1]
        _s, k_last, _l = d.gpus[-1]
        attached = F.num(d.top.get("Attached GPUs", ("", 0))[0])
        k_prev = d.gpus[-2][1] if len(d.gpus) >= 2 else []
        # Cut: the last block's sections are a strict prefix of its sibling's (a GPU with extra
        # sections, e.g. MIG devices, is no truncation since the order then differs).
        if k_prev and len(k_last) < len(k_prev) and k_last == k_prev[: len(k_last)]:
            partial = True
        elif len(d.gpus) == 1 and attached and attached > 1 and "processes" not in k_last and len(k_last) > 20:
            partial = True
    if last_header_empty and dumps:
        partial = True
    if partial:
        notes.append("dump ends inside a GPU block: truncated")
    return inv, samples, events, n_parsed, n_unrecognized, examples, notes, partial
