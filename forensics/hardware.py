"""Hardware and software evidence: catalogued events grouped into candidate root causes per node and GPU.

Method: every event whose kind is known here (or an XID/SXid in the catalog) is given a category and a
severity; events are grouped by (node, GPU, category); a group's severity is its worst event's.
Consequences are not causes: XID 45 ("preemptive cleanup") and NCCL/watchdog errors are attached to
the cause they follow, not reported alone. Application XIDs (13, 31, 43) that hit most nodes at about
the same time are one fleet-wide software finding, not one finding per GPU.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import polars as pl

from forensics.findings import Category, Evidence, Severity
from forensics.outputs import RUN_KEYS, in_mixed_run
from forensics.schema import WEIGHT, with_weight

# kind → (category, default severity) for events that are not XID/SXid.
KIND_RULES: dict[str, tuple[Category, Severity]] = {
    "gpu_fallen_off_bus": (Category.GPU_HARDWARE, Severity.CRITICAL),
    "gpu_crash_dump": (Category.GPU_HARDWARE, Severity.HIGH),
    "gpu_init_failure": (Category.GPU_HARDWARE, Severity.CRITICAL),
    "gpu_error": (Category.GPU_HARDWARE, Severity.CRITICAL),
    "ecc_uncorrectable": (Category.GPU_MEMORY, Severity.HIGH),
    "row_remap_pending": (Category.GPU_MEMORY, Severity.HIGH),
    "row_remap_failure": (Category.GPU_MEMORY, Severity.CRITICAL),
    "retired_pages_pending": (Category.GPU_MEMORY, Severity.HIGH),
    "pcie_aer": (Category.PCIE, Severity.MEDIUM),
    "pcie_link_degraded": (Category.PCIE, Severity.MEDIUM),
    "nic_link": (Category.NETWORK, Severity.MEDIUM),
    "nic_module": (Category.NETWORK, Severity.MEDIUM),
    "ib_carrier": (Category.NETWORK, Severity.MEDIUM),
    "ib_port_down": (Category.NETWORK, Severity.MEDIUM),
    "thermal": (Category.THERMAL_POWER, Severity.MEDIUM),
    "power": (Category.THERMAL_POWER, Severity.MEDIUM),
    "mce": (Category.GPU_HARDWARE, Severity.MEDIUM),
    "edac": (Category.GPU_HARDWARE, Severity.MEDIUM),
    "dcgm_diag": (Category.GPU_HARDWARE, Severity.HIGH),
    "dcgm_health": (Category.GPU_HARDWARE, Severity.HIGH),
    "oom": (Category.SOFTWARE, Severity.MEDIUM),
    "segfault": (Category.SOFTWARE, Severity.MEDIUM),
    "kernel_panic": (Category.GPU_HARDWARE, Severity.HIGH),
}

APP_XIDS = {13, 31, 43}
CONSEQUENCE_XIDS = {45}
FLEET_SHARE = 0.5
"""Share of nodes an application XID must hit to be called fleet-wide (software), not one GPU's fault; and
one finding to be folded into a fleet-wide one (`analyze.fold_fleet`)."""

MAX_EVIDENCE = 8


@dataclass
class Candidate:
    """A root-cause candidate before ranking."""

    category: Category
    severity: Severity
    node: str | None
    gpu_index: int | None
    gpu_bus_id: str | None
    title: str
    summary: str
    first_seen: datetime | None
    last_seen: datetime | None
    evidence: list[Evidence]
    action: str
    confidence: float
    consequences: list[str] = field(default_factory=list)
    alternatives: list[str] = field(default_factory=list)
    impact: dict[str, float | None] = field(default_factory=dict)
    """step_time_slowdown_pct / lost_gpu_hours, set when a slowdown or hang is attributed to it."""
    kinds: set[str] = field(default_factory=set)
    """Event kinds/codes behind it, e.g. {'xid:79'}: analysis uses them to link consequences."""


def _rules_frame() -> pl.DataFrame:
    """The catalog and KIND_RULES as one lookup table keyed by (kind, code); code null = any code."""
    from forensics.catalog import entries

    rows = [
        {"kind": e.kind, "code": str(e.code), "category": e.category, "sev": e.severity, "action": e.action,
         "code_name": e.name}
        for kind in ("xid", "sxid")
        for e in entries(kind)
    ]
    rows += [
        {"kind": k, "code": None, "category": c.value, "sev": s.value, "action": None, "code_name": None}
        for k, (c, s) in KIND_RULES.items()
    ]
    return pl.DataFrame(rows, schema={k: pl.String for k in ("kind", "code", "category", "sev", "action", "code_name")})


def classify(events: pl.DataFrame) -> pl.DataFrame:
    """Add `category`, `sev`, `action` and `code_name` from the catalog and KIND_RULES (vectorised join).

    An XID/SXid missing from the catalog is still hardware evidence of medium severity; a parser's own
    severity, when it set one, wins over the kind's default (not over the catalog's).
    """
    rules = _rules_frame()
    by_code = rules.filter(pl.col("code").is_not_null())
    by_kind = rules.filter(pl.col("code").is_null()).drop("code")
    valid = list(Severity._value2member_map_)
    # the rules are worked out on the distinct (kind, code, severity) of the events, then taken to every row
    # by a join of those three columns alone: a join of the whole table would copy every column of millions
    # of rows (an Xid flood: ~750 MB)
    keys = ["kind", "code", "severity"]
    combos = (
        events.select(keys)
        .unique()
        .join(by_code, on=["kind", "code"], how="left", nulls_equal=False)
        .join(by_kind, on="kind", how="left", suffix="_k")
        .select(
            *keys,
            category=pl.coalesce(
                "category",
                "category_k",
                pl.when(pl.col("kind").is_in(["xid", "sxid"])).then(pl.lit("gpu_hardware")),
            ),
            sev=pl.coalesce(
                "sev",
                pl.when(pl.col("category_k").is_not_null() & pl.col("severity").is_in(valid)).then("severity"),
                "sev_k",
                pl.when(pl.col("kind").is_in(["xid", "sxid"])).then(pl.lit("medium")),
            ),
            action=pl.coalesce(
                "action",
                pl.when(pl.col("kind").is_in(["xid", "sxid"])).then(
                    pl.lit("Look the code up in NVIDIA's XID documentation; run DCGM diagnostics")
                ),
            ),
            code_name=pl.coalesce(
                "code_name", pl.when(pl.col("kind").is_in(["xid", "sxid"])).then(pl.lit("uncatalogued"))
            ),
        )
    )
    added = events.select(keys).join(combos, on=keys, how="left", nulls_equal=True, maintain_order="left")
    return events.hstack(added.drop(keys))


def _evidence(rows: pl.DataFrame) -> list[Evidence]:
    """Pick up to MAX_EVIDENCE lines: the first of each distinct code, then the last line."""
    return _group_evidence(rows, pl.zeros(rows.height, pl.UInt32, eager=True).alias("_g")).get(0, [])


_DOWN = r"(?i)\b(down|DOWN)\b|carrier lost|unplugged"
"""A NIC link line saying the link went down."""
_DEV = r"\b(mlx\d+_\d+|ib\d+|ibp\w+|en\w+\d)\b"
"""A NIC's device name in a line."""


_EVENT_COLUMNS = [
    "ts", "node", "gpu_index", "gpu_bus_id", "rank", "source", "kind", "code", "severity", "message", "file", "line",
    WEIGHT,
]
"""The events' columns candidates are made of (`WEIGHT`: the rows a row stands for, where a flood was thinned)."""


def _group_ids(keyed: pl.DataFrame, groups: pl.DataFrame) -> pl.Series:
    """Per row of `keyed`: the position (`_g`) of its group among `groups` (the distinct keys, in order)."""
    keys = list(groups.columns)
    return (
        keyed.select(keys)
        .join(groups.with_row_index("_g"), on=keys, how="left", nulls_equal=True, maintain_order="left")
        .get_column("_g")
    )


def _group_evidence(keyed: pl.DataFrame, gid: pl.Series) -> dict[int, list[Evidence]]:
    """`_evidence` of every group at once: {group's position: its evidence}; `gid` each row's group's position
    (`_group_ids`; a group's rows: those of its id, in table order)."""
    small = pl.DataFrame([gid, keyed.get_column("ts"), keyed.get_column("file"), keyed.get_column("line")])
    by = pl.arg_sort_by("_g", "ts", "file", "line", nulls_last=True, maintain_order=True)
    order = small.select(by).to_series()
    srt = pl.DataFrame([gid, keyed.get_column("kind"), keyed.get_column("code"), keyed.get_column("file"),
                        keyed.get_column("line")])[order].with_columns(_pos=order)
    g = pl.col("_g")
    # each code's first line in time order and the group's last, each line once, at most MAX_EVIDENCE
    picked = (
        srt.filter(pl.struct("_g", "kind", "code").is_first_distinct() | (g != g.shift(-1)).fill_null(True))
        .unique(subset=["_g", "file", "line"], keep="first", maintain_order=True)
        .filter(pl.int_range(pl.len()).over("_g") < MAX_EVIDENCE)
    )
    rows = keyed[picked.get_column("_pos")].with_columns(_g=picked.get_column("_g"))
    out: dict[int, list[Evidence]] = {}
    for r in rows.iter_rows(named=True):
        out.setdefault(r["_g"], []).append(Evidence.from_event(r))
    return out


def candidates_from_events(events: pl.DataFrame, nodes: list[str]) -> list[Candidate]:
    """Group classified hardware/software events into candidates (see module docstring)."""
    out, keyed = _fleet_wide(events, nodes)
    return out + _group_candidates(keyed) if keyed is not None else out


def classified(events: pl.DataFrame) -> pl.DataFrame:
    """The events that may make a candidate, `classify`d (only the columns candidates are made of)."""
    # Events a parser itself calls `info` (a link coming up at boot, a state report) are context for
    # the timeline, not evidence of a fault: they form no candidate of their own; nor do kinds no rule
    # classifies (an XID/SXid always is). Both left out before `classify`, and the columns not read here:
    # every filter of millions of events copies each column it keeps.
    xid_like = pl.col("kind").is_in(["xid", "sxid"])
    ev = with_weight(events).select(_EVENT_COLUMNS).filter(
        (pl.col("kind").is_in(list(KIND_RULES)) | xid_like) & ~((pl.col("severity") == "info") & ~xid_like)
    )
    return classify(ev)


def _fleet_wide(events: pl.DataFrame, nodes: list[str]) -> tuple[list[Candidate], pl.DataFrame | None]:
    """The fleet-wide application-fault candidate (when there is one) and the other classified events, keyed
    by their group's GPU (`gkey`); None for no such event."""
    if events.height == 0:
        return [], None
    ev = classified(events)
    if ev.height == 0:
        return [], None
    is_xid = pl.col("kind") == "xid"
    code_int = pl.col("code").cast(pl.Int64, strict=False)
    app = _burst(ev.filter(is_xid & code_int.is_in(list(APP_XIDS))))
    out: list[Candidate] = []
    known = [n for n in nodes if n != "unknown"]
    n_nodes = len(known) or ev.filter(pl.col("node") != "unknown").get_column("node").n_unique()
    app_nodes = app.filter(pl.col("node") != "unknown").get_column("node").n_unique()
    fleet_app = app_nodes >= 2 and app_nodes >= FLEET_SHARE * n_nodes
    if fleet_app:
        codes = sorted(app.get_column("code").unique().to_list(), key=int)
        out.append(
            Candidate(
                category=Category.SOFTWARE,
                severity=Severity.HIGH,
                node=None,
                gpu_index=None,
                gpu_bus_id=None,
                title=f"Application fault on every node: XID {', '.join(codes)} on {app_nodes} of {n_nodes} nodes",
                summary=(
                    f"XID {', '.join(codes)} (application-side GPU exceptions) appeared on {app_nodes} of "
                    f"{n_nodes} nodes at about the same time: a software bug or bad input, not one faulty GPU."
                ),
                first_seen=app.get_column("ts").min(),  # type: ignore[arg-type]
                last_seen=app.get_column("ts").max(),  # type: ignore[arg-type]
                evidence=_evidence(app),
                action="Check the application (kernel bug, bad data, out-of-range access); no hardware action.",
                confidence=0.85,
                kinds={f"xid:{c}" for c in codes},
            )
        )
        ev = ev.join(app.select("file", "line"), on=["file", "line"], how="anti")
        if (ev.get_column(WEIGHT) > 1).any():
            # a thinned row of a run the burst's window cut stands for rows on both sides of the cut (`_CUT`)
            runs = list(RUN_KEYS)
            cut = app.select(runs).unique().with_columns(pl.lit(True).alias(_CUT))
            ev = ev.join(cut, on=runs, how="left", nulls_equal=True, maintain_order="left")

    keyed = ev.with_columns(
        gkey=pl.coalesce(pl.col("gpu_bus_id"), pl.col("gpu_index").cast(pl.String), pl.lit("-")),
    )
    return out, keyed


_CUT = "_cut"
"""A column of the classified events where the fleet-wide fault's burst took rows of their run (`RUN_KEYS`): a
thinned row's weight there counts rows of either side, so the group's count is an estimate."""


def _group_candidates(keyed: pl.DataFrame) -> list[Candidate]:
    """A candidate per (node, GPU, category) of the classified events `keyed` (see `_fleet_wide`)."""
    out: list[Candidate] = []
    if keyed.height == 0:
        return out
    is_xid = pl.col("kind") == "xid"
    code_int = pl.col("code").cast(pl.Int64, strict=False)
    # every group's figures in one aggregation and its evidence in one sort: a bundle may hold thousands of
    # groups (a node's every NIC) and a group hundreds of thousands of events (an Xid flood)
    consequence = is_xid & pl.col("code").str.contains(r"^[0-9]+$") & code_int.is_in(list(CONSEQUENCE_XIDS))
    rank = pl.col("sev").replace_strict({s.value: s.rank for s in Severity}, default=9)
    keys = ["node", "gkey", "category"]
    nic_link = pl.col("kind") == "nic_link"
    down = nic_link & pl.col("message").str.contains(_DOWN)
    # a thinned row of a NIC's run of ups and downs stands for rows of either: its group's downs are counted about
    about = pl.lit(False)
    if (keyed.get_column(WEIGHT) > 1).any():
        keyed = keyed.with_columns(in_mixed_run(down).alias("_downs_about"))
        about = pl.col("_downs_about").any()
    groups = keyed.group_by(keys, maintain_order=True).agg(
        n=pl.col(WEIGHT).sum(),
        codes=pl.col("code").filter(is_xid).unique(),
        only_consequence=consequence.fill_null(False).all(),
        sevs=pl.col("sev").drop_nulls().unique(),
        kinds_seen=pl.col("kind").unique(),
        downs=pl.col(WEIGHT).filter(down).sum(),
        downs_about=about,
        # (and the events' count, where the fleet-wide fault's burst cut a run)
        cut=((pl.col(WEIGHT) > 1) & pl.col(_CUT)).any() if _CUT in keyed.columns else pl.lit(False),
        gpu_index=pl.col("gpu_index").drop_nulls().first(),
        bus=pl.col("gpu_bus_id").drop_nulls().first(),
        file=pl.col("file").first(),
        first_seen=pl.col("ts").min(),
        last_seen=pl.col("ts").max(),
        kinds=pl.struct("kind", "code").unique(),
        labels=pl.struct("kind", "code", "code_name").unique(),
        devs=pl.col("message")
        .filter(pl.col("category") == Category.NETWORK.value)
        .str.extract(_DEV, 1)
        .drop_nulls()
        .unique(),
    )
    gid = _group_ids(keyed, groups.select(keys))
    evidence = _group_evidence(keyed, gid)
    # each group's worst, earliest row: the first of its rows ordered by severity, then time
    order = pl.DataFrame([gid, keyed.select(_r=rank).to_series(), keyed.get_column("ts")]).select(
        pl.arg_sort_by("_g", "_r", "ts", nulls_last=True, maintain_order=True)
    ).to_series()
    heads = order.filter(gid.gather(order).is_first_distinct())
    mains = keyed.select("kind", "code", "code_name", "action")[heads].rename(lambda c: f"m_{c}")
    groups = groups.hstack(mains)
    for g, r in enumerate(groups.iter_rows(named=True)):
        node, category = r["node"], r["category"]
        codes = r["codes"]
        worst = min((Severity(s) for s in r["sevs"]), key=lambda s: s.rank)
        kinds_seen = set(r["kinds_seen"])
        if r["only_consequence"]:
            worst = Severity.INFO
        elif codes and all(int(c) in APP_XIDS | CONSEQUENCE_XIDS for c in codes) and kinds_seen == {"xid"}:
            # application XIDs on one GPU: usually the job's own bug; analysis raises it when the job died with it
            worst = Severity.LOW
        downs = r["downs"] or 0
        if kinds_seen <= {"nic_link", "nic_module", "ib_carrier"}:
            # one link down may be maintenance or a reboot; more than one in the window is a flapping link
            worst = Severity.HIGH if downs >= 2 else min(worst, Severity.MEDIUM, key=lambda v: -v.rank)
        gpu_index, bus = r["gpu_index"], r["bus"]
        label = _label({"kind": r["m_kind"], "code": r["m_code"], "code_name": r["m_code_name"]})
        # a file the bundle does not attribute to a host is named instead of an anonymous "unknown"
        node_label = node if node != "unknown" else f"an unnamed node ({r['file']})"
        where = (
            node_label
            + (f" GPU {gpu_index}" if gpu_index is not None else "")
            + (f" ({bus})" if bus is not None else "")
        )
        kinds = {f"{x['kind']}:{x['code']}" if x["code"] is not None else x["kind"] for x in r["kinds"]}
        others = sorted({_label(x) for x in r["labels"]} - {label})
        together = f", together with {', '.join(others[:5])}" if others else ""
        # (a thinned flood's row stands for the rows of its run after it: where a time window cut a run, as the
        # fleet-wide fault's burst does, the count is off by the rows of the cut)
        count = f"{'about ' if r['cut'] else ''}{r['n']} event(s)"
        summary = f"{label} on {where}: {count}" + together
        title = f"{label} on {where}"
        if category == Category.NETWORK.value:
            # a NIC's PCI address is not a GPU's: name the device instead
            devs = sorted(set(r["devs"]))
            dev_txt = ", ".join(devs) if devs else (f"NIC at {bus}" if bus is not None else "a NIC")
            title = (
                f"{dev_txt} link went down {'about ' if r['downs_about'] else ''}{downs} time(s) on {node_label}" if downs else f"{label} on {dev_txt} of {node_label}"
            )
            where = f"{node_label} ({dev_txt})"
            summary = f"{label} on {where}: {count}" + together
            gpu_index, bus = None, None
        out.append(
            Candidate(
                category=Category(category),
                severity=worst,
                node=None if node == "unknown" else node,
                gpu_index=int(gpu_index) if gpu_index is not None else None,
                gpu_bus_id=bus,
                title=title,
                summary=summary + ".",
                first_seen=r["first_seen"],
                last_seen=r["last_seen"],
                evidence=evidence.get(g, []),
                action=r["m_action"] or _default_action(Category(category)),
                confidence=0.9 if not codes or any(int(c) not in APP_XIDS for c in codes) else 0.6,
                kinds=kinds,
            )
        )
    return out


BURST = timedelta(minutes=15)
"""Application XIDs within this of the busiest moment belong to one fleet-wide burst."""


def _burst(app: pl.DataFrame) -> pl.DataFrame:
    """The application-XID rows around the moment most nodes logged them (old, isolated ones left out)."""
    timed = app.filter(pl.col("ts").is_not_null())
    if timed.height == 0:
        return app
    busiest = (
        timed.group_by(pl.col("ts").dt.truncate("5m").alias("bucket"))
        .agg(nodes=pl.col("node").n_unique())
        .sort("nodes", "bucket", descending=[True, False])
        .row(0, named=True)["bucket"]
    )
    return timed.filter(pl.col("ts").is_between(busiest - BURST, busiest + BURST))


KIND_LABELS = {
    "gpu_fallen_off_bus": "GPU fell off the bus",
    "gpu_crash_dump": "GPU crash dump",
    "gpu_init_failure": "GPU failed to initialise",
    "gpu_error": "GPU reports an error state",
    "ecc_uncorrectable": "Uncorrectable ECC errors",
    "row_remap_pending": "Row remapping pending",
    "row_remap_failure": "Row remapping failure",
    "retired_pages_pending": "Page retirement pending",
    "pcie_aer": "PCIe AER errors",
    "pcie_link_degraded": "PCIe link below its maximum",
    "nic_link": "NIC link state changes",
    "nic_module": "NIC module/cable event",
    "ib_carrier": "IB carrier lost",
    "ib_port_down": "IB port not active",
    "thermal": "Thermal/HW slowdown",
    "power": "Power slowdown",
    "mce": "Machine check",
    "edac": "Memory controller (EDAC) errors",
    "dcgm_diag": "DCGM diagnostic failure",
    "dcgm_health": "DCGM health failure",
    "oom": "Out-of-memory kill",
    "segfault": "Segfault",
    "kernel_panic": "Kernel panic",
}


def _label(row: dict) -> str:
    if row["kind"] in ("xid", "sxid"):
        name = row.get("code_name") or ""
        return f"{row['kind'].upper()} {row['code']}" + (f" ({name})" if name else "")
    return KIND_LABELS.get(row["kind"], row["kind"].replace("_", " "))


def _default_action(category: Category) -> str:
    return {
        Category.GPU_HARDWARE: "Drain the node, run DCGM diagnostics (dcgmi diag -r 3), RMA the GPU if it fails.",
        Category.GPU_MEMORY: "Drain the node, reset the GPU to apply row remapping; RMA if remapping fails or recurs.",
        Category.NVLINK: "Reset the GPU, check NVLink/NVSwitch and Fabric Manager logs; RMA if it recurs.",
        Category.PCIE: "Reseat the GPU/riser or NIC, check the PCIe slot and link training; RMA if it recurs.",
        Category.NETWORK: "Check the NIC, transceiver and cable of the named port (ibstat, mlxlink); replace the cable.",
        Category.THERMAL_POWER: "Check cooling (fans, airflow, inlet temperature) and power delivery of the node.",
        Category.CONFIG_DRIFT: "Align the node's driver/firmware/library versions with the fleet.",
        Category.SOFTWARE: "Check the application and its configuration.",
        Category.STRAGGLER: "Drain the node and run DCGM diagnostics and nccl-tests against a healthy peer.",
        Category.HANG: "Inspect the rank that never joined the collective (py-spy dump, flight recorder).",
    }[category]


def detail(row: dict, key: str) -> object:
    """Value of `key` in a row's JSON `detail`, or None."""
    raw = row.get("detail")
    if not raw:
        return None
    try:
        return json.loads(raw).get(key)
    except ValueError:
        return None
