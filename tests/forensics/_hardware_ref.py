"""The group loop of `forensics.hardware.candidates_from_events` as it was before its groups were read in one
aggregation (thirty-fifth round), and `_evidence` as it was before it went through `_group_evidence`, kept
verbatim to test that `hardware._group_candidates` and `hardware._evidence` give the same candidates."""

from __future__ import annotations

import polars as pl

from forensics.findings import Category, Evidence, Severity
from forensics.hardware import APP_XIDS, CONSEQUENCE_XIDS, MAX_EVIDENCE, Candidate, _default_action, _label


def _evidence(rows: pl.DataFrame) -> list[Evidence]:
    """Pick up to MAX_EVIDENCE lines: the first of each distinct code, then the last line (as it was)."""
    rows = rows.sort("ts", "file", "line", nulls_last=True)
    firsts = rows.unique(subset=["kind", "code"], keep="first", maintain_order=True)
    picked = pl.concat([firsts, rows.tail(1)]).unique(subset=["file", "line"], maintain_order=True)
    return [Evidence.from_event(r) for r in picked.head(MAX_EVIDENCE).iter_rows(named=True)]


def group_candidates_ref(keyed: pl.DataFrame) -> list[Candidate]:
    """A candidate per (node, GPU, category) of `keyed` (`hardware._fleet_wide`'s), one group at a time."""
    out: list[Candidate] = []
    is_xid = pl.col("kind") == "xid"
    code_int = pl.col("code").cast(pl.Int64, strict=False)
    consequence = is_xid & pl.col("code").str.contains(r"^[0-9]+$") & code_int.is_in(list(CONSEQUENCE_XIDS))
    for (node, gkey, category), rows in keyed.group_by(["node", "gkey", "category"], maintain_order=True):
        codes = rows.filter(is_xid).get_column("code").unique().to_list()
        only_consequence = rows.height > 0 and bool(rows.select(consequence.fill_null(False).all()).item())
        worst = min((Severity(s) for s in rows.get_column("sev").drop_nulls().unique()), key=lambda s: s.rank)
        kinds_seen = set(rows.get_column("kind").unique().to_list())
        if only_consequence:
            worst = Severity.INFO
        elif codes and all(int(c) in APP_XIDS | CONSEQUENCE_XIDS for c in codes) and kinds_seen == {"xid"}:
            # application XIDs on one GPU: usually the job's own bug; analysis raises it when the job died with it
            worst = Severity.LOW
        downs = rows.filter(pl.col("kind") == "nic_link").filter(
            pl.col("message").str.contains(r"(?i)\b(down|DOWN)\b|carrier lost|unplugged")
        ).height
        if kinds_seen <= {"nic_link", "nic_module", "ib_carrier"}:
            # one link down may be maintenance or a reboot; more than one in the window is a flapping link
            worst = Severity.HIGH if downs >= 2 else min(worst, Severity.MEDIUM, key=lambda v: -v.rank)
        gpu_index = rows.get_column("gpu_index").drop_nulls()
        bus = rows.get_column("gpu_bus_id").drop_nulls()
        # the worst, earliest row (its position found without sorting a copy of the group)
        first = pl.arg_sort_by(
            pl.col("sev").replace_strict({s.value: s.rank for s in Severity}, default=9),
            "ts",
            nulls_last=True,
            maintain_order=True,
        ).first()
        main = rows.row(int(rows.select(first).item()), named=True)
        label = _label(main)
        # a file the bundle does not attribute to a host is named instead of an anonymous "unknown"
        node_label = node if node != "unknown" else f"an unnamed node ({rows['file'][0]})"
        where = f"{node_label}" + (f" GPU {gpu_index[0]}" if len(gpu_index) else "") + (f" ({bus[0]})" if len(bus) else "")
        kinds = {f"{k}:{c}" if c is not None else k for k, c in rows.select("kind", "code").unique().iter_rows()}
        labelled = rows.select("kind", "code", "code_name").unique()
        others = sorted({_label(r) for r in labelled.iter_rows(named=True)} - {label})
        summary = f"{label} on {where}: {rows.height} event(s)" + (
            f", together with {', '.join(others[:5])}" if others else ""
        )
        title = f"{label} on {where}"
        if category == Category.NETWORK.value:
            # a NIC's PCI address is not a GPU's: name the device instead
            devs = sorted(set(rows["message"].str.extract(r"\b(mlx\d+_\d+|ib\d+|ibp\w+|en\w+\d)\b", 1).drop_nulls().to_list()))
            dev_txt = ", ".join(devs) if devs else (f"NIC at {bus[0]}" if len(bus) else "a NIC")
            title = (
                f"{dev_txt} link went down {downs} time(s) on {node_label}" if downs else f"{label} on {dev_txt} of {node_label}"
            )
            where = f"{node_label} ({dev_txt})"
            summary = f"{label} on {where}: {rows.height} event(s)" + (
                f", together with {', '.join(others[:5])}" if others else ""
            )
            gpu_index, bus = gpu_index.head(0), bus.head(0)
        out.append(
            Candidate(
                category=Category(category),
                severity=worst,
                node=None if node == "unknown" else node,
                gpu_index=int(gpu_index[0]) if len(gpu_index) else None,
                gpu_bus_id=bus[0] if len(bus) else None,
                title=title,
                summary=summary + ".",
                first_seen=rows.get_column("ts").min(),  # type: ignore[arg-type]
                last_seen=rows.get_column("ts").max(),  # type: ignore[arg-type]
                evidence=_evidence(rows),
                action=main["action"] or _default_action(Category(category)),
                confidence=0.9 if not codes or any(int(c) not in APP_XIDS for c in codes) else 0.6,
                kinds=kinds,
            )
        )
    return out
