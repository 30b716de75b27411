"""Network evidence: IB port counter deltas, NIC link flaps, and NCCL transport errors grouped by peer.

- Counters: per (node, device, port, counter) the growth between the first and last reading in the
  bundle (one reading: the value since the counter was cleared, weaker evidence). Error counters that
  matter (FORMATS.md §10): symbol errors, link error recovery, link downed, receive errors, remote
  physical errors, local link integrity, excessive buffer overrun, transmit discards. `PortXmitWait`
  alone is congestion, not an error.
- NCCL `Got completion from peer <ip> with error 12`: the reporter is a witness; the *named peer* is the
  suspect when several reporters name it; a node erring towards many peers suspects its own NIC.
"""

from __future__ import annotations

import polars as pl

from forensics.findings import Category, Evidence, Severity, iso
from forensics.hardware import Candidate
from forensics.outputs import in_mixed_run
from forensics.schema import WEIGHT, with_weight

ERROR_COUNTERS = {
    "symbolerrorcounter": "symbol errors",
    "symbolerror": "symbol errors",
    "linkerrorrecoverycounter": "link error recoveries",
    "linkerrorrecovery": "link error recoveries",
    "linkdownedcounter": "link downs",
    "linkdowned": "link downs",
    "portrcverrors": "receive errors",
    "portrcvremotephysicalerrors": "remote physical errors",
    "locallinkintegrityerrors": "local link integrity errors",
    "excessivebufferoverrunerrors": "buffer overruns",
    "portxmitdiscards": "transmit discards",
}
GROWTH_MIN = {"link downs": 1, "link error recoveries": 1, "symbol errors": 50}
"""Growth in the job window that makes a port suspect; other counters need DEFAULT_GROWTH_MIN."""
DEFAULT_GROWTH_MIN = 100
SINGLE_READING_MIN = {"link downs": 5, "symbol errors": 10000, "link error recoveries": 50}
"""With one reading only (counts since last clear), only large counts are called out."""


def counter_growth(comms: pl.DataFrame) -> pl.DataFrame:
    """Per (node, device, port, counter) of the error counters: readings, first and last value, growth."""
    c = comms.filter((pl.col("record") == "ib_counter") & pl.col("counter").is_not_null() & pl.col("value").is_not_null())
    if c.height == 0:
        return pl.DataFrame()
    c = c.with_columns(key=pl.col("counter").str.to_lowercase().str.replace_all("[^a-z]", ""))
    c = c.filter(pl.col("key").is_in(list(ERROR_COUNTERS)))
    if c.height == 0:
        return pl.DataFrame()
    # readings are told apart by their time, else by the parser's reading number (undated dumps)
    c = c.with_columns(
        reading=pl.col("detail").str.json_path_match("$.reading").cast(pl.Int64, strict=False).fill_null(0)
    )
    return (
        c.sort("ts", "reading", nulls_last=True)
        .group_by("node", "device", "port", "key")
        .agg(
            readings=pl.struct("ts", "reading").n_unique(),
            first=pl.col("value").first(),
            last=pl.col("value").last(),
            first_ts=pl.col("ts").first(),
            last_ts=pl.col("ts").last(),
            counter=pl.col("counter").first(),
            file=pl.col("file").last(),
            line=pl.col("line").last(),
        )
        .with_columns(
            growth=pl.when(pl.col("readings") > 1).then(pl.col("last") - pl.col("first")).otherwise(None),
            label=pl.col("key").replace_strict(ERROR_COUNTERS, default=None),
        )
    )


def counter_candidates(growth: pl.DataFrame) -> list[Candidate]:
    """Ports whose error counters grew in the bundle's window (or are very large with one reading)."""
    if growth.height == 0:
        return []
    out = []
    bad = []
    for r in growth.iter_rows(named=True):
        if r["growth"] is not None:
            if r["growth"] >= GROWTH_MIN.get(r["label"], DEFAULT_GROWTH_MIN):
                bad.append(r)
        elif r["last"] >= SINGLE_READING_MIN.get(r["label"], 10**9):
            bad.append(r)
    by_port: dict[tuple, list[dict]] = {}
    for r in bad:
        by_port.setdefault((r["node"], r["device"], r["port"]), []).append(r)
    for (node, device, port), rows in by_port.items():
        parts = [
            f"{r['label']} +{int(r['growth'])}" if r["growth"] is not None else f"{r['label']} {int(r['last'])} since clear"
            for r in rows
        ]
        flapping = any(r["label"] in ("link downs", "link error recoveries") for r in rows)
        out.append(
            Candidate(
                category=Category.NETWORK,
                severity=Severity.HIGH if flapping else Severity.MEDIUM,
                node=None if node == "unknown" else node,
                gpu_index=None,
                gpu_bus_id=None,
                title=f"InfiniBand port {device}/{port} on {node if node != 'unknown' else 'an unnamed node (' + rows[0]['file'] + ')'}: {', '.join(parts)}",
                summary=(
                    f"Error counters of {device} port {port} on {node} grew during the job ({', '.join(parts)}): "
                    + ("the link went down or retrained — a flapping cable or transceiver." if flapping else "a marginal link.")
                ),
                first_seen=min((r["first_ts"] for r in rows if r["first_ts"]), default=None),
                last_seen=max((r["last_ts"] for r in rows if r["last_ts"]), default=None),
                evidence=[
                    Evidence(
                        source="ib", file=r["file"], line=r["line"],
                        ts=iso(r["last_ts"]),
                        text=f"{device} port {port} {r['counter']}: {int(r['first'])} → {int(r['last'])}",
                    )
                    for r in rows
                ],
                action="Check the cable and transceiver of this port (mlxlink -d <dev> --show_ber), reseat or replace; check the switch port.",
                confidence=0.8 if flapping else 0.6,
                kinds={"ib_counter"},
            )
        )
    return out


def peer_candidates(events: pl.DataFrame, inventory: pl.DataFrame) -> list[Candidate]:
    """NCCL IB errors grouped by the peer they name; a peer named by ≥ 2 reporters is a network suspect."""
    e = with_weight(events.filter(pl.col("kind") == "nccl_ib_error"))
    if e.height == 0:
        return []
    ip_map = dict(
        inventory.filter((pl.col("attribute") == "ip") & pl.col("value").is_not_null())
        .unique(subset="value", keep="last", maintain_order=True)
        .select("value", "node")
        .iter_rows()
    )
    # the peer each error names: the detail's `peer` (or, empty, its `peer_ip`), else an IPv4 after `peer ` in
    # the message; its `<port>` cut off (one expression over every error: a flood holds hundreds of thousands)
    detail = pl.col("detail").fill_null("{}")
    first = detail.str.json_path_match("$.peer")
    named = pl.when(first.is_not_null() & (first != "")).then(first)
    named = named.otherwise(detail.str.json_path_match("$.peer_ip"))
    raw = pl.coalesce(named, pl.col("message").str.extract(r"peer (\d+\.\d+\.\d+\.\d+)", 1))
    df = (
        e.with_columns(_raw=raw)
        .filter(pl.col("_raw").is_not_null() & (pl.col("_raw") != ""))
        .with_columns(peer=pl.col("_raw").str.split("<").list.first())
        .with_columns(peer_node=pl.col("peer").replace_strict(ip_map, default=None, return_dtype=pl.String))
        .drop("_raw")
    )
    # a thinned flood's row stands for rows of its run left out, which may name another peer: counts by peer
    # are then estimates
    thinned = (df.get_column(WEIGHT) > 1).any()
    df = df.with_columns(_about=in_mixed_run(pl.col("peer")) if thinned else pl.lit(False))
    if df.height == 0:
        return []
    out = []
    for (peer,), rows in df.group_by("peer", maintain_order=True):
        reporters = rows["node"].n_unique()
        if reporters < 2:
            continue
        peer_node = rows["peer_node"].drop_nulls()
        node = peer_node[0] if len(peer_node) else None
        name = node or peer
        out.append(
            Candidate(
                category=Category.NETWORK,
                severity=Severity.HIGH,
                node=node,
                gpu_index=None,
                gpu_bus_id=None,
                title=f"NCCL InfiniBand errors from {reporters} nodes all name peer {name}",
                summary=(
                    f"{'about ' if rows['_about'].any() else ''}{rows[WEIGHT].sum()} NCCL transport error(s) on {reporters} node(s) name the same peer {peer}"
                    + (f" ({node})" if node else " (not resolved to a node in this bundle)")
                    + ": the reporters are witnesses, the named peer's NIC, cable or host is the suspect."
                ),
                first_seen=rows["ts"].min(),  # type: ignore[arg-type]
                last_seen=rows["ts"].max(),  # type: ignore[arg-type]
                evidence=[
                    Evidence(source="nccl", file=x["file"], line=x["line"], ts=iso(x["ts"]), text=x["message"])
                    for x in rows.sort("ts", nulls_last=True).unique(subset="node", keep="first", maintain_order=True).head(6).iter_rows(named=True)
                ],
                action="Check the named peer's HCA port, cable and switch port (ibstat, perfquery, mlxlink); drain it if errors persist.",
                confidence=0.7 if node else 0.5,
                kinds={"nccl_ib_error"},
            )
        )
    return out
