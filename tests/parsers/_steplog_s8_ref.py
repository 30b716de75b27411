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


def _step_fragments(
    seg: pl.DataFrame, present: frozenset[str], pre: tuple[pl.Series, pl.DataFrame] | None = None
) -> list[pl.DataFrame]:
    """Fragments of the one-line step grammars (`pre`: `_titan_pre` of `seg`, when the caller has it)."""
    out: list[pl.DataFrame] = []
    txt = pl.col("text")

    # Megatron family
    m = _match(
        seg,
        g.MEGATRON_ITER_RE,
        txt.str.contains("iteration", literal=True),
        gate=("iteration",),
        present=present,
        must="step",
    )
    if m.height:
        out.append(_megatron_frag(m))

    m = _match(seg, g.DS_PIPE_RE, txt.str.contains("iter time (s)", literal=True), gate=("iter time (s)",), present=present)
    if m.height:
        out.append(
            _frag(
                m,
                kind=pl.lit("deepspeed_pipe"),
                framework=pl.lit("deepspeed"),
                prio=pl.lit(0),
                anchor=pl.lit(True),
                step=_f("step").cast(pl.Int64, strict=False),
                loss=_num(_f("loss")),
                step_time_s=_num(_f("t")),
                step_time_source=pl.lit("reported"),
                throughput=_num(_f("sps")),
                throughput_unit=pl.lit("samples/s"),
            )
        )

    m = _match(seg, g.DS_STEP_RE, txt.str.contains("step=", literal=True), gate=("step=",), present=present)
    if m.height:
        out.append(
            _frag(
                m,
                kind=pl.lit("deepspeed_step"),
                framework=pl.lit("deepspeed"),
                prio=pl.lit(2),
                anchor=pl.lit(True),
                step=_f("step").cast(pl.Int64, strict=False),
                skipped_iterations=_f("skipped").cast(pl.Int64, strict=False),
                lr=_num(_f("lr")),
            )
        )

    for pattern, new in ((g.DS_TPUT_NEW_RE, True), (g.DS_TPUT_OLD_RE, False)):
        m = _match(seg, pattern, txt.str.contains("SamplesPerSec=", literal=True), gate=("SamplesPerSec=",), present=present)
        if m.height == 0:
            continue
        if not new:
            m = m.filter(~txt.str.contains("RunningAvgSamplesPerSec", literal=True))
        cols: dict[str, pl.Expr] = {
            "kind": pl.lit("deepspeed_throughput"),
            "framework": pl.lit("deepspeed"),
            "prio": pl.lit(1),
            "anchor": pl.lit(True),
            "step": _f("step").cast(pl.Int64, strict=False),
            "epoch": _num(_f("epoch")),
            "running_avg_samples_per_s": _num(_f("avg")),
        }
        if new:
            cols |= {"throughput": _num(_f("cur")), "throughput_unit": pl.lit("samples/s")}
        out.append(_frag(m, **cols))

    m = seg.clear()
    titan_vals = None
    if "step:" in present and "loss:" in present:
        titan = txt.str.contains("loss:", literal=True) & txt.str.contains(_rx(g.TITAN_RE))
        if seg.height < _LANE_MIN:
            m = seg.filter(txt.str.contains("step:", literal=True) & titan)
        else:  # (the regexes only on the lines with the literal; a `_TITAN_CANON` line matches `TITAN_RE`)
            m = seg.filter(txt.str.contains("step:", literal=True)) if pre is None else seg[pre[0]]
            if m.height >= _LANE_MIN:
                cf = _titan_canon(m.get_column("text")) if pre is None else pre[1]
                canon = cf.get_column("_canon")
                rest = (~canon).arg_true()
                if rest.len():
                    hit = m[rest].select(titan).to_series()
                    keep = canon.clone().scatter(rest, hit)
                    m, cf = m.filter(keep), cf.filter(keep)
                titan_vals = _titan_values(m.get_column("text"), cf)
            else:
                m = m.filter(titan)
    if m.height:
        if titan_vals is None:
            titan_vals = _titan_values(m.get_column("text"))
        m = m.with_columns(titan_vals)
        k = {name: pl.col(f"_k_{name}") for name in g.TITAN_KEYS}
        loss = pl.col("_loss").cast(pl.Float64, strict=False)  # (a `NUM` group: no separator to drop)
        out.append(
            _frag(
                m,
                kind=pl.lit("torchtitan"),
                framework=pl.lit("torchtitan"),
                prio=pl.lit(0),
                anchor=pl.lit(True),
                step=pl.col("_step").cast(pl.Int64, strict=False),
                loss=pl.when(loss != -1.0).then(loss),  # -1.0: pipeline ranks without the loss
                grad_norm=k["grad_norm"],
                memory_gib=k["memory_gib"],
                throughput=k["tps"],
                throughput_unit=pl.when(k["tps"].is_not_null()).then(pl.lit("tokens/s/GPU")),
                tflops=k["tflops"],
                mfu_pct=k["mfu_pct"],
            )
        )

    m = _match(seg, g.NANOGPT_RE, txt.str.contains("iter ", literal=True), gate=("iter ",), present=present)
    if m.height:
        mfu = _num(_f("mfu"))
        out.append(
            _frag(
                m,
                kind=pl.lit("nanogpt"),
                framework=pl.lit("nanogpt"),
                prio=pl.lit(0),
                anchor=pl.lit(True),
                step=_f("step").cast(pl.Int64, strict=False),
                loss=_num(_f("loss")),
                step_time_s=_num(_f("ms")) / 1000.0,
                step_time_source=pl.lit("reported"),
                mfu_pct=pl.when(mfu > -100.0).then(mfu),  # -100.00%: EMA not initialised yet
            )
        )

    m = _match(seg, g.NANOCHAT_RE, txt.str.contains("dt: ", literal=True), gate=("dt: ",), present=present)
    if m.height:
        tps = _num(_f("tps"))
        out.append(
            _frag(
                m,
                kind=pl.lit("nanochat"),
                framework=pl.lit("nanochat"),
                prio=pl.lit(0),
                anchor=pl.lit(True),
                step=_f("step").cast(pl.Int64, strict=False),
                total_steps=_f("total").cast(pl.Int64, strict=False),
                loss=_num(_f("loss")),
                step_time_s=_num(_f("ms")) / 1000.0,
                step_time_source=pl.lit("reported"),
                throughput=tps,
                throughput_unit=pl.when(tps.is_not_null()).then(pl.lit("tokens/s")),
                mfu_pct=_num(_f("mfu")),
            )
        )

    m = _match(seg, g.MODDED_RE, txt.str.contains("train_time:", literal=True), gate=("train_time:",), present=present)
    if m.height:
        out.append(
            _frag(
                m,
                kind=pl.lit("modded_nanogpt"),
                framework=pl.lit("modded-nanogpt"),
                prio=pl.lit(0),
                anchor=pl.lit(True),
                step=_f("step").cast(pl.Int64, strict=False),
                total_steps=_f("total").cast(pl.Int64, strict=False),
                loss=_num(_f("loss")),
                cum_time_s=_num(_f("cum_ms")) / 1000.0,
                interval_avg_step_s=_num(_f("avg")) / 1000.0,
            )
        )

    m = _match(seg, g.LITGPT_RE, txt.str.contains("iter time:", literal=True), gate=("iter time:",), present=present)
    if m.height:
        out.append(
            _frag(
                m,
                kind=pl.lit("litgpt"),
                framework=pl.lit("litgpt"),
                prio=pl.lit(0),
                anchor=pl.lit(True),
                step=_f("step").cast(pl.Int64, strict=False),
                global_step=_num(_f("ostep")),
                loss=_num(_f("loss")),
                step_time_s=_num(_f("ms")) / 1000.0,
                step_time_source=pl.lit("reported"),
            )
        )

    m = _match(seg, g.LLMC_RE, txt.str.contains("tok/s)", literal=True), gate=("tok/s)",), present=present)
    if m.height:
        out.append(
            _frag(
                m,
                kind=pl.lit("llmc"),
                framework=pl.lit("llm.c"),
                prio=pl.lit(0),
                anchor=pl.lit(True),
                step=_f("step").cast(pl.Int64, strict=False),
                total_steps=_f("total").cast(pl.Int64, strict=False),
                loss=_num(_f("loss")),
                step_time_s=_num(_f("ms")) / 1000.0,
                step_time_source=pl.lit("reported"),
                throughput=_num(_f("tps")),
                throughput_unit=pl.lit("tokens/s"),
            )
        )

    m = _match(seg, g.MLLOG_RE, txt.str.contains(":::MLLOG", literal=True), gate=(":::MLLOG",), present=present)
    if m.height:
        js = _f("json")
        m = m.with_columns(
            _key=js.str.json_path_match("$.key"),
            _step=js.str.json_path_match("$.metadata.step")
            .cast(pl.Float64, strict=False)
            .cast(pl.Int64, strict=False),
        ).filter((pl.col("_key") == "tracked_stats") & pl.col("_step").is_not_null())
        tput = _num(js.str.json_path_match("$.value.throughput"))
        out.append(
            _frag(
                m,
                kind=pl.lit("mllog"),
                framework=pl.lit("mlperf"),
                prio=pl.lit(0),
                anchor=pl.lit(True),
                step=pl.col("_step"),
                throughput=tput,
                throughput_unit=pl.when(tput.is_not_null()).then(pl.lit("samples/s")),
                loss=_num(js.str.json_path_match("$.value.train_loss")),
            )
        )

    m = _match(seg, g.MAXTEXT_RE, txt.str.contains("completed step:", literal=True), gate=("completed step:",), present=present)
    if m.height:
        tps = _num(_f("tps"))
        out.append(
            _frag(
                m,
                kind=pl.lit("maxtext"),
                framework=pl.lit("maxtext"),
                prio=pl.lit(0),
                anchor=pl.lit(True),
                step=_f("step").cast(pl.Int64, strict=False),
                step_time_s=_num(_f("s")),
                step_time_source=pl.lit("reported"),
                tflops=_num(_f("tflops")),
                throughput=pl.coalesce(tps, _num(_f("tflops"))),
                throughput_unit=pl.when(tps.is_not_null()).then(pl.lit("tokens/s/GPU")).otherwise(pl.lit("TFLOP/s/GPU")),
                loss=_num(_f("loss")),
            )
        )

    m = _match(seg, g.NEMO2_RE, txt.str.contains("Training epoch", literal=True), gate=("Training epoch",), present=present)
    if m.height:
        r = _f("rest")
        k = {name: _key(r, pat) for name, pat in g.NEMO2_KEYS.items()}
        out.append(
            _frag(
                m,
                kind=pl.lit("nemo2"),
                framework=pl.lit("nemo"),
                prio=pl.lit(0),
                anchor=pl.lit(True),
                step=pl.coalesce(
                    k["global_step"].cast(pl.Int64, strict=False), _f("step").cast(pl.Int64, strict=False)
                ),
                total_steps=_f("total").cast(pl.Int64, strict=False),
                epoch=_num(_f("epoch")),
                loss=k["loss"],
                step_time_s=k["step_s"],
                step_time_source=pl.when(k["step_s"].is_not_null()).then(pl.lit("reported")),
                consumed_samples=k["consumed_samples"],
                lr=k["lr"],
            )
        )

    m = _match(seg, g.AUTOMODEL_RE, txt.str.contains("| epoch ", literal=True), gate=("| epoch ",), present=present)
    if m.height:
        r = _f("rest")
        k = {name: _key(r, pat) for name, pat in g.AUTOMODEL_KEYS.items()}
        out.append(
            _frag(
                m,
                kind=pl.lit("automodel"),
                framework=pl.lit("nemo-automodel"),
                prio=pl.lit(0),
                anchor=pl.lit(True),
                step=_f("step").cast(pl.Int64, strict=False),
                epoch=_num(_f("epoch")),
                loss=_num(_f("loss")),
                grad_norm=k["grad_norm"],
                lr=k["lr"],
                memory_gib=k["memory_gib"],
                throughput=pl.coalesce(k["tps_gpu"], k["tps"]),
                throughput_unit=pl.when(k["tps_gpu"].is_not_null())
                .then(pl.lit("tokens/s/GPU"))
                .when(k["tps"].is_not_null())
                .then(pl.lit("tokens/s")),
                tokens_per_s=k["tps"],
            )
        )

    m = _match(seg, g.TORCHTUNE_RE, txt.str.starts_with("Step "), gate=("Step ",), present=present)
    if m.height:
        r = _f("rest")
        k = {name: _key(r, pat) for name, pat in g.TORCHTUNE_KEYS.items()}
        m = m.filter(pl.any_horizontal(*(v.is_not_null() for v in k.values())))
        out.append(
            _frag(
                m,
                kind=pl.lit("torchtune"),
                framework=pl.lit("torchtune"),
                prio=pl.lit(0),
                anchor=pl.lit(True),
                step=_f("step").cast(pl.Int64, strict=False),
                loss=k["loss"],
                lr=k["lr"],
                grad_norm=k["grad_norm"],
                throughput=k["tps_gpu"],
                throughput_unit=pl.when(k["tps_gpu"].is_not_null()).then(pl.lit("tokens/s/GPU")),
            )
        )

    # HF Trainer dicts
    m = seg.filter(txt.str.contains(_rx(g.HF_DICT_RE))) if "{" in present else seg.clear()
    if m.height:
        k = {name: _key(txt, pat) for name, pat in g.HF_KEYS.items()}
        summary = k["train_runtime"].is_not_null()
        train = k["loss"].is_not_null() | k["step_runtime"].is_not_null() | k["grad_norm"].is_not_null()
        logged = m.filter(~summary & train & ~txt.str.contains("'eval_", literal=True))
        if logged.height:
            out.append(
                _frag(
                    logged,
                    kind=pl.lit("hf_dict"),
                    framework=pl.lit("hf-trainer"),
                    prio=pl.lit(0),
                    anchor=k["step"].is_not_null(),
                    step=k["step"].cast(pl.Int64, strict=False),
                    loss=k["loss"],
                    grad_norm=k["grad_norm"],
                    lr=k["lr"],
                    epoch=k["epoch"],
                    step_time_s=k["step_runtime"],
                    step_time_source=pl.when(k["step_runtime"].is_not_null()).then(pl.lit("reported")),
                    throughput=k["step_sps"],
                    throughput_unit=pl.when(k["step_sps"].is_not_null()).then(pl.lit("samples/s")),
                    attach_line=pl.col("line"),
                )
            )
        summ = m.filter(summary)
        if summ.height:
            out.append(
                _frag(
                    summ,
                    kind=pl.lit("hf_summary"),
                    framework=pl.lit("hf-trainer"),
                    prio=pl.lit(0),
                    anchor=pl.lit(True),
                    standalone=pl.lit(True),
                    step_time_s=1.0 / k["train_steps_ps"],
                    step_time_source=pl.when(k["train_steps_ps"] > 0).then(pl.lit("run_mean")),
                    throughput=k["train_sps"],
                    throughput_unit=pl.when(k["train_sps"].is_not_null()).then(pl.lit("samples/s")),
                    loss=k["train_loss"],
                    epoch=k["epoch"],
                    train_runtime_s=k["train_runtime"],
                )
            )
    return out
