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



# ----------------------------------------------------------------------------- _fixed_width by blocks, _numbers

OLD_FIXED_WIDTH = r'''
def _digits8(z: np.ndarray) -> np.ndarray:
    """The numbers written by 8 bytes of digit values (0-9, most significant first) per uint64 (SWAR)."""
    import numpy as np  # (here: a worker that reads no long dmon loop never imports it)

    u64 = np.uint64
    z = ((z & u64(0x0F0F0F0F0F0F0F0F)) * u64(2561)) >> u64(8)
    z = ((z & u64(0x00FF00FF00FF00FF)) * u64(6553601)) >> u64(16)
    return ((z & u64(0x0000FFFF0000FFFF)) * u64(42949672960001)) >> u64(32)


def _token_ends(mat: np.ndarray) -> np.ndarray:
    """Per row of bytes, the positions where a non-space (a byte above 32) is followed by a space or the end
    of the row, as bits (first byte: most significant bit of the first word) in big-endian-packed uint64s."""
    import numpy as np  # (here: a worker that reads no long dmon loop never imports it)

    u64 = np.uint64
    m, width = mat.shape
    words = -(-(width + 1) // 64)
    bits = np.zeros((m, words * 8), dtype=np.uint8)
    if width % 8:
        bits[:, : (width + 7) // 8] = np.packbits(mat > 32, axis=1)
    else:  # (rows of whole bytes: the rows' bits packed in one run, 3x faster)
        bits[:, : width // 8] = np.packbits((mat > 32).ravel()).reshape(m, width // 8)
    b = bits.view(">u8").astype(u64)
    after = b << u64(1)  # (the next position's bit, across words)
    after[:, :-1] |= b[:, 1:] >> u64(63)
    return b & ~after


def _rows_bytes(texts: pl.Series, width: int) -> tuple[np.ndarray, int]:
    """The bytes of `texts` (rows of `width` bytes each, no nulls) one after the other as one uint8 array,
    after `pad` bytes of spaces (8 or more: every field's last 8 bytes can be read as one word); and `pad`.

    Polars writes them into its own memory (each row an array of `width` bytes), which numpy reads in place:
    no joined copy in a Python `bytes` (a 16 MB range: ~13 MB of fresh pages for the kernel to map and zero
    each time; ~3 -> ~2.4 ms of CPU besides)."""
    npad = -(-8 // width)
    spaces = pl.repeat(" " * width, npad, dtype=pl.String, eager=True)
    rows = pl.concat([spaces, texts.cast(pl.String)]).cast(pl.Binary)
    return rows.bin.reinterpret(dtype=pl.Array(pl.UInt8, width)).to_numpy().reshape(-1), npad * width


def _fixed_width(rows: pl.DataFrame, fields: list[str]) -> tuple[pl.DataFrame, pl.Series] | None:
    """The columns `_group_frame` (runs None) gives the rows (`line`, `text`: the rows of one field list) that
    have dmon's layout, and the `line`s of the others (left to the row regex); None for a short group, a field
    list with a repeated field or no such layout.

    A row has the layout when it has the most common length, is printable ASCII, and its tokens (runs of
    non-spaces) end at the byte positions where a reference row's one token per field end (dmon right-aligns
    its columns): each field's bytes are then spaces and its token, the tokens the row regex gives. A numeric
    cell is read from its bytes when it is 1-8 digits or `-` (else the row is left to the regex): the value
    the cast of its text gives. Dates, times and `extra` cells are decoded once per run of rows with the same
    bytes there."""
    import numpy as np  # (here: a worker that reads no long dmon loop never imports it)

    u64 = np.uint64
    nf = len(fields)
    if rows.height < _FAST_MIN or len(set(fields)) != nf:
        return None
    lens = rows.get_column("text").str.len_bytes()
    width = int(lens.mode().min())  # type: ignore[arg-type]
    same = lens == width
    cand = rows.filter(same)
    m = cand.height
    if m < _FAST_MIN or width == 0:
        return None
    buf, pad = _rows_bytes(cand.get_column("text"), width)
    if buf.size != pad + m * width:
        return None
    mat = buf[pad:].reshape(m, width)
    ends: list[int] | None = None
    for r in range(min(m, 16)):
        found = [t.end() for t in re.finditer(rb"[^ ]+", mat[r].tobytes())]
        if len(found) == nf:
            ends = found
            break
    if ends is None:
        return None
    # tokens end where a non-space is followed by a space or the end of the row: at the reference's ends only
    ref = np.zeros((1, width), dtype=np.uint8)
    ref[0, [e - 1 for e in ends]] = 33
    ok = (_token_ends(mat) == _token_ends(ref)).all(axis=1)
    if int(mat.min()) < 32 or int(mat.max()) > 126:
        ok &= (mat >= 32).all(axis=1) & (mat <= 126).all(axis=1)
    lo = dict(zip(fields, [0, *ends[:-1]], strict=True))
    hi = dict(zip(fields, ends, strict=True))

    def word(end: int) -> np.ndarray:
        """Bytes end-8 .. end-1 of every row as one little-endian uint64 (before the row: spaces)."""
        return np.ndarray((m,), dtype="<u8", buffer=buf, offset=pad + end - 8, strides=(width,)).copy()

    nums = [f for f in fields if f in _MAP or f == "gpu"]
    values: dict[str, pl.Series] = {}
    if nums:
        words = np.empty((len(nums), m), dtype=u64)  # (a field's cells contiguous)
        for k, f in enumerate(nums):
            w = words[k]
            w[:] = np.ndarray((m,), dtype="<u8", buffer=buf, offset=pad + hi[f] - 8, strides=(width,))
            before = 8 - (hi[f] - lo[f])
            if before > 0:  # (the bytes of the fields before: spaces)
                keep = u64((1 << (64 - 8 * before)) - 1) << u64(8 * before)
                w &= keep
                w |= u64(0x2020202020202020) & ~keep
            elif before < 0:  # (a wider field: its token is 8 bytes at most)
                ok &= mat[:, hi[f] - 9] == 32
        g = words.view(np.uint8)
        d = g - 48
        digit = d <= 9
        good = (digit | (g == 32)).view(u64) == u64(0x0101010101010101)
        dash = (words >> u64(48)) == u64(0x2D20)  # (`-` after a space: N/A)
        ok &= (good | dash).all(axis=0)
        d *= digit
        num = _digits8(d.view(u64)).astype(np.float64)
        num[dash] = np.nan
        for k, f in enumerate(nums):
            values[f] = pl.Series(f, num[k], nan_to_null=True)

    def tokens(names: list[str]) -> tuple[dict[str, pl.Series], np.ndarray]:
        """The tokens of fields `names` once per run of rows with the same bytes there, and each row's run."""
        change = np.zeros(m, dtype=bool)
        change[0] = True
        for f in names:
            for e in range(min(hi[f], lo[f] + 8), hi[f] + 8, 8):
                end = min(e, hi[f])
                w = word(end)
                if end - 8 < lo[f]:  # (only the field's bytes)
                    w &= u64((1 << (64 - 8 * (lo[f] - end + 8))) - 1) << u64(8 * (lo[f] - end + 8))
                change[1:] |= w[1:] != w[:-1]
        first = np.flatnonzero(change)
        rows_first = mat[first]
        out = {}
        for f in names:
            part = np.concatenate(
                [rows_first[:, lo[f] : hi[f]], np.full((len(first), 1), 10, dtype=np.uint8)], axis=1
            )
            cells = pl.Series([part.tobytes().decode("latin-1")]).str.split("\n").explode().head(len(first))
            out[f] = cells.str.strip_chars(" ")
        return out, np.cumsum(change) - 1

    cols: dict[str, pl.Series] = {}
    stamps = None
    if "date" in lo and "time" in lo:
        stamps = _stamps(mat, lo["date"], hi["date"], lo["time"], hi["time"])
    if stamps is not None:
        cols["ts"] = stamps
    elif "date" in lo and "time" in lo:
        tok, run = tokens(["date", "time"])
        ts = pl.select(
            pl.concat_str([pl.lit(tok["date"]), pl.lit(tok["time"])], separator=" ")
            .str.strptime(pl.Datetime("us"), "%Y%m%d %H:%M:%S", strict=False)
            .dt.replace_time_zone("UTC")
        ).to_series()
        cols["ts"] = ts.gather(run)
    else:
        cols["ts"] = pl.repeat(None, m, dtype=F.UTC, eager=True)
    cols["gpu_index"] = (
        values["gpu"].cast(pl.Int32) if "gpu" in values else pl.repeat(None, m, dtype=pl.Int32, eager=True)
    )
    skip = _skip(fields)
    rest = [f for f in fields if f not in _MAP and f not in skip]
    if rest:
        tok, run = tokens(rest)
        encoded = pl.struct(**{f: _val(pl.lit(tok[f])) for f in rest}).struct.json_encode()
        extra = pl.select(encoded).to_series()
        cols["extra"] = extra.gather(run)
    else:
        cols["extra"] = pl.repeat(None, m, dtype=pl.String, eager=True)
    for f, col in _MAP.items():
        if f in values:
            cols[col] = values[f].cast(pl.Int64) if col in F.INT_COLUMNS else values[f]
    fast = pl.DataFrame(
        [cand.get_column("line"), cand.get_column("text"), *(v.alias(k) for k, v in cols.items())]
    )
    slow = rows.get_column("line").filter(~same)
    if not ok.all():
        keep = pl.Series("_ok", ok)
        fast = fast.filter(keep)
        slow = pl.concat([slow, cand.get_column("line").filter(~keep)])
    return fast, slow
'''
"""`_digits8`, `_token_ends` and `_fixed_width` as they were before the blocks and `_numbers` (verbatim)."""


def _old_module(fast_min: int) -> dict:
    ns = dict(vars(dmon))
    ns["_FAST_MIN"] = fast_min
    exec(OLD_FIXED_WIDTH, ns)
    return ns


def _old_numbers_block(words):
    """`_fixed_width`'s numbers before `_numbers` (verbatim but for the returns): (num, good, dash)."""
    import numpy as np

    u64 = np.uint64
    g = words.view(np.uint8)
    d = g - 48
    digit = d <= 9
    good = (digit | (g == 32)).view(u64) == u64(0x0101010101010101)
    dash = (words >> u64(48)) == u64(0x2D20)  # (`-` after a space: N/A)
    d *= digit
    num = _old_module(1024)["_digits8"](d.view(u64)).astype(np.float64)
    num[dash] = np.nan
    return num, good, dash


def _same_numbers(cells: list[bytes]) -> None:
    import numpy as np

    k = 3 if len(cells) % 3 == 0 and cells else 1
    raw = np.frombuffer(b"".join(cells), dtype="<u8").reshape(k, -1)
    num0, good0, dash0 = _old_numbers_block(raw.copy())
    num1, dash1, good1 = dmon._numbers(raw.copy())
    assert num1.shape == num0.shape and num1.dtype == num0.dtype
    assert (good1 == good0).all() and (dash1 == dash0).all()
    # (the number of a cell neither digits and spaces nor `-` is never read: its row leaves the byte path)
    read = good0 | dash0
    assert np.array_equal(num1[read], num0[read], equal_nan=True)


_CELL_BYTES = st.sampled_from(list(b" 0123456789-") + [0x2F, 0x3A, 0x10, 0x20, 0x30, 0x39, 0x40, 0x21, 0x29, 0x2D, 0x7F, 0x80, 0xC3, 0xFF, 0x00, 0x1F, 0x3F, 0xB0])


@settings(max_examples=500, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.integers(0, 99_999_999).map(lambda v: str(v).rjust(8).encode()),
            st.integers(1, 7).map(lambda n: (" " * (8 - n) + "-" * n).encode()),
            st.sampled_from([b"       -", b"      --", b"-       ", b"        ", b"99999999", b"00000000", b" 1 2 3 4", b"1234567-"]),
            st.lists(_CELL_BYTES, min_size=8, max_size=8).map(bytes),
        ),
        min_size=1,
        max_size=48,
    )
)
def test_numbers_as_before(cells: list[bytes]) -> None:
    """`_numbers` (in place) gives the old block's flags on any bytes, and its numbers where they are read."""
    _same_numbers(cells)


def test_numbers_every_byte() -> None:
    """Every byte value at every position of a cell of digits (and of `-` after spaces, and of spaces)."""
    cells = []
    for pos in range(8):
        for v in range(256):
            for base in (b"12345678", b"       -", b"    1234", b"        "):
                c = bytearray(base)
                c[pos] = v
                cells.append(bytes(c))
    _same_numbers(cells)


def _same_fixed_width(rows: list[str], fields: list[str], monkeypatch: pytest.MonkeyPatch, block: int) -> None:
    frame = pl.DataFrame({"line": pl.int_range(5, 5 + len(rows), eager=True), "text": pl.Series(rows, dtype=pl.String)})
    old = _old_module(4)["_fixed_width"](frame, fields)
    monkeypatch.setattr(dmon, "_FAST_MIN", 4)
    monkeypatch.setattr(dmon, "_BLOCK", block)
    new = dmon._fixed_width(frame, fields)
    if old is None:
        assert new is None
        return
    assert new is not None
    assert new[0].equals(old[0], null_equal=True) and new[0].schema == old[0].schema
    assert new[1].to_list() == old[1].to_list()


_ROW_A = " 20261128   00:00:{s:02d}   {g:4d} {pwr:>6s} {t:>6s} {mt:>6s} {sm:>6s} {mem:>6s} {enc:>6s} {dec:>6s} {jpg:>6s} {ofa:>6s} {mclk:>6s} {pclk:>6s}"
_FIELDS_A = ["date", "time", "gpu", "pwr", "gtemp", "mtemp", "sm", "mem", "enc", "dec", "jpg", "ofa", "mclk", "pclk"]
_ROW_B = "  {g:3d} {pwr:>5s} {t:>5s} {mt:>5s} {sb:>5s} {db:>5s} {pci:>5s}"
_FIELDS_B = ["gpu", "pwr", "gtemp", "mtemp", "sbecc", "dbecc", "pci"]
_VAL = st.one_of(st.integers(0, 99999).map(str), st.integers(0, 99).map(str), st.just("-"), st.sampled_from(["--", "1-", "a", "1.5", "\u00e9", "99999999", "0x1", "N/A"]))


@settings(max_examples=200, deadline=None)
@given(
    st.booleans(),
    st.lists(st.tuples(st.integers(0, 59), st.integers(0, 7), st.lists(_VAL, min_size=11, max_size=11)), min_size=8, max_size=40),
    st.lists(st.tuples(st.integers(0, 200), st.integers(0, 120), st.sampled_from(" -x\t\u00e9\x00#0")), max_size=6),
    st.integers(1, 7),
)
def test_fixed_width_as_before(kind_a: bool, rows: list, mutations: list, block: int) -> None:
    """`_fixed_width` by blocks of rows (here 1-7, to cross their edges) gives what it gave on the whole
    matrix at once: the same rows taken, columns and values, and the same rows left to the regex; rows with
    odd cells (too long, not numbers, `-` in odd places), mutated bytes (non-ASCII, tabs, NUL) and shifted
    columns."""
    texts = []
    for s, g, v in rows:
        if kind_a:
            names = ["pwr", "t", "mt", "sm", "mem", "enc", "dec", "jpg", "ofa", "mclk", "pclk"]
            texts.append(_ROW_A.format(s=s, g=g, **dict(zip(names, v, strict=True))))
        else:
            texts.append(_ROW_B.format(g=g, pwr=v[0], t=v[1], mt=v[2], sb=v[3], db=v[4], pci=v[5]))
    for at, pos, ch in mutations:
        i = at % len(texts)
        t = texts[i]
        p = pos % (len(t) + 1)
        texts[i] = t[:p] + ch + t[p + 1 :]
    with pytest.MonkeyPatch.context() as mp:
        _same_fixed_width(texts, _FIELDS_A if kind_a else _FIELDS_B, mp, block)


@pytest.mark.parametrize("seed", [0, 1])
def test_fixed_width_long_loop_as_before(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Whole loops of both field lists (thousands of rows, several real blocks) as before."""
    lines = _loop(30000, seed)
    for head, fields in (("#Date", _FIELDS_A), ("# gpu", _FIELDS_B)):
        rows, cur = [], None
        for ln in lines:
            if ln.startswith("#"):
                cur = ln.startswith(head) if ln.startswith(("#Date", "# gpu")) else cur
                continue
            if cur:
                rows.append(ln)
        _same_fixed_width(rows, fields, monkeypatch, 8192)
        _same_fixed_width(rows, fields, monkeypatch, 1000)
