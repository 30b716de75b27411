"""Identity resolution: GPU index from bus id and back, per node, from the inventory."""

from __future__ import annotations

import polars as pl
import pytest

from forensics import identity
from forensics.schema import conform


def _inventory() -> pl.DataFrame:
    rows = [
        {"node": "n1", "component": "gpu", "gpu_index": i, "gpu_bus_id": f"00000000:{0x18 + i:02X}:00.0"}
        for i in range(4)
    ]
    rows.append({"node": "unknown", "component": "gpu", "gpu_index": 0, "gpu_bus_id": "00000000:AA:00.0"})
    return conform(pl.DataFrame(rows).with_columns(_REQUIRED), "inventory")


_REQUIRED = [pl.lit("x").alias(c) for c in ("source", "file", "device", "attribute", "value")]


def _samples() -> pl.DataFrame:
    return conform(
        pl.DataFrame(
            {
                "node": ["n1", "n1", "n1", "n2", "n1", "unknown"],
                "gpu_index": [3, None, 1, 0, None, None],
                "gpu_bus_id": [
                    None, "00000000:1A:00.0", "00000000:19:00.0", None, "00000000:FF:00.0", "00000000:AA:00.0"
                ],
                "line": [1, 2, 3, 4, 5, 6],
            }
        ).with_columns(_REQUIRED[:2]),
        "gpu_samples",
    )


def test_index_and_bus_id_fill_each_other_on_mapped_nodes_only_rows_in_order() -> None:
    tables, notes = identity.resolve({"inventory": _inventory(), "gpu_samples": _samples()})
    got = tables["gpu_samples"].select("node", "gpu_index", "gpu_bus_id", "line")
    assert got.rows() == [
        ("n1", 3, "00000000:1B:00.0", 1),  # bus id from the index
        ("n1", 2, "00000000:1A:00.0", 2),  # index from the bus id
        ("n1", 1, "00000000:19:00.0", 3),  # both known: as it was
        ("n2", 0, None, 4),  # a node the inventory does not map
        ("n1", None, "00000000:FF:00.0", 5),  # a bus id the node does not have
        ("unknown", None, "00000000:AA:00.0", 6),  # no node: not one inventory
    ]
    assert notes == []


def test_a_lazy_table_resolves_as_the_eager_one() -> None:
    eager, _ = identity.resolve({"inventory": _inventory(), "gpu_samples": _samples()})
    lazy, _ = identity.resolve({"inventory": _inventory(), "gpu_samples": _samples().lazy()})
    assert isinstance(lazy["gpu_samples"], pl.LazyFrame)
    assert lazy["gpu_samples"].collect().equals(eager["gpu_samples"], null_equal=True)


def test_a_table_with_nothing_to_fill_is_left_as_it_is() -> None:
    """No row misses exactly one of index and bus id on a mapped node: the table object comes back unchanged
    (no joins planned over a large table's rows)."""
    samples = _samples().filter(pl.col("line").is_in([3, 4, 6])).lazy()
    tables, _ = identity.resolve({"inventory": _inventory(), "gpu_samples": samples})
    assert tables["gpu_samples"] is samples


def test_rows_of_one_node_are_filled_by_lookup_as_by_the_joins(monkeypatch: pytest.MonkeyPatch) -> None:
    """A file's part (rows of one node) takes its fills by a lookup of the node's GPUs (`_looked_up`), not by
    the joins: the same rows, values and types, also where the node maps one index to two bus ids (a GPU that
    fell off the bus and was renumbered: one is picked for every frame) and for rows the node has no GPU
    for."""
    inv = pl.concat(
        [
            _inventory(),
            conform(
                pl.DataFrame(
                    {"node": ["n1"], "component": ["gpu"], "gpu_index": [2],
                     "gpu_bus_id": ["00000000:2F:00.0"]}
                ).with_columns(_REQUIRED),
                "inventory",
            ),
        ]
    )
    _, _, fill = identity.resolve_rowwise({"inventory": inv, "gpu_samples": _samples()})
    assert fill is not None
    gm = fill.keywords["gm"]  # type: ignore[attr-defined]
    one = _samples().filter(pl.col("node") == "n1")
    one = pl.concat([one, one.with_columns(gpu_index=pl.Series([2, None, 9, 2], dtype=pl.Int32))])
    joined = identity._filled
    joins: list[int] = []
    monkeypatch.setattr(identity, "_filled", lambda *a, **k: joins.append(1) or joined(*a, **k))
    for frame in (one, one.reverse(), one.head(1), one.filter(pl.col("gpu_index").is_not_null())):
        got = fill(frame)
        want = joined(frame, gm, by_bus=True, by_index=True)
        assert got.schema == want.schema and got.equals(want, null_equal=True)
    assert not joins  # (looked up)
    assert fill(one).get_column("gpu_bus_id").null_count() < one.get_column("gpu_bus_id").null_count()
    # rows of two nodes are joined
    two = pl.concat([one, _samples().filter(pl.col("node") == "n2")])
    assert fill(two).equals(joined(two, gm, by_bus=True, by_index=True), null_equal=True) and joins


def test_an_index_of_two_bus_ids_takes_the_lower_whatever_the_inventorys_order() -> None:
    """A node whose inventory maps an index to two bus ids (a GPU renumbered after another fell off the bus)
    fills that index's rows with the lower bus id, however the inventory's rows are ordered: an ingest
    worker's map and the identity stage's fill alike (`filled_by_index`, `_GpuMap.index_rows`)."""
    extra = conform(
        pl.DataFrame(
            {"node": ["n1"], "component": ["gpu"], "gpu_index": [0], "gpu_bus_id": ["00000000:0A:00.0"]}
        ).with_columns(_REQUIRED),
        "inventory",
    )
    inv = pl.concat([_inventory(), extra])
    samples = conform(
        pl.DataFrame(
            {"node": ["n1", "n1"], "gpu_index": [0, 1], "gpu_bus_id": [None, None], "line": [1, 2]}
        ).with_columns(_REQUIRED[:2]),
        "gpu_samples",
    )
    got = set()
    for seed in range(6):
        shuffled = inv.sample(fraction=1.0, shuffle=True, seed=seed)
        filled = identity.resolve({"inventory": shuffled, "gpu_samples": samples})[0]["gpu_samples"]
        got.add(tuple(filled.filter(pl.col("gpu_index") == 0).get_column("gpu_bus_id").unique().to_list()))
        gm = identity.map_of(shuffled)
        assert gm is not None
        assert ("n1", 0, "00000000:0A:00.0") in gm.index_rows(["n1"])
    assert got == {("00000000:0A:00.0",)}
