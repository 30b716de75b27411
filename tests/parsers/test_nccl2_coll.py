# ruff: noqa: E501  (the reference is kept verbatim)
"""`nccl._strict_coll` cutting the COLL messages by bytes (binary slices) gives what the character slices gave
(the old code, kept verbatim below): on random fast-lane rows (ASCII and not, odd ops, middles and tails,
non-ASCII characters anywhere in the message, other levels, no space after the level), on the rows the fast
lane takes from every fixture and real log, and (ASCII regex classes) under `ascii_scope`."""

from __future__ import annotations

from pathlib import Path

import polars as pl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from parsers import _common, nccl
from parsers._common import arx
from parsers.base import FileContext

FIX = Path(__file__).parent.parent / "fixtures"
REAL = Path("/work/shared/real-logs")


def _strict_coll_ref(rows: pl.DataFrame) -> tuple[pl.DataFrame, pl.Series]:
    """The `_COLL_FAST` lines among fast-lane `rows` (line, text, hc, level, msg_off), aggregated per (head,
    op, tail `count … [nranks=N] [stream S]`), and the per-row mask of those lines.

    A message is cut at its first `: opCount ` and its first ` count `: the op before (letters only: checked
    once per group), the middle (opCount, buffers: `_COLL_MID`, checked per line) and the tail after (few
    distinct ones: `_COLL_TAIL` once per group); the message matches `_COLL_FAST` exactly when all three do.
    Offsets are bytes and slices characters: the line up to the message is ASCII (`_FAST_HEAD`), and a
    non-ASCII character before the tail fails the op or middle check, so the cuts agree whenever all pass.
    Groups: hc, op, comm, root, calls, first_line, line, first_msg, last_msg (`_COLL_GROUPS`)."""
    text = pl.col("text")
    off = pl.col("msg_off")
    info = rows.get_column("level") == "INFO"
    c = rows.select(
        oc=pl.when(pl.lit(info)).then(text.str.find(": opCount ", literal=True))
    ).get_column("oc")
    cand = (c >= rows.get_column("msg_off")).fill_null(False)
    if not cand.any():
        return nccl._empty_coll(), cand
    oc, d = pl.col("oc"), pl.col("d")
    # (one filter: the lines with `: opCount ` in the message and ` count ` 10+ characters after it)
    cf = (
        rows.with_columns(
            oc=c, _i=pl.int_range(pl.len(), dtype=pl.UInt32), d=text.str.find(" count ", literal=True)
        )
        .filter(pl.lit(cand) & (d > oc + 9).fill_null(False))
        .select(
            "_i",
            "line",
            "hc",
            "msg_off",
            op=text.str.slice(off, oc - off),
            tail=text.str.slice(d + 1),
            ok=text.str.slice(oc + 10, d - oc - 10).str.contains(arx(nccl._COLL_MID)),
        )
    )
    groups = (
        cf.group_by("hc", "op", "tail", "ok")
        .agg(
            calls=pl.len(),
            first_line=pl.col("line").first(),
            line=pl.col("line").last(),
            _if=pl.col("_i").first(),
            _il=pl.col("_i").last(),
            msg_off=pl.col("msg_off").first(),
        )
        .with_columns(g=pl.col("tail").str.extract_groups(arx(nccl._COLL_TAIL)))
        .with_columns(
            good=pl.col("ok")
            & pl.col("op").str.contains(arx(r"^[A-Za-z]+$"))
            & pl.col("g").struct.field("comm").is_not_null()
        )
    )
    good = groups.get_column("good")
    if not good.any():
        return nccl._empty_coll(), pl.repeat(False, rows.height, dtype=pl.Boolean, eager=True).alias("strict")
    if good.all():
        pos = cf.get_column("_i")
    else:
        bad = groups.filter(~pl.col("good")).select("hc", "op", "tail", "ok")
        pos = cf.join(bad, on=["hc", "op", "tail", "ok"], how="anti").get_column("_i")
    strict = pl.repeat(False, rows.height, dtype=pl.Boolean, eager=True).alias("strict").scatter(pos, True)
    groups = groups.filter(pl.col("good"))
    texts = rows.get_column("text")
    ends = pl.DataFrame(
        {"_f": texts.gather(groups.get_column("_if")), "_l": texts.gather(groups.get_column("_il"))}
    )
    coll = groups.hstack(ends).select(
        "hc",
        "op",
        comm=pl.col("g").struct.field("comm"),
        root=pl.col("g").struct.field("root"),
        calls=pl.col("calls").cast(pl.UInt32),
        first_line="first_line",
        line="line",
        first_msg=pl.col("_f").str.slice(pl.col("msg_off")),
        last_msg=pl.col("_l").str.slice(pl.col("msg_off")),
    )
    return coll, strict



_KEYS = ["hc", "op", "comm", "root", "first_line"]


def _same(rows: pl.DataFrame) -> None:
    for asc in (False, True) if _common.is_ascii(rows.get_column("text")) else (False,):
        with _common.ascii_scope(asc):
            got, gs = nccl._strict_coll(rows)
            want, ws = _strict_coll_ref(rows)
        assert gs.to_list() == ws.to_list()
        assert got.schema == want.schema
        assert got.sort(_KEYS).equals(want.sort(_KEYS))


_OPS = ["AllReduce", "AllGather", "Broadcast", "ReduceScatter", "Send", "Recv", "All_Reduce", "Allé", "ß", ""]
_MIDS = [
    "75 sendbuff 0x7f2d289344f8 recvbuff 0x7f42a530fbe3",
    "4b sendbuff (nil) recvbuff 0x7f9192b05e12",
    "1 sendbuff 0x1 recvbuff (nil)",
    "7g sendbuff 0x1 recvbuff 0x2",
    "é sendbuff 0x1 recvbuff 0x2",
    "12 sendbuff 0x1 recvbuff 0x2 ü",
    "12 sendbuff 0x1  recvbuff 0x2",
    "",
]
_TAILS = [
    "count 16777216 datatype 7 op 0 root 0 comm 0x55d0ebc650a8 [nranks=8] stream 0x55d0f00170",
    "count 1048576 datatype 9 op 0 root 2 comm 0x55d125acbae4 [nranks=4] stream 0x55d0f0018000",
    "count 1048576 datatype 9 op 0 root 2 comm 0x55d125acbae4 [nranks=4]",
    "count 1 datatype 9 op 0 root -1 comm 0x5 [nranks=4] stream (nil)",
    "count 1 datatype 9 op 0 root 0 comm 0x5 [nranks=4] stream ö",
    "count 1 datatype 9 op 0 root 0 comm 0xé [nranks=4]",
    "count x",
]
_HEADS = ["gpu-a27:936215:936215 [0]", " 3: h:1:2 [7] 12.5 enqueue.cc:100 (func)", "n:1:1 [1]"]


@st.composite
def _rows(draw: st.DrawFn) -> pl.DataFrame:
    n = draw(st.integers(1, 40))
    recs = []
    for i in range(n):
        hc = draw(st.integers(0, len(_HEADS) - 1))
        level = draw(st.sampled_from(["INFO", "INFO", "INFO", "WARN"]))
        sp = draw(st.sampled_from([" ", " ", " ", ""]))
        if draw(st.integers(0, 9)) == 0:
            msg = draw(st.text(alphabet="AlRduce: opCount sendbuf0x12 recvnil() tamp[]=é", max_size=60))
        else:
            msg = draw(st.sampled_from(_OPS)) + ": opCount " + draw(st.sampled_from(_MIDS)) + " " + draw(st.sampled_from(_TAILS))
            if draw(st.integers(0, 9)) == 0:
                k = draw(st.integers(0, len(msg)))
                msg = msg[:k] + draw(st.sampled_from(["é", " count ", ": opCount ", "x", "€"])) + msg[k:]
        pre = _HEADS[hc] + " NCCL " + level + sp
        recs.append({"line": 10 + i, "text": pre + msg, "hc": hc, "level": level, "msg_off": len(pre)})
    return pl.DataFrame(recs, schema={"line": pl.Int64, "text": pl.String, "hc": pl.UInt32, "level": pl.String, "msg_off": pl.Int64})


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_rows())
def test_strict_coll_same_on_random_rows(rows: pl.DataFrame) -> None:
    _same(rows)


def test_strict_coll_same_on_fixtures_and_real_logs(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    seen: list[pl.DataFrame] = []
    orig = nccl._strict_coll

    def spy(rows: pl.DataFrame) -> tuple[pl.DataFrame, pl.Series]:
        seen.append(rows)
        return orig(rows)

    monkeypatch.setattr(nccl, "_strict_coll", spy)
    files = [p for d in (FIX, REAL) if d.exists() for p in sorted(d.rglob("*")) if p.is_file() and p.stat().st_size < 5_000_000]
    for p in files:
        try:
            text = p.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if " NCCL " not in text:
            continue
        nccl.family_rows(pl.Series(text.split("\n")), FileContext(path=p.name, node="n"))
    monkeypatch.setattr(nccl, "_strict_coll", orig)
    assert any(r.height for r in seen)
    for rows in seen:
        _same(rows)
