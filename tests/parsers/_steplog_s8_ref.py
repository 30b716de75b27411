"""The step-log functions the eighth performance round replaced, verbatim (references for test_steplog_s8):
they run with `parsers.step_log`'s names (helpers, constants) as their globals."""

# ruff: noqa: E501, F821, C901, N806, N812

from __future__ import annotations

import polars as pl

from parsers import step_log as _S

globals().update({k: v for k, v in vars(_S).items() if not k.startswith("__")})


def _tqdm_match(seg: pl.DataFrame) -> pl.DataFrame:
    """`_match(seg, g.TQDM_RE, …)` with the groups the bar fragments read (desc, n, total, rate, unit,
    post).

    Split lane for `_TQDM_CANON` bars: there the lazy `desc` of `TQDM_RE` ends at the first digit (it holds
    none), the percentage and bar end at the first two `|`, `n`/`total` lie around the next `/` and end at the
    `[`, the rate follows the first `,` (the times hold none) and ends at the unit, its first `s` or `i`;
    `post` is the rest. Other bars take the regex.
    """
    txt = pl.col("text")
    if seg.height < _LANE_MIN:  # (every group of the regex, as before)
        return _match(seg, g.TQDM_RE, txt.str.contains("%|", literal=True))
    bars = seg.filter(txt.str.contains("%|", literal=True))
    # one split at the first two `|` (`_TQDM_CANON` is the part before them, any text without `|` between
    # them, and the part after: the regexes of the parts skip the bar's many block characters); in the rest
    # (ASCII up to the unit, so byte offsets are character offsets) the fields are cut at the offsets of
    # `/`, `[`, `,` and the unit
    cut = bars.select(_s=txt.str.splitn("|", 3)).unnest("_s")
    canon = cut.select(
        (
            pl.col("field_0").str.contains(_rx(_TQDM_CANON_HEAD))
            & pl.col("field_2").str.contains(_rx(_TQDM_CANON_TAIL))
        )
        .fill_null(False)
    ).to_series()
    n_canon = int(canon.sum())
    fast = bars.filter(canon) if n_canon < bars.height else bars
    cut = cut.filter(canon) if n_canon < bars.height else cut
    parts = cut.select(
        _d=pl.col("field_0").str.strip_suffix("%").str.strip_chars_end("0123456789"),
        _r=pl.col("field_2"),
    )
    r = pl.col("_r")
    parts = parts.with_columns(
        _sl=r.str.find("/", literal=True),
        _lb=r.str.find("[", literal=True),
        _c=r.str.find(",", literal=True),
        _at=r.str.find(_rx("[si]")),
    )
    sl, lb, c, at = pl.col("_sl"), pl.col("_lb"), pl.col("_c"), pl.col("_at")
    # (a negative remaining time: the character after the first `<`, which the rate's bars hold a digit,
    # `:`, `?` or `,` at)
    neg = r.str.slice(r.str.find("<", literal=True) + 1, 1) == "-"
    fast = pl.concat([fast, parts], how="horizontal").with_columns(
        m=pl.struct(
            desc="_d",
            n=r.str.slice(0, sl).str.strip_chars(),
            total=r.str.slice(sl + 1, lb - sl - 1).str.strip_chars(),
            rate=pl.when(~neg).then(r.str.slice(c + 1, at - c - 1).str.strip_chars()),
            unit=pl.when(~neg).then(r.str.slice(at, 4)),
            post=pl.when(neg).then(r.str.slice(r.str.find("<", literal=True) + 1)).otherwise(r.str.slice(at + 4)),
        )
    ).drop("_d", "_r", "_sl", "_lb", "_c", "_at")
    if n_canon == bars.height:
        return fast
    slow = _match(bars.filter(~canon), g.TQDM_RE)
    slow = slow.with_columns(m=pl.struct(*(pl.col("m").struct.field(f) for f in _TQDM_FIELDS.to_schema())))
    return pl.concat([fast, slow]).sort("line", "seg")


def _bar_fragments(
    seg: pl.DataFrame, present: frozenset[str], batch: _Batch | None = None
) -> tuple[list[pl.DataFrame], pl.DataFrame]:
    """tqdm and rich progress bars; returns (fragments, lines understood). (`batch`: the lines of several
    files, see `parse_many`: a file's `Total optimization steps` select its own bars.)"""
    out: list[pl.DataFrame] = []
    txt = pl.col("text")
    m = _tqdm_match(seg) if "%|" in present else seg.clear()
    seen = [m.select("line")]
    if m.height:
        totals = seg.filter(txt.str.contains("Total optimization steps = ", literal=True)).select(
            "line",
            n=txt.str.extract(_rx(g.HF_TOTAL_STEPS_RE), 1)
            .str.replace_all(",", "")
            .cast(pl.Int64, strict=False),
        )
        hf_total = totals.get_column("n").drop_nulls()
        by_file = batch is not None and hf_total.len() > 0
        if by_file:  # (`parse_many`: each file's bars are checked against its own totals, if it has any)
            assert batch is not None
            fi = batch.file_of(pl.col("line"))
            pairs = totals.filter(pl.col("n").is_not_null()).select(
                fi=fi, p=pl.concat_str(fi.cast(pl.String), pl.lit(":"), pl.col("n").cast(pl.String))
            )
            with_total = pairs.get_column("fi").unique().implode()
            in_file_total = ~fi.is_in(with_total) | pl.concat_str(
                fi.cast(pl.String), pl.lit(":"), _f("total").cast(pl.Int64, strict=False).cast(pl.String)
            ).is_in(pairs.get_column("p").implode())
        desc = _f("desc")
        post = _f("post")
        k = {name: _key(post, pat) for name, pat in g.TQDM_POST_KEYS.items()}
        tt = desc.str.extract_groups(_rx(g.TORCHTUNE_DESC_RE))
        rate = _num(_f("rate"))
        it_s = pl.when(_f("unit").str.starts_with("s")).then(1.0 / rate).otherwise(rate)
        # a rate in other units (`examples/s`, `B/s`) marks a data bar, not a training loop
        units_ok = _f("unit").is_not_null() | _f("rate").is_null()
        keep = (_f("n").cast(pl.Int64, strict=False) > 0) & ~desc.str.contains(_rx(g.EVAL_DESC_RE)) & units_ok
        if by_file:
            keep = keep & in_file_total
        elif hf_total.len() > 0:
            keep = keep & _f("total").cast(pl.Int64, strict=False).is_in(hf_total.implode())
        bars = m.filter(keep)
        if (hf_total.len() == 0 or by_file) and bars.height:
            # unlabelled bars of several lengths (HF evaluation inside training): keep the stream's main loop,
            # the total with the most distinct positions
            bars = bars.with_columns(
                _total=_f("total").cast(pl.Int64, strict=False),
                _n=_f("n").cast(pl.Int64, strict=False),
                _blank=desc.str.strip_chars() == "",
            )
            best = (
                bars.filter(pl.col("_blank") & ~fi.is_in(with_total) if by_file else pl.col("_blank"))
                .group_by("key", "_total")
                .agg(_k=pl.col("_n").n_unique())
                .sort("_k", "_total", descending=True)
                .group_by("key", maintain_order=True)
                .agg(_best=pl.col("_total").first())
            )
            bars = (
                bars.join(best, on="key", how="left")
                .filter(~pl.col("_blank") | pl.col("_best").is_null() | (pl.col("_total") == pl.col("_best")))
                .drop("_total", "_n", "_blank", "_best")
            )
        if bars.height:
            # values read off the description and the postfix (regexes), each a function of that text alone
            dv = {
                "_tt_has": tt.struct.field("step").is_not_null(),
                "_tt_step": tt.struct.field("step").cast(pl.Int64, strict=False),
                "_tt_loss": _num(tt.struct.field("loss")),
                "_tt_epoch": _num(tt.struct.field("epoch")),
                "_ep_hit": desc.str.contains(_rx(r"Epoch \d+")),
                "_ep": _num(desc.str.extract(_rx(r"Epoch (\d+)"), 1)),
            }
            if bars.height < _LANE_MIN:
                v = dv | {f"_k_{name}": e for name, e in k.items()}
            else:  # worked out once per distinct description and postfix (a few per file), joined to the bars
                bars = bars.with_columns(_desc=desc, _post=post)
                # (the expressions read `m`'s struct: the distinct texts are put back in one)
                by_desc = (
                    bars.select(pl.col("_desc").unique())
                    .with_columns(m=pl.struct(desc=pl.col("_desc")))
                    .select("_desc", **dv)
                )
                by_post = (
                    bars.select(pl.col("_post").unique())
                    .with_columns(m=pl.struct(post=pl.col("_post")))
                    .select("_post", **{f"_k_{name}": e for name, e in k.items()})
                )
                bars = bars.join(
                    by_desc, on="_desc", how="left", nulls_equal=True, maintain_order="left"
                ).join(by_post, on="_post", how="left", nulls_equal=True, maintain_order="left")
                v = {c: pl.col(c) for c in dv} | {f"_k_{name}": pl.col(f"_k_{name}") for name in k}
            kv = {name: v[f"_k_{name}"] for name in k}
            fw = (
                pl.when(v["_tt_has"])
                .then(pl.lit("torchtune"))
                .when(kv["global_step"].is_not_null() | kv["consumed_samples"].is_not_null())
                .then(pl.lit("nemo"))
                .when(v["_ep_hit"])
                .then(pl.lit("lightning"))
                .otherwise(pl.lit("tqdm"))
            )
            out.append(
                _frag(
                    bars,
                    kind=pl.lit("tqdm"),
                    framework=fw,
                    prio=pl.lit(3),
                    anchor=pl.lit(True),
                    step=pl.coalesce(v["_tt_step"], _f("n").cast(pl.Int64, strict=False)),
                    total_steps=_f("total").cast(pl.Int64, strict=False),
                    loss=pl.coalesce(v["_tt_loss"], kv["loss"], kv["reduced_loss"]),
                    step_time_s=pl.coalesce(kv["step_s"], 1.0 / it_s),
                    step_time_source=pl.when(kv["step_s"].is_not_null())
                    .then(pl.lit("reported"))
                    .when(it_s > 0)
                    .then(pl.lit("tqdm_rate")),
                    throughput=it_s,
                    throughput_unit=pl.when(it_s.is_not_null()).then(pl.lit("it/s")),
                    global_step=kv["global_step"],
                    consumed_samples=kv["consumed_samples"],
                    epoch=pl.coalesce(v["_tt_epoch"], v["_ep"]),
                )
            )
    m = _match(seg, g.RICH_BAR_RE, txt.str.starts_with("Epoch "), gate=("Epoch ",), present=present)
    seen.append(m.select("line"))
    if m.height:
        rate = _num(_f("rate"))
        it_s = pl.when(_f("unit") == "s/it").then(1.0 / rate).otherwise(rate)
        out.append(
            _frag(
                m.filter(_f("n").cast(pl.Int64, strict=False) > 0),
                kind=pl.lit("rich_bar"),
                framework=pl.lit("lightning"),
                prio=pl.lit(3),
                anchor=pl.lit(True),
                step=_f("n").cast(pl.Int64, strict=False),
                total_steps=_f("total").cast(pl.Int64, strict=False),
                epoch=_num(_f("epoch")),
                step_time_s=1.0 / it_s,
                step_time_source=pl.when(it_s > 0).then(pl.lit("tqdm_rate")),
                throughput=it_s,
                throughput_unit=pl.lit("it/s"),
                loss=_key(_f("post"), rf"(?:^|\s)(?:train_)?loss(?:_step)?: (?P<v>{g.NUM})"),
            )
        )
    return out, pl.concat(seen)


def _times(rows: pl.DataFrame, seg: pl.DataFrame) -> pl.DataFrame:
    """Inherit missing times from the line right above; derive missing step times (cumulative, then ts deltas).

    `rows` come in (key, line) order. On many rows whose (key, line) pairs are unique (so every sort and join
    below has one answer whatever the order it starts from) the work runs on narrow frames and the results go
    back by row position: the wide frame is gathered once at most; `_times_general` is the plain form.
    """
    if rows.height < _LANE_MIN:
        return _times_general(rows, seg)
    # (in (key, line) order a repeated pair is one next to its like)
    key, line = pl.col("key"), pl.col("line")
    if rows.select(((key == key.shift(1)) & (line == line.shift(1))).any()).item():
        return _times_general(rows, seg)
    n = rows.height
    quality = pl.when(pl.col("ts").is_not_null()).then(pl.col("ts_quality"))
    narrow = rows.select(
        "key", "line", "ts", "kind", "framework", "step", "cum_time_s", ts_quality=quality, _i=pl.int_range(n)
    )
    # (a row with its own time keeps it: nothing to inherit when every row has one)
    inherit = rows.get_column("ts").null_count() > 0
    stamped = seg.clear().select("key", src_line=pl.col("line"), src_ts=pl.col("ts"))
    if inherit:
        stamped = seg.filter(pl.col("ts").is_not_null())
        stamped = stamped.select("key", src_line=pl.col("line"), src_ts=pl.col("ts"))
        if stamped.select(pl.struct("key", "src_line").is_duplicated().any()).item():
            stamped = stamped.unique(["key", "src_line"], keep="first", maintain_order=True)
        # (the seg frame is in line order and a line has one key: `stamped` is sorted by `src_line` as it is)
        narrow = narrow.with_columns(prev_row_line=pl.col("line").shift(1).over("key"))
    if stamped.height:
        j = narrow.sort("line").join_asof(
            stamped,
            left_on="line",
            right_on="src_line",
            by="key",
            strategy="backward",
            allow_exact_matches=False,
            check_sortedness=False,
        )
        ok = (
            pl.col("ts").is_null()
            & ~pl.col("kind").is_in(["tqdm", "rich_bar"])  # a bar is redrawn long after the line above it
            & pl.col("src_ts").is_not_null()
            & ((pl.col("line") - pl.col("src_line")) <= INHERIT_GAP)
            & (pl.col("prev_row_line").is_null() | (pl.col("src_line") > pl.col("prev_row_line")))
        )
        j = j.select(
            "_i",
            ts=pl.when(ok).then(pl.col("src_ts")).otherwise(pl.col("ts")),
            ts_quality=pl.when(ok).then(pl.lit("inherited")).otherwise(pl.col("ts_quality")),
        ).sort("_i")
        narrow = narrow.with_columns(j.get_column("ts"), j.get_column("ts_quality"))
    narrow = narrow.with_columns(pl.col("ts_quality").fill_null("none"))
    # (rows in (key, line) order, pairs unique: with one framework in all they are in this order already)
    fw = pl.col("framework")
    one_fw = narrow.select(fw.eq_missing(fw.first()).all()).item()
    order = None if one_fw else narrow.select(pl.arg_sort_by("key", "framework", "line")).to_series()
    if order is not None and not order.equals(pl.Series(range(n), dtype=order.dtype), check_names=False):
        narrow = narrow[order]
        rows = rows[order]
    grp = ["key", "framework"]
    has_step = pl.col("step").is_not_null()
    narrow = narrow.with_columns(_p=pl.int_range(n))
    cum = narrow.filter(has_step & pl.col("cum_time_s").is_not_null()).select(
        "_p",
        d_cum=(pl.col("cum_time_s") - pl.col("cum_time_s").shift(1)).over(grp),
        d_step=(pl.col("step") - pl.col("step").shift(1)).over(grp),
    )
    own_q = pl.col("ts_quality").is_in(["exact", "local_assumed_utc", "year_inferred"])
    own = narrow.filter(has_step & own_q).select(
        "_p",
        d_ts=((pl.col("ts") - pl.col("ts").shift(1)).dt.total_microseconds() / 1e6).over(grp),
        d_step_ts=(pl.col("step") - pl.col("step").shift(1)).over(grp),
    )
    extra = {"ts": narrow.get_column("ts"), "ts_quality": narrow.get_column("ts_quality")}
    for part, cols in ((cum, ("d_cum", "d_step")), (own, ("d_ts", "d_step_ts"))):
        for c in cols:
            full = _nulls(c, n, part.schema[c])
            extra[c] = full.scatter(part.get_column("_p"), part.get_column(c)) if part.height else full
    rows = rows.with_columns(**extra)
    return _derived_step_time(rows)


def _times_general(rows: pl.DataFrame, seg: pl.DataFrame) -> pl.DataFrame:
    """`_times` by sorts and joins of the whole frame."""
    rows = rows.with_columns(ts_quality=pl.when(pl.col("ts").is_not_null()).then(pl.col("ts_quality")))
    stamped = seg.filter(pl.col("ts").is_not_null()).select(
        "key", src_line=pl.col("line"), src_ts=pl.col("ts")
    ).unique(["key", "src_line"], keep="first", maintain_order=True).sort("key", "src_line")
    rows = rows.with_columns(prev_row_line=pl.col("line").shift(1).over("key")).sort("line")
    if stamped.height and rows.height:
        j = rows.sort("line").join_asof(
            stamped.sort("src_line"),
            left_on="line",
            right_on="src_line",
            by="key",
            strategy="backward",
            allow_exact_matches=False,
            check_sortedness=False,
        )
        ok = (
            pl.col("ts").is_null()
            & ~pl.col("kind").is_in(["tqdm", "rich_bar"])  # a bar is redrawn long after the line above it
            & pl.col("src_ts").is_not_null()
            & ((pl.col("line") - pl.col("src_line")) <= INHERIT_GAP)
            & (pl.col("prev_row_line").is_null() | (pl.col("src_line") > pl.col("prev_row_line")))
        )
        rows = j.with_columns(
            ts=pl.when(ok).then(pl.col("src_ts")).otherwise(pl.col("ts")),
            ts_quality=pl.when(ok).then(pl.lit("inherited")).otherwise(pl.col("ts_quality")),
        ).drop("src_line", "src_ts")
    rows = rows.with_columns(ts_quality=pl.col("ts_quality").fill_null("none")).sort(
        "key", "framework", "line", maintain_order=True
    )

    grp = ["key", "framework"]
    has_step = pl.col("step").is_not_null()
    # cumulative training time (composer wall_clock/train, modded-nanogpt train_time)
    cum = rows.filter(has_step & pl.col("cum_time_s").is_not_null()).select(
        "key",
        "framework",
        "line",
        d_cum=(pl.col("cum_time_s") - pl.col("cum_time_s").shift(1)).over(grp),
        d_step=(pl.col("step") - pl.col("step").shift(1)).over(grp),
    )
    # timestamp deltas, own (not inherited) times only
    own = rows.filter(has_step & pl.col("ts_quality").is_in(["exact", "local_assumed_utc", "year_inferred"])).select(
        "key",
        "framework",
        "line",
        d_ts=((pl.col("ts") - pl.col("ts").shift(1)).dt.total_microseconds() / 1e6).over(grp),
        d_step_ts=(pl.col("step") - pl.col("step").shift(1)).over(grp),
    )
    rows = rows.join(cum, on=["key", "framework", "line"], how="left").join(
        own, on=["key", "framework", "line"], how="left"
    )
    return _derived_step_time(rows, "prev_row_line")
