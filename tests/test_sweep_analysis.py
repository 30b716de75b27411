"""`scripts/sweep_analysis.py`: its draw of varied cases (the sweep itself takes minutes and is run by hand)."""

from __future__ import annotations

from forensics.simulate import FAULT_KINDS, parse_fault
from tests.conftest import load_script


def test_the_draw_is_fixed_by_its_seed_and_covers_every_kind_early_midway_and_late() -> None:
    sweep = load_script("scripts/sweep_analysis.py")
    cases = sweep.draw(40, large=False)
    assert cases == sweep.draw(40, large=False) and cases != sweep.draw(41, large=False)
    singles = [faults[0] for faults, *_ in cases if len(faults) == 1]
    for k in (k for k in FAULT_KINDS if k != "none"):
        assert sorted(s.rsplit("+", 1)[1] for s in singles if s.split("@")[0] == k) == ["0.1", "0.5", "0.92"]
    assert sum(not faults for faults, *_ in cases) == 4 and sum(len(faults) == 2 for faults, *_ in cases) == 8
    for faults, nodes, hours, seed in cases + sweep.draw(42, large=True):
        specs = [parse_fault(f) for f in faults]  # every spec the simulator takes
        assert all(s.node is not None and 0 <= s.node < nodes for s in specs)
        assert hours >= 0.05 and 0 <= seed < 1000
