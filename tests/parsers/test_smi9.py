# ruff: noqa: E501  (dmon lines and the replaced code are kept verbatim below)
"""Round 9 (smi9) fast paths of the nvidia-smi dmon parser equal the code they replace.

The replaced code is kept here verbatim (`_old_*`) as the reference; inputs are random columns (hypothesis),
the edges of each shortcut, and whole dmon loops parsed both ways.
"""

from __future__ import annotations

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parsers import nvidia_smi_dmon as dmon
from parsers.base import FileContext


def _old_hash_lines(text: pl.Series) -> pl.Series:
    return text.str.starts_with("#")


_EDGES = ["", "#", "$", "#$", "\"", "\"#", "$#", "##", "# gpu", "#\x00", "\x00", "#\u00e9", "\u00e9#", "\x7f", "\U0001f600#", "#\n", " #", "\t#"]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(_EDGES), st.text(max_size=6), st.text(alphabet="#$\"% \x00\x7f\u00e9", max_size=4))))
def test_hash_lines_is_starts_with(texts: list[str]) -> None:
    """`_hash_lines` (two comparisons) flags the lines `str.starts_with("#")` flags, whatever their bytes."""
    s = pl.Series("line", texts, dtype=pl.String)
    assert dmon._hash_lines(s).to_list() == _old_hash_lines(s).to_list()


def test_hash_lines_edges_and_chunks() -> None:
    """The edges, also in a column of several chunks (as the carried lines make one)."""
    s = pl.concat([pl.Series("line", _EDGES), pl.Series("line", list(reversed(_EDGES)))], rechunk=False)
    assert s.n_chunks() == 2
    assert dmon._hash_lines(s).to_list() == _old_hash_lines(s).to_list()


def _loop(rows: int, seed: int) -> list[str]:
    """A dmon loop of two interleaved field lists (as `-s pucvmet` and `-s pe` runs appended to one file),
    with repeated headers, some odd lines and comments."""
    import random

    rnd = random.Random(seed)
    head_a = "#Date       Time        gpu    pwr  gtemp  mtemp     sm    mem    enc    dec    jpg    ofa   mclk   pclk"
    units_a = "#YYYYMMDD   HH:MM:SS    Idx      W      C      C      %      %      %      %      %      %    MHz    MHz"
    head_b = "# gpu   pwr gtemp mtemp sbecc dbecc   pci"
    units_b = "# Idx     W     C     C  errs  errs  errs"
    out: list[str] = []
    k = 0
    while len(out) < rows:
        if rnd.random() < 0.5:
            out += [head_a, units_a]
            for g in range(8):
                vals = [rnd.choice(["-", str(rnd.randint(0, 999))]) for _ in range(11)]
                out.append(f" 20261128   00:{k // 60 % 60:02d}:{k % 60:02d}   {g:4d} " + " ".join(f"{v:>6s}" for v in vals))
        else:
            out += [head_b, units_b]
            for g in range(8):
                vals = [str(rnd.randint(0, 99)) for _ in range(5)]
                out.append(f"  {g:3d} " + " ".join(f"{v:>5s}" for v in vals))
        if rnd.random() < 0.1:
            out.append(rnd.choice(["#comment", "# Idx", "", "garbage line", "#Date Time gpu", "##"]))
        k += 1
    return out


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_dmon_loop_parses_as_with_starts_with(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """`parse` and `carry` of a long loop give what they gave with `str.starts_with("#")`."""
    lines = pl.Series("line", _loop(9000, seed))
    ctx = FileContext(path="gpu-node-001/nvidia-smi-dmon.log", node="gpu-node-001", first_line=7)
    new = dmon.parse(lines, ctx)
    new_carry = dmon.carry(lines)
    monkeypatch.setattr(dmon, "_hash_lines", _old_hash_lines)
    old = dmon.parse(lines, ctx)
    assert dmon.carry(lines) == new_carry
    assert (new.parsed, new.unrecognized, new.unrecognized_examples) == (old.parsed, old.unrecognized, old.unrecognized_examples)
    for t in old.tables:
        assert new.tables[t].equals(old.tables[t], null_equal=True), t


def _old_rows_bytes(texts: pl.Series) -> bytes:
    pad = 8  # (spaces before the first row: every field's last 8 bytes can be read as one word)
    texts = pl.concat([pl.Series([" " * pad]), texts])
    buf = texts.str.join("").cast(pl.Binary).item()
    return buf


_CHARS = st.sampled_from([" ", "0", "9", "-", "a", "#", "\t", "\u00e9", "\u20ac", "\U0001f600", "\x00", "\x7f"])


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 24), st.lists(st.lists(_CHARS, min_size=1, max_size=24), min_size=1, max_size=40), st.integers(0, 3))
def test_rows_bytes_is_the_joined_rows(width: int, rows: list[list[str]], chunks: int) -> None:
    """`_rows_bytes` gives the bytes the joined rows gave (after at least 8 spaces), for rows of any bytes
    (multi-byte characters too) cut to one byte length, in a column of one or several chunks."""
    import numpy as np

    texts = []
    for chars in rows:
        t = "".join(chars)
        while len(t.encode()) > width:
            t = t[:-1]
        texts.append(t + " " * (width - len(t.encode())))
    parts = [pl.Series("text", texts[i :: chunks + 1], dtype=pl.String) for i in range(chunks + 1)]
    col = pl.concat([p for p in parts if len(p)], rechunk=False) if chunks else pl.Series("text", texts)
    buf, pad = dmon._rows_bytes(col, width)
    old = _old_rows_bytes(col)
    assert pad >= 8 and pad % width == 0
    assert buf.dtype == np.uint8 and buf.ndim == 1 and buf.flags["C_CONTIGUOUS"]
    assert buf[:pad].tobytes() == b" " * pad
    assert buf[pad:].tobytes() == old[8:]
    # (the words `_fixed_width` reads before the first row: spaces, as the old 8 bytes of padding gave)
    assert buf[pad - 8 : pad].tobytes() == old[:8]
