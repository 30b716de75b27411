"""DCGM: `dcgmi diag -r 1..4` (text tables of DCGM 2.x-4.x, and `--json`), `dcgmi health -c`,
`dcgmi discovery -l`, and the `nv-hostengine` log.

- diag: every test result per GPU is understood; Fail -> event (source 'dcgm', kind 'dcgm_diag',
  severity high), Warn -> medium, Pass/Skip -> no event. code = the test name; message = the verbatim
  result row; detail = section, status and the Warning/Info text that names that GPU (wrapped cells
  rejoined: a cell filled to the column width continues mid-word, a shorter one at a space).
  Metadata (`DCGM Version`, `Driver Version Detected`, `GPU Device IDs Detected`) -> inventory
  (component 'node': dcgm_version, driver_version, gpu_device_ids).
- health -c: each incident (`PCIe system: Warning - ...`) -> event kind 'dcgm_health' (code = the
  system, Warning medium, Failure high); healthy GPUs give no event.
- discovery -l: GPU ID, name, bus id (verbatim and normalised), UUID -> inventory (component 'gpu').
- nv-hostengine.log: ERROR lines -> events kind 'dcgm_hostengine' (severity low; local time).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

import polars as pl

from parsers import _nvsmi_fields as F
from parsers._common import json_detail
from parsers._sniff import cheap_requirements, head_text, holds, opens_with_digit, probed
from parsers.base import FileContext, ParseResult, Tally, account, numbered

NAME = "dcgm"
DESCRIPTION = "DCGM dcgmi diag (text and JSON), health -c, discovery -l, nv-hostengine log"
TABLES = ("events", "inventory")
FILENAME_HINTS = ("dcgm*", "*dcgmi*", "nv-hostengine*", "nv_hostengine*")
DETECTS = "a dcgmi '| Diagnostic | Result |' table, a 'Health Monitor Report', 'GPUs found.' + 'Device Information', diag JSON, or hostengine log lines"
PRIORITY = 20

SOURCE = "dcgm"
HOSTENGINE_RE = (
    r"^(?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?) (?P<level>[A-Z]+) +\[(?P<pid>\d+):(?P<tid>\d+)\](?: (?P<msg>.*))?$"
)
_ROW = re.compile(r"^\s*\|(?P<l>[^|]*)\|(?P<r>.*)\|\s*$")
_ROWCUT = re.compile(r"^\s*\|(?P<l>[^|]*)\|(?P<r>.*?)\s*$")
_SECTION = re.compile(r"^\s*[|+]-+\s+(?P<name>[A-Za-z][\w ]*?)\s+-+\+")
_BORDER = re.compile(r"^\s*\+[-=+]+\+?\s*$")
_RESULT = re.compile(r"^(?P<status>Pass|Fail|Warn|Skip|Warning|Failure)\b(?:\s*-\s*(?:All|GPUs?:\s*(?P<gpus>[\d,\s]+)))?\s*$", re.I)
_PERGPU = re.compile(r"^GPU\s*(?P<gpu>\d+)\s*:\s*(?P<status>Pass|Fail|Warn|Skip)\b", re.I)
_GPUREF = re.compile(r"^GPU\s*(?P<gpu>\d+)\b")
_SEV = {"fail": "high", "failure": "high", "warn": "medium", "warning": "medium"}


_SNIFF_GUARD = {
    lit: ((probed(lit),),)
    for lit in (
        "Diagnostic",
        "Successfully ran diagnostic",
        "Health Monitor Report",
        "GPUs found.",
        "Device Information",
        '"DCGM ',
    )
}
"""Each literal the sniff looks for as a one-string requirement (`parsers._sniff.probed`: its two rarest
characters looked for first, then its longest blank-free piece)."""
_SNIFF_HOSTENGINE_REQS = cheap_requirements(HOSTENGINE_RE)
"""Requirements of `HOSTENGINE_RE`: a head lacking one has no hostengine line."""
_SNIFF_HOSTENGINE = re.compile(HOSTENGINE_RE)
_SNIFF_HOSTENGINE_DIGIT = opens_with_digit(HOSTENGINE_RE)
"""Whether a hostengine line opens with a decimal digit (then no other line is tried)."""


_SNIFF_IAGNOSTIC = ((probed("iagnostic"),),)
"""In both 'Diagnostic' and 'Successfully ran diagnostic': one search rules out the two."""


def _has(text: str, lit: str) -> bool:
    """`lit in text`, its guard characters and probe looked for first."""
    return holds(_SNIFF_GUARD[lit], text)


def sniff(head: bytes, name: str) -> float:
    """1.0 for dcgmi table or JSON signatures; 0.8 for hostengine log lines."""
    text = head_text(head)
    # (each regex only where its literal is: a search of a 64 KB head costs ~0.2 ms)
    diag = holds(_SNIFF_IAGNOSTIC, text)
    if diag and _has(text, "Diagnostic") and re.search(r"^\|\s*Diagnostic\s+\|\s*Result\s+\|", text, re.M):
        return 1.0
    if diag and _has(text, "Successfully ran diagnostic"):
        return 1.0
    if _has(text, "Health Monitor Report"):
        return 1.0
    if _has(text, "GPUs found.") and _has(text, "Device Information"):
        return 1.0
    if _has(text, '"DCGM ') and re.search(r'"DCGM (?:GPU )?Diagnostic"\s*:', text):
        return 1.0
    if not holds(_SNIFF_HOSTENGINE_REQS, text):
        return 0.0  # no line can match HOSTENGINE_RE: no hit
    # (the first 50 lines: from the first 8,192 characters when those hold 50 lines besides the last, which
    # may be cut short)
    raw = text[:8192].splitlines()[:-1] if len(text) > 8192 else []
    raw = raw[:50] if len(raw) >= 50 else text.splitlines()[:50]
    lines = [ln for ln in raw if ln.strip() and not ln.startswith("#")]
    digit = _SNIFF_HOSTENGINE_DIGIT
    hits = sum(1 for ln in lines if (not digit or ln[:1].isdecimal()) and _SNIFF_HOSTENGINE.match(ln))
    if lines and hits / len(lines) >= 0.5 and re.search(r"dcgm|hostengine|nvvs", text, re.I):
        return 0.8
    return 0.0


def _norm_status(s: str) -> str:
    s = s.lower()
    return {"warning": "warn", "failure": "fail"}.get(s, s)


def parse(lines: pl.Series, ctx: FileContext) -> ParseResult:
    """Dispatch on the content: JSON diag, a dcgmi table, or a hostengine log."""
    texts: list[str] = [t if t is not None else "" for t in lines.cast(pl.String).to_list()]
    read = _reader(texts)
    if read is None:
        return _parse_hostengine(lines, ctx)
    rows, result = read(texts, F.blank_flags(lines), ctx)
    return _result(F.frames(*rows), result)


def parse_many(items: Sequence[tuple[pl.Series, FileContext]]) -> list[ParseResult]:
    """`[parse(lines, ctx) for lines, ctx in items]`: the lines of all files read in one pass (strings, blank
    flags), each diag JSON or dcgmi table read on its own and their tables built by `F.frames_many`; a
    hostengine log (a vectorised parse of its own) is parsed alone."""
    if not items:
        return []
    text, texts_all, blank_all, starts = F.batch_lines(items)
    out: list[ParseResult | None] = [None] * len(items)
    read_k: list[int] = []
    rows: list[tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]] = []
    results: list[dict[str, Any]] = []
    for k, (lines, ctx) in enumerate(items):
        texts = texts_all[starts[k] : starts[k + 1]]
        read = _reader(texts)
        if read is None:
            out[k] = _parse_hostengine(lines, ctx)
            continue
        r, result = read(texts, blank_all[starts[k] : starts[k + 1]], ctx)
        read_k.append(k)
        rows.append(r)
        results.append(result)
    for k, tables, result in zip(read_k, F.frames_many(rows), results, strict=True):
        out[k] = _result(tables, result)
    return out  # type: ignore[return-value]


def _reader(texts: list[str]) -> Any:  # noqa: ANN401
    """The reader of a diag JSON or dcgmi tables file (`_parse_json`, `_parse_tables`), None for a hostengine
    log."""
    if re.search(r'"DCGM (?:GPU )?Diagnostic"\s*:', "\n".join(texts)):
        return _parse_json
    if any(_ROW.match(t) for t in texts[:400]):
        return _parse_tables
    return None


def _result(tables: dict[str, pl.DataFrame], result: dict[str, Any]) -> ParseResult:
    """The ParseResult of a JSON or table file: its inventory and events (dcgm has no samples)."""
    return ParseResult(tables={"inventory": tables["inventory"], "events": tables["events"]}, **result)


# ----------------------------------------------------------------------------- tables


def _cells(texts: list[str]) -> int:
    """Wrap width of the right column: DCGM cuts cell text every (dashes - 3) characters, mid-word.

    Taken from the first `+----+----+` border; without one, the longest cell text seen.
    """
    for t in texts:
        m = re.match(r"^\s*\+[-=]+\+(?P<r>[-=]+)\+\s*$", t)
        if m:
            return len(m.group("r")) - 3
    w = 0
    for t in texts:
        m = _ROW.match(t)
        if m:
            w = max(w, len(m.group("r")[1:].rstrip()))
    return w


def _parse_tables(
    texts: list[str], blank: list[bool], ctx: FileContext
) -> tuple[tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]], dict[str, Any]]:
    """The rows (inventory, no samples, events) and the other `ParseResult` fields of a dcgmi tables file."""
    first = ctx.first_line
    width = _cells(texts)
    tally = Tally()
    # records: [left, [(right_raw, line)], section]
    records: list[dict[str, Any]] = []
    nonblank = [i for i, b in enumerate(blank) if not b]
    last = nonblank[-1] if nonblank else -1
    # A table that does not end on its closing border was cut (the excerpt or the capture ended early).
    cut = last >= 0 and not _BORDER.match(texts[last].rstrip())
    section = ""
    mode = "diag"
    for i, raw in enumerate(texts):
        ln = first + i
        t = raw.rstrip()
        if blank[i]:
            continue
        ok = True
        if (m := _SECTION.match(t)) is not None:
            section = m.group("name").strip()
        elif _BORDER.match(t):
            pass
        elif "Health Monitor Report" in t:
            mode = "health"
        elif (m := _ROW.match(t) or (_ROWCUT.match(t) if i == last else None)) is not None:
            left, right = m.group("l").strip(), m.group("r")
            if left == "Diagnostic" and right.strip() == "Result":
                mode = "diag"
            elif left == "GPU ID" and right.strip() == "Device Information":
                mode = "discovery"
            elif left:
                records.append({"left": left, "rows": [(right, ln)], "section": section, "mode": mode})
            elif records:
                records[-1]["rows"].append((right, ln))
            else:
                ok = False
        elif re.match(r"^\s*(?:Successfully ran diagnostic|\d+ GPUs? found\.|\d+ NvSwitch(?:es)? found\.|\d+ CPUs? found\.)", t):
            pass
        elif re.match(r"^\s*\|\s*(?:Switch ID|\d+|CPU ID)?\s*\|\s*$", t):
            pass  # one-column tables of `discovery -l` (NvSwitch / CPU ids): understood, no row
        else:
            ok = False
        tally.count(ok, ln, raw)

    def joined(rows: list[tuple[str, int]]) -> str:
        # Pieces are fixed-width slices of one text: concatenate them as they are (a slice may end on
        # the space between two words, or mid-word), then squeeze the padding of short pieces.
        out = "".join((r[1:] if r.startswith(" ") else r)[:width].ljust(width) for r, _ in rows)
        return " ".join(out.split())

    inv: list[dict[str, Any]] = []
    events: list[dict[str, Any]] = []

    def event(kind: str, code: str, status: str, gpu: int | None, ln: int, detail: dict[str, Any]) -> None:
        events.append(
            {"ts": None, "ts_quality": "none", "node": ctx.node, "gpu_index": gpu, "gpu_bus_id": None, "source": SOURCE,
             "kind": kind, "code": code, "severity": _SEV[status], "message": texts[ln - first].strip(),
             "detail": F.to_json(detail), "file": ctx.path, "line": ln}
        )

    def node_attr(attr: str, value: str, ln: int) -> None:
        inv.append({"node": ctx.node, "component": "node", "attribute": attr, "value": value, "source": SOURCE,
                    "file": ctx.path, "line": ln})

    last_test: dict[str, Any] | None = None
    gpu_health: int | None = None
    for k, rec in enumerate(records):
        left, rows, mode = rec["left"], rec["rows"], rec["mode"]
        if mode == "discovery":
            if left.isdigit():
                idx = int(left)
                vals = {}
                for r, ln in rows:
                    m = re.match(r"^\s*(Name|PCI Bus ID|Device UUID):\s*(.*?)\s*$", r)
                    if m:
                        vals[m.group(1)] = (m.group(2), ln)
                bus = vals.get("PCI Bus ID", (None, 0))[0]
                for key, attr in (("Name", "name"), ("PCI Bus ID", "bus_id"), ("Device UUID", "uuid")):
                    if key in vals:
                        inv.append({"node": ctx.node, "component": "gpu", "gpu_index": idx, "gpu_bus_id": bus,
                                    "attribute": attr, "value": vals[key][0], "source": SOURCE, "file": ctx.path,
                                    "line": vals[key][1]})
            continue
        if mode == "health":
            m = re.match(r"^(?:GPU ID:\s*|->\s*)(?P<gpu>\d+)$", left)
            if m:
                gpu_health = int(m.group("gpu"))
            if left in ("Overall Health",) or left.startswith("Group"):
                gpu_health = None
            # incidents: '<system>: <Status> - text' in the right column, or left '-> <system>'
            text_rows = rows if not m else rows[1:]
            lm = re.match(r"^->\s*(?P<sys>.+)$", left)
            if lm and not lm.group("sys").isdigit() and lm.group("sys") != "Errors":
                txt = joined(rows)
                sm = re.match(r"^(?P<st>Warning|Failure|Fail|Warn)\b\s*-?\s*(?P<msg>.*)$", txt)
                if sm:
                    event("dcgm_health", lm.group("sys"), _norm_status(sm.group("st")), gpu_health, rows[0][1],
                          {"status": sm.group("st"), "text": sm.group("msg")})
                continue
            txt = joined(text_rows) if text_rows else ""
            for sm in re.finditer(r"(?P<sys>[A-Za-z][\w /]*?(?: system)?): (?P<st>Warning|Failure) - (?P<msg>.*?)(?=(?: [A-Za-z][\w /]*?: (?:Warning|Failure) - )|$)", txt):
                event("dcgm_health", sm.group("sys"), _norm_status(sm.group("st")), gpu_health, text_rows[0][1],
                      {"status": sm.group("st"), "text": sm.group("msg")})
            continue
        # diag
        if rec["section"] == "Metadata":
            attr = {"DCGM Version": "dcgm_version", "Driver Version Detected": "driver_version",
                    "GPU Device IDs Detected": "gpu_device_ids"}.get(left, "dcgm_" + left.lower().replace(" ", "_"))
            node_attr(attr, joined(rows), rows[0][1])
            continue
        if left in ("Warning", "Info", "Error") and last_test is not None:
            txt = joined(rows)
            gm = _GPUREF.match(txt)
            last_test["notes"].append((left, int(gm.group("gpu")) if gm else None, txt))
            continue
        results: list[tuple[int | None, str, int]] = []
        for r, ln in rows:
            s = r.strip()
            if (pm := _PERGPU.match(s)) is not None:
                results.append((int(pm.group("gpu")), _norm_status(pm.group("status")), ln))
            elif (rm := _RESULT.match(s)) is not None:
                gl = [int(g) for g in re.findall(r"\d+", rm.group("gpus") or "")]
                for g in gl or [None]:
                    results.append((g, _norm_status(rm.group("status")), ln))
        last_test = {"name": left, "section": rec["section"], "results": results, "notes": []}
        rec["test"] = last_test
    for rec in records:
        test = rec.get("test")
        if not test:
            continue
        per_gpu = [r for r in test["results"] if r[0] is not None]
        chosen = per_gpu if per_gpu else test["results"]
        for gpu, status, ln in chosen:
            if status in ("fail", "warn"):
                notes = [f"{kind}: {txt}" for kind, g, txt in test["notes"] if g is None or gpu is None or g == gpu]
                event("dcgm_diag", test["name"], status, gpu, ln,
                      {"section": test["section"], "status": status, "notes": notes})
    return (inv, [], events), {
        "parsed": tally.parsed,
        "unrecognized": tally.unrecognized,
        "unrecognized_examples": tally.examples,
        "partial": bool(cut),
    }


# ----------------------------------------------------------------------------- JSON


def _parse_json(
    texts: list[str], blanks: list[bool], ctx: FileContext
) -> tuple[tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]], dict[str, Any]]:
    """The rows (inventory, no samples, events) and the other `ParseResult` fields of a diag JSON file."""
    first = ctx.first_line
    start = next((i for i, t in enumerate(texts) if t.lstrip().startswith("{")), 0)
    body = "\n".join(texts[start:])
    partial = False
    notes: list[str] = []
    try:
        obj, end = json.JSONDecoder().raw_decode(body)
    except json.JSONDecodeError as exc:
        obj, partial = None, True
        notes.append(f"diag JSON cut or invalid: {exc.msg} at line {first + start + exc.lineno - 1}")
    inv: list[dict[str, Any]] = []
    events: list[dict[str, Any]] = []
    cursor = start

    def line_of(needle: str) -> int:
        nonlocal cursor
        for j in range(cursor, len(texts)):
            if needle in texts[j]:
                cursor = j
                return first + j
        return first + start

    if isinstance(obj, dict):
        diag = obj.get("DCGM GPU Diagnostic") or obj.get("DCGM Diagnostic") or obj
        meta = {**(obj.get("metadata") or {}), **(diag.get("metadata") or {})} if isinstance(diag, dict) else {}
        version = (diag.get("version") if isinstance(diag, dict) else None) or meta.get("DCGM Version") or meta.get("version")
        if version:
            inv.append({"node": ctx.node, "component": "node", "attribute": "dcgm_version", "value": str(version),
                        "source": SOURCE, "file": ctx.path, "line": line_of(str(version))})
        drv = meta.get("Driver Version Detected") or meta.get("driver_version")
        if drv:
            inv.append({"node": ctx.node, "component": "node", "attribute": "driver_version", "value": str(drv),
                        "source": SOURCE, "file": ctx.path, "line": line_of(str(drv))})
        cursor = start
        for cat in (diag.get("test_categories") or []) if isinstance(diag, dict) else []:
            for test in cat.get("tests") or []:
                name = str(test.get("name", "?"))
                tline = line_of(f'"{name}"')
                for res in test.get("results") or []:
                    status = _norm_status(str(res.get("status", "")))
                    if status not in ("fail", "warn"):
                        continue
                    gpu = res.get("gpu_id", res.get("gpu_ids", res.get("entity_id")))
                    gpus = [int(g) for g in re.findall(r"\d+", str(gpu))] if gpu is not None else [None]
                    texts_w = []
                    for key in ("warnings", "errors", "info"):
                        for w in res.get(key) or []:
                            texts_w.append(w.get("warning") or w.get("message") or json.dumps(w) if isinstance(w, dict) else str(w))
                    # Evidence: the JSON line holding the first warning text (else the test's name line).
                    wline = tline
                    if texts_w:
                        needle = json.dumps(texts_w[0])[1:41]
                        wline = next((first + j for j in range(tline - first, len(texts)) if needle in texts[j]), tline)
                    for g in gpus or [None]:
                        events.append(
                            {"ts": None, "ts_quality": "none", "node": ctx.node, "gpu_index": g, "gpu_bus_id": None,
                             "source": SOURCE, "kind": "dcgm_diag", "code": name, "severity": _SEV[status],
                             "message": texts[wline - first].strip(),
                             "detail": F.to_json({"category": cat.get("category"), "status": status, "notes": texts_w}),
                             "file": ctx.path, "line": wline}
                        )
    blank = sum(blanks)
    parsed = (len(texts) - start) - sum(blanks[start:]) if obj is not None else 0
    unrec = start - sum(blanks[:start])
    if obj is None:
        parsed, unrec = 0, len(texts) - blank
    return (inv, [], events), {
        "parsed": parsed,
        "unrecognized": unrec,
        "unrecognized_examples": [
            (first + i, texts[i][:500]) for i in range(min(start, 20)) if not blanks[i]
        ],
        "notes": notes,
        "partial": partial,
    }


# ----------------------------------------------------------------------------- hostengine


def _parse_hostengine(lines: pl.Series, ctx: FileContext) -> ParseResult:
    frame = numbered(lines, ctx).with_columns(g=pl.col("text").str.extract_groups(HOSTENGINE_RE))
    parsed, unrecognized, examples = account(frame.select("line", "text", ok=pl.col("g").struct.field("level").is_not_null()), pl.col("ok"))
    err = frame.filter(pl.col("g").struct.field("level") == "ERROR")
    events = err.select(
        ts=pl.col("g").struct.field("ts").str.strptime(pl.Datetime("us"), "%Y-%m-%d %H:%M:%S%.f", strict=False).dt.replace_time_zone("UTC"),
        ts_quality=pl.lit("local_assumed_utc"),
        node=pl.lit(ctx.node),
        source=pl.lit(SOURCE),
        kind=pl.lit("dcgm_hostengine"),
        code=pl.col("g").struct.field("msg").str.extract(r"\[([^\]\[]+:\d+)\] \[[^\]]+\]$", 1),
        severity=pl.lit("low"),
        message=pl.col("text"),
        detail=json_detail(pid=pl.col("g").struct.field("pid"), tid=pl.col("g").struct.field("tid")),
        file=pl.lit(ctx.path),
        line=pl.col("line"),
    )
    tail = frame.filter(pl.col("text").str.strip_chars() != "").tail(1)
    cut = tail.height == 1 and tail.get_column("g").struct.field("msg").is_null().item()
    return ParseResult(
        tables={"events": F.conform_table(events, "events")},
        parsed=parsed,
        unrecognized=unrecognized,
        unrecognized_examples=examples,
        partial=bool(cut),
    )
