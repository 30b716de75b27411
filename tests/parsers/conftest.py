"""Fixtures of the parser tests."""

from __future__ import annotations

import pytest

from parsers import base


@pytest.fixture(params=["compiled", "polars"])
def csv_cells_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """A test run twice: `--query-gpu` CSV rows cut and numbered by the compiled scanner
    (`nvidia_smi_csv._rows_coded`, where the install built it: `tests/parsers/test_fastscan.py` fails where it
    did not), and by polars alone (the compiled module taken away: `_rows_by_tail` and the splits)."""
    if request.param == "polars":
        monkeypatch.setattr(base, "_fastscan", None)
    elif base.compiled("csv_cells") is None:
        pytest.skip("parsers._fastscan not built (test_fastscan.py::test_scanner_is_built says so)")
    return request.param


def uncoded(distinct_values):  # noqa: ANN001, ANN201
    """A reference `_distinct_values(data, plan)` called as the module calls it now (`uniq`, the numbered
    cells' distinct cells, is empty where the compiled scanner is taken away, as the reference runs do)."""

    def call(data, plan, uniq=None):  # noqa: ANN001, ANN202
        assert not uniq
        return distinct_values(data, plan)

    return call
