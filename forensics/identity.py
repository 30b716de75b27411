"""Identity resolution across tables: a PCI bus id → the node's GPU index (and back) from the inventory.

Kernel lines name GPUs by bus id, nvidia-smi by index and bus id, NCCL by bus id and CUDA device;
joining on (node, normalised bus id) gives every row both, where the bundle has the node's inventory.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

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
        .pipe(latest_per_bus)
    )


def latest_per_bus(m: pl.DataFrame) -> pl.DataFrame:
    """`gpu_map` rows (of several inventories' maps, in their order) with one row a (node, bus id): the
    last."""
    return m.unique(subset=["node", "gpu_bus_id"], keep="last")


Fill = Callable[[pl.DataFrame], pl.DataFrame]
"""`resolve_rowwise`'s fill: a frame of a table's rows -> the same rows, in the same order, each as `resolve`
gives it."""


def resolve(tables: dict[str, pl.DataFrame]) -> tuple[dict[str, pl.DataFrame], list[str]]:
    """Fill gpu_index from gpu_bus_id (and the reverse) in events and gpu_samples; return notes."""
    out, notes, _fill = resolve_rowwise(tables)
    return out, notes


def resolve_rowwise(tables: dict[str, pl.DataFrame]) -> tuple[dict[str, pl.DataFrame], list[str], Fill | None]:
    """`resolve`, and the fill it applies to a table, as a function of any frame of the table's rows (None
    where the inventory maps no GPU): the ingest fills so each part of a large table that it keeps as it is
    (`ingest._write_in_parts`), where `resolve` changed the table as a whole (dmon samples name a GPU by index
    only: every sample gets its bus id), rather than reading, sorting and writing every row of the table
    again."""
    inv = tables.get("inventory")
    gm = map_of(inv) if inv is not None else None
    if gm is None:
        return tables, [], None
    out = dict(tables)
    for t in ("events", "gpu_samples"):
        df = tables.get(t)
        if df is None:
            continue
        if isinstance(df, pl.DataFrame):
            out[t] = _fill_frame(df, gm)
            continue
        # (a LazyFrame, a table too large to hold, is joined lazily) a row changes only where one of index and
        # bus id is missing, on a node the inventory maps: when no row is such, the joins are skipped (5.9 M
        # samples of a node without inventory: ~1.3 s of CPU)
        one_missing = pl.col("gpu_index").is_null() != pl.col("gpu_bus_id").is_null()
        mapped = pl.col("node").is_in(gm.nodes.implode())
        if df.filter(one_missing & mapped).select("node").head(1).collect().height:
            out[t] = _filled(df, gm.lazy(), by_bus=True, by_index=True)
    return out, [], partial(_fill_frame, gm=gm)


def map_of(inventory: pl.DataFrame) -> _GpuMap | None:
    """The map `resolve_rowwise` fills from, of `inventory` (None where it maps no GPU): for `index_rows`."""
    m = gpu_map(inventory) if inventory.height else None
    return _GpuMap.of(m) if m is not None and m.height else None


def filled_by_index(
    df: pl.DataFrame, m: pl.DataFrame
) -> tuple[pl.DataFrame, tuple[tuple[Any, ...], ...]] | None:
    """`df` (rows of a table with a GPU index and bus id, every one named by index only: dmon samples) with
    every bus id filled from `m` (`gpu_map` rows: of an inventory not yet whole, as an ingest worker has it),
    as `resolve_rowwise`'s fill gives them where the whole inventory's map holds the same rows on `df`'s nodes
    (`_GpuMap.index_rows`, returned with the rows); None where a row cannot be filled so (a row with a bus id
    or without an index, a node `m` does not map, an index it lacks)."""
    if df.height == 0 or df.get_column("gpu_bus_id").null_count() != df.height:
        return None
    if df.get_column("gpu_index").null_count():
        return None
    nodes = df.get_column("node").unique()
    m = m.filter(pl.col("node").is_in(nodes.implode()))
    if m.get_column("node").n_unique() != nodes.len():
        return None
    gm = _GpuMap.of(m)
    out = _fill_frame(df, gm)
    if out.get_column("gpu_bus_id").null_count():
        return None
    return out, gm.index_rows(nodes)


@dataclass(eq=False)
class _GpuMap:
    """`gpu_map`'s rows as the fills join them: by (node, bus id) to an index (`_idx`), by (node, index) to a
    bus id (`_bus`; one bus id an index, picked once for every frame the fill is given), and per node. Its
    frames are DataFrames, or LazyFrames (`lazy`) for a table too large to hold."""

    nodes: pl.Series
    by_bus: Any
    by_index: Any
    _of_node: dict[str, tuple[pl.DataFrame, pl.DataFrame]] = field(default_factory=dict)

    @classmethod
    def of(cls, m: pl.DataFrame) -> _GpuMap:
        """The map of `gpu_map`'s rows `m`. Where a node maps an index to two bus ids (a GPU that fell off the
        bus and was renumbered), the lower bus id is picked, whatever the rows' order: every map of the same rows
        fills alike (an ingest worker's, `filled_by_index`, and the stage's)."""
        by_index = (
            m.rename({"gpu_bus_id": "_bus"})
            .sort("node", "gpu_index", "_bus", nulls_last=True)
            .unique(subset=["node", "gpu_index"], keep="first", maintain_order=True)
        )
        return cls(m.get_column("node").unique(), m.rename({"gpu_index": "_idx"}), by_index)

    def lazy(self) -> _GpuMap:
        return _GpuMap(self.nodes, self.by_bus.lazy(), self.by_index.lazy())

    def index_rows(self, nodes: Iterable[str]) -> tuple[tuple[Any, ...], ...]:
        """(node, gpu_index, bus id) of the fill by index (`by_index`) on `nodes`, sorted: what a fill of rows
        named by index only on those nodes takes from this map, and all it takes."""
        names = pl.Series(sorted(set(nodes)), dtype=pl.String)
        rows = self.by_index.filter(pl.col("node").is_in(names.implode()))
        return tuple(sorted(rows.select("node", "gpu_index", "_bus").rows(), key=repr))

    def of_node(self, node: str) -> tuple[pl.DataFrame, pl.DataFrame]:
        """`by_bus` and `by_index` of one node."""
        got = self._of_node.get(node)
        if got is None:
            one = pl.col("node") == node
            got = self._of_node[node] = (self.by_bus.filter(one), self.by_index.filter(one))
        return got


def _fill_frame(df: pl.DataFrame, gm: _GpuMap) -> pl.DataFrame:
    """`df` (rows of events or gpu_samples) filled from `gm` (`gpu_map`); `df` itself when no row changes. A
    join is made only where a row can take something from it: the index from the bus id for a row with a bus
    id and no index, the bus id from the index for the reverse, on a node `gm` maps (a join on a null key
    matches nothing; a dmon part of 77k samples, all of them by index: ~88 -> ~25 ms, read and filled).
    Rows of one node (a file's part) take their fills by a lookup of the node's few GPUs instead of a join (a dmon
    file's 15k samples: ~2.3 -> ~1 ms)."""
    if df.height == 0:
        return df
    mapped = pl.col("node").is_in(gm.nodes.implode())
    index, bus = pl.col("gpu_index"), pl.col("gpu_bus_id")
    need = df.select(
        by_bus=(index.is_null() & bus.is_not_null() & mapped).any(),
        by_index=(bus.is_null() & index.is_not_null() & mapped).any(),
        node=pl.col("node").first(),
        nodes=pl.col("node").n_unique(),
    ).row(0, named=True)
    if not (need["by_bus"] or need["by_index"]):
        return df
    if need["nodes"] == 1:
        return _looked_up(df, gm, need["node"], by_bus=need["by_bus"], by_index=need["by_index"])
    return _filled(df, gm, by_bus=need["by_bus"], by_index=need["by_index"])


def _filled(df: Any, gm: _GpuMap, by_bus: bool, by_index: bool) -> Any:
    """`df` (a DataFrame or LazyFrame, with `gm` of the same kind) with its index filled from its bus id
    (`by_bus`) and its bus id from its index (`by_index`), per node, by left joins on `gm`: the rows in their
    order (the parts of a large table arrive sorted, and are written so unless a stage moved them)."""
    fills = {}
    if by_bus:
        df = df.join(gm.by_bus, on=["node", "gpu_bus_id"], how="left", maintain_order="left")
        fills["gpu_index"] = pl.coalesce("gpu_index", "_idx")
    if by_index:
        df = df.join(gm.by_index, on=["node", "gpu_index"], how="left", maintain_order="left")
        fills["gpu_bus_id"] = pl.coalesce("gpu_bus_id", "_bus")
    return df.with_columns(**fills).drop([c for c, on in (("_idx", by_bus), ("_bus", by_index)) if on])


def _looked_up(df: pl.DataFrame, gm: _GpuMap, node: str, by_bus: bool, by_index: bool) -> pl.DataFrame:
    """`_filled(df, gm, by_bus, by_index)` of rows all of node `node` (no null: a mapped node, as the caller
    saw), each fill a lookup of the node's GPUs (`replace_strict`, null where the node has no such GPU)."""
    of_bus, of_index = gm.of_node(node)
    fills = {}
    if by_bus:
        found = pl.col("gpu_bus_id").replace_strict(
            of_bus.get_column("gpu_bus_id"), of_bus.get_column("_idx"), default=None,
            return_dtype=of_bus.schema["_idx"],
        )
        fills["gpu_index"] = pl.coalesce("gpu_index", found)
    if by_index:
        found = pl.col("gpu_index").replace_strict(
            of_index.get_column("gpu_index"), of_index.get_column("_bus"), default=None,
            return_dtype=of_index.schema["_bus"],
        )
        fills["gpu_bus_id"] = pl.coalesce("gpu_bus_id", found)
    return df.with_columns(**fills)
