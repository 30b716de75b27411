"""`nvidia-smi -q -x` XML dumps (DTD v11/v12/v13 or none; one or several documents in a file).

Parsed with the standard library's incremental `xml.etree.ElementTree.XMLPullParser`, fed line by line
so every element keeps the line it starts on and a truncated document yields what came before the
cut (partial=True); a document whose lines each close their markup is fed whole, its elements numbered
from the lines' tags (`_read_whole`), and `parse_many` reads a file of the shape of one read before
from its lines (`parsers._nvsmi_xml_shapes`). The DOCTYPE is blanked before parsing (same line count),
so no DTD or external entity is ever fetched or expanded; a document declaring entities of its own fails
as malformed.
Tags are mapped onto the same canonical fields as `-q` text (`parsers._nvsmi_fields`):
`clocks_throttle_reason_*` (v11) and `clocks_event_reason_*` (v12+) alike. MIG device and process
subtrees are skipped (their ECC counts are per instance, the GPU's own counters are kept).
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections import Counter, deque
from collections.abc import Sequence
from functools import lru_cache
from itertools import accumulate, compress
from typing import Any

import polars as pl

from parsers import _nvsmi_fields as F
from parsers import _nvsmi_xml_shapes as shapes
from parsers.base import MAX_EXAMPLES, FileContext, ParseResult

NAME = "nvidia-smi-xml"
DESCRIPTION = "nvidia-smi -q -x XML dumps (any DTD version; truncated documents parsed as far as they go)"
TABLES = ("inventory", "gpu_samples", "events")
FILENAME_HINTS = ("*.xml", "nvidia-smi*", "nvidia_smi*")
DETECTS = "an <nvidia_smi_log> root element (optionally after <?xml ...?> and a DOCTYPE)"
PRIORITY = 20
RECORD_START = b"<?xml "
"""The line each document of an `nvidia-smi -q -x -l N` loop opens with: a large file is read in chunks that
end before it (`forensics.bundle.ChunkReader`), never inside a document."""
INVENTORY_KEY = F.INV_KEY
"""A file's inventory rows are unique on these columns (`_nvsmi_fields.frames`); the ingest keeps them so
across the chunks of a large file."""

_INV = {
    "product_name": "name",
    "product_brand": "brand",
    "product_architecture": "architecture",
    "serial": "serial",
    "uuid": "uuid",
    "pci/pci_bus_id": "bus_id",
    "vbios_version": "vbios",
    "board_part_number": "board_part_number",
    "gpu_part_number": "gpu_part_number",
    "gpu_fru_part_number": "fru_part_number",
    "board_id": "board_id",
    "gpu_module_id": "module_id",
    "minor_number": "minor_number",
    "multigpu_board": "multigpu_board",
    "inforom_version/img_version": "inforom_image",
    "inforom_version/oem_object": "inforom_oem",
    "inforom_version/ecc_object": "inforom_ecc",
    "inforom_version/pwr_object": "inforom_pwr",
    "gsp_firmware_version": "gsp_firmware",
    "pci/pci_device_id": "pci_device_id",
    "pci/pci_sub_system_id": "pci_sub_system_id",
    "pci/pci_gpu_link_info/pcie_gen/max_link_gen": "pcie_gen_max",
    "pci/pci_gpu_link_info/pcie_gen/max_device_link_gen": "pcie_gen_device_max",
    "pci/pci_gpu_link_info/pcie_gen/max_host_link_gen": "pcie_gen_host_max",
    "pci/pci_gpu_link_info/link_widths/max_link_width": "pcie_width_max",
    "ecc_mode/current_ecc": "ecc_mode",
    "ecc_mode/pending_ecc": "ecc_mode_pending",
    "persistence_mode": "persistence_mode",
    "mig_mode/current_mig": "mig_mode",
    "mig_mode/pending_mig": "mig_mode_pending",
    "compute_mode": "compute_mode",
    "addressing_mode": "addressing_mode",
    "gpu_virtualization_mode/virtualization_mode": "virtualization_mode",
    "gpu_reset_status/reset_required": "reset_required",
    "gpu_reset_status/drain_and_reset_recommended": "drain_and_reset_recommended",
    "gpu_recovery_action": "gpu_recovery_action",
    "fabric/state": "fabric_state",
    "fabric/status": "fabric_status",
    "fabric/cliqueid": "fabric_clique_id",
    "fabric/clusteruuid": "fabric_cluster_uuid",
    "fabric/health/bandwidth": "fabric_health_bandwidth",
    "fb_memory_usage/total": "memory_total",
    "power_readings/enforced_power_limit": "power_limit",
    "power_readings/current_power_limit": "power_limit",
    "power_readings/power_limit": "power_limit",
    "power_readings/default_power_limit": "default_power_limit",
    "power_readings/max_power_limit": "max_power_limit",
    "max_clocks/sm_clock": "max_sm_clock",
    "max_clocks/mem_clock": "max_mem_clock",
    "applications_clocks/graphics_clock": "applications_clock_graphics",
    "applications_clocks/mem_clock": "applications_clock_memory",
}

_SAMPLE = {
    "utilization/gpu_util": ("utilization_pct", 0),
    "utilization/memory_util": ("mem_utilization_pct", 0),
    "fb_memory_usage/used": ("memory_used_mib", 0),
    "fb_memory_usage/total": ("memory_total_mib", 0),
    "temperature/gpu_temp": ("temperature_c", 0),
    "temperature/memory_temp": ("mem_temperature_c", 0),
    "power_readings/instant_power_draw": ("power_w", 0),
    "power_readings/power_draw": ("power_w", 1),
    "power_readings/average_power_draw": ("power_w", 2),
    "power_readings/enforced_power_limit": ("power_limit_w", 0),
    "power_readings/current_power_limit": ("power_limit_w", 1),
    "power_readings/power_limit": ("power_limit_w", 2),
    "clocks/sm_clock": ("sm_clock_mhz", 0),
    "clocks/mem_clock": ("mem_clock_mhz", 0),
    "retired_pages/multiple_single_bit_retirement/retired_count": ("retired_pages_sbe", 0),
    "retired_pages/double_bit_retirement/retired_count": ("retired_pages_dbe", 0),
    "retired_pages/pending_blacklist": ("retired_pages_pending", 0),
    "retired_pages/pending_retirement": ("retired_pages_pending", 1),
    "remapped_rows/remapped_row_corr": ("remapped_rows_correctable", 0),
    "remapped_rows/remapped_row_unc": ("remapped_rows_uncorrectable", 0),
    "remapped_rows/remapped_row_pending": ("remap_pending", 0),
    "remapped_rows/remapped_row_failure": ("remap_failure", 0),
    "pci/pci_gpu_link_info/pcie_gen/current_link_gen": ("pcie_gen", 0),
    "pci/pci_gpu_link_info/pcie_gen/max_link_gen": ("pcie_gen_max", 0),
    "pci/pci_gpu_link_info/link_widths/current_link_width": ("pcie_width", 0),
    "pci/pci_gpu_link_info/link_widths/max_link_width": ("pcie_width_max", 0),
}

_EXTRA = {
    "fan_speed": "fan_speed",
    "power_readings/average_power_draw": "power_draw_average",
    "power_readings/instant_power_draw": "power_draw_instant",
    "power_readings/power_draw": "power_draw",
    "performance_state": "pstate",
    "pci/replay_counter": "pcie_replays",
    "pci/replay_rollover_counter": "pcie_replay_rollovers",
    "pci/tx_util": "pcie_tx",
    "pci/rx_util": "pcie_rx",
    "fb_memory_usage/reserved": "memory_reserved",
    "bar1_memory_usage/used": "bar1_used",
    "clocks/graphics_clock": "graphics_clock",
    "clocks/video_clock": "video_clock",
    "utilization/encoder_util": "encoder_util",
    "utilization/decoder_util": "decoder_util",
    "voltage/graphics_volt": "voltage_graphics",
    "ecc_errors/aggregate/sram_threshold_exceeded": "sram_threshold_exceeded",
}

_SKIP = {"mig_devices", "processes", "accounted_processes", "supported_clocks", "vgpu_software_licensed_product"}
_THROTTLE = re.compile(r"^clocks_(?:throttle|event)_reasons?_(.+)$")
_DOCTYPE = re.compile(r"<!DOCTYPE[^>\[]*(\[.*?\])?\s*>", re.S)


def sniff(head: bytes, name: str) -> float:
    """1.0 when the head holds an <nvidia_smi_log> element."""
    if b"<nvidia_smi_log" not in head:  # (no decode for most heads)
        return 0.0
    text = head.decode("utf-8", "replace")
    if "<nvidia_smi_log" in text:
        return 1.0 if text.lstrip().startswith("<") or "<?xml" in text[:400] else 0.9
    return 0.0


@lru_cache(maxsize=4096)
def _plan(path: str) -> tuple[tuple[str, str, int], ...]:
    """What `_map` does with a leaf at this tag path, as (operation, argument, priority) steps (tag paths
    repeat in every GPU block and every dump)."""
    steps: list[tuple[str, str, int]] = []
    key = path.replace("gpu_power_readings/", "power_readings/")
    if key in _INV:
        steps.append(("inv", _INV[key], 0))
    if key in _SAMPLE:
        col, pri = _SAMPLE[key]
        steps.append(("sample", col, pri))
    if key in _EXTRA:
        steps.append(("extra", _EXTRA[key], 0))
    parts = key.split("/")
    if len(parts) == 2 and parts[0] in ("clocks_throttle_reasons", "clocks_event_reasons"):
        m = _THROTTLE.match(parts[1])
        if m and m.group(1) in F.THROTTLE_COLUMNS:
            steps.append(("sample", F.THROTTLE_COLUMNS[m.group(1)], 0))
    elif parts[0] == "ecc_errors" and len(parts) >= 3 and parts[1] in ("volatile", "aggregate"):
        scope, rest = parts[1], parts[2:]
        if len(rest) == 1:
            k = rest[0]
            if "uncorrectable" in k:
                steps.append(("part", f"ecc_uncorrected_{scope}", 0))
            elif "correctable" in k:
                steps.append(("part", f"ecc_corrected_{scope}", 0))
        elif len(rest) == 2 and rest[1] == "total":
            if rest[0] == "single_bit":
                steps.append(("total", f"ecc_corrected_{scope}", 0))
            elif rest[0] == "double_bit":
                steps.append(("total", f"ecc_uncorrected_{scope}", 0))
    elif parts[0] in ("platform_info", "platforminfo") and len(parts) == 2:  # <platformInfo> in v12/v13
        steps.append(("inv", "platform_" + parts[1], 0))
        if parts[1] == "module_id":
            steps.append(("inv", "module_id", 0))
    return tuple(steps)



_CHILD: dict[str, dict[Any, tuple[str, tuple[tuple[str, str, int], ...]] | None]] = {}
"""parent tag path -> child tag -> (child tag path, its `_plan`), None for a skipped child (tag paths repeat
in every GPU block and dump)."""
_CHILDREN = [0]
"""How many children `_CHILD` holds: it is emptied (before a document's walk) past 100,000."""
_TEXT: dict[str | None, tuple[str, bool]] = {}
"""A leaf's text -> (its value: words joined by one space, whether it holds an error marker); texts repeat."""
_MARKER_RE = re.compile("|".join(re.escape(m) for m in F.ERROR_MARKERS))


_Leaf = tuple[str | None, int, tuple[tuple[str, str, int], ...]]
"""A leaf read under a GPU: its text, line and `_plan` steps."""
_Gpu = tuple[int, str | None, int, list[_Leaf]]
"""A GPU of a document: its position, `id` attribute, line and leaves (in document order)."""
_Doc = tuple[tuple[str | None, int] | None, list[tuple[str, str | None, int]], list[_Gpu]]
"""What `_rows` reads of a document: the text and line of its `timestamp` (None: none), the node attributes'
(attribute, text, line) of the elements present, its GPUs."""


def _walk(el: ET.Element, prefix: str, lines: dict[int, int], line: int, out: list[_Leaf]) -> None:
    """The leaves under `el` (tag path `prefix`) with their lines (`line`: where none is known) and steps,
    skipping the `_SKIP` subtrees."""
    kids = _CHILD.get(prefix)
    if kids is None:
        kids = _CHILD[prefix] = {}
    for child in el:
        tag = child.tag
        got = kids.get(tag, False)
        if got is False:
            low = tag.lower() if isinstance(tag, str) else ""
            if not low or low in _SKIP:
                got = None
            else:
                path = f"{prefix}/{low}" if prefix else low
                got = (path, _plan(path))
            kids[tag] = got
            _CHILDREN[0] += 1
        if got is None:
            continue
        if len(child):
            _walk(child, got[0], lines, line, out)
            continue
        out.append((child.text, lines.get(id(child), line), got[1]))


def _apply(leaves: list[_Leaf], snap: F.GpuSnapshot) -> None:
    """Note each leaf's value (an error marker) and put it where its tag path's `_plan` says."""
    if type(leaves) is shapes.ShapedLeaves:
        _apply_shaped(leaves, snap)
        return
    texts = _TEXT
    if len(texts) > 100_000:
        texts.clear()
    for t, line, steps in leaves:
        known = texts.get(t)
        if known is None:
            v = " ".join((t or "").split())
            known = texts[t] = (v, _MARKER_RE.search(v) is not None)
        value = known[0]
        if known[1]:  # = snap.note
            snap.errors.append((value, line))
        for op, arg, pri in steps:
            if op == "inv":
                snap.put_inv(arg, value, line)
            elif op == "sample":
                snap.put_sample(arg, value, line, pri)
            elif op == "extra":
                snap.put_extra(arg, value, line)
            elif op == "part":
                snap.parts.setdefault(arg, []).append((value, line))
            else:  # total
                snap.totals[arg] = (value, line)


def _apply_shaped(leaves: shapes.ShapedLeaves, snap: F.GpuSnapshot) -> None:
    """`_apply` of the leaves of a GPU read by its document's shape: each text's value and marker flag as
    `_apply` finds them, the errors noted in order, then each operation's steps in order (each operation
    writes its own fields of `snap`, so the order between operations does not matter)."""
    texts = _TEXT
    if len(texts) > 100_000:
        texts.clear()
    vals, at, tm = leaves.values, leaves.at, leaves.template
    get = texts.get
    kn = [get(t) or _known(t) for t in map(vals.__getitem__, tm.refs)]
    for known, ln in zip(kn, tm.lines, strict=True):
        if known[1]:  # = snap.note
            snap.errors.append((known[0], at + ln))
    ops = tm.ops
    # (the first step of an argument meets an empty field of the fresh `snap`: `put_inv` keeps a value
    # that is not '', `put_sample` any; later steps of it go through them)
    if "inv" in ops:
        put_inv, inv = snap.put_inv, snap.inv
        for k, ln, arg, _p, new in ops["inv"]:
            value = kn[k][0]
            if not new:
                put_inv(arg, value, at + ln)
            elif value != "":
                inv[arg] = (value, at + ln)
    if "sample" in ops:
        put_sample, sample = snap.put_sample, snap.sample
        for k, ln, arg, pri, new in ops["sample"]:
            if new:
                sample[arg] = (kn[k][0], at + ln, pri)
            else:
                put_sample(arg, kn[k][0], at + ln, pri)
    if "extra" in ops:
        put_extra = snap.put_extra
        for k, ln, arg, _p, _n in ops["extra"]:
            put_extra(arg, kn[k][0], at + ln)
    if "part" in ops:
        parts = snap.parts
        for k, ln, arg, _p, _n in ops["part"]:
            parts.setdefault(arg, []).append((kn[k][0], at + ln))
    if "total" in ops:
        totals = snap.totals
        for k, ln, arg, _p, _n in ops["total"]:
            totals[arg] = (kn[k][0], at + ln)


def _known(t: str | None) -> tuple[str, bool]:
    """A text's `_TEXT` entry (made and kept)."""
    v = " ".join((t or "").split())
    known = _TEXT[t] = (v, _MARKER_RE.search(v) is not None)
    return known


def _documents(texts: list[str]) -> list[tuple[int, int]]:
    """Split the file into documents at each `<?xml` or `<nvidia_smi_log` that starts a new one."""
    joined = "\n".join(texts)
    if joined.count("\n") == len(texts) - 1:
        # (the lines holding the literals found in the joined text: a line holds it iff the text does there;
        # each match's line counted on from the previous match's, not from the start: a 16 MB loop of 2,400
        # documents took 6 s counting the same newlines again for each)
        lines_at: list[int] = []
        line, pos = 0, 0
        for m in re.finditer(r"<\?xml", joined):
            line += joined.count("\n", pos, m.start())
            pos = m.start()
            lines_at.append(line)
        starts = [i for i in dict.fromkeys(lines_at) if texts[i].lstrip("\ufeff \t").startswith("<?xml")]
        if not starts:
            at = joined.find("<nvidia_smi_log")
            starts = [joined.count("\n", 0, at)] if at >= 0 else [0]
    else:  # (a line holding a newline itself)
        starts = [i for i, t in enumerate(texts) if t.lstrip("\ufeff \t").startswith("<?xml")]
        if not starts:
            starts = [i for i, t in enumerate(texts) if "<nvidia_smi_log" in t][:1] or [0]
    starts = sorted(set(starts))
    ends = [*starts[1:], len(texts)]
    return list(zip(starts, ends, strict=True))


def parse(lines: pl.Series, ctx: FileContext) -> ParseResult:
    """Parse each XML document of the file; see the module docstring."""
    with F.gc_paused():
        got = _loop(lines, ctx) if len(lines) >= LOOP_LINES_MIN else None
        if got is None:
            texts, blank, starts, tags = _prepare(lines)
            got = _parse(texts, blank, ctx, starts, tags)
        rows, result = got
        return ParseResult(tables=F.frames(*rows, inv_tuples=True), **result)


LOOP_LINES_MIN = 3_000
"""Files of fewer lines are parsed document by document (`_loop` pays for a shape and a pass: measured, it
pays from ~2,000-3,000 lines of 4 documents or more)."""
LOOP_SHAPES_MAX = 8
"""The most document lengths of a file `_loop` keeps a shape for (the most frequent first)."""


def _loop(
    lines: pl.Series, ctx: FileContext
) -> tuple[tuple[list[Any], list[dict[str, Any]], list[dict[str, Any]]], dict[str, Any]] | None:
    """`_parse` of the file's `_prepare`d lines for an `nvidia-smi -q -x -l N` loop, its documents of a
    repeated shape read without parsing them; None (nothing read) for a file of fewer than 4 documents.

    The first document of each length found at least twice (up to `LOOP_SHAPES_MAX` lengths) is read as
    `_read_docs` reads it and, when read whole without a note, gives its shape (`shapes.doc_shape`: per
    line, the same markup or an element alone on its line with its text). One polars pass over the file
    (`shapes.verify`, each document a file) finds the documents of a shape and their texts: what reading
    them would give (see `parsers._nvsmi_xml_shapes`). The other documents are read as `_read_docs` reads
    them (`_read_doc`)."""
    text = lines.cast(pl.String).fill_null("")
    t = pl.col("t")
    # (= _documents: a document opens on each line starting with '<?xml' but for a BOM, spaces and tabs)
    opens = text.to_frame("t").select(t.str.strip_chars_start("\ufeff \t").str.starts_with("<?xml"))
    begins: list[int] = opens.to_series().arg_true().to_list()
    if len(begins) < 4:
        return None
    n, first = len(text), ctx.first_line
    bounds = list(zip(begins, [*begins[1:], n], strict=True))
    counts = Counter(e - b for b, e in bounds)
    wanted = [ln for ln, c in counts.most_common(LOOP_SHAPES_MAX) if c >= 2]
    made: dict[int, shapes.DocShape | None] = {}
    for b, e in bounds:
        ln = e - b
        if ln in wanted and ln not in made:
            made[ln] = _doc_shape(text.slice(b, ln), first + b)
    cands = [made.get(e - b) for b, e in bounds]
    if not any(c is not None for c in cands):
        return None
    sizes = [begins[0], *(e - b for b, e in bounds)]
    blank, shaped, values = shapes.verify(text, sizes, [None, *cands])
    docs: list[_Doc] = []
    spans: list[tuple[int, int]] = []
    notes: list[str] = []
    partial = False
    rest = [(b, e) for (b, e), c, ok in zip(bounds, cands, shaped[1:], strict=True) if c is None or not ok]
    texts: Sequence[str] = _Lines(text)
    starts: list[int] | None = None
    tags: list[int] | None = None
    if rest and sum(e - b for b, e in rest) > n // 8:  # (many documents read: the file's lines at once)
        texts = text.to_list()
        starts, tags = _tag_counts(text)
    for (b, e), c, ok, vals in zip(bounds, cands, shaped[1:], values[1:], strict=True):
        if c is not None and ok:
            docs.append(c.doc_at(vals, first + b))
            spans.append((b, b + c.upto))
            continue
        if starts is None:  # (the document's lines alone)
            part = text.slice(b, e - b)
            st, tg = _tag_counts(part)
            doc, span, note, partial_doc, _w = _read_doc(part.to_list(), 0, e - b, first + b, st, tg)
            span = None if span is None else (b + span[0], b + span[1])
        else:
            doc, span, note, partial_doc, _w = _read_doc(texts, b, e, first, starts, tags)
        if note is not None:
            notes.append(note)
        partial = partial or partial_doc
        if doc is not None and span is not None:
            spans.append(span)
            docs.append(doc)
    return _rows(docs, spans, notes, partial, texts, blank, ctx)


def _doc_shape(part: pl.Series, at: int) -> shapes.DocShape | None:
    """The shape of a document (its lines, the first numbered `at`) read whole without a note; else None."""
    st, tg = _tag_counts(part)
    doc, span, note, partial_doc, whole = _read_doc(part.to_list(), 0, len(part), at, st, tg)
    if doc is None or span is None or note is not None or partial_doc or not whole:
        return None
    return shapes.doc_shape(part, doc, at, span[1])


def parse_many(items: Sequence[tuple[pl.Series, FileContext]]) -> list[ParseResult]:
    """`[parse(lines, ctx) for lines, ctx in items]`: the lines of all files checked in one pass, the tables
    of all files built in one construction per table (`F.frames_many`) and cut back per file.

    A file of the *shape* of one read before (`shapes.Shape`: the same lines but for the texts of elements
    alone on their line; dumps of one machine type repeat it) takes that file's documents with its own
    texts, without being parsed: one polars pass over the batch checks each file against the shape of the
    last file read whole of its length (`shapes.verify`) and cuts out the texts. The other files are parsed
    (`_read_docs`), the shapes of those read whole kept (`shapes.keep_shapes`).
    """
    if not items:
        return []
    with F.gc_paused():
        text = pl.concat([lines.cast(pl.String) for lines, _ in items]).fill_null("")
        sizes = [len(lines) for lines, _ in items]
        at = list(accumulate(sizes, initial=0))
        keys = [(ctx.first_line, n) for (_l, ctx), n in zip(items, sizes, strict=True)]
        cands = [shapes.SHAPES.get(key) for key in keys]
        blank, shaped, values = shapes.verify(text, sizes, cands)
        got: list[Any] = [None] * len(items)  # (rows, other ParseResult fields) per file
        for k, (_lines, ctx) in enumerate(items):
            sh = cands[k]
            if shaped[k] and sh is not None:
                shapes.served(keys[k])
                docs = sh.docs_of(values[k])
                a, b = at[k], at[k + 1]
                got[k] = _rows(docs, sh.spans, [], False, _Lines(text.slice(a, b - a)), blank[a:b], ctx)
        for k, (lines, ctx) in enumerate(items):  # (a loop of many lines: as `parse` reads it)
            if got[k] is None and sizes[k] >= LOOP_LINES_MIN:
                got[k] = _loop(lines, ctx)
        read = [k for k in range(len(items)) if got[k] is None]
        if read:  # (the files parsed: their lines as strings, their tags counted, in one pass)
            sub = pl.concat([text.slice(at[k], sizes[k]) for k in read])
            st, tg = _tag_counts(sub)
            texts: list[str] = sub.to_list()
            begin = list(accumulate((sizes[k] for k in read), initial=0))
            made: list[tuple[int, list[_Doc], list[tuple[int, int]]]] = []
            for r, k in enumerate(read):
                ctx = items[k][1]
                c, d = begin[r], begin[r + 1]
                docs, spans, notes, partial, whole = _read_docs(texts[c:d], ctx, st[c:d], tg[c:d])
                got[k] = _rows(docs, spans, notes, partial, texts[c:d], blank[at[k] : at[k + 1]], ctx)
                # (a shape kept of the first file of its length read whole, in order, when wanted)
                if whole and not notes and not partial and 0 < sizes[k] <= shapes.SHAPE_LINES_MAX:
                    if all(keys[k] != keys[j] for j, _d, _s in made) and shapes.wanted(keys[k]):
                        made.append((k, docs, spans))
            if made:
                shapes.keep_shapes(text, at, sizes, keys, items, made)
        rows = [g[0] for g in got]
        results = [g[1] for g in got]
        tables = F.frames_many(rows, inv_tuples=True)
        return [ParseResult(tables=t, **result) for t, result in zip(tables, results, strict=True)]


_Read = tuple[ET.Element | None, dict[int, int], int | None, str | None, bool, list[ET.Element]]
"""A document read: its root, the line of each element (by id), the line index (in the document) where the
lines read end (None: all), a note, whether it ends early, its elements (kept alive: ids are keys)."""


def _read_lines(doc_lines: list[str], at: int) -> _Read:
    """Read a document (its lines; `at`: its first line's number) line by line, as far as it is valid: each
    element takes the line its start tag's events came with, the lines after the root's closing tag are not
    read."""
    # = ET.XMLPullParser(events=("start", "end")), its feed and read_events without their Python layers:
    # the parser puts the events of each fed line in `queue` (the pull parser's own construction)
    parser = ET.XMLParser(target=ET.TreeBuilder())
    queue: deque[tuple[str, ET.Element]] = deque()
    parser._setevents(queue, ("start", "end"))
    feed, next_event = parser.feed, queue.popleft
    el_line: dict[int, int] = {}
    root: ET.Element | None = None
    keep: list[ET.Element] = []
    failed_at: int | None = None
    closed_at: int | None = None  # line index (in the document) where the root element closed
    note: str | None = None
    partial = False
    for j, t in enumerate(doc_lines):
        error: SyntaxError | None = None
        try:
            feed(t + "\n")
        except SyntaxError as exc:  # (the pull parser reads it after the line's events)
            error = exc
        while queue:
            ev, el = next_event()
            if ev == "end":
                if el is root:
                    closed_at = j
                continue
            if root is None:
                root = el
            el_line[id(el)] = at + j
            keep.append(el)
        if error is not None:
            if not isinstance(error, ET.ParseError):
                raise error
            failed_at = j
            note = f"XML document at line {at}: {error}"
            break
        if closed_at is not None:
            break  # anything after the root (a shell prompt, stderr) is not this document
    if closed_at is not None:
        failed_at = closed_at + 1  # lines after the closing tag stay unrecognized unless blank
    elif failed_at is None:
        try:
            parser.close()
        except ET.ParseError as exc:
            partial = True
            note = f"XML document at line {at} ends early: {exc}"
    else:
        partial = True
    return root, el_line, failed_at, note, partial, keep


def _read_whole(
    chunk: str, doc_lines: list[str], at: int, starts: list[int], tags: list[int]
) -> _Read | None:
    """`_read_lines` of a document (`chunk`, its DOCTYPE blanked; `doc_lines`: its lines as in the file,
    each a line of `chunk`; `starts`, `tags`: their counts of tags by `_prepare`) fed at once, when the
    document parses whole (ends on its root, then nothing but blanks and processing instructions) and its
    lines say where each element starts; else None.

    The lines say it when each holds as many '>' as '<', holds no '<!' but a DOCTYPE without an internal
    subset alone on its line, and no '<?' but a processing instruction alone on its line. Then every '<'
    opens markup (character data and attribute values hold none), each markup ends on its line (a start tag
    ending on a later line would leave its first line one '>' short: its other '>' are in text or values,
    and so on to the last line, which would have one too many), and the '<' followed by neither '/', '?' nor
    '!' open the start tags. So fed line by line, each element comes with the line of its start tag, in
    document (pre-)order, as `Element.iter` lists them; the root closes on the last line holding a tag (an
    empty root's start tag, else its end tag), after which nothing is read."""
    if -1 in starts:
        return None
    if -2 in starts:
        starts = list(starts)
        j = starts.index(-2)
        while True:
            t = doc_lines[j].strip(" \t\r\ufeff")
            pi = t.startswith("<?") and t.endswith("?>") and len(t) >= 4 and t.count("<") == 1
            if not (pi or _SIMPLE_DOCTYPE.fullmatch(t)):
                return None
            starts[j] = 0
            if -2 not in starts:
                break
            j = starts.index(-2, j)
    parser = ET.XMLParser(target=ET.TreeBuilder())
    try:
        parser.feed(chunk)
        root = parser.close()
    except Exception:  # noqa: BLE001 - read line by line: the same errors, where they are
        return None
    els = list(root.iter())
    if max(starts, default=0) <= 1:
        lines = list(compress(range(at, at + len(starts)), starts))
    else:
        lines = [at + j for j, n in enumerate(starts) if n for _ in range(n)]
    if len(els) != len(lines):
        return None
    closed_at = next((j for j in range(len(tags) - 1, -1, -1) if tags[j]), None)
    if closed_at is None:
        return None
    return root, dict(zip(map(id, els), lines, strict=True)), closed_at + 1, None, False, els


_SIMPLE_DOCTYPE = re.compile(r"<!DOCTYPE[^<>\[]*>")
"""A DOCTYPE without an internal subset (blanked before parsing)."""


def _prepare(lines: pl.Series) -> tuple[list[str], list[bool], list[int], list[int]]:
    """The lines as Python strings ('' for a null), their blank flags (`F.blank_flags`) and `_tag_counts`."""
    text = lines.cast(pl.String).fill_null("")
    return (
        text.to_list(),
        (text.str.strip_chars().str.len_bytes() == 0).to_list(),  # (= F.blank_flags)
        *_tag_counts(text),
    )


def _tag_counts(text: pl.Series) -> tuple[list[int], list[int]]:
    """Per line (no null), its start tags ('<' followed by neither '/', '?' nor '!'), or -1 when it holds more
    or fewer '>' than '<', or -2 when it holds '<?' or '<!' (`_read_whole` looks at it); and its start and end
    tags."""
    t = pl.col("t")
    lt, gt, et, pi, bang = (t.str.count_matches(x, literal=True) for x in ("<", ">", "</", "<?", "<!"))
    flags = (
        text.to_frame("t")
        .lazy()
        .select(
            starts=pl.when(lt != gt).then(-1).when(pi + bang > 0).then(-2).otherwise(lt - et),
            tags=lt - pi - bang,
        )
        .collect()
    )
    return flags.get_column("starts").to_list(), flags.get_column("tags").to_list()


def _parse(
    texts: list[str],
    blank: list[bool],
    ctx: FileContext,
    starts: list[int] | None = None,
    tags: list[int] | None = None,
) -> tuple[tuple[list[Any], list[dict[str, Any]], list[dict[str, Any]]], dict[str, Any]]:
    """The rows of the three tables and the other `ParseResult` fields of one file (`_prepare`'s output;
    without `starts` and `tags`, every document is read line by line)."""
    docs, spans, notes, partial, _whole = _read_docs(texts, ctx, starts, tags)
    return _rows(docs, spans, notes, partial, texts, blank, ctx)


def _read_docs(
    texts: list[str], ctx: FileContext, starts: list[int] | None, tags: list[int] | None
) -> tuple[list[_Doc], list[tuple[int, int]], list[str], bool, bool]:
    """The documents of a file (see `_parse`): what `_rows` reads of each, the lines of each read (in
    order, disjoint), notes, whether one ends early, and whether each was read whole (`_read_whole`)."""
    docs: list[_Doc] = []
    spans: list[tuple[int, int]] = []
    partial = False
    whole = True
    notes: list[str] = []
    # Lines before the first document (e.g. a shell prompt) stay unrecognized.
    for start, end in _documents(texts):
        doc, span, note, partial_doc, whole_doc = _read_doc(texts, start, end, ctx.first_line, starts, tags)
        whole = whole and whole_doc
        if note is not None:
            notes.append(note)
        partial = partial or partial_doc
        if doc is not None and span is not None:
            spans.append(span)
            docs.append(doc)
    return docs, spans, notes, partial, whole


def _read_doc(
    texts: Sequence[str], start: int, end: int, first: int, starts: list[int] | None, tags: list[int] | None
) -> tuple[_Doc | None, tuple[int, int] | None, str | None, bool, bool]:
    """One document of `_read_docs` (lines `start` to `end` of `texts`, whose first line is number `first`;
    `starts`, `tags`: `_tag_counts` of `texts`, None: read line by line): what `_rows` reads of it and the
    lines read (None, None: no <nvidia_smi_log> root), its note, whether it ends early, whether it was read
    whole."""
    chunk = "\n".join(texts[start:end]).lstrip("\ufeff")
    # Blank the DOCTYPE (and any internal subset) keeping its newlines: nothing is fetched or expanded.
    chunk = _DOCTYPE.sub(lambda m: "\n" * m.group(0).count("\n"), chunk)
    doc_lines = chunk.split("\n")
    at = first + start
    read = None
    whole = True
    if starts is not None and tags is not None and len(doc_lines) == end - start:
        read = _read_whole(chunk, texts[start:end], at, starts[start:end], tags[start:end])
    if read is None:
        whole = False
        read = _read_lines(doc_lines, at)
    root, el_line, failed_at, note, partial_doc, _keep = read
    upto = end if failed_at is None else min(end, start + failed_at)
    if root is None or root.tag != "nvidia_smi_log":
        return None, None, note, partial_doc, whole
    ts_el = root.find("timestamp")
    node_texts = []
    for tag, attr in (("driver_version", "driver_version"), ("cuda_version", "cuda_version")):
        e = root.find(tag)
        if e is not None:
            node_texts.append((attr, e.text, el_line.get(id(e), at)))
    gpus: list[_Gpu] = []
    for idx, gpu in enumerate(root.findall("gpu")):
        line = el_line.get(id(gpu), at)
        if _CHILDREN[0] > 100_000:
            _CHILD.clear()
            _CHILDREN[0] = 0
        leaves: list[_Leaf] = []
        _walk(gpu, "", el_line, line, leaves)
        gpus.append((idx, gpu.get("id"), line, leaves))
    ts = (ts_el.text, el_line.get(id(ts_el), at)) if ts_el is not None else None
    return (ts, node_texts, gpus), (start, upto), note, partial_doc, whole


class _Lines(Sequence[str]):
    """A file's lines, each read from its column when asked for (a file read by its shape reads few or none:
    for events and unrecognized lines)."""

    def __init__(self, lines: pl.Series) -> None:
        self._lines = lines

    def __len__(self) -> int:
        return len(self._lines)

    def __getitem__(self, i):  # type: ignore[no-untyped-def, override]
        if isinstance(i, slice):
            return self._lines[i].to_list()
        return self._lines[i]


def _rows(
    docs: list[_Doc],
    spans: list[tuple[int, int]],
    notes: list[str],
    partial: bool,
    texts: Sequence[str],
    blank: list[bool],
    ctx: FileContext,
) -> tuple[tuple[list[Any], list[dict[str, Any]], list[dict[str, Any]]], dict[str, Any]]:
    """The rows of the three tables and the other `ParseResult` fields of a file of these documents (see
    `_read_docs`; `texts`, `blank`: the file's lines)."""
    first = ctx.first_line
    inv: list[Any] = []  # (F.INV_TUPLE tuples)
    samples: list[dict[str, Any]] = []
    events: list[dict[str, Any]] = []
    seen = F.Stated()  # the inventory facts stated so far: the file's inventory rows are unique (F.frames)

    def text_of(line: int) -> str:
        return texts[line - first]

    for ts_el, node_texts, gpus in docs:
        ts = F.parse_local_ts(ts_el[0] if ts_el is not None else None)
        node_attrs = [(attr, (t or "").strip(), ln) for attr, t, ln in node_texts if (t or "").strip()]
        inv += F.new_node_rows(node_attrs, node=ctx.node, path=ctx.path, source="nvidia-smi-xml", seen=seen)
        for idx, bus, line, leaves in gpus:
            snap = F.GpuSnapshot(index=idx, bus_raw=bus, line=line)
            _apply(leaves, snap)
            if "bus_id" not in snap.inv and snap.bus_raw:
                snap.put_inv("bus_id", snap.bus_raw, snap.line)
            if snap.bus_raw is None and "bus_id" in snap.inv:
                snap.bus_raw = snap.inv["bus_id"][0]
            gi, row, ev = F.snapshot_rows(
                snap,
                node=ctx.node,
                path=ctx.path,
                source="nvidia-smi-xml",
                ts=ts,
                text_of=text_of,
                seen=seen,
                tuples=True,
            )
            row["source"] = "nvidia-smi-xml"
            inv += gi
            samples.append(row)
            events += ev
    # parsed: the non-blank lines of the spans read; unrecognized: the non-blank lines between them
    parsed = sum(b - a - blank[a:b].count(True) for a, b in spans)
    unrecognized = 0
    examples: list[tuple[int, str]] = []
    for a, b in zip([0, *(e for _, e in spans)], [*(s for s, _ in spans), len(texts)], strict=True):
        if b > a:
            unrecognized += b - a - blank[a:b].count(True)
            if len(examples) < MAX_EXAMPLES:
                examples += [(first + i, texts[i][:500]) for i in range(a, b) if not blank[i]]
    return (inv, samples, events), {
        "parsed": parsed,
        "unrecognized": unrecognized,
        "unrecognized_examples": examples[:MAX_EXAMPLES],
        "notes": notes,
        "partial": partial,
    }
