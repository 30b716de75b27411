"""The family grammar's candidate scans (parsers/_mixed.py) against the expressions they replace."""

from __future__ import annotations

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parsers import _mixed
from parsers import _step_grammars as g

PIECES = [
    "x", " ", "1", "42", ":", "]", "[", ".", ".py", ".py:", ".py:96]", ".py:96:", "a.cpp:12]", ".h:3]",
    ".hpp:",
    ".cc:7] ", ".cc:]", "[INFO] ", "[INFO] 2024-", "[DEBUG] 2024-01-01", "[WARNING] 999-", "[ERROR] 20245-",
    "[CRITICAL] 1999-", "[INFO]", "\u00e9", "\u0663", "[INFO] \u0663\u0663\u0663\u0663-", "NCCL ", "\t",
]
_line = st.one_of(st.none(), st.lists(st.sampled_from(PIECES), max_size=8).map("".join))


def _reference(lines: pl.Series, rx) -> pl.Series:  # noqa: ANN001
    """What `_family` ran before `_sources` (kept verbatim), nulls made False."""
    return lines.str.contains(rx(_mixed.FAMILY_SOURCES)).fill_null(False)


@pytest.mark.parametrize("share", [0.0, 0.25, 1.0])
@settings(max_examples=150, deadline=None)
@given(lines=st.lists(_line, max_size=60))
def test_sources_equal_regex(lines: list[str | None], share: float) -> None:
    col = pl.Series("t", lines, dtype=pl.String)
    ascii = all(x is None or x.isascii() for x in lines)
    rxs = [str, g.ascii_classes] if ascii else [str]
    saved = _mixed.SOURCE_LINES, _mixed.SOURCE_SAMPLE, _mixed.SOURCE_SHARE
    try:
        # small thresholds: both the literal prefilter and the whole-line regex paths on small inputs
        _mixed.SOURCE_LINES, _mixed.SOURCE_SAMPLE, _mixed.SOURCE_SHARE = 0, 7, share
        for rx in rxs:
            got = _mixed._sources(col, rx)
            assert got.dtype == pl.Boolean
            assert got.to_list() == _reference(col, rx).to_list()
    finally:
        _mixed.SOURCE_LINES, _mixed.SOURCE_SAMPLE, _mixed.SOURCE_SHARE = saved


def test_sources_big_chunk_both_paths() -> None:
    rare = ["step 1 loss 2.0"] * 30000 + ["[E1206 12:00:00.1 ProcessGroupNCCL.cpp:607] x", None, "a.py:3]"]
    dense = ["[INFO] [logging.py:96:log_dist] step"] * 30000 + ["[INFO] 2024-01-01 x", None]
    for lines in (rare, dense):
        col = pl.Series("t", lines, dtype=pl.String)
        for rx in (str, g.ascii_classes):
            assert _mixed._sources(col, rx).to_list() == _reference(col, rx).to_list()


MARK_PIECES = ["x", "NCCL ", "NCCL", "c10d", "Error", "what():", "torch.distributed", "Exit", "GroupNCCL"]
_mark_line = st.one_of(st.none(), st.lists(st.sampled_from(MARK_PIECES), max_size=4).map("".join))


@settings(max_examples=200, deadline=None)
@given(st.lists(_mark_line, max_size=99))
def test_mixes_equal_reference(lines: list[str | None]) -> None:
    from parsers import step_log

    col = pl.Series("t", lines, dtype=pl.String)
    saved = _mixed.MARK_SAMPLE
    try:
        for sample in (0, 3, 64):
            _mixed.MARK_SAMPLE = sample
            got = _mixed._mixes(step_log, col)
            # the code before (verbatim): the marks looked for in every line holding a family literal
            lit = _mixed._holds_any(col, _mixed.FAMILY_LITERALS, _mixed._FAMILY_ANY).fill_null(False)
            at = lit.arg_true()
            marks = _mixed._holds_any(col.gather(at), _mixed.FAMILY_MARKS, _mixed._MARKS_ANY)
            want = bool(len(at) and marks.any())
            if len(col) <= _mixed.SMALL_LINES and not col.null_count():
                text = "\n".join(col.to_list())
                if not any(mark in text for mark in _mixed.FAMILY_MARKS):
                    assert got == (False, None)
                    continue
            assert got[0] == want
            assert got[1].to_list() == lit.to_list()
    finally:
        _mixed.MARK_SAMPLE = saved
