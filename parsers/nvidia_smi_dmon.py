"""`nvidia-smi dmon` (any `-s` selection; `-o D`/`-o T`/`-o DT` date and time columns or none).

Two `#` header lines (names, then units) govern the whitespace-separated rows below them until the next
header (dmon repeats it). Columns: `gpu` -> gpu_index, `pwr` -> power_w, `gtemp` -> temperature_c,
`mtemp` -> mem_temperature_c, `sm` -> utilization_pct, `mem` -> mem_utilization_pct, `fb` ->
memory_used_mib, `mclk` -> mem_clock_mhz, `pclk` -> sm_clock_mhz (NOTE: dmon's processor clock is the
graphics clock, which equals the SM clock on datacenter GPUs), `sbecc`/`dbecc` -> volatile ECC
counts; the rest (enc, dec, jpg, ofa, pviol, tviol, rxpci, txpci, bar1, ...) go to `extra`. `-` = N/A.
Rows carry a time only with `-o DT` (local, 'local_assumed_utc'); with `-o T` alone the time of day is
kept in `extra` and ts stays null. dmon prints no bus id: gpu_bus_id stays null.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache
from itertools import accumulate
from typing import TYPE_CHECKING

import polars as pl

if TYPE_CHECKING:
    import numpy as np

from parsers import _nvsmi_fields as F
from parsers._common import repeated
from parsers._sniff import has_bytes
from parsers.base import MAX_EXAMPLES, FileContext, ParseResult, compiled

NAME = "nvidia-smi-dmon"
DESCRIPTION = "nvidia-smi dmon device monitoring rows (any -s selection, -o DT)"
TABLES = ("gpu_samples", "events")
FILENAME_HINTS = ("*dmon*",)
DETECTS = "a '# gpu  pwr  gtemp ...' (or '#Date Time gpu ...') header followed by a '# Idx  W  C ...' units line"
PRIORITY = 15

_MANY, _PROBE = 8192, 4096
"""Lines of a chunk from which a field list's `extra` fields may be encoded once per distinct value (when the
first _PROBE rows repeat them)."""
_BATCH_LINES = 1 << 17
"""Lines of a file below which `parse_many` reads it with the others of its batch (whose bytes the ingest bounds
by `BATCH_BYTES`): the README's 24-hour bundle's 15k-line loops, ten a batch, 5.0 -> 3.6 ms a file against
`parse` of each (their rows read as bytes either way; the regex, for a row of another shape, encodes `extra`
per row in a batch, per distinct value in a long chunk read alone)."""

HEADER_RE = r"^#\s*(?:Date\s+)?(?:Time\s+)?gpu(?:\s+[A-Za-z][\w]*)*\s*$"
UNITS_RE = r"^#\s*(?:YYYYMMDD\s+)?(?:HH:MM:SS\s+)?Idx\b"
_MAP = {
    "pwr": "power_w",
    "gtemp": "temperature_c",
    "mtemp": "mem_temperature_c",
    "sm": "utilization_pct",
    "mem": "mem_utilization_pct",
    "fb": "memory_used_mib",
    "mclk": "mem_clock_mhz",
    "pclk": "sm_clock_mhz",
    "sbecc": "ecc_corrected_volatile",
    "dbecc": "ecc_uncorrected_volatile",
}


def sniff(head: bytes, name: str) -> float:
    """0.95 for a dmon names line followed by its units line."""
    # (literals of the units and names lines: no decode)
    if not has_bytes(head, b"Idx") or not has_bytes(head, b"gpu"):
        return 0.0
    text = head.decode("utf-8", "replace")
    if re.search(HEADER_RE, text, re.M) and re.search(UNITS_RE, text, re.M):
        return 0.95
    return 0.0


def carry(lines: pl.Series) -> list[str]:
    """The header line in force at the end of `lines` ([] when none): a file parsed in chunks can prepend it
    to the next chunk, whose first rows it governs (it is then parsed, and counted, as a header line)."""
    text = lines.cast(pl.String).fill_null("")
    # (looked for from the end, a block of lines at a time: dmon repeats its header every few rows)
    for end in range(len(text), 0, -_CARRY_BLOCK):
        block = text.slice(max(0, end - _CARRY_BLOCK), min(end, _CARRY_BLOCK))
        hpos = _hash_lines(block).arg_true()
        heads = hpos.filter(block.gather(hpos).str.contains(HEADER_RE))
        if len(heads):
            return [block[int(heads[-1])]]
    return []


_CARRY_BLOCK = 8192
"""Lines `carry` looks at at once, from the end (a 16 MB chunk of 200k lines: ~2 -> ~0.15 ms)."""


def _val(e: pl.Expr) -> pl.Expr:
    return pl.when(e == "-").then(None).otherwise(e)


def _skip(fields: list[str] | tuple[str, ...]) -> set[str]:
    """The fields that are neither mapped nor `extra`."""
    return {"gpu", "date", "time"} if "date" in fields else {"gpu"}


@lru_cache(maxsize=256)
def _layout(fields: tuple[str, ...]) -> tuple[str, tuple[tuple[str, tuple[str, ...]], ...]] | None:
    """The row regex of a field list whose consecutive `extra` fields are captured as one run (a group per
    run of two or more, named r<i>; other fields f<i>), and the runs of `extra` fields (group, fields) in
    order; None when no run has two fields or a field repeats (then `extra` keeps each field's own cell)."""
    if len(set(fields)) != len(fields):
        return None
    skip = _skip(fields)
    is_rest = [f not in _MAP and f not in skip for f in fields]
    parts: list[str] = []
    runs: list[tuple[str, tuple[str, ...]]] = []
    i = 0
    while i < len(fields):
        j = i
        if is_rest[i]:
            while j + 1 < len(fields) and is_rest[j + 1]:
                j += 1
        if j > i:
            parts.append(f"(?P<r{i}>[^ ]+(?: +[^ ]+){{{j - i}}})")
            runs.append((f"r{i}", fields[i : j + 1]))
        else:
            parts.append(f"(?P<f{i}>[^ ]+)")
            if is_rest[i]:
                runs.append((f"f{i}", (fields[i],)))
        i = j + 1
    if all(len(fs) == 1 for _, fs in runs):
        return None
    return "^" + " +".join(parts) + "$", tuple(runs)


def _row_regex(fields: list[str]) -> str:
    return "^" + " +".join(f"(?P<f{i}>[^ ]+)" for i in range(len(fields))) + "$"


def _extra_per_value(runs: tuple[tuple[str, tuple[str, ...]], ...]) -> pl.Expr:
    """The `extra` JSON from the run cells, encoded once per distinct text of the runs and mapped back: the
    runs are split into the fields' cells again (tokens separated by spaces, as in the row regex), so each
    value is the one the per-field cells give."""
    runs_cells = [pl.col("cells").struct.field(g) for g, _ in runs]
    key = runs_cells[0] if len(runs_cells) == 1 else pl.concat_str(runs_cells, separator=" ")
    rest = [f for _, fs in runs for f in fs]
    rx = "^" + " +".join(f"(?P<g{k}>[^ ]+)" for k in range(len(rest))) + "$"
    u = key.unique(maintain_order=True)
    toks = u.str.extract_groups(rx)
    js = pl.struct(**{f: _val(toks.struct.field(f"g{k}")) for k, f in enumerate(rest)}).struct.json_encode()
    return key.replace_strict(u, js, default=None, return_dtype=pl.String)


def _group_frame(
    data: pl.LazyFrame,
    fields: list[str],
    runs: tuple[tuple[str, tuple[str, ...]], ...] | None = None,
    keep: tuple[str, ...] = ("line", "text"),
) -> pl.LazyFrame:
    """Typed columns of the data rows of one header field list (`cells`: struct of the row's tokens; with
    `runs`, the cells of `_layout`'s regex: `extra` encoded per distinct text of its runs; `keep`: the
    columns of `data` kept as they are)."""
    in_run = {f for _, fs in runs for f in fs} if runs else set()
    cell = {f: pl.col("cells").struct.field(f"f{i}") for i, f in enumerate(fields) if f not in in_run}
    exprs = {}
    for f, col in _MAP.items():
        if f in cell:
            v = cell[f].cast(pl.Float64, strict=False)  # (`-` does not parse either: null, as _val makes it)
            exprs[col] = v.cast(pl.Int64) if col in F.INT_COLUMNS else v
    if "date" in cell and "time" in cell:
        ts = pl.concat_str([cell["date"], cell["time"]], separator=" ").str.strptime(
            pl.Datetime("us"), "%Y%m%d %H:%M:%S", strict=False
        ).dt.replace_time_zone("UTC")
    else:
        ts = pl.lit(None, dtype=F.UTC)
    skip = _skip(fields)
    rest = {f: _val(e) for f, e in cell.items() if f not in _MAP and f not in skip}
    if runs:
        extra = _extra_per_value(runs)
    else:
        extra = pl.struct(**rest).struct.json_encode() if rest else pl.lit(None, dtype=pl.String)
    return data.select(
        *keep,
        ts=ts,
        gpu_index=cell["gpu"].cast(pl.Int32, strict=False) if "gpu" in cell else pl.lit(None, dtype=pl.Int32),
        extra=extra,
        **exprs,
    )


_FAST_MIN = 1024
"""Rows of one field list from which its rows of dmon's fixed-width layout are read as columns of bytes."""
_BLOCK = 8192
"""Rows `_fixed_width` checks and reads the numbers of at a time (a 16 MB range: ~16 blocks)."""



def _numbers(words: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per cell of `words` (its last 8 bytes as a little-endian uint64; `words` is overwritten): its number as
    float64 (a cell of digits and spaces), whether it is `-` after a space (N/A: the number is NaN), and
    whether it holds digits and spaces only. The number of a cell that is neither is left undefined.

    SWAR on the words, in place on one more array of their size (`_fixed_width` hands a block of rows: the
    arrays stay small): a byte b is a digit or a space when t = b ^ 0x30 is 0-9 or 0x10, i.e. t < 0x20, its
    low nibble + 6 does not reach 0x10, and its low nibble is 0 where t has 0x10 (a digit's value is t's low
    nibble, a space's 0). The digit values of a word make its number in three multiply-shift steps (the
    cell's first byte is the most significant digit)."""
    import numpy as np  # (here: a worker that reads no long dmon loop never imports it)

    u64 = np.uint64
    cells = words.view(np.uint8).reshape(*words.shape, 8)
    dash = (cells[..., 7] == 45) & (cells[..., 6] == 32)  # (`-` after a space: N/A)
    t = np.bitwise_xor(words, u64(0x3030303030303030))
    low = np.bitwise_and(t, u64(0x0F0F0F0F0F0F0F0F), out=words)
    scratch = np.add(low, u64(0x0F0F0F0F0F0F0F0F))
    np.bitwise_and(scratch, t, out=scratch)
    np.bitwise_and(scratch, u64(0x1010101010101010), out=scratch)  # (0x10 and a non-zero nibble)
    np.bitwise_and(t, u64(0xE0E0E0E0E0E0E0E0), out=t)  # (t >= 0x20)
    np.bitwise_or(t, scratch, out=t)
    np.add(low, u64(0x0606060606060606), out=scratch)
    np.bitwise_and(scratch, u64(0x1010101010101010), out=scratch)  # (a nibble above 9)
    np.bitwise_or(t, scratch, out=t)
    good = t == 0
    del scratch
    # the digits' values (spaces: 0) to numbers, in place
    for mask, mul, shift in _DIGITS8:
        if mask is not None:
            np.bitwise_and(low, u64(mask), out=low)
        np.multiply(low, u64(mul), out=low)
        np.right_shift(low, u64(shift), out=low)
    num = t.view(np.float64)
    np.copyto(num, low, casting="unsafe")
    num[dash] = np.nan
    return num, dash, good


_DIGITS8 = ((None, 2561, 8), (0x00FF00FF00FF00FF, 6553601, 16), (0x0000FFFF0000FFFF, 42949672960001, 32))
"""The steps (mask, multiplier, shift) that make the number of 8 bytes of digit values (0-9, most significant
first) in a uint64, the bytes masked to their low nibble already."""


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
    spaces = repeated(" " * width, npad, pl.String)
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
    scanned = _scanned(rows, fields)
    if scanned is not None:
        return scanned
    lens = rows.get_column("text").str.len_bytes()
    width = _common_length(lens)
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
    ref_ends = _token_ends(ref)
    lo = dict(zip(fields, [0, *ends[:-1]], strict=True))
    hi = dict(zip(fields, ends, strict=True))

    def word(end: int) -> np.ndarray:
        """Bytes end-8 .. end-1 of every row as one little-endian uint64 (before the row: spaces)."""
        return np.ndarray((m,), dtype="<u8", buffer=buf, offset=pad + end - 8, strides=(width,)).copy()

    nums = [f for f in fields if f in _MAP or f == "gpu"]
    values: dict[str, pl.Series] = {}
    ok = np.empty(m, dtype=bool)
    num = np.empty((len(nums), m), dtype=np.float64)
    # (a block of rows at a time: its temporaries stay in the cache and are memory the allocator hands out
    # again, where arrays of a whole range's bytes are fresh pages each time, for the kernel to map and zero)
    for a in range(0, m, _BLOCK):
        b = min(m, a + _BLOCK)
        blk = mat[a:b]
        okb = (_token_ends(blk) == ref_ends).all(axis=1)
        if int(blk.min()) < 32 or int(blk.max()) > 126:
            okb &= (blk >= 32).all(axis=1) & (blk <= 126).all(axis=1)
        if nums:
            words = np.empty((len(nums), b - a), dtype=u64)  # (a field's cells contiguous)
            for k, f in enumerate(nums):
                w = words[k]
                at = pad + a * width + hi[f] - 8
                w[:] = np.ndarray((b - a,), dtype="<u8", buffer=buf, offset=at, strides=(width,))
                before = 8 - (hi[f] - lo[f])
                if before > 0:  # (the bytes of the fields before: spaces)
                    keep = u64((1 << (64 - 8 * before)) - 1) << u64(8 * before)
                    w &= keep
                    w |= u64(0x2020202020202020) & ~keep
                elif before < 0:  # (a wider field: its token is 8 bytes at most)
                    okb &= blk[:, hi[f] - 9] == 32
            nb, dash, good = _numbers(words)
            okb &= (good | dash).all(axis=0)
            num[:, a:b] = nb
        ok[a:b] = okb
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
        # (as UInt32, polars' index type: an Int64 index is converted and bounds-checked first, ~60
        # instructions a row)
        return out, np.cumsum(change, dtype=np.uint32) - np.uint32(1)

    stamps = None
    if "date" in lo and "time" in lo:
        stamps = _stamps(mat, lo["date"], hi["date"], lo["time"], hi["time"])
    if stamps is not None:
        ts = stamps
    elif "date" in lo and "time" in lo:
        tok, run = tokens(["date", "time"])
        ts = pl.select(
            pl.concat_str([pl.lit(tok["date"]), pl.lit(tok["time"])], separator=" ")
            .str.strptime(pl.Datetime("us"), "%Y%m%d %H:%M:%S", strict=False)
            .dt.replace_time_zone("UTC")
        ).to_series().gather(run)
    else:
        ts = repeated(None, m, F.UTC)
    skip = _skip(fields)
    rest = [f for f in fields if f not in _MAP and f not in skip]
    extra = _extra(rest, *tokens(rest), m) if rest else repeated(None, m, pl.String)
    fast = _frame(cand.get_column("line"), cand.get_column("text"), ts, values, extra, m)
    slow = rows.get_column("line").filter(~same)
    if not ok.all():
        keep = pl.Series("_ok", ok)
        fast = fast.filter(keep)
        slow = pl.concat([slow, cand.get_column("line").filter(~keep)])
    return fast, slow


def _kinds(fields: list[str]) -> bytes:
    """What `_fastscan.dmon_rows` reads each field as: b'n' a number (a mapped field or `gpu`), b'd' and b't'
    the date and time of a row's `ts` (with both only), b's' a field `_skip` drops, b'x' one of `extra`."""
    skip = _skip(fields)
    dated = "date" in fields and "time" in fields
    return bytes(
        ord("n") if f in _MAP or f == "gpu"
        else ord("d") if dated and f == "date"
        else ord("t") if dated and f == "time"
        else ord("s") if f in skip
        else ord("x")
        for f in fields
    )


def _scanned(rows: pl.DataFrame, fields: list[str]) -> tuple[pl.DataFrame, pl.Series] | None:
    """`_fixed_width(rows, fields)` read by the compiled module (`parsers._fastscan.dmon_rows`) where every
    row is of the fields' shape (printable ASCII, one token a field, numbers of 1-8 digits or `-`, a date and time
    that exist), whatever their widths: each row's values are those the bytes or the row regex give it, and no
    row is left to the regex. None where the module is not built or a row is of another shape (then the
    bytes are read as columns here, and the rest by the regex). A dmon file's 15k rows: ~5 -> ~1.5 ms."""
    scan = compiled("dmon_rows")
    text = rows.get_column("text")
    m = text.len()
    if scan is None or text.null_count():
        return None
    import numpy as np  # (here: a worker that reads no long dmon loop never imports it)

    kinds = _kinds(fields)
    nums = [f for f in fields if f in _MAP or f == "gpu"]
    ints, floats = np.empty(2 * m, dtype=np.int64), np.empty(len(nums) * m, dtype=np.float64)
    if scan(text.__arrow_c_stream__(), m, kinds, ints, floats) != m:
        return None
    values = {f: pl.Series(f, floats[k * m : (k + 1) * m], nan_to_null=True) for k, f in enumerate(nums)}
    if b"d" in kinds:
        ts = pl.Series("ts", ints[:m]).cast(pl.Datetime("us")).dt.replace_time_zone("UTC")
    else:
        ts = repeated(None, m, F.UTC)
    rest = [f for f, k in zip(fields, kinds, strict=True) if k == ord("x")]
    extra = repeated(None, m, pl.String)
    if rest:
        # (each run of rows with the same `extra` tokens encoded once, from its first row's cells)
        change = ints[m:]
        firsts = text.gather(np.flatnonzero(change)).str.strip_chars()
        cells = firsts.str.extract_groups(_row_regex(fields))
        at = {f: i for i, f in enumerate(fields)}
        tok = {f: cells.struct.field(f"f{at[f]}") for f in rest}
        extra = _extra(rest, tok, np.cumsum(change, dtype=np.uint32) - np.uint32(1), m)
    fast = _frame(rows.get_column("line"), text, ts, values, extra, m)
    return fast, rows.get_column("line").head(0)


def _extra(rest: list[str], tok: dict[str, pl.Series], run: np.ndarray, m: int) -> pl.Series:
    """The `extra` JSON of `m` rows: `tok`, the cells of the `rest` fields once per run of rows with the same
    cells, encoded once each, and `run`, each row's run (UInt32)."""
    encoded = pl.select(pl.struct(**{f: _val(pl.lit(tok[f])) for f in rest}).struct.json_encode()).to_series()
    return encoded.new_from_index(0, m) if len(encoded) == 1 else encoded.gather(run)  # (one run: repeated)


def _frame(
    line: pl.Series, text: pl.Series, ts: pl.Series, values: dict[str, pl.Series], extra: pl.Series, m: int
) -> pl.DataFrame:
    """The columns `_group_frame` gives `m` rows, from their numbers (`values`: per `gpu` or mapped field, NaN
    or null where N/A), times and `extra`."""
    cols = {
        "ts": ts,
        "gpu_index": values["gpu"].cast(pl.Int32) if "gpu" in values else repeated(None, m, pl.Int32),
        "extra": extra,
    }
    for f, col in _MAP.items():
        if f in values:
            cols[col] = values[f].cast(pl.Int64) if col in F.INT_COLUMNS else values[f]
    return pl.DataFrame([line, text, *(v.alias(k) for k, v in cols.items())])


_DAYS_IN = (0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)

_COUNT_MAX = 1 << 16
"""Row lengths up to which `_common_length` counts them in an array indexed by length."""


def _common_length(lens: pl.Series) -> int:
    """`lens.mode().min()` of row lengths (UInt32, no nulls, not empty): the shortest of the most frequent.
    When no row is longer than `_COUNT_MAX` bytes, by a count per length (`np.bincount`: its `argmax` is the
    first, i.e. shortest, length of the highest count), instead of polars' hash group-by of every row."""
    import numpy as np  # (here: a worker that reads no long dmon loop never imports it)

    arr = lens.to_numpy()
    if int(arr.max()) > _COUNT_MAX:
        return int(lens.mode().min())  # type: ignore[arg-type]
    return int(np.bincount(arr).argmax())


def _stamps(mat: np.ndarray, d0: int, d1: int, t0: int, t1: int) -> pl.Series | None:
    """The `ts` of rows (`mat`) whose date cell (bytes d0-d1) is spaces then 8 digits and time cell (t0-t1)
    spaces then `HH:MM:SS`, as the strptime of `_fixed_width` gives it, read from the bytes once per run of
    rows with the same date and time (dmon prints a second's rows, one per GPU, with the same stamp): None
    unless every row's cells have that shape, a year of 1970-2200, a date that exists and a time of day
    without leap second (then strptime reads them)."""
    import numpy as np  # (here: a worker that reads no long dmon loop never imports it)

    m = mat.shape[0]
    if d1 - d0 < 8 or t1 - t0 < 8 or m == 0:
        return None
    change = np.zeros(m, dtype=bool)
    change[0] = True
    width = mat.shape[1]
    for a, b in ((d0, d1), (t0, t1)):  # (the cells' bytes as words of 8, the last one ending the cell)
        for at in [*range(a, b - 8, 8), b - 8]:
            w = np.ndarray((m,), dtype="<u8", buffer=mat, offset=at, strides=(width,))
            change[1:] |= w[1:] != w[:-1]
    first = np.flatnonzero(change)
    date, tod = mat[first, d0:d1], mat[first, t0:t1]
    if not ((date[:, :-8] == 32).all() and (tod[:, :-8] == 32).all()):
        return None
    d = date[:, -8:].astype(np.int64) - 48
    t = tod[:, -8:].astype(np.int64) - 48
    digits = t[:, [0, 1, 3, 4, 6, 7]]
    if not (((d >= 0) & (d <= 9)).all() and ((digits >= 0) & (digits <= 9)).all()):
        return None
    if not (t[:, [2, 5]] == 10).all():  # (the colons)
        return None
    year = d[:, 0] * 1000 + d[:, 1] * 100 + d[:, 2] * 10 + d[:, 3]
    month, day = d[:, 4] * 10 + d[:, 5], d[:, 6] * 10 + d[:, 7]
    hour, minute, sec = t[:, 0] * 10 + t[:, 1], t[:, 3] * 10 + t[:, 4], t[:, 6] * 10 + t[:, 7]
    leap = (year % 4 == 0) & ((year % 100 != 0) | (year % 400 == 0))
    last = np.array(_DAYS_IN)[np.clip(month, 0, 12)] + ((month == 2) & leap)
    ok = (year >= 1970) & (year <= 2200) & (month >= 1) & (month <= 12) & (day >= 1) & (day <= last)
    ok &= (hour <= 23) & (minute <= 59) & (sec <= 59)
    if not ok.all():
        return None
    # days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's days_from_civil)
    y = year - (month <= 2)
    era = y // 400
    yoe = y - era * 400
    doy = (153 * ((month + 9) % 12) + 2) // 5 + day - 1
    days = era * 146097 + yoe * 365 + yoe // 4 - yoe // 100 + doy - 719468
    micros = (days * 86400 + hour * 3600 + minute * 60 + sec) * 1_000_000
    run = np.cumsum(change) - 1
    return pl.Series("ts", micros[run]).cast(pl.Datetime("us")).dt.replace_time_zone("UTC")


def parse(lines: pl.Series, ctx: FileContext) -> ParseResult:
    """Parse every header group; see the module docstring.

    Rows are tokens separated by spaces (of the line stripped of whitespace). Header and units lines
    start with `#`, so the regexes run on those few lines only; every row then takes the field list of
    the last header above it, and the rows of one field list (however often dmon repeated its header)
    are split into cells by one anchored regex that also checks the token count.
    """
    text = lines.cast(pl.String).fill_null("")
    n = len(text)
    head_pos, marks, sigs, sig_of_header = _headers(text)
    # the field list of the governing header (the last one above; null: none yet); header and units lines
    # themselves are never data
    sig = repeated(None, n, pl.Int64)
    if len(head_pos):
        sig = sig.scatter(head_pos, pl.Series(sig_of_header, dtype=pl.Int64)).forward_fill()
    mark = repeated(False, n, pl.Boolean)
    if len(marks):
        mark = mark.scatter(marks, True)
    frame = pl.DataFrame(
        {
            "line": pl.int_range(ctx.first_line, ctx.first_line + n, dtype=pl.Int64, eager=True),
            "text": text,
            "sig": sig,
            "mark": mark,
        }
    )
    parts = []
    data_lines: list[pl.Series] = []
    for fields_t, s in sigs.items():
        fields = list(fields_t)
        rx = _row_regex(fields)
        rows = frame.lazy().filter((pl.col("sig") == s) & ~pl.col("mark"))
        fast = None
        if n >= _MANY:
            # (a long group: its rows of dmon's fixed-width layout read as columns of bytes, the rest below)
            sel = (frame.get_column("sig") == s) & ~mark
            got = _fixed_width(frame.select("line", "text").filter(sel), fields)
            if got is not None:
                fast, slow = got
                rows = frame.lazy().filter(pl.col("line").is_in(slow.implode())) if len(slow) else None
        # A long group whose `extra` fields repeat their values (idle encoders: `0 0 0 0`) captures each run
        # of `extra` fields as one cell (fewer captures) and encodes `extra` once per distinct run text.
        layout = _layout(fields_t) if n >= _MANY and fast is None else None
        runs = None
        if layout is not None:
            probe = (
                frame.lazy()
                .filter((pl.col("sig") == s) & ~pl.col("mark"))
                .head(_PROBE)
                .select(cells=pl.col("text").str.strip_chars().str.extract_groups(layout[0]))
                .select(pl.concat_str([pl.col("cells").struct.field(g) for g, _ in layout[1]], separator=" "))
                .collect(engine="in-memory")
                .to_series()
            )
            if probe.len() and probe.n_unique() * 4 <= probe.len():
                rx, runs = layout
        if rows is not None:
            # (the rows of the field list, their cells and typed columns in one query)
            data = rows.with_columns(cells=pl.col("text").str.strip_chars().str.extract_groups(rx)).filter(
                pl.col("cells").struct.field(rx[rx.index("<") + 1 : rx.index(">")]).is_not_null()
            )
            part = _group_frame(data, fields, runs).collect(engine="in-memory")
            if fast is not None:
                part = pl.concat([fast, part], how="vertical").sort("line") if part.height else fast
        else:
            part = fast
        if part.height == 0:
            continue
        data_lines.append(part.get_column("line"))
        parts.append(part)
    ok = mark
    if data_lines:
        first = ctx.first_line
        ok = ok.scatter(pl.concat(data_lines) - first, True)
    # (blank lines are neither header, units nor data lines: looked for among the other lines only)
    rest = (~ok).arg_true()
    blank = text.gather(rest).str.strip_chars().str.len_bytes() == 0
    unrecognized = len(rest) - int(blank.sum())
    parsed = n - len(rest)
    bad_idx = rest.filter(~blank).head(MAX_EXAMPLES)
    examples = [
        (ctx.first_line + int(i), str(t)[:500])
        for i, t in zip(bad_idx.to_list(), text.gather(bad_idx).to_list(), strict=True)
    ]

    if parts:
        # (one field list's rows are in line order already)
        samples = _merged(parts, "line") if len(parts) > 1 else parts[0]
        samples = samples.with_columns(
            node=pl.lit(ctx.node),
            file=pl.lit(ctx.path),
            source=pl.lit("nvidia-smi-dmon"),
            ts_quality=pl.when(pl.col("ts").is_not_null()).then(pl.lit("local_assumed_utc")).otherwise(pl.lit("none")),
            gpu_bus_id=pl.lit(None, dtype=pl.String),
        )
        events = F.transition_events(samples, ctx)
        gpu_samples = F.conform_known(samples, "gpu_samples")
    else:
        events = F.conform_table(pl.DataFrame(), "events")
        gpu_samples = F.conform_table(pl.DataFrame(), "gpu_samples")
    return ParseResult(
        tables={"gpu_samples": gpu_samples, "events": events},
        parsed=parsed,
        unrecognized=unrecognized,
        unrecognized_examples=examples,
    )


_MERGE_RUNS = 64
"""Runs of rows in line order from which `_merged` sorts the field lists' rows instead of slicing them."""


def _merged(parts: list[pl.DataFrame], key: str) -> pl.DataFrame:
    """`pl.concat(parts, how="diagonal_relaxed").sort(key)` of parts each in `key` order, no value of `key` in
    two rows (field lists' rows: each line in one part): the concatenation cut into its runs of rows that stay
    together in `key` order, and these concatenated in that order, instead of a gather of every column (two
    field lists in a few blocks of a 16 MB range's 160k rows: ~12 -> ~2 ms). The same frame: with distinct
    keys the sort has one order, whatever its stability, and the runs give it (the sort's flag on `key` set
    too); more than `_MERGE_RUNS` runs: the sort itself."""
    full = pl.concat(parts, how="diagonal_relaxed")
    order = full.get_column(key).arg_sort().cast(pl.Int64)
    # a run starts where the next row in key order is not the next row of `full`
    at = (order.diff() != 1).fill_null(True).arg_true()
    if len(at) > _MERGE_RUNS:
        return full.sort(key)
    starts = at.to_list()
    firsts = order.gather(at).to_list()
    sizes = [b - a for a, b in zip(starts, [*starts[1:], full.height], strict=True)]
    runs = [full.slice(f, size) for f, size in zip(firsts, sizes, strict=True)]
    merged = runs[0] if len(runs) == 1 else pl.concat(runs, how="vertical", rechunk=False)
    # (the column replaced in place: `with_columns` would copy every column into one chunk)
    merged.replace_column(merged.get_column_index(key), merged.get_column(key).set_sorted())
    return merged


def parse_many(items: Sequence[tuple[pl.Series, FileContext]]) -> list[ParseResult]:
    """`[parse(lines, ctx) for lines, ctx in items]` in one pass over the lines of all files: every line is
    governed by the last header above it in its own file, the rows of one field list are read in one query
    whatever file they are in (those of dmon's fixed-width layout as columns of bytes: `_fixed_width`), the
    accounting is counted per file from the flags of all lines, and the events are found per GPU of each file
    (`F.transition_events_many`). Files of `_BATCH_LINES` lines or more are parsed alone."""
    out: list[ParseResult | None] = [None] * len(items)
    batch = [k for k, (lines, _ctx) in enumerate(items) if len(lines) < _BATCH_LINES]
    if len(batch) < 2:
        batch = []
    alone = set(range(len(items))).difference(batch)
    for k in sorted(alone):
        out[k] = parse(*items[k])
    if batch:
        for k, result in zip(batch, _parse_batch([items[k] for k in batch]), strict=True):
            out[k] = result
    return out  # type: ignore[return-value]


def _parse_batch(items: Sequence[tuple[pl.Series, FileContext]]) -> list[ParseResult]:
    """`parse_many` of files of fewer than `_MANY` lines each."""
    nf = len(items)
    sizes = [len(lines) for lines, _ in items]
    starts = list(accumulate(sizes, initial=0))
    n = starts[-1]
    text = pl.concat([lines.cast(pl.String) for lines, _ in items], how="vertical").fill_null("")
    stripped = text.str.strip_chars()
    blank = stripped.str.len_bytes() == 0
    pos = pl.int_range(0, n, dtype=pl.UInt32, eager=True)
    # the file of each line, and its line number there
    file_of = pl.Series(starts[1:], dtype=pl.UInt32).search_sorted(pos, side="right").cast(pl.Int64)
    line_off = pl.Series([ctx.first_line - starts[k] for k, (_l, ctx) in enumerate(items)], dtype=pl.Int64)
    head_pos, marks, sigs, sig_of_header = _headers(text)
    # index of the governing header (-1: none yet): the last one above the line, when in the line's file
    hi = head_pos.search_sorted(pos, side="right").cast(pl.Int64)
    head_file = pl.Series([-1, *file_of.gather(head_pos).to_list()], dtype=pl.Int64)
    sig_s = pl.Series([None, *sig_of_header], dtype=pl.Int64)
    mark = repeated(False, n, pl.Boolean)
    if len(marks):
        mark = mark.scatter(marks, True)
    frame = pl.DataFrame(
        {"_pos": pos, "_f": file_of, "_hi": hi, "text": text, "stripped": stripped, "mark": mark}
    ).select(
        "_pos",
        "_f",
        line=pl.col("_pos").cast(pl.Int64) + pl.lit(line_off).gather(pl.col("_f")),
        text="text",
        stripped="stripped",
        sig=pl.when(pl.lit(head_file).gather(pl.col("_hi")) == pl.col("_f")).then(
            pl.lit(sig_s).gather(pl.col("_hi"))
        ),
        mark="mark",
    )
    parts = []
    data_pos: list[pl.Series] = []
    for fields_t, s in sigs.items():
        fields = list(fields_t)
        rx = _row_regex(fields)
        rows: pl.LazyFrame | None = frame.lazy().filter((pl.col("sig") == s) & ~pl.col("mark"))
        fast = None
        if n >= _FAST_MIN and rows is not None:
            # (the rows of the field list in dmon's fixed-width layout, in all files, read as columns of
            # bytes; the others by the row regex below)
            group = rows.select(line=pl.col("_pos").cast(pl.Int64), text="text").collect()
            got = _fixed_width(group, fields)
            if got is not None:
                cols, slow = got
                pos = cols.get_column("line").cast(pl.UInt32)
                f = file_of.gather(pos)
                fast = cols.with_columns(
                    _pos=pos, _f=f, line=pos.cast(pl.Int64) + line_off.gather(f)
                ).select("_pos", "_f", "line", pl.exclude("_pos", "_f", "line"))
                rows = None
                if len(slow):
                    rows = frame.lazy().filter(pl.col("_pos").is_in(slow.cast(pl.UInt32).implode()))
        if rows is not None:
            data = rows.with_columns(cells=pl.col("stripped").str.extract_groups(rx)).filter(
                pl.col("cells").struct.field(rx[rx.index("<") + 1 : rx.index(">")]).is_not_null()
            )
            keep = ("_pos", "_f", "line", "text")
            part = _group_frame(data, fields, None, keep).collect(engine="in-memory")
            if fast is not None:
                part = pl.concat([fast, part], how="vertical").sort("_pos") if part.height else fast
        else:
            assert fast is not None
            part = fast
        if part.height == 0:
            continue
        data_pos.append(part.get_column("_pos"))
        parts.append(part)
    ok = mark
    if data_pos:
        ok = ok.scatter(pl.concat(data_pos), True)
    bad = ~ok & ~blank
    bad_pos = bad.arg_true()
    cut = pl.Series(starts, dtype=pl.UInt32)
    bad_at = bad_pos.search_sorted(cut).to_list()
    blank_at = blank.arg_true().search_sorted(cut).to_list()
    # examples: the first MAX_EXAMPLES bad lines of each file, read in one gather
    ex_pos = [bad_pos.slice(bad_at[k], min(MAX_EXAMPLES, bad_at[k + 1] - bad_at[k])) for k in range(nf)]
    ex_all = pl.concat(ex_pos)
    ex_text = text.gather(ex_all).to_list() if len(ex_all) else []
    ex_at = list(accumulate((len(e) for e in ex_pos), initial=0))
    ex_num = ex_all.to_list()

    samples_of: list[pl.DataFrame]
    events_of: list[pl.DataFrame]
    if parts:
        samples = pl.concat(parts, how="diagonal_relaxed").sort("_pos") if len(parts) > 1 else parts[0]
        nodes = pl.Series([ctx.node for _, ctx in items], dtype=pl.String)
        paths = pl.Series([ctx.path for _, ctx in items], dtype=pl.String)
        samples = samples.with_columns(
            node=pl.lit(nodes).gather(pl.col("_f")),
            file=pl.lit(paths).gather(pl.col("_f")),
            source=pl.lit("nvidia-smi-dmon"),
            ts_quality=pl.when(pl.col("ts").is_not_null()).then(pl.lit("local_assumed_utc")).otherwise(pl.lit("none")),
            gpu_bus_id=pl.lit(None, dtype=pl.String),
        )
        events_of = F.transition_events_many(samples, nf)
        fcol = samples.get_column("_f")
        at = fcol.search_sorted(pl.Series(range(nf + 1), dtype=fcol.dtype)).to_list()
        conformed = F.conform_known(samples, "gpu_samples")
        empty = F.conform_table(pl.DataFrame(), "gpu_samples")
        samples_of = [conformed.slice(a, b - a) if b > a else empty.clone() for a, b in zip(at, at[1:])]
    else:
        events_of = [F.conform_table(pl.DataFrame(), "events") for _ in range(nf)]
        samples_of = [F.conform_table(pl.DataFrame(), "gpu_samples") for _ in range(nf)]
    out = []
    for k, (_lines, ctx) in enumerate(items):
        unrecognized = bad_at[k + 1] - bad_at[k]
        examples = [
            (ctx.first_line + p - starts[k], str(t)[:500])
            for p, t in zip(ex_num[ex_at[k] : ex_at[k + 1]], ex_text[ex_at[k] : ex_at[k + 1]], strict=True)
        ]
        out.append(
            ParseResult(
                tables={"gpu_samples": samples_of[k], "events": events_of[k]},
                parsed=sizes[k] - unrecognized - (blank_at[k + 1] - blank_at[k]),
                unrecognized=unrecognized,
                unrecognized_examples=examples,
            )
        )
    return out


def _hash_lines(text: pl.Series) -> pl.Series:
    """`text.str.starts_with("#")` of a column without nulls, as two comparisons: a line starts with '#' when
    it sorts between "#" and "$" (bytes compare as code points do; "#" is one byte, the next one "$"), ~3x
    cheaper than the prefix test (a 16 MB dmon range: ~1.6 -> ~0.5 ms)."""
    return (text >= "#") & (text < "$")


def _headers(text: pl.Series) -> tuple[pl.Series, pl.Series, dict[tuple[str, ...], int], list[int]]:
    """The header lines of `text`: their positions, those of the header and units lines together, the field
    lists (field list -> its number `sig`, in order of appearance) and each header's `sig`. dmon repeats its
    header every few rows: each distinct header text is split once."""
    hpos = _hash_lines(text).arg_true()
    htext = text.gather(hpos)
    is_h = htext.str.contains(HEADER_RE)
    is_u = htext.str.contains(UNITS_RE)
    sigs: dict[tuple[str, ...], int] = {}
    head_texts = htext.filter(is_h).to_list()
    sig_of_text = {
        t: sigs.setdefault(tuple(f.lower() for f in t.lstrip("#").split()), len(sigs))
        for t in dict.fromkeys(head_texts)
    }
    return hpos.filter(is_h), hpos.filter(is_h | is_u), sigs, [sig_of_text[t] for t in head_texts]
