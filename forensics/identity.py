"""Identity resolution across tables: a PCI bus id → the node's GPU index (and back) from the inventory.

Kernel lines name GPUs by bus id, nvidia-smi by index and bus id, NCCL by bus id and CUDA device;
joining on (node, normalised bus id) gives every row both, where the bundle has the node's inventory.
"""

from __future__ import annotations

import polars as pl


def gpu_map(inventory: pl.DataFrame) -> pl.DataFrame:
    """(node, gpu_bus_id, gpu_index) for every GPU the inventory names with both."""
    return (
        inventory.filter(
            (pl.col("component") == "gpu")
            & pl.col("gpu_index").is_not_null()
            & pl.col("gpu_bus_id").is_not_null()
            # files of no known node may come from different machines: their GPUs are not one inventory
            & (pl.col("node") != "unknown")
        )
        .select("node", "gpu_bus_id", "gpu_index")
        .unique(subset=["node", "gpu_bus_id"], keep="last")
    )


def resolve(tables: dict[str, pl.DataFrame]) -> tuple[dict[str, pl.DataFrame], list[str]]:
    """Fill gpu_index from gpu_bus_id (and the reverse) in events and gpu_samples; return notes."""
    inv = tables.get("inventory")
    if inv is None or inv.height == 0:
        return tables, []
    m = gpu_map(inv)
    if m.height == 0:
        return tables, []
    out = dict(tables)
    for t in ("events", "gpu_samples"):
        df = tables.get(t)
        if df is None or (isinstance(df, pl.DataFrame) and df.height == 0):
            continue  # (a LazyFrame, a table too large to hold, is joined lazily)
        # a row changes only where one of index and bus id is missing, on a node the inventory maps: when
        # no row is such, the joins are skipped (5.9 M samples of a node without inventory: ~1.3 s of CPU)
        one_missing = pl.col("gpu_index").is_null() != pl.col("gpu_bus_id").is_null()
        mapped = pl.col("node").is_in(m.get_column("node").unique().implode())
        if df.lazy().filter(one_missing & mapped).select("node").head(1).collect().height == 0:
            continue
        mm = m.lazy() if isinstance(df, pl.LazyFrame) else m
        # (rows kept in their order: the parts of a large table arrive sorted, and are written so unless
        # a stage moved them)
        by_bus = df.join(
            mm.rename({"gpu_index": "_idx"}), on=["node", "gpu_bus_id"], how="left", maintain_order="left"
        )
        by_idx = by_bus.join(
            mm.rename({"gpu_bus_id": "_bus"}).unique(subset=["node", "gpu_index"]),
            on=["node", "gpu_index"],
            how="left",
            maintain_order="left",
        )
        out[t] = by_idx.with_columns(
            gpu_index=pl.coalesce("gpu_index", "_idx"), gpu_bus_id=pl.coalesce("gpu_bus_id", "_bus")
        ).drop("_idx", "_bus")
    return out, []
