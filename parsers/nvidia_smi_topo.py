"""`nvidia-smi topo -m` matrices and `nvidia-smi nvlink -s/-e/-c` listings -> inventory (+ NVLink events).

Convention (inventory, component 'gpu', gpu_index from the `GPU<n>` label; topo/nvlink print no bus id,
so gpu_bus_id is null here — the bug-report parser fills it from a `-q` section of the same report,
and analysis can join on (node, gpu_index)):
- `nic_affinity`: every NIC column with its path type, NIC names resolved through the `NIC Legend`
  (`mlx5_0:NODE,mlx5_1:PIX,...`; old drivers name the HCA column directly, e.g. `mlx4_0:PHB`);
- `nearest_nics`: the NIC(s) with the closest path (X < PIX < PXB < PHB < NODE < SYS), e.g. `mlx5_3`;
- `gpu_links`: the GPU↔GPU row (`GPU1:NV18,GPU2:NV18,...`), `nvlink_peer_count`: peers reached by NV<k>;
- `cpu_affinity`, `numa_affinity`, `gpu_numa_id`: as printed.
NIC rows give component 'nic' rows (device = NIC name) with `gpu_affinity`.
`nvlink -s`: `name`, `uuid` (verbatim), `nvlink_active_links`, `nvlink_link_speed` (distinct speeds),
`nvlink_inactive_links`; an `<inactive>` link next to active ones is an `nvlink_inactive` event (medium).
`nvlink -e`: non-zero error counters are `nvlink_errors` events (code = counter; Recovery medium, else low).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import polars as pl

from parsers import _nvsmi_fields as F
from parsers._sniff import has_bytes, head_text
from parsers.base import MAX_EXAMPLES, FileContext, ParseResult, Tally

NAME = "nvidia-smi-topo"
DESCRIPTION = "nvidia-smi topo -m (GPU/NIC affinity matrix) and nvlink -s/-e/-c listings"
TABLES = ("inventory", "events")
FILENAME_HINTS = ("*topo*", "*nvlink*")
DETECTS = "a GPU0 GPU1 ... header over 'GPU0  X  NV18 ...' rows, or 'GPU 0: <name> (UUID: GPU-...)' + 'Link 0: ...' lines"
PRIORITY = 15

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_DEV = re.compile(r"^(GPU\d+|NIC\d+|mlx\d+_\d+|[a-z]+\d*_\d+|ib\d+|eth\d+|en\w+)$")
_CELL = re.compile(r"^(X|NV\d+|PIX|PXB|PHB|NODE|SYS|SOC|PIX\d*|NA|N/A)$")
_ORDER = {"X": 0, "PIX": 1, "PXB": 2, "PHB": 3, "NODE": 4, "SOC": 4, "SYS": 5}
_AFFINITY = ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")
_LEGEND = re.compile(r"^\s*(?P<k>X|SYS|NODE|PHB|PXB|PIX|NV#|SOC)\s+=")
_NICLEG = re.compile(r"^\s*(?P<nic>NIC\d+):\s*(?P<dev>\S+)\s*$")
_NVGPU = re.compile(r"^GPU (?P<idx>\d+): (?P<name>.+?) \(UUID: (?P<uuid>[^)]+)\)\s*$")
_NVLINK = re.compile(r"^\s+Link (?P<link>\d+):\s*(?P<rest>.*?)\s*$")
_SPEED = re.compile(r"^[\d.]+ GB/s$")
_NVERR = re.compile(r"^(?P<counter>[A-Za-z][A-Za-z0-9 ]*?(?:Errors?|Counter|Count)):\s*(?P<val>\d+)$")


def sniff(head: bytes, name: str) -> float:
    """0.95 for a topo matrix header + GPU0 row, or an nvlink GPU line + Link line."""
    # Both matrix patterns need 'GPU0', both nvlink ones '(UUID: GPU-': a head with neither (and no escape
    # code, whose removal could join them) scores 0 without a decode or regex (most heads of a bundle).
    if not has_bytes(head, b"GPU0") and not has_bytes(head, b"(UUID: GPU-") and b"\x1b" not in head:
        return 0.0
    text = head_text(head)
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    # (each pair of multi-line searches only where the literal its first regex needs is: a failed `^...`
    # search in multi-line mode visits every position of the head)
    if (
        "GPU0" in text
        and re.search(r"^[ \t]+GPU0[ \t]+(?:GPU1|NIC0|mlx\w+|CPU Affinity)", text, re.M)
        and re.search(r"^GPU0[ \t]+X\b", text, re.M)
    ):
        return 0.95
    if (
        "(UUID: GPU-" in text
        and re.search(r"^GPU \d+: .+\(UUID: GPU-", text, re.M)
        and re.search(r"^\s+Link \d+:", text, re.M)
    ):
        return 0.95
    return 0.0


def _split_header(text: str) -> list[str]:
    if "\t" in text:
        return [t.strip() for t in text.split("\t") if t.strip()]
    return [t.strip() for t in re.split(r"\s{2,}", text.strip()) if t.strip()]


_LINES: dict[str, tuple[Any, ...]] = {}
"""`_classify` of each distinct line seen by this process (a pure function of the line: nvlink listings
repeat the same `Link k: ... Errors: 0` lines for every GPU and node)."""
_LINES_MAX = 100_000


def _classify(raw: str) -> tuple[Any, ...]:
    """What `parse` needs to know of a line apart from its state: (kind, payload, row tokens, legend kind,
    legend payload). kind: 1 failure line, 2 matrix header (device and affinity columns), 3 nvlink GPU line
    (index, name, uuid), 4 nvlink Link line (link, rest, whether rest is a speed or `<inactive>`, error
    counter (name, count) or None), 0 none of these; row tokens: the split of a matrix
    row (device label and a cell first), else None; legend kind: 1 a legend line, 2 a NIC legend entry
    (NIC, device), 3 a shell prompt running nvidia-smi, 0 other; whether an nvlink Link line can make a row
    or an event (a speed or `<inactive>`, or a counter above 0)."""
    text = (_ANSI.sub("", raw) if "\x1b" in raw else raw).rstrip()
    kind, payload = 0, None
    if F.failure_event(text, 0, node="", path="") is not None:
        kind = 1
    elif (
        text[:1] in (" ", "\t")
        and "GPU0" in text  # (the header's first column: split only such lines)
        and (head := _split_header(text))
        and head[0] == "GPU0"
        and len(head) > 1
        and not _CELL.match(head[1])
    ):
        kind, payload = 2, ([h for h in head if _DEV.match(h)], [h for h in head if not _DEV.match(h)])
    elif (m := _NVGPU.match(text)) is not None:
        kind, payload = 3, (int(m.group("idx")), m.group("name"), m.group("uuid"))
    elif (m := _NVLINK.match(raw.replace("\t", "    "))) is not None:
        rest = m.group("rest")
        em = _NVERR.match(rest)
        speed = _SPEED.match(rest) is not None or rest == "<inactive>"
        err = (em.group("counter"), int(em.group("val"))) if em else None
        kind, payload = 4, (int(m.group("link")), rest, speed, err)
    tok = text.split()
    rowtok = tok if tok and _DEV.match(tok[0]) and len(tok) > 1 and _CELL.match(tok[1]) else None
    leg, leg_payload = 0, None
    if text.strip() in ("Legend:", "NIC Legend:") or _LEGEND.match(text):
        leg = 1
    elif (m := _NICLEG.match(text)) is not None:
        leg, leg_payload = 2, (m.group("nic"), m.group("dev"))
    elif re.match(r"^\s*\$?\s*nvidia-smi\b", text):
        leg = 3
    # (whether `_read` keeps a Link line: one with a speed or `<inactive>`, or a counter above 0)
    kept = kind == 4 and (payload[2] or (payload[3] is not None and payload[3][1] > 0))  # type: ignore[index]
    return kind, payload, rowtok, leg, leg_payload, kept


def parse(lines: pl.Series, ctx: FileContext) -> ParseResult:
    """Parse topo matrices and nvlink listings; see the module docstring."""
    texts: list[str] = [t if t is not None else "" for t in lines.cast(pl.String).to_list()]
    inv, events, tally, partial = _read(texts, F.blank_flags(lines), ctx)
    return _result(F.frames(inv, [], events), tally, partial)


def parse_many(items: Sequence[tuple[pl.Series, FileContext]]) -> list[ParseResult]:
    """`[parse(lines, ctx) for lines, ctx in items]`: the blank test made once over all the files' lines, each
    file walked on its own, each table built once for all of them (`_nvsmi_fields.frames_many`) and cut per
    file."""
    if not items:
        return []
    _, every, blank, _ = F.batch_lines(items)
    read = []
    offset = 0
    for lines, ctx in items:
        n = len(lines)
        read.append(_read(every[offset : offset + n], blank[offset : offset + n], ctx))
        offset += n
    tables = F.frames_many([(inv, [], events) for inv, events, _, _ in read])
    return [_result(t, tally, partial) for t, (_, _, tally, partial) in zip(tables, read, strict=True)]


def _result(tables: dict[str, pl.DataFrame], tally: Tally, partial: bool) -> ParseResult:
    return ParseResult(
        tables={"inventory": tables["inventory"], "events": tables["events"]},
        parsed=tally.parsed,
        unrecognized=tally.unrecognized,
        unrecognized_examples=tally.examples,
        partial=partial,
    )


def _read(  # noqa: C901, PLR0912, PLR0915
    texts: list[str], blank: list[bool], ctx: FileContext
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], Tally, bool]:
    """Walk one file's lines: its inventory rows, its events (NVLink and failure lines), its line accounting
    and whether it was cut."""
    first = ctx.first_line
    parsed = unrecognized = 0
    examples: list[tuple[int, str]] = []
    devcols: list[str] = []
    affcols: list[str] = []
    rows: list[tuple[str, list[str], list[str], int]] = []
    legend: dict[str, str] = {}
    nv: dict[int, dict[str, Any]] = {}
    cur_nv: dict[str, Any] | None = None
    partial = False
    failures: list[dict[str, Any]] = []
    classes = _LINES
    if len(classes) > _LINES_MAX:
        classes.clear()
    get = classes.get
    for i, raw in enumerate(texts):
        if blank[i]:
            continue
        c = get(raw)
        if c is None:
            c = classes[raw] = _classify(raw)
        kind = c[0]
        if kind == 4 and cur_nv is not None:  # (the bulk of an nvlink listing first)
            if c[5]:  # (a link line that makes no row nor event is not kept)
                cur_nv["links"].append((*c[1], first + i))
            parsed += 1
            continue
        ln = first + i
        ok = True
        if kind == 1:
            text = (_ANSI.sub("", raw) if "\x1b" in raw else raw).rstrip()
            fe = F.failure_event(text, ln, node=ctx.node, path=ctx.path)
            assert fe is not None
            failures.append(fe)  # a lost GPU shows here too ('Unable to determine the device handle')
        elif kind == 2:
            devcols, affcols = list(c[1][0]), list(c[1][1])
            cur_nv = None
        elif kind == 3:
            idx, name, uuid = c[1]
            cur_nv = nv.setdefault(idx, {"idx": idx, "name": name, "uuid": uuid, "line": ln, "links": []})
        elif devcols and (tok := c[2]) is not None:
            cells = tok[1 : 1 + len(devcols)]
            rest = tok[1 + len(devcols) :]
            if len(cells) < len(devcols):
                partial = True
            rows.append((tok[0], cells, rest, ln))
        elif c[3] == 1:
            pass
        elif c[3] == 2:
            legend[c[4][0]] = c[4][1]
        else:
            ok = False
        if ok:  # (Tally.count, inline)
            parsed += 1
        else:
            unrecognized += 1
            if len(examples) < MAX_EXAMPLES:
                examples.append((ln, raw[:500]))
    tally = Tally(parsed, unrecognized, examples)

    gpu_rows = [r for r in rows if r[0].startswith("GPU")]
    if gpu_rows and affcols and gpu_rows[-1] is rows[-1] and len(rows[-1][2]) < len(affcols):
        partial = True  # the matrix's last row was cut before its affinity columns

    def nic(name: str) -> str:
        return legend.get(name, name)

    inv: list[dict[str, Any]] = []
    events: list[dict[str, Any]] = []

    def put(component: str, idx: int | None, device: str | None, attr: str, value: str, ln: int) -> None:
        if value != "":
            inv.append(
                {"node": ctx.node, "component": component, "gpu_index": idx, "gpu_bus_id": None, "device": device,
                 "attribute": attr, "value": value, "source": "nvidia-smi-topo", "file": ctx.path, "line": ln}
            )

    for label, cells, rest, ln in rows:
        pairs = list(zip(devcols, cells, strict=False))
        nics = [(nic(d), c) for d, c in pairs if not d.startswith("GPU")]
        gpus = [(d, c) for d, c in pairs if d.startswith("GPU") and d != label]
        if label.startswith("GPU"):
            idx = int(label[3:])
            if nics:
                put("gpu", idx, None, "nic_affinity", ",".join(f"{d}:{c}" for d, c in nics), ln)
                ranked = [(_ORDER.get(c, 9), d) for d, c in nics]
                best = min(r for r, _ in ranked)
                if best < 9:
                    put("gpu", idx, None, "nearest_nics", ",".join(d for r, d in ranked if r == best), ln)
            if gpus:
                put("gpu", idx, None, "gpu_links", ",".join(f"{d}:{c}" for d, c in gpus), ln)
                put("gpu", idx, None, "nvlink_peer_count", str(sum(1 for _, c in gpus if c.startswith("NV"))), ln)
            for col, v in zip(affcols, rest, strict=False):
                put("gpu", idx, None, col.lower().replace(" ", "_"), v, ln)
        else:
            put("nic", None, nic(label), "gpu_affinity", ",".join(f"{d}:{c}" for d, c in gpus + [(d, c) for d, c in pairs if d.startswith("GPU") and d == label]), ln)

    for idx, g in sorted(nv.items()):
        put("gpu", idx, None, "name", g["name"], g["line"])
        put("gpu", idx, None, "uuid", g["uuid"], g["line"])
        speeds = [(k, r, ln) for k, r, sp, _, ln in g["links"] if sp]
        if speeds:
            active = [r for _, r, _ in speeds if r != "<inactive>"]
            inactive = [(k, ln) for k, r, ln in speeds if r == "<inactive>"]
            put("gpu", idx, None, "nvlink_active_links", str(len(active)), g["line"])
            if active:
                put("gpu", idx, None, "nvlink_link_speed", ",".join(sorted(set(active))), g["line"])
            if inactive:
                put("gpu", idx, None, "nvlink_inactive_links", ",".join(str(k) for k, _ in inactive), inactive[0][1])
                if active:
                    events.append(_event(ctx, idx, "nvlink_inactive", None, "medium", texts[inactive[0][1] - first],
                                         inactive[0][1], {"inactive_links": [k for k, _ in inactive], "active_links": len(active)}))
        for k, _, _, err, ln in g["links"]:
            if err is not None and err[1] > 0:
                counter = err[0]
                sev = "medium" if "recovery" in counter.lower() else "low"
                events.append(_event(ctx, idx, "nvlink_errors", counter, sev, texts[ln - first], ln, {"link": k, "count": err[1]}))
    return inv, events + failures, tally, partial


def _event(ctx: FileContext, idx: int, kind: str, code: str | None, sev: str, text: str, ln: int, detail: dict[str, Any]) -> dict[str, Any]:
    return {
        "ts": None, "ts_quality": "none", "node": ctx.node, "gpu_index": idx, "gpu_bus_id": None, "source": F.SOURCE,
        "kind": kind, "code": code, "severity": sev, "message": text.strip(), "detail": F.to_json(detail),
        "file": ctx.path, "line": ln,
    }
