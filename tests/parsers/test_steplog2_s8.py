# ruff: noqa: N806, E501  (the references verbatim)
"""steplog2's changes to step_log's row grouping give what the code they replace gives.

`_sort_frags` (a narrow frame gathered by one arg-sort; one key: no join for the key ranks), `_sort_rows`
(one key: no join) and `_grouped` (`one_run`: a frame of one key, its windows without the runs' bounds) are
compared with the code they replace, kept here verbatim (`_ref_*`), on random frames: one key or several, null
keys, repeated (key, line, seg) triples (ties), list columns or none, small and past the big-input threshold.
The whole `_rows` is also compared with the original by tests/parsers/test_steplog_s8.py (its `_ref_rows`).
"""

from __future__ import annotations

import random

import polars as pl
import pytest

from parsers import step_log as S  # noqa: N812

_LANE_MIN = S._LANE_MIN
_last_at = S._last_at
MERGE_GAP, ATTACH_GAP = S.MERGE_GAP, S.ATTACH_GAP


# ----------------------------------------------------------------------------- references (verbatim)


def _ref_grouped(f: pl.LazyFrame, over_key: bool) -> pl.LazyFrame:
    """`f` (fragments in (key, line, seg) order) with `group` (the fragments of one step row share it: a
    running count of the group starts), `orphan` and `_start` (see `_rows`). `over_key` false: the keys come
    in runs (the order above), and the per-key windows are worked out by the runs' starts instead (same
    values: the last anchor value above a fragment within its run)."""
    f = f.with_columns(
        attach_line=pl.coalesce(pl.col("attach_line"), pl.col("line")),
        standalone=pl.col("standalone").fill_null(False),
    )
    f = f.with_columns(
        a_step=pl.when(pl.col("anchor")).then(pl.col("step")),
        a_kind=pl.when(pl.col("anchor")).then(pl.col("kind")),
        a_line=pl.when(pl.col("anchor")).then(pl.col("line")),
        a_alone=pl.when(pl.col("anchor")).then(pl.col("standalone")),
    )
    prev_cols = ("a_step", "a_kind", "a_line", "a_alone")
    if over_key:
        prev = {f"prev_{c[2:]}": pl.col(c).shift(1).forward_fill().over("key") for c in prev_cols}
    else:
        # `x.shift(1).forward_fill().over("key")` on runs of keys: the last non-null `x` above the fragment,
        # when its position is in the fragment's run (at or after the run's first fragment), else null
        i = pl.int_range(pl.len(), dtype=pl.Int64)
        run_start = (i == 0) | pl.col("key").ne_missing(pl.col("key").shift(1))
        f = f.with_columns(
            _run=pl.when(run_start).then(i).forward_fill(),
            **{f"_at_{c}": _last_at(pl.col(c), i) for c in prev_cols},
        )
        above = {c: pl.col(c).forward_fill().shift(1) for c in prev_cols}
        within = {c: pl.col(f"_at_{c}") >= pl.col("_run") for c in prev_cols}
        prev = {f"prev_{c[2:]}": pl.when(within[c]).then(above[c]) for c in prev_cols}
    f = f.with_columns(
        **prev,
        prev_key=pl.col("key").shift(1),
        prev_attach=pl.col("attach_line").shift(1),
        prev_anchor=pl.col("anchor").shift(1),
    )
    # the same step twice: different grammars describing one step, or redraws of a progress bar
    redraw = pl.col("kind").is_in(["tqdm", "rich_bar"]) & (pl.col("kind") == pl.col("prev_kind"))
    same_step = (
        (pl.col("step") == pl.col("prev_step"))
        & ((pl.col("kind") != pl.col("prev_kind")) | redraw)
        & ((pl.col("line") - pl.col("prev_line")) <= MERGE_GAP)
        & ~pl.col("prev_alone").fill_null(True)
    ).fill_null(False)
    attached = (
        pl.col("prev_line").is_not_null()
        & ((pl.col("attach_line") - pl.col("prev_line")) <= ATTACH_GAP)
        & ~pl.col("prev_alone").fill_null(True)
    ).fill_null(False)
    # an orphan (breakdown without an anchor above it) starts a group unless it continues the same block
    orphan_start = ~attached & (
        pl.col("prev_anchor").fill_null(True) | (pl.col("attach_line") != pl.col("prev_attach")).fill_null(True)
    )
    start = (
        (pl.col("key") != pl.col("prev_key")).fill_null(True)
        | (pl.col("anchor") & (pl.col("standalone") | ~same_step))
        | (~pl.col("anchor") & orphan_start)
    )
    return f.with_columns(group=start.cum_sum(), orphan=~pl.col("anchor") & ~attached, _start=start)


def _ref_sort_rows(rows: pl.DataFrame) -> pl.DataFrame:
    """`rows.sort("group").sort("key", "line", maintain_order=True)` (`group` distinct: one order only, that
    of (key, line, group)); by one packed integer key where the key ranks, lines and groups fit in 62 bits."""
    line, group = pl.col("line"), pl.col("group")
    if rows.height < 2:
        return rows.sort("group").sort("key", "line", maintain_order=True)
    st = rows.select(
        n=pl.col("key").null_count() + line.null_count() + group.null_count(),
        lo=line.min(),
        hl=line.max(),
        hg=group.max(),
    ).row(0, named=True)
    keys = rows.get_column("key").unique().sort()
    kb, lb = (keys.len() - 1).bit_length(), int(st["hl"] or 0).bit_length()
    gb = int(st["hg"] or 0).bit_length()
    if st["n"] or st["lo"] < 0 or kb + lb + gb > 62:
        return rows.sort("group").sort("key", "line", maintain_order=True)
    rank = pl.DataFrame({"key": keys, "_kr": pl.int_range(keys.len(), eager=True, dtype=pl.Int64)})
    packed = (
        rows.select("key", "line", "group")
        .join(rank, on="key", how="left", maintain_order="left")
        .select((pl.col("_kr") * (1 << (lb + gb))) + (line * (1 << gb)) + group.cast(pl.Int64))
        .to_series()
    )
    if bool((packed.diff().drop_nulls() > 0).all()):  # (in that order already)
        return rows.rechunk()
    return rows.with_columns(_sk=packed).sort("_sk").drop("_sk")


def _ref_sort_frags(frags: pl.DataFrame) -> pl.DataFrame:
    """`frags.sort("key", "line", "seg")`; on many fragments whose (key, line, seg) are all distinct (one order
    only), by one integer sort key: the key's rank among the distinct keys, the line and the segment packed in
    63 bits (a sort by the three columns costs several times more)."""
    if frags.height < _LANE_MIN:
        return frags.sort("key", "line", "seg", maintain_order=True)
    line, seg = pl.col("line"), pl.col("seg")
    st = frags.select(
        n=pl.col("key").null_count() + line.null_count() + seg.null_count(),
        lo=pl.min_horizontal(line.min(), seg.min()),
        hl=line.max(),
        hs=seg.max(),
    ).row(0, named=True)
    keys = frags.get_column("key").unique().sort()
    if st["n"] or st["lo"] < 0 or st["hl"] >= 1 << 36 or st["hs"] >= 1 << 16 or keys.len() >= 1 << 11:
        return frags.sort("key", "line", "seg", maintain_order=True)
    rank = pl.DataFrame({"key": keys, "_kr": pl.int_range(keys.len(), eager=True, dtype=pl.Int64)})
    packed = (
        frags.select("key", "line", "seg")
        .join(rank, on="key", how="left", maintain_order="left")
        .select((pl.col("_kr") * (1 << 52)) + (line * (1 << 16)) + seg)
        .to_series()
    )
    if not bool((packed.sort().diff().drop_nulls() > 0).all()):  # (a repeated triple: ties)
        return frags.sort("key", "line", "seg", maintain_order=True)
    # (the frame's own sort: a gather by index is slow on the list-of-struct timers)
    return frags.with_columns(_sk=packed).sort("_sk").drop("_sk")



_Batch, FileContext, g, numbered, _rx = S._Batch, S.FileContext, S.g, S.numbered, S._rx


def _ref_segments(
    lines: pl.Series, ctx: FileContext, batch: _Batch | None = None, numbers: pl.Series | None = None
) -> tuple[pl.DataFrame, pl.DataFrame, dict[str, bool], bool, pl.Expr]:
    """What both preparations start with: the numbered lines, their `\\r` segments (`seg`), which cleaning
    and prefix steps can change any line (`on`), whether ANSI codes are removed from inside lines (`dirty`),
    and the text with them removed (`clean`).

    Cheap checks skip the steps that cannot change any line (same result, fewer passes and collects). The
    literal checks run once over the raw lines: every later step works on a suffix of the raw line (prefixes
    stripped) unless ANSI codes are removed from its middle (`dirty`: then every step runs). The anchored
    prefixes are checked where they are stripped, on the text they are stripped from.
    """
    if numbers is not None:  # (lines of a file with others left out between them, see `_titan_lane`)
        frame = pl.DataFrame({"line": numbers.cast(pl.Int64, strict=False), "text": lines.cast(pl.String)})
    else:
        frame = numbered(lines, ctx) if batch is None else batch.frame
    seg = frame
    if frame.height and bool(frame.get_column("text").str.contains("\r", literal=True).any()):
        # segment numbers exploded with the segments (what a window `int_range().over("line")` gave, cheaper)
        parts = pl.col("text").str.split("\r")
        seg = frame.with_columns(parts, seg=pl.int_ranges(0, parts.list.len(), dtype=pl.Int64))
        seg = seg.explode("text", "seg")
    else:
        seg = seg.with_columns(seg=pl.lit(0, dtype=pl.Int64))
    text = pl.col("text")
    flags = seg.select(
        esc=text.str.contains("\x1b", literal=True).any(),
        pasted=text.str.contains(_rx(g.ANSI_PASTED_RE)).any(),
        banner=text.str.contains("global rank", literal=True).any(),
        msg=text.str.contains("[Rank ", literal=True).any(),
        mllog=text.str.contains(":::MLLOG", literal=True).any(),
    ).row(0, named=True)
    dirty = bool(flags["esc"] or flags["pasted"])
    on = {k: bool(v) or dirty for k, v in flags.items()}
    clean = text.str.replace_all(_rx(g.ANSI_RE), "") if flags["esc"] else text
    if dirty:
        pasted = clean.str.contains(_rx(g.ANSI_PASTED_RE))
        clean = pl.when(pasted).then(clean.str.replace_all(_rx(g.ANSI_PASTED_RE), "")).otherwise(clean)
    return frame, seg, on, dirty, clean



_strip_passes, _ENV_STACK = S._strip_passes, S._ENV_STACK


def _ref_strip_envelopes(seg: pl.DataFrame) -> pl.DataFrame:
    """`_strip_passes(seg)`, with the rank and host worked out once per distinct prefix (and, on big inputs
    that have one, column `_key`: the stream key of that rank and host, see `_prepare`).

    One capture-free replace strips the stack of envelopes from each line that opens with one (the passes
    strip the leftmost-first match of the alternation up to three times, which is the greedy `{1,3}` of
    it: nothing after a match constrains it). The stripped prefixes are few (one per launcher rank or
    host); the passes run on them alone (envelopes hold no anchors but `^`, so a prefix alone is stripped
    as it was in its line) and their rank and host are mapped back to the lines.
    """
    if seg.height < _LANE_MIN:
        return _strip_passes(seg)
    rest = seg.get_column("rest")
    prefix = rest.str.extract(_rx(_ENV_STACK), 0)  # (null where no envelope opens the line)
    if prefix.null_count() == seg.height:
        return seg.with_columns(env_rank=pl.lit(None, dtype=pl.Int32), host=pl.lit(None, dtype=pl.String))
    uniq = prefix.drop_nulls().unique(maintain_order=True)
    meta = _strip_passes(pl.DataFrame({"rest": uniq}))
    if not (meta.get_column("rest") == "").all():  # (cannot happen; the passes, line by line, decide then)
        return _strip_passes(seg)
    # (`_key`: the stream key `_prepare` builds from the host and envelope rank, per distinct prefix too)
    keys = meta.select(
        pl.concat_str(
            [pl.col("host").fill_null(""), pl.col("env_rank").cast(pl.String).fill_null("")], separator="|"
        )
    ).to_series()
    # the rank, host and key of each line's prefix by one join (the prefixes in `uniq` are distinct; a line
    # without one matches none and gets nulls, the key `|`)
    table = pl.DataFrame(
        {
            "_p": uniq,
            "env_rank": meta.get_column("env_rank").cast(pl.Int32, strict=False),
            "host": meta.get_column("host").cast(pl.String),
            "_key": keys,
        }
    )
    got = pl.DataFrame({"_p": prefix}).join(table, on="_p", how="left", maintain_order="left")
    return seg.with_columns(
        rest=pl.col("rest").str.slice(prefix.str.len_chars().fill_null(0)),
        env_rank=got.get_column("env_rank"),
        host=got.get_column("host"),
        _key=got.get_column("_key").fill_null("|"),
    )


# ----------------------------------------------------------------------------- inputs


def _frame(rnd: random.Random, n: int, n_keys: int, ties: bool, nulls: bool, timers: bool) -> pl.DataFrame:
    keys = [f"h{k}|{k}" for k in range(n_keys)]
    key = [rnd.choice(keys) for _ in range(n)]
    if nulls:
        key[rnd.randrange(n)] = None
    line = rnd.sample(range(3 * n), n) if not ties else [rnd.randrange(n // 3 + 1) for _ in range(n)]
    seg = [rnd.randrange(3) if ties else 0 for _ in range(n)]
    kinds = ["tqdm", "hf_dict", "timer_line", None]
    df = pl.DataFrame(
        {
            "key": key,
            "line": line,
            "seg": seg,
            "kind": [rnd.choice(kinds) for _ in range(n)],
            "step": [rnd.choice([None, *range(1, 6)]) for _ in range(n)],
            "anchor": [rnd.random() < 0.7 for _ in range(n)],
            "standalone": [rnd.choice([None, False, False, True]) for _ in range(n)],
            "attach_line": [rnd.choice([None, rnd.randrange(3 * n)]) for _ in range(n)],
            "loss": [rnd.choice([None, 1.5]) for _ in range(n)],
        },
        schema_overrides={"line": pl.Int64, "seg": pl.Int64, "step": pl.Int64, "attach_line": pl.Int64},
    ).with_row_index("_i")
    if timers:
        df = df.with_columns(
            timers=pl.Series([[{"name": "a", "ms": float(i)}] if i % 3 else None for i in range(n)])
        )
    return df


_CASES = [
    (n, n_keys, ties, nulls, timers)
    for n in (50, _LANE_MIN + 37)
    for n_keys in (1, 3)
    for ties in (False, True)
    for nulls in (False, True)
    for timers in (False, True)
]


@pytest.mark.parametrize(("n", "n_keys", "ties", "nulls", "timers"), _CASES)
def test_sort_frags(n: int, n_keys: int, ties: bool, nulls: bool, timers: bool) -> None:
    rnd = random.Random(n * 7 + n_keys + 2 * ties + 4 * nulls + 8 * timers)
    df = _frame(rnd, n, n_keys, ties, nulls, timers)
    got, want = S._sort_frags(df), _ref_sort_frags(df)
    assert got.schema == want.schema and got.equals(want, null_equal=True)


@pytest.mark.parametrize(("n", "n_keys", "nulls"), [(n, k, z) for n in (50, 5000) for k in (1, 3) for z in (False, True)])
def test_sort_rows(n: int, n_keys: int, nulls: bool) -> None:
    rnd = random.Random(n + n_keys + nulls)
    df = _frame(rnd, n, n_keys, False, nulls, True)
    df = df.with_columns(group=pl.Series(rnd.sample(range(1, 4 * n), n), dtype=pl.UInt32))
    got, want = S._sort_rows(df), _ref_sort_rows(df)
    assert got.schema == want.schema and got.equals(want, null_equal=True)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("n", [40, _LANE_MIN + 11])
def test_grouped_one_run(seed: int, n: int) -> None:
    rnd = random.Random(seed * 1000 + n)
    df = _ref_sort_frags(_frame(rnd, n, 1, seed % 2 == 1, False, False)).drop("_i")
    got = S._grouped(df.lazy(), over_key=False, one_run=True).collect()
    want = _ref_grouped(df.lazy(), over_key=False).collect()
    # (the runs' helper columns, which no caller reads, are not made)
    assert set(want.columns) - set(got.columns) == {"_run", *(f"_at_a_{c}" for c in ("step", "kind", "line", "alone"))}
    want = want.select(got.columns)
    assert got.schema == want.schema and got.equals(want, null_equal=True)
    other = S._grouped(df.lazy(), over_key=False, one_run=False).collect().select(got.columns)
    assert other.equals(want, null_equal=True)


def test_rows_many_fragments_one_and_more_keys() -> None:
    """`_rows` on many fragments (`_rows_gathered`) against the original `_rows` of test_steplog_s8."""
    from tests.parsers.test_steplog_s8 import _ref_rows

    rnd = random.Random(5)
    for n_keys in (1, 2):
        n = _LANE_MIN + 200
        df = _frame(rnd, n, n_keys, False, False, False).drop("_i")
        frags = pl.DataFrame(
            {c: pl.Series(c, [None] * n, dtype=t) for c, t in S._FRAG.items()}
        ).with_columns(
            key=df.get_column("key"),
            line=df.get_column("line"),
            seg=df.get_column("seg"),
            kind=df.get_column("kind").fill_null("tqdm"),
            step=df.get_column("step"),
            anchor=df.get_column("anchor"),
            standalone=df.get_column("standalone"),
            attach_line=df.get_column("attach_line"),
            loss=df.get_column("loss"),
            prio=pl.lit(3, dtype=pl.Int32),
        )
        got, want = S._rows(frags), _ref_rows(frags)
        assert got.schema == want.schema and got.equals(want, null_equal=True)


@pytest.mark.parametrize("n_keys", [1, 3])
@pytest.mark.parametrize("n_fw", [1, 2])
def test_sort_stable(n_keys: int, n_fw: int) -> None:
    """`_sort_stable` (one string value: rank 0 without a join) is the stable sort it stands for."""
    rnd = random.Random(n_keys * 10 + n_fw)
    n = _LANE_MIN + 123
    df = pl.DataFrame(
        {
            "key": [f"|{rnd.randrange(n_keys)}" for _ in range(n)],
            "framework": [["hf-trainer", "tqdm"][rnd.randrange(n_fw)] for _ in range(n)],
            "line": [rnd.randrange(n // 2) for _ in range(n)],
            "v": list(range(n)),
        }
    )
    got = S._sort_stable(df, ("key", "framework", "line"))
    want = df.sort("key", "framework", "line", maintain_order=True)
    assert got.schema == want.schema and got.equals(want)
    ordered = want.with_columns(v=pl.int_range(n, dtype=pl.Int64))
    assert S._sort_stable(ordered, ("key", "framework", "line")).equals(ordered)


_PIECES = ["\r", "\r", "[32m", "[0", ";1m", "\x1b[0m", "global rank", "global", " rank", "[Rank ", ":::MLLOG",
           ":::ML", "LOG", " 50%|#####     | 5/10 [00:01<00:01, 2.00it/s]", "{'loss': 1.0}", "x", " ", "7", ""]


@pytest.mark.parametrize("seed", range(40))
def test_segments_flags(seed: int) -> None:
    """`_segments` with its flags read off the lines (not the segments) gives what the old one gives."""
    rnd = random.Random(seed)
    n = rnd.choice([1, 5, 50])
    lines = ["".join(rnd.choice(_PIECES) for _ in range(rnd.randrange(8))) for _ in range(n)]
    if seed % 5 == 0:
        lines = [ln.replace("\r", "") for ln in lines]
    ser = pl.Series("line", lines, dtype=pl.String)
    ctx = S.FileContext(path="n1/train.log", node="n1", year_hint=2025)
    got, want = S._segments(ser, ctx), _ref_segments(ser, ctx)
    for a, b in zip(got[:2], want[:2]):
        assert a.schema == b.schema and a.equals(b, null_equal=True)
    assert got[2:4] == want[2:4]
    assert got[1].select(got[4]).equals(want[1].select(want[4]), null_equal=True)


_ENVS = ["gpu-node-343: ", "[rank3]:", "3: [default1]:", "node7: [rank0]:", "[default0]:", "12: ", ""]


@pytest.mark.parametrize("share", [0.0, 0.001, 0.05, 0.3, 1.0])
def test_strip_envelopes(share: float) -> None:
    """`_strip_envelopes` (few lines with an envelope: only those cut and joined) gives what the old one gives."""
    rnd = random.Random(int(share * 1000))
    n = _LANE_MIN + 77
    rest = [
        (rnd.choice(_ENVS[:-1]) + rnd.choice(_ENVS) if rnd.random() < share else "")
        + rnd.choice([" 50%|#####     | 5/10 [00:01<00:01, 2.00it/s]", "{'loss': 1.0}", "", "x: y", "é 1"])
        for _ in range(n)
    ]
    seg = pl.DataFrame({"line": range(n), "rest": rest}, schema_overrides={"line": pl.Int64})
    got, want = S._strip_envelopes(seg), _ref_strip_envelopes(seg)
    assert got.schema == want.schema and got.equals(want, null_equal=True)


def _bar_lines(rnd: random.Random, n: int, hosts: list[str]) -> list[str]:
    out = []
    for i in range(n):
        host = rnd.choice(hosts)
        r = rnd.random()
        if r < 0.1:  # an evaluation bar, another total, blank description
            total, s, desc = 250, rnd.randrange(0, 251), ""
        elif r < 0.15:
            total, s, desc = 40, rnd.randrange(0, 41), rnd.choice(["Epoch 1: ", "Map: ", "x "])
        elif r < 0.17:
            out.append(host + "{'loss': 1.5, 'grad_norm': 2.0, 'epoch': 0.5}")
            continue
        else:
            total, s, desc = 3000 + (r > 0.98), i, rnd.choice(["", "", " "])
        pct = 100 * s // total
        out.append(
            host + "\r".join(
                f"{desc}{pct:3d}%|{'#' * (pct // 10):10s}| {s + k}/{total} [01:{(s + k) % 60:02d}<02:00, {rnd.uniform(1, 2):.2f}s/it]"
                for k in range(rnd.choice([1, 1, 3]))
            )
        )
    return out


@pytest.mark.parametrize("hosts", [[""], ["worker-1: "], ["worker-1: ", "worker-2: "], ["", "worker-2: "]])
@pytest.mark.parametrize("seed", range(3))
def test_unlabelled_bars(hosts: list[str], seed: int) -> None:
    """`_bar_fragments` without a `Total optimization steps` line on many bars (`_unlabelled_bars`) gives
    what the reference (tests/parsers/_steplog_s8_ref.py, verbatim) gives."""
    from parsers.base import FileContext
    from tests.parsers import _steplog_s8_ref as R  # noqa: N812

    rnd = random.Random(seed)
    lines = _bar_lines(rnd, _LANE_MIN + 500, hosts)
    if seed == 2:
        lines = ["", *lines[:100], "not a bar |%| x", *lines[100:]]
    ser = pl.Series("line", lines, dtype=pl.String)
    ctx = FileContext(path="n1/train.log", node="n1", year_hint=2025)
    with S.ascii_scope(S.is_ascii(ser)):
        _, seg = S._prepare(ser, ctx)
        present = S._present(seg)
        got, want = S._bar_fragments(seg, present), R._bar_fragments(seg, present)
    assert len(got[0]) == len(want[0]) and got[0]
    for a, b in zip(got[0], want[0]):
        assert a.schema == b.schema and a.equals(b, null_equal=True)
    assert got[1].equals(want[1])


def test_tqdm_tail_start() -> None:
    """The canonical tail test without its `.*$` (and no newline) is the test with it."""
    rnd = random.Random(3)
    parts = [" ", "12", "/", "300", "[", "01:02", "<", "-", "?", ",", " 1.5", "s/it", "it/s", "]", "\n", "\r", "x", "é"]
    texts = [" 5/10 [00:01<00:02, 2.00it/s]", " 5/10 [00:01<-1:00, 2.00it/s]\n", " 5/10 [00:01<00:02, ?it/s]x\ny"]
    texts += ["".join(rnd.choice(parts) for _ in range(rnd.randrange(14))) for _ in range(3000)]
    t = pl.Series(texts)
    with S.ascii_scope(False):
        got = t.str.contains(S._rx(S._TQDM_TAIL_START)) & ~t.str.contains("\n", literal=True)
        want = t.str.contains(S._rx(S._TQDM_CANON_TAIL))
    assert got.equals(want) and want.sum() > 0
