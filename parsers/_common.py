"""Helpers shared by parsers: identities (PCI bus ids), launcher envelopes, time parsing. All vectorised."""

from __future__ import annotations

import contextlib
import json
import re
from typing import Any

import polars as pl

from parsers._step_grammars import ThreadFlag, ascii_classes

# ----------------------------------------------------------------------------- ASCII regexes

_ascii = ThreadFlag()
"""Whether the lines this thread reads with the NCCL/PyTorch-distributed grammar hold no non-ASCII
character (set by `ascii_scope`): `arx` then gives each regex with ASCII classes
(`_step_grammars.ascii_classes`: the same matches on such text), which polars compiles 5-15x faster. Polars
keeps only the last 32 regexes compiled per thread and a range's reading uses ~100, so each is compiled again
on every range."""


def arx(pattern: Any) -> Any:
    """The regex to run for `pattern` (a string; anything else is returned as is) on the lines being read."""
    return ascii_classes(pattern) if _ascii and isinstance(pattern, str) else pattern


def format_str(template: str, *args: pl.Expr) -> pl.Expr:
    """`pl.format(template, *args)` (`{}` placeholders only) as a `concat_str`: null where an argument is
    null, numbers written as their cast to String, as `format`. polars 2.1's `format` panics on a column
    holding an empty chunk (`assertion failed: i < self.len()`, pola-rs/polars#25187), which the frames of
    several files read together hold once filtered; `concat_str` does not."""
    parts = template.split("{}")
    if len(parts) != len(args) + 1 or any("{" in x or "}" in x for x in parts):
        need = f"{len(parts) - 1} argument(s) and no other brace"
        raise ValueError(f"format_str: {template!r} needs {need}, got {len(args)}")
    exprs: list[pl.Expr] = []
    for k, text in enumerate(parts):
        if text:
            exprs.append(pl.lit(text))
        if k < len(args):
            exprs.append(args[k])
    return pl.concat_str(exprs)


def is_ascii(text: pl.Series) -> bool:
    """True when no string of `text` holds a non-ASCII character (as many characters as bytes)."""
    text = text.cast(pl.String)
    return int(text.str.len_bytes().sum()) == int(text.str.len_chars().sum())


def ascii_scope(ascii: bool) -> contextlib.AbstractContextManager[None]:
    """`arx` gives ASCII-class regexes inside the block when `ascii` (the caller vouches that every line read
    there, and so every text made from them, is ASCII); nested scopes restore the outer one."""
    return _ascii.scope(ascii)


def repeated(value: Any, n: int, dtype: Any) -> pl.Series:
    """`pl.repeat(value, n, dtype=dtype, eager=True)` (named `literal` too) without a query: ~20 against
    ~200 us, whatever `n`; parsers make such columns (all null, all false) many times a file."""
    return pl.Series("literal", [value], dtype=dtype).new_from_index(0, n)


# ----------------------------------------------------------------------------- PCI bus ids

_BDF_RE = r"(?i)^(?:PCI:)?(?:([0-9a-f]{4,8}):)?([0-9a-f]{1,2}):([0-9a-f]{1,2})(?:\.([0-7]))?$"


def normalize_bus_id(expr: pl.Expr) -> pl.Expr:
    """Normalise any GPU/PCI address form to `dddd:bb:dd.f` lower case (FORMATS.md §1.4).

    Accepts `PCI:0000:9b:00` (Xid, no function), `0000:84:00.0`, `00000000:4C:00.0` (nvidia-smi),
    `3b:00.0`. Anything else becomes null. The function defaults to 0.
    """
    s = expr.cast(pl.String).str.strip_chars()
    parts = s.str.extract_groups(arx(_BDF_RE))
    domain = parts.struct.field("1").fill_null("0").str.to_integer(base=16, strict=False)
    bus = parts.struct.field("2").str.to_integer(base=16, strict=False)
    dev = parts.struct.field("3").str.to_integer(base=16, strict=False)
    fn = parts.struct.field("4").fill_null("0")
    return format_str(
        "{}:{}:{}.{}",
        _hex(domain & 0xFFFF, 4),
        _hex(bus, 2),
        _hex(dev, 2),
        fn,
    )


def nccl_bus_id(expr: pl.Expr) -> pl.Expr:
    """Normalise NCCL's `busId 6b000` (hex of dddd:bb:dd.f with leading zeros dropped)."""
    v = expr.cast(pl.String).str.strip_chars().str.to_integer(base=16, strict=False)
    return format_str(
        "{}:{}:{}.{}",
        _hex((v // 0x100000) & 0xFFFF, 4),
        _hex((v // 0x1000) & 0xFF, 2),
        _hex((v // 0x10) & 0xFF, 2),
        (v & 0x7).cast(pl.String),
    )


def _hex(v: pl.Expr, width: int) -> pl.Expr:
    """Lower-case zero-padded hex of an integer expression."""
    digits = "0123456789abcdef"
    out = pl.lit("")
    for i in range(width - 1, -1, -1):
        nib = (v // (16**i)) % 16
        out = out + pl.lit(pl.Series(list(digits))).get(nib)
    return out


# ----------------------------------------------------------------------------- launcher envelopes

# Outermost first; each pattern's named groups are kept as metadata (FORMATS.md §1.1). Groups:
# `rank` (the rank the prefix names: global for `[rankN]:`/Open MPI/Lightning, local for torchrun
# `[default0]:`/`[host:0]`, task id for srun), `host` (pdsh / torchrun `--role $(hostname)` host or IP),
# `pid`, `ip`, `actor` (Ray). A pattern without a `rank` group strips its prefix and yields no rank.
ENVELOPES: tuple[tuple[str, str], ...] = (
    ("openmpi", r"^\[\d+,(?<rank>\d+)\]<(?:stdout|stderr)>:\s?"),
    ("stdio", r"^(?:stdout|stderr): "),
    ("cri", r"^(?:stdout|stderr) [FP] "),  # Kubernetes CRI log lines (after the collector timestamp)
    ("ray", r"^\((?<actor>\w+) pid=(?<pid>\d+)(?:, ip=(?<ip>[\d.]+))?\) "),
    ("srun", r"^\s*(?<rank>\d+): "),
    ("torchrun", r"^\[default(?<rank>\d+)\]:\s?"),
    ("c10", r"^\[rank(?<rank>\d+)\]:\s?"),  # PyTorch c10 logs (global rank) and torchtitan `--role rank`
    ("torchrun_host", r"^\[(?<host>[A-Za-z][\w.-]*):(?<rank>\d+)\]\s?"),
    ("lightning", r"^\[rank: (?<rank>\d+)\] "),
    # pdsh / DeepSpeed runner / k8s collectors: `host: `. The host must be an IPv4 address or a name with
    # a digit, so Python exception lines (`RuntimeError: ...`) are not taken for a host.
    ("pdsh", r"^(?<host>(?:\d{1,3}\.){3}\d{1,3}|[A-Za-z][\w-]*\d[\w.-]*): "),
)


_ENVELOPE_FIELDS = {"rest": pl.String, "rank": pl.Int32, "rank_source": pl.String, "host": pl.String, "pid": pl.Int64}


def _any_envelope_re() -> str:
    """One anchored alternation of every envelope (groups made non-capturing): a line it does not match
    is left alone by every pass of `_split_series`, so only the lines it matches need the per-envelope work."""
    alts = [re.sub(r"\(\?<\w+>", "(?:", p.removeprefix("^")) for _, p in ENVELOPES]
    return "^(?:" + "|".join(f"(?:{a})" for a in alts) + ")"


_ANY_ENVELOPE = _any_envelope_re()


def _split_series(text: pl.Series) -> pl.Series:
    """Eager worker of `split_envelopes`: a combined prefilter finds the lines that open with any envelope;
    only those get one regex pass per envelope (the rest keep their text and null metadata)."""
    text = text.cast(pl.String)
    hit = text.str.contains(arx(_ANY_ENVELOPE)).fill_null(False)
    n_hit = int(hit.sum())
    if n_hit == 0:
        return pl.DataFrame(
            {"rest": text},
            schema_overrides={"rest": pl.String},
        ).with_columns(
            rank=pl.lit(None, dtype=pl.Int32),
            rank_source=pl.lit(None, dtype=pl.String),
            host=pl.lit(None, dtype=pl.String),
            pid=pl.lit(None, dtype=pl.Int64),
        ).to_struct("envelope")
    if n_hit == len(text):
        return _split_all(text)
    idx = hit.arg_true()
    done = _split_all(text.gather(idx)).struct.unnest().with_columns(_i=idx)
    base = pl.DataFrame({"rest": text}).with_columns(
        rank=pl.lit(None, dtype=pl.Int32),
        rank_source=pl.lit(None, dtype=pl.String),
        host=pl.lit(None, dtype=pl.String),
        pid=pl.lit(None, dtype=pl.Int64),
    )
    for col in ("rest", "rank", "rank_source", "host", "pid"):
        base = base.with_columns(base.get_column(col).scatter(idx, done.get_column(col)))
    return base.to_struct("envelope")


def _split_all(text: pl.Series) -> pl.Series:
    """One regex pass per envelope over the whole column (three rounds, prefixes stack)."""
    df = pl.DataFrame({"rest": text.cast(pl.String)}).with_columns(
        rank=pl.lit(None, dtype=pl.Int32),
        rank_source=pl.lit(None, dtype=pl.String),
        host=pl.lit(None, dtype=pl.String),
        pid=pl.lit(None, dtype=pl.Int64),
    )
    for round_ in range(3):
        # a line no envelope opens is left alone by every later pass: none such, the rounds are done
        if round_ and not df.get_column("rest").str.contains(arx(_ANY_ENVELOPE)).any():
            break
        for name, pattern in ENVELOPES:
            py = pattern.replace("(?<", "(?P<")
            groups = re.findall(r"\(\?P<(\w+)>", py)
            py = arx(py)
            df = df.with_columns(_hit=pl.col("rest").str.contains(py))
            if not df.get_column("_hit").any():
                continue
            hit = pl.col("_hit")
            upd: dict[str, pl.Expr] = {}
            if "rank" in groups:
                got = pl.col("rest").str.extract(py, groups.index("rank") + 1).cast(pl.Int32, strict=False)
                upd["rank"] = pl.when(hit).then(got).otherwise(pl.col("rank"))
                upd["rank_source"] = pl.when(hit).then(pl.lit(name)).otherwise(pl.col("rank_source"))
            if "host" in groups:
                got_host = pl.col("rest").str.extract(py, groups.index("host") + 1)
                upd["host"] = pl.when(hit).then(got_host).otherwise(pl.col("host"))
            if "pid" in groups:
                got_pid = pl.col("rest").str.extract(py, groups.index("pid") + 1).cast(pl.Int64, strict=False)
                upd["pid"] = pl.when(hit).then(got_pid).otherwise(pl.col("pid"))
            upd["rest"] = pl.when(hit).then(pl.col("rest").str.replace(py, "")).otherwise(pl.col("rest"))
            df = df.with_columns(**upd)
    return df.drop("_hit", strict=False).to_struct("envelope")


def split_envelopes(text: pl.Expr) -> dict[str, pl.Expr]:
    """Strip launcher prefixes from a column of lines; return expressions for what they said.

    Returns a dict of expressions: `rest` (the line without prefixes), `rank` (Int32, innermost prefix
    naming a rank), `rank_source` (name of that envelope, e.g. 'torchrun' or 'openmpi'), `host` (innermost
    prefix naming a host or IP, e.g. pdsh), `pid` (Ray). Prefixes stack (e.g. `3: [default1]:[rank9]:`), so
    the envelopes are applied up to three times; the innermost rank wins since it is the one the writing
    process knows itself by. Evaluated eagerly per column (one regex pass per envelope), so the
    expression tree stays small.
    """
    packed = envelope_struct(text)
    return {name: packed.struct.field(name) for name in _ENVELOPE_FIELDS}


def envelope_struct(text: pl.Expr) -> pl.Expr:
    """`split_envelopes` as one struct expression (fields rest, rank, rank_source, host, pid).

    NOTE: polars evaluates a `map_batches` once per use, so a caller needing several fields should
    materialise this struct as one column first and read the fields from it.
    """
    return text.map_batches(_split_series, return_dtype=pl.Struct(_ENVELOPE_FIELDS))


def strip_envelopes(text: pl.Expr) -> tuple[pl.Expr, pl.Expr]:
    """Strip launcher prefixes from a column of lines; return (rest, rank from the prefix or null).

    Applied up to two times (prefixes stack, e.g. `3: [default1]:`); the innermost rank wins since it is
    the one the writing process knows itself by. See `split_envelopes` for the host/pid metadata.
    """
    parts = split_envelopes(text)
    return parts["rest"], parts["rank"]


# ----------------------------------------------------------------------------- misc


def to_json(obj: dict[str, Any]) -> str:
    """Serialise a detail dict compactly and deterministically (`json.dumps(obj, sort_keys=True,
    separators=(",", ":"), default=str)`, with the encoder made once: ~2 us a call less)."""
    return _JSON.encode(obj)


_JSON = json.JSONEncoder(sort_keys=True, separators=(",", ":"), default=str)


def json_detail(**fields: pl.Expr) -> pl.Expr:
    """Build a JSON object string column from named expressions (nulls dropped by json_encode)."""
    return pl.struct(**fields).struct.json_encode()
