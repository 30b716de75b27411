"""`hardware.candidates_from_events` reads its groups in one aggregation and their evidence in one sort: the
candidates are those of the loop it replaced (`_hardware_ref`), on events drawn at random and on floods;
and it leaves out the events no rule classifies before `classify`, as the filter after it did."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import polars as pl
import pytest

from forensics.hardware import _evidence, _fleet_wide, _group_candidates, classified, classify
from forensics.schema import conform, with_weight
from tests.forensics._hardware_ref import _evidence as evidence_ref
from tests.forensics._hardware_ref import group_candidates_ref

T0 = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)
KINDS = [
    ("xid", ["13", "43", "45", "79", "94", "31", "119"]),
    ("sxid", ["12028", "20034"]),
    ("nic_link", [None]),
    ("nic_module", [None]),
    ("ib_carrier", [None]),
    ("thermal", [None]),
    ("pcie_aer", [None]),
    ("ecc_uncorrectable", [None]),
    ("oom", [None]),
    ("nccl_warn", [None]),  # no rule: left out
]
MESSAGES = [
    "mlx5_core 0000:3b:00.0 mlx5_0: Link down",
    "ib0: carrier lost",
    "enp27s0f1np1: Link is Down",
    "NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.",
    "eth3: link up",
    "",
]


def _events(rng: np.random.Generator, n: int, nodes: int) -> pl.DataFrame:
    rows = []
    for i in range(n):
        kind, codes = KINDS[rng.integers(len(KINDS))]
        node = "unknown" if rng.random() < 0.05 else f"node-{rng.integers(nodes):02d}"
        gpu = int(rng.integers(4))
        rows.append(
            {
                "ts": None if rng.random() < 0.1 else T0 + timedelta(seconds=int(rng.integers(0, 3600))),
                "node": node,
                "gpu_index": gpu if rng.random() < 0.5 else None,
                "gpu_bus_id": f"0000:{0x3b + gpu:02x}:00.0" if rng.random() < 0.6 else None,
                "source": "kernel",
                "kind": kind,
                "code": codes[rng.integers(len(codes))],
                "severity": ["info", "unknown", "high", "medium", "low"][rng.integers(5)],
                "message": MESSAGES[rng.integers(len(MESSAGES))],
                "file": f"{node}/{['dmesg.log', 'kern.log'][rng.integers(2)]}",
                "line": int(rng.integers(1, 400)),
            }
        )
    return conform(pl.DataFrame(rows, infer_schema_length=None), "events")


@pytest.mark.parametrize("seed", range(12))
def test_grouped_candidates_are_those_of_the_loop(seed: int) -> None:
    rng = np.random.default_rng(seed)
    nodes = int(rng.integers(1, 12))
    ev = _events(rng, int(rng.integers(1, 600)), nodes)
    names = [f"node-{i:02d}" for i in range(nodes)]
    _, keyed = _fleet_wide(ev, names)
    assert keyed is not None and _group_candidates(keyed) == group_candidates_ref(keyed)
    assert _evidence(keyed) == evidence_ref(keyed)  # (all the events as one group: the fleet-wide fault's)
    xid_like = pl.col("kind").is_in(["xid", "sxid"])
    kept = pl.col("category").is_not_null() & ~((pl.col("severity") == "info") & ~xid_like)
    before = classify(with_weight(ev)).filter(kept)  # (classified carries the rows' weights)
    assert classified(ev).equals(before.select(classified(ev).columns))


def test_grouped_candidates_of_a_flood_are_those_of_the_loop() -> None:
    """An Xid 13/43 flood on one GPU, link flaps on every NIC of a node, an Xid 79 among them."""
    rows = [
        {"ts": T0 + timedelta(milliseconds=i), "node": "node-01", "gpu_bus_id": "0000:38:00.0", "source": "kernel",
         "kind": "xid", "code": ["13", "43"][i % 7 == 0], "severity": "unknown",
         "message": f"NVRM: Xid (PCI:0000:38:00): 13, line {i}", "file": "node-01/dmesg.log", "line": i + 1}
        for i in range(5000)
    ]
    rows += [
        {"ts": T0 + timedelta(seconds=i), "node": "node-02", "gpu_bus_id": f"0000:{i % 12:02x}:00.0", "source": "kernel",
         "kind": "nic_link", "code": None, "severity": "medium", "message": f"mlx5_{i % 12}: Link {'down' if i % 2 else 'up'}",
         "file": "node-02/dmesg.log", "line": i + 1}
        for i in range(240)
    ]
    rows.append({"ts": T0, "node": "node-03", "gpu_bus_id": "0000:3b:00.0", "source": "kernel", "kind": "xid", "code": "79",
                 "severity": "unknown", "message": "NVRM: Xid (PCI:0000:3b:00): 79", "file": "node-03/dmesg.log", "line": 9})
    ev = conform(pl.DataFrame(rows, infer_schema_length=None), "events")
    names = ["node-01", "node-02", "node-03", "node-04"]
    _, keyed = _fleet_wide(ev, names)
    assert keyed is not None
    got = _group_candidates(keyed)
    assert got == group_candidates_ref(keyed)
    assert len(got) == 1 + 12 + 1 and len(got[0].evidence) == 3  # 13's first, 43's first, the last
