"""A plain-Python reading of a small NCCL debug log whose lines are all plain INFO records (`nccl.parse`'s
fixed cost on a per-node file of a few hundred lines is dozens of small polars operations and regex
compiles; Python's `re` over a few hundred lines is cheaper).

`parse` returns exactly what `nccl.parse` returns, or None when the chunk holds anything else: a line that is
not blank and not an NCCL record the fast lane (`nccl._FAST_HEAD`) reads, a WARN/ERROR/ABORT record, a COLL
line, a markdown link, the literals of the whole-file checks, or a character outside printable ASCII and
tab (on such text Python's `re` and polars' regex engine agree on every pattern used here: `\\s`, `\\w`, `\\d`
are ASCII in both). The rows are worked out as `nccl._nccl_rows` does for those records, and the tables are
built with the same polars concatenation; `tests/parsers/test_nccl_fast.py` checks both readings agree.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache, lru_cache
from operator import itemgetter
from typing import Any, NamedTuple

import polars as pl

from forensics.errors import CONTAINED
from forensics.schema import columns
from parsers.base import FileContext, ParseResult

MAX_LINES = 2000
"""Chunks of more lines take the vectorised path."""
_SAFE = re.compile(r"[^\t\x20-\x7e]")
_IPV4 = re.compile(r"^\d{1,3}(?:\.\d{1,3}){3}$")
_SRUN = re.compile(r"\s*\d+: ")
"""The srun `-l` launcher prefix (`parsers._common.ENVELOPES` 'srun') before a bare version line."""
_SRUN_START = tuple(" \t0123456789")
_BLANK_START = ("", " ", "\t")
"""How a line the small path takes as blank (nothing but spaces and tabs) starts."""
_C10 = re.compile(r"\[(?:rank|default)\d+\]:\s?")
"""The PyTorch launcher prefixes `[rankN]:` and `[defaultN]:` (`parsers._common.ENVELOPES` 'c10', 'torchrun'):
INFO records read the same after them (their rank goes to WARN events only); a record with another prefix
after one is left to the vectorised path."""
_I64 = 2**63
_I32 = 2**31
_INV_SCHEMA = columns(
    "inventory",
    "node", "component", "device", "attribute", "value", "source", "file", "line",
)
_NET_SCHEMA = columns("comms", "node", "pid", "line", "device", "detail", "record", "file")
_RANK_SCHEMA = columns(
    "comms",
    "record", "node", "comm_id", "rank", "nranks", "cuda_dev", "gpu_bus_id", "pid", "nccl_version",
    "detail", "file", "line",
)
_BOTH_SCHEMA = {**_NET_SCHEMA, **_RANK_SCHEMA}
_BOTH = list(_BOTH_SCHEMA)
_FROM_RANK = itemgetter(
    *(list(_RANK_SCHEMA).index(c) if c in _RANK_SCHEMA else len(_RANK_SCHEMA) for c in _BOTH)
)
"""A rank row (with a None after it) in `_BOTH` order."""


@cache
def _rx(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def _safe(text: str) -> bool:
    """No character outside printable ASCII, tab and newline: `not _SAFE.search(text.replace("\\n", " "))`
    (deleting those characters from the bytes is ~15x faster than the regex scan)."""
    return text.isascii() and not text.encode("ascii").translate(None, _SAFE_BYTES)


_SAFE_BYTES = bytes(range(0x20, 0x7F)) + b"\t\n"


def _int(s: str | None, limit: int) -> int | None:
    """`cast(Int64|Int32, strict=False)` of a digit string (with an optional `-`)."""
    if s is None:
        return None
    v = int(s)
    return v if -limit <= v < limit else None


def _plain(v: str) -> bool:
    """A string `json.dumps` writes between quotes as it is (and holding no quote a null-member pattern of
    `_json` could start at)."""
    return v.isascii() and v.isprintable() and '"' not in v and "\\" not in v


def _dumps(v: Any) -> str:
    """`json.dumps(v)`, a plain string without a look at the encoder."""
    if isinstance(v, str) and _plain(v):
        return f'"{v}"'
    return json.dumps(v)


def _json(**fields: Any) -> str:
    """`nccl.json_detail` of plain values: `struct.json_encode`, then its null members dropped."""
    parts = []
    plain = True  # (no string holds a quote or backslash: the null members are just left out)
    for k, v in fields.items():
        if v is None:
            continue
        if isinstance(v, bool):
            enc = "true" if v else "false"
        elif isinstance(v, int):
            enc = str(v)
        elif isinstance(v, list):
            plain = plain and all(not isinstance(x, str) or _plain(x) for x in v)
            enc = "[" + ",".join(_dumps(x) for x in v) + "]"
        else:
            plain = plain and (not isinstance(v, str) or _plain(v))
            enc = _dumps(v)
        parts.append(f'"{k}":{enc}')
    if plain:  # (`_json_nulls` gives the same: only a null member makes a `":null` there)
        return "{" + ",".join(parts) + "}"
    return _json_nulls(fields)


def _json_nulls(fields: dict[str, Any]) -> str:
    """`_json` the way `nccl.json_detail` works: every member encoded, then the null ones cut out by regex."""
    parts = []
    for k, v in fields.items():
        if v is None:
            enc = "null"
        elif isinstance(v, bool):
            enc = "true" if v else "false"
        elif isinstance(v, int):
            enc = str(v)
        elif isinstance(v, list):
            enc = "[" + ",".join(json.dumps(x) for x in v) + "]"
        else:
            enc = json.dumps(v)
        parts.append(f"{json.dumps(k)}:{enc}")
    js = "{" + ",".join(parts) + "}"
    if "null" not in js:  # (each pattern below holds it)
        return js
    js = re.sub(r'"[^"]+":null,', "", js)
    js = re.sub(r',"[^"]+":null\}', "}", js)
    return re.sub(r'\{"[^"]+":null\}', "{}", js)


@lru_cache(maxsize=4096)
def _bus_id(bus: str | None) -> str | None:
    """`parsers._common.nccl_bus_id` of a busId token (the nodes of a job print the same few)."""
    if bus is None:
        return None
    s = bus.strip()
    try:
        v = int(s, 16)
    except ValueError:
        return None
    if v >= _I64:
        return None
    return f"{(v // 0x100000) & 0xFFFF:04x}:{(v // 0x1000) & 0xFF:02x}:{(v // 0x10) & 0xFF:02x}.{v & 0x7}"


_PLAIN_HEAD = re.compile(r"([A-Za-z][A-Za-z0-9_-]*):([0-9]+):[0-9]+ \[([0-9]+)\] NCCL INFO (?s:.)?")
"""The commonest line start: a host name (a letter first, no dot), pid, tid, [cudaDev], ` NCCL INFO ` (and
the message's first character: a key holds it)."""


def _head(key: str) -> dict[str, Any] | None:
    """The fast lane's reading of a line start (None: not one it takes). A `_PLAIN_HEAD` start is read from
    that match: no launcher envelope can open it (a letter first), the fast head is all of it but its level,
    no collector stamp starts it, `NCCL_HEAD_RE`'s host is its name (from the line start: its first match),
    which is no IPv4 address and holds no dot (the node is the host); 'collective' is left to the full
    reading (a torchfrtrace head)."""
    m = _PLAIN_HEAD.fullmatch(key)
    if m is not None and m.group(1) != "collective" and _PLAIN_READ:
        host = m.group(1)
        return {
            "env": False, "node": host, "host": host, "pid": _int(m.group(2), _I64),
            "dev": _int(m.group(3), _I32), "level": "INFO", "msg_off": m.end(3) + 12,  # (past '] NCCL INFO ')
        }
    return _head_read(key)


def _head_read(key: str) -> dict[str, Any] | None:
    """`_head` by the fast lane's patterns."""
    rx = _patterns()
    m = rx.fast_head.match(key)
    if m is None:
        return None
    head = m.group("head")
    if head.startswith(rx.not_heads):
        return None
    if key[4:5] == "-" and rx.collector_ts.search(key):
        return None
    h = rx.head.search(head)
    if h is None:
        return None
    host = h.group("host")
    env = m.group("env")
    env_len = len(env) if env is not None else 0
    sp = m.group("sp")
    return {
        "env": env is not None,
        "node": host if _IPV4.search(host) else host.split(".", 1)[0],
        "host": host,
        "pid": _int(h.group("pid"), _I64),
        "dev": _int(h.group("dev"), _I32),
        "level": m.group("level"),
        "msg_off": env_len + len(head) + 6 + len(m.group("level")) + len(sp),
    }


def parse(lines: pl.Series, ctx: FileContext) -> ParseResult | None:
    """`nccl.parse(lines, ctx)` for a small chunk of plain INFO records (and blank lines), else None."""
    got = records(lines, ctx.first_line, {})
    if got is None:
        return None
    return results([_rows(*got, ctx, {})])[0]


def parse_many(items: list[tuple[pl.Series, FileContext]]) -> list[ParseResult | None]:
    """`[parse(lines, ctx) for lines, ctx in items]`: each file's lines read in Python as `parse` does (the
    line starts and network lines read once for the batch), each table built once for all the files and cut
    per file."""
    heads: dict[str, dict[str, Any] | None] = {}
    memo: dict[Any, Any] = {}
    out: list[ParseResult | None] = [None] * len(items)
    done: list[tuple[int, _Rows]] = []
    others = _others(items)
    for i, (lines, ctx) in enumerate(items):
        if i in others:
            continue
        got = records(lines, ctx.first_line, heads)
        if got is not None:
            done.append((i, _rows(*got, ctx, memo)))
    try:
        got = results([r for _i, r in done])
    except CONTAINED:  # noqa: BLE001 - each file's frames on their own: `parse` of the file that fails fails
        got = [results([r])[0] for _i, r in done]
    for (i, _r), result in zip(done, got, strict=True):
        out[i] = result
    return out


def _others(items: list[tuple[pl.Series, FileContext]]) -> set[int]:
    """The items holding a line that is not blank (spaces and tabs) and has no `NCCL `: `records` of such an
    item is None (every line it reads but a blank one is a record or a bare version line, which have one).
    Looked for in one query over the batch: `records` finds such a line in Python, line by line, and a rank
    log of a hang has its watchdog lines at its end."""
    if len(items) < 2:
        return set()
    sizes = pl.Series([len(lines) for lines, _ctx in items], dtype=pl.Int64)
    text = pl.concat([lines.cast(pl.String) for lines, _ctx in items]).alias("text")
    key = pl.select(pl.int_range(len(items), dtype=pl.Int64).repeat_by(sizes).explode()).to_series()
    other = ~text.str.contains("NCCL ", literal=True) & text.str.contains(r"[^ \t]")
    hit = key.filter(other.fill_null(False)).unique()
    return set(hit.to_list())


_Rec = tuple[int, dict[str, Any], str]
_PLAIN_READ = True
"""`_head` reads a `_PLAIN_HEAD` start from its match (tests compare it with `_head_read`)."""
_SPECIAL_FIRST = frozenset(["", " ", "\t", "[", "N", *"0123456789"])
"""The first characters of the lines `records`' loop reads other than as a plain record (blank lines, PyTorch
launcher prefixes, srun ranks, bare `NCCL version` lines)."""
_SPECIAL_START = re.compile(r"\n[\n \t\[N0-9]")
"""A line after the first opening with one of `_SPECIAL_FIRST` (or empty) in the lines joined by '\n'."""
_GOOD = "\n"
"""`records`' key (in `heads`) of the plain INFO heads read so far: {line start: (head, message offset)} (no
line start holds a newline)."""


def records(
    lines: pl.Series, first_line: int, heads: dict[str, dict[str, Any] | None]
) -> tuple[list[_Rec], list[_Rec]] | None:
    """The (line, head, message) of each record of a chunk of plain INFO records (and blank lines) and the
    (line, head of the record before, match) of its bare `NCCL version` lines, else None.

    `heads`: the line starts read so far (`_head` depends on the key alone), shared by the files of a batch.
    """
    from parsers import nccl

    if len(lines) > MAX_LINES or lines.null_count():
        return None
    texts: list[str] = lines.to_list()
    joined = "\n".join(texts)
    if not _safe(joined) or "](http" in joined or " opCount " in joined:
        return None
    if any(lit in joined for lit in nccl._FAST_LITERALS):
        return None
    recs: list[_Rec] = []  # (line, head, message)
    bares: list[_Rec] = []
    n = first_line
    keys = nccl._FAST_KEY_CHARS
    if texts and texts[0][:1] not in _SPECIAL_FIRST and texts[-1] and not _SPECIAL_START.search(joined):
        # no line is blank or opens with a launcher prefix, an srun rank or `NCCL version` (each opens with
        # one of `_SPECIAL_FIRST`): each is a record, read by the loop below's last steps; a line start read
        # before as a plain INFO head is looked up with its reading at once
        good = heads.get(_GOOD)
        if good is None:
            good = heads[_GOOD] = {}  # type: ignore[assignment]
        for i, t in enumerate(texts, n):
            at = t.find(" NCCL ")
            if at < 0:
                return None
            got = good.get(t[: at + 11])
            if got is None:
                key = t[: at + 11]
                info = key.endswith(" NCCL INFO ")
                if not info:
                    key = t[: at + keys]
                h = heads.get(key, False)
                if h is False:
                    h = heads[key] = _head(t[: at + keys])
                if h is None or h["level"] not in ("INFO", "TRACE"):
                    return None
                got = (h, h["msg_off"])
                if info:
                    good[key] = got
            recs.append((i, got[0], t[got[1] :]))
        return (recs, bares) if recs else None
    for i, t in enumerate(texts):
        if t[:1] in _BLANK_START and not t.strip(" \t"):
            continue
        c10 = t.startswith(("[rank", "[default")) and _C10.match(t)
        if c10:  # (a PyTorch launcher prefix: stripped as `nccl.prepare` does, read as the line after it)
            t = t[c10.end() :]
        body = t
        if not c10 and t[:1] in _SRUN_START and (srun := _SRUN.match(t)):
            body = t[srun.end() :]
        if body.startswith("NCCL version"):
            # a bare version line (rank 0, NCCL <= 2.21), after an NCCL record: the node is that record's
            bare = _bare_version(body) if recs else None
            if bare is None:
                return None
            bares.append((n + i, recs[-1][1], bare))
            recs.append((n + i, recs[-1][1], ""))  # (a record of the line count and the file's hosts)
            continue
        at = t.find(" NCCL ")
        if at < 0:
            return None
        # `_FAST_HEAD` reads the key up to the level and the one space after it: after ` NCCL INFO ` it
        # reads nothing more, so the line start up to there is the same key (one per rank and thread, not
        # one per message)
        key = t[: at + 11]
        if not key.endswith(" NCCL INFO "):
            key = t[: at + keys]
        h = heads.get(key, False)
        if h is False:
            h = heads[key] = _head(t[: at + keys])
        if h is None or h["level"] not in ("INFO", "TRACE") or (c10 and h["env"]):
            return None
        recs.append((n + i, h, t[h["msg_off"] :]))
    return (recs, bares) if recs else None


@dataclass
class _Rows:
    """One file's rows, worked out in Python, before any frame is built."""

    comms: list[tuple[Any, ...]]
    """In the order of the comms columns `kind` names."""
    kind: int
    """Which comms columns: 0 none, 1 network rows only, 2 rank rows only, 3 both."""
    inventory: list[tuple[Any, ...]]
    notes: list[str]
    node: str | None
    parsed: int


class _Rx(NamedTuple):
    """The `nccl` patterns and literals the small path reads with (compiled once)."""

    fast_head: re.Pattern[str]
    not_heads: tuple[str, ...]
    collector_ts: re.Pattern[str]
    head: re.Pattern[str]
    bare_version: re.Pattern[str]
    conn_prefixes: tuple[str, ...]
    conn: re.Pattern[str]
    version: re.Pattern[str]
    cuda_driver: re.Pattern[str]
    env: re.Pattern[str]
    bootstrap: re.Pattern[str]
    net_ib: re.Pattern[str]
    net_socket: re.Pattern[str]
    using_net: re.Pattern[str]
    ofi: re.Pattern[str]
    init: re.Pattern[str]
    topo: re.Pattern[str]
    conn_apart: bool
    """`_starts_apart(conn_prefixes)`."""


@cache
def _patterns() -> _Rx:
    from parsers import nccl

    return _Rx(
        *(_rx(nccl._FAST_HEAD), nccl._FAST_NOT_HEADS, _rx(nccl._COLLECTOR_TS), _rx(nccl.NCCL_HEAD_RE)),
        _rx(nccl.BARE_VERSION_RE),
        nccl._CONN_PREFIXES,
        *(_rx(x) for x in (nccl.CONN_RE, nccl.VERSION_RE, nccl.CUDA_DRIVER_RE, nccl.ENV_RE)),
        _rx(nccl.BOOTSTRAP_RE),
        *(_rx(x) for x in (nccl.NET_IB_RE, nccl.NET_SOCKET_RE, nccl.USING_NET_RE, nccl.OFI_RE)),
        *(_rx(x) for x in (nccl.INIT_RE, nccl.TOPO_RE)),
        _starts_apart(nccl._CONN_PREFIXES),
    )


def _bare_version(text: str) -> re.Match[str] | None:
    """`nccl.BARE_VERSION_RE` on a line (the whole line: `^...$`)."""
    return _patterns().bare_version.match(text)


def _classify(msg: str, rx: _Rx) -> tuple[tuple[str, tuple[Any, ...]], ...]:
    """What `nccl._nccl_rows` reads in a record's message: (kind, values) for each row kind it gives ('conn':
    a ring/tree/channel line; the others the fields `_rows` keeps), in `_rows`' order."""
    if msg[:4] in rx.conn_prefixes and rx.conn_apart and _no_substring_kind(msg):
        return _CONN_ONLY if rx.conn.search(msg) else _NOTHING  # (`_substring_kinds` adds nothing)
    out: list[tuple[str, tuple[Any, ...]]] = []
    if msg[:4] in rx.conn_prefixes:
        if rx.conn.search(msg):
            out.append(("conn", ()))
        if rx.conn_apart:  # (no word below opens such a message)
            return _substring_kinds(msg, rx, out)
    if msg.startswith("NCCL version"):
        m = rx.version.search(msg)
        if m:
            out.append(("ver", (m.group("ver"), m.group("cuda"))))
    elif msg.startswith("cudaDriverVersion"):
        m = rx.cuda_driver.search(msg)
        if m:
            out.append(("drv", (_int(m.group(1), _I64),)))
    if msg.startswith("NCCL_"):
        m = rx.env.search(msg)
        if m:
            out.append(("env", (m.group("var"), m.group("val"))))
    if msg.startswith("Bootstrap"):
        m = rx.bootstrap.search(msg)
        if m:
            out.append(("bs", (m.group("ifname"), m.group("ip"))))
    elif msg.startswith("NET/IB"):
        m = rx.net_ib.search(msg)
        if m:
            out.append(("ib", (msg, m)))
    elif msg.startswith("NET/Socket"):
        if rx.net_socket.search(msg):
            out.append(("sock", (msg,)))
    elif msg.startswith("Using network"):
        m = rx.using_net.search(msg)
        if m:
            out.append(("using", (m.group(1),)))
    return _substring_kinds(msg, rx, out)


def _no_substring_kind(msg: str) -> bool:
    """No literal `_substring_kinds` looks for is in `msg`."""
    return " - Init " not in msg and " nNodes " not in msg and "NET/OFI Selected" not in msg


def _substring_kinds(
    msg: str, rx: _Rx, out: list[tuple[str, tuple[Any, ...]]]
) -> tuple[tuple[str, tuple[Any, ...]], ...]:
    """`_classify`'s last checks (literals anywhere in the message), then its value (`_NOTHING` and
    `_CONN_ONLY` shared: `_rows` tells them by identity)."""
    if "NET/OFI Selected" in msg:
        m = rx.ofi.search(msg)
        if m:
            out.append(("ofi", (m.group("prov"), _int(m.group("nics"), _I64))))
    if " - Init " in msg:
        m = rx.init.search(msg)
        if m:
            out.append(("init", (m,)))
    if " nNodes " in msg:
        m = rx.topo.search(msg)
        if m:
            out.append(("topo", (m,)))
    if not out:
        return _NOTHING
    if len(out) == 1 and out[0] == _CONN_ONLY[0]:
        return _CONN_ONLY
    return tuple(out)


_NOTHING: tuple[tuple[str, tuple[Any, ...]], ...] = ()
_CONN_ONLY: tuple[tuple[str, tuple[Any, ...]], ...] = (("conn", ()),)


def _starts_apart(prefixes: tuple[str, ...]) -> bool:
    """No message opening with one of `prefixes` (4 characters each) opens with one of `_STARTS`."""
    return all(len(p) == 4 for p in prefixes) and all(w[:4] not in prefixes and len(w) >= 4 for w in _STARTS)


_STARTS = ("NCCL version", "cudaDriverVersion", "NCCL_", "Bootstrap", "NET/IB", "NET/Socket", "Using network")
"""The words `_classify` looks for at a message's start."""


def _rows(recs: list[_Rec], bares: list[_Rec], ctx: FileContext, memo: dict[Any, Any]) -> _Rows:
    """A file's rows (`nccl._nccl_rows` for its records). `memo`: messages and network lines read before (a
    message's rows follow from its text, and the ranks and nodes of a job print the same ones)."""
    from parsers import nccl

    path = ctx.path
    inv: list[tuple[Any, ...]] = []
    ver: list[tuple[Any, ...]] = []
    cuda_drv: list[tuple[Any, ...]] = []
    env: list[tuple[Any, ...]] = []
    ips: list[tuple[Any, ...]] = []
    ib: list[tuple[Any, ...]] = []
    sock: list[tuple[Any, ...]] = []
    using: list[tuple[Any, ...]] = []
    ofi: list[tuple[Any, ...]] = []
    init: list[tuple[Any, ...]] = []
    topo: list[tuple[Any, ...]] = []
    bs_ips: list[tuple[Any, ...]] = []
    conn = 0
    rx = _rx
    pats = _patterns()
    kinds = {
        "ver": ver, "drv": cuda_drv, "env": env, "bs": bs_ips, "ib": ib, "sock": sock, "using": using,
        "ofi": ofi, "init": init, "topo": topo,
    }
    for line, h, msg in recs:
        got = memo.get(msg)
        if got is None:
            got = memo[msg] = _classify(msg, pats)
        if got is _CONN_ONLY:
            conn += 1
        elif got:
            for kind, value in got:
                if kind == "conn":
                    conn += 1
                else:
                    kinds[kind].append((h, line, *value))
    for line, h, m in bares:  # (after the prefixed ones, as `nccl._nccl_rows` concatenates them)
        cuda = m.group("cuda") if m.group("cuda") is not None else m.group("cuda2")
        ver.append(({"node": h["node"], "pid": None}, line, m.group("ver"), cuda))
    for h, line, v, cuda in ver:
        inv.append((h["node"], "software", None, "nccl_version", v, "nccl", path, line))
    for h, line, v, cuda in ver:
        if cuda is not None:
            inv.append((h["node"], "software", None, "nccl_cuda_version", cuda, "nccl", path, line))
    for h, line, v in cuda_drv:
        if v is not None:  # (a version no Int64 holds, a corrupt line: no fact, as `nccl._nccl_rows`)
            inv.append((h["node"], "software", None, "cuda_driver_version", f"{v // 1000}.{(v % 1000) // 10}",
                        "nccl", path, line))
    for h, line, var, val in env:
        inv.append((h["node"], "software", None, "env." + var, val, "nccl", path, line))
    for h, line, ifname, ip in bs_ips:
        ips.append((h["node"], "node", ifname, "ip", ip, "nccl", path, line))
    for h, line, _msg, m in ib:
        ips.append((h["node"], "node", m.group("ifname"), "ip", m.group("ip"), "nccl", path, line))
    inv.extend(ips)
    net: list[tuple[Any, ...]] = []
    item_rx = rx(nccl.NET_IB_ITEM_RE)
    for h, line, msg, m in ib:
        got = memo.get(("ib", msg))
        if got is None:
            items = [x.group(0) for x in item_rx.finditer(msg)]
            dev = ",".join(rx(r"\]([\w.-]+):").search(it).group(1) for it in items)  # type: ignore[union-attr]
            detail = _json(
                transport="RoCE" if all(it.endswith("/RoCE") for it in items) else "IB",
                devices=[re.sub(r"^\[\d+\]", "", it, count=1) for it in items],
                oob_if=m.group("ifname"),
                oob_ip=m.group("ip"),
                relaxed_ordering="[RO]" in msg,
            )
            nics = [item_rx.search(it).groups() for it in items]  # type: ignore[union-attr]
            got = memo[("ib", msg)] = (dev, detail, nics)
        dev, detail, nics = got
        net.append((h["node"], h["pid"], line, dev, detail, "network", path))
        inv.extend((h["node"], "nic", g[0], "nccl_transport", g[2], "nccl", path, line) for g in nics)
    sock_rx = rx(nccl.NET_SOCKET_ITEM_RE)
    for h, line, msg in sock:
        got = memo.get(("sock", msg))
        if got is None:
            items = [x.group(0) for x in sock_rx.finditer(msg)]
            dev = ",".join(rx(r"\]([^:\s]+):").search(it).group(1) for it in items)  # type: ignore[union-attr]
            detail = _json(transport="Socket", devices=items)
            addrs = [sock_rx.search(it).groups() for it in items]  # type: ignore[union-attr]
            got = memo[("sock", msg)] = (dev, detail, addrs)
        dev, detail, addrs = got
        net.append((h["node"], h["pid"], line, dev, detail, "network", path))
        inv.extend((h["node"], "node", g[0], "ip", g[1], "nccl", path, line) for g in addrs)
    for h, line, netname in using:
        detail = memo.get(("using", netname))
        if detail is None:
            detail = memo[("using", netname)] = _json(transport=netname, selected=True)
        net.append((h["node"], h["pid"], line, None, detail, "network", path))
    for h, line, prov, nics in ofi:
        detail = _json(transport="OFI", provider=prov, nics=nics)
        net.append((h["node"], h["pid"], line, None, detail, "network", path))
    rank = _rank_rows(init, topo, ver, path)
    kind = (1 if net else 0) | (2 if rank else 0)
    comms: list[tuple[Any, ...]] = net if kind == 1 else rank if kind == 2 else []
    if kind == 3:
        # the network rows, then the rank rows: `pl.concat(how="diagonal_relaxed")` of the two (columns in
        # order of first appearance, missing ones null), built at once
        pad = (None,) * (len(_BOTH) - len(_NET_SCHEMA))
        comms = [r + pad for r in net]
        comms += [_FROM_RANK(r + (None,)) for r in rank]
    # `unique(subset=[node, component, device, attribute, value], keep="first", maintain_order=True)`
    seen: set[tuple[Any, ...]] = set()
    first = []
    for r in inv:
        if r[:5] not in seen:
            seen.add(r[:5])
            first.append(r)
    notes = [f"{conn} ring/tree/channel lines"] if conn else []
    hosts = sorted({h["node"] for _line, h, _msg in recs})
    return _Rows(comms, kind, first, notes, hosts[0] if len(hosts) == 1 else None, len(recs))


def _frame(rows: list[tuple[Any, ...]], schema: dict[str, Any]) -> pl.DataFrame:
    """`pl.DataFrame(rows, schema=schema, orient="row")` (rows: at least one), built column by column (a
    Series per column from its values: half the time of the row-wise build)."""
    if not COLUMN_FRAMES:
        return pl.DataFrame(rows, schema=schema, orient="row")
    cols = zip(schema.items(), zip(*rows), strict=True)
    return pl.DataFrame([pl.Series(name, values, dtype=dtype) for (name, dtype), values in cols])


COLUMN_FRAMES = True
"""Build `results`' frames column by column (tests compare with the row-wise build)."""


def results(files: list[_Rows]) -> list[ParseResult]:
    """Each file's ParseResult: its rows' tables, each table built once for all the files and cut per file
    (a file's rows are contiguous)."""
    comms: list[pl.DataFrame | None] = [None] * len(files)
    for kind, schema in ((1, _NET_SCHEMA), (2, _RANK_SCHEMA), (3, _BOTH_SCHEMA)):
        mine = [i for i, f in enumerate(files) if f.kind == kind]
        if mine:
            frame = _frame([r for i in mine for r in files[i].comms], schema)
            at = 0
            for i in mine:
                n = len(files[i].comms)
                comms[i] = frame.slice(at, n)
                at += n
    inv_rows = [r for f in files for r in f.inventory]
    inv = _frame(inv_rows, _INV_SCHEMA) if inv_rows else None
    out = []
    at = 0
    for f, c in zip(files, comms, strict=True):
        tables: dict[str, pl.DataFrame] = {}
        if c is not None:
            tables["comms"] = c
        if f.inventory and inv is not None:
            tables["inventory"] = inv.slice(at, len(f.inventory))
            at += len(f.inventory)
        out.append(
            ParseResult(
                tables=tables,
                parsed=f.parsed,
                unrecognized=0,
                unrecognized_examples=[],
                notes=f.notes,
                node=f.node,
            )
        )
    return out


def _rank_rows(init: list[Any], topo: list[Any], ver: list[Any], path: str) -> list[tuple[Any, ...]]:
    """The comms 'rank' rows (`nccl._nccl_rows`' rank map), as tuples in `_RANK_SCHEMA` order."""
    if not init and not topo:
        return []
    # a row: [node, pid, line, comm, comm_id, rank, nranks, cuda_dev, gpu_bus_id, phase, nvml_dev, prio,
    # nnodes, local_rank]
    rows: list[list[Any]] = []
    for h, line, m in init:
        comm, commid, rank, nranks, dev, bus, phase, nvml = m.group(*_INIT_GROUPS)
        rows.append(
            [
                h["node"], h["pid"], line, comm, commid or comm, _int(rank, _I32), _int(nranks, _I32),
                _int(dev, _I32), _bus_id(bus), phase, _int(nvml, _I32), 0 if phase == "COMPLETE" else 1,
                None, None,
            ]
        )
    for h, line, m in topo:
        comm, rank, nranks, nnodes, lrank = m.group(*_TOPO_GROUPS)
        rows.append(
            [
                h["node"], h["pid"], line, comm, comm, _int(rank, _I32), _int(nranks, _I32), h["dev"], None,
                "topology", None, 2, _int(nnodes, _I32), _int(lrank, _I32),
            ]
        )
    # commId (when some line printed it) wins for every row of the same process-local comm pointer
    cid: dict[tuple[Any, ...], str] = {}
    for r in rows:
        if r[4] != r[3]:
            k = (r[0], r[1], r[3])
            if k not in cid:
                cid[k] = r[4]
    if cid:
        for r in rows:
            k = (r[0], r[1], r[3])
            if k in cid and r[1] is not None:  # (a join: a null pid matches nothing)
                r[4] = cid[k]
    rows.sort(key=_BY_PRIO_LINE)
    groups: dict[tuple[Any, ...], list[list[Any]]] = {}
    for r in rows:
        k = (r[0], r[1], r[3], r[5])
        g = groups.get(k)
        if g is None:
            groups[k] = [r]
        else:
            g.append(r)

    vers = {v for _h, _line, v, _c in ver}
    one_ver = next(iter(vers)) if len(vers) == 1 else None
    pver: dict[tuple[Any, Any], str] = {}
    for h, _line, v, _c in ver:
        if h["pid"] is not None:
            pver.setdefault((h["node"], h["pid"]), v)
    out = []
    for (node, pid, comm, rk), rs in groups.items():
        r0 = rs[0]
        if len(rs) == 1:
            phases = [r0[9]]
            nranks, cuda_dev, bus, nvml, nnodes, lrank = r0[6], r0[7], r0[8], r0[10], r0[12], r0[13]
        else:
            phases = sorted({r[9] for r in rs})
            nranks, cuda_dev, bus, nvml, nnodes, lrank = (_first(rs, i) for i in (6, 7, 8, 10, 12, 13))
        # `_json(comm=, phase=, phases=, nvml_dev=, nnodes=, local_rank=)`: the comm pointer (`0x` and hex
        # digits) and the phases (START, COMPLETE, topology) are plain strings, the others ints or None
        detail = f'{{"comm":"{comm}","phase":"{r0[9]}","phases":["' + '","'.join(phases) + '"]'
        if nvml is not None:
            detail += f',"nvml_dev":{nvml}'
        if nnodes is not None:
            detail += f',"nnodes":{nnodes}'
        if lrank is not None:
            detail += f',"local_rank":{lrank}'
        v = pver.get((node, pid)) if pid is not None else None
        out.append(
            (
                "rank", node, r0[4], rk, nranks, cuda_dev, bus, pid, v if v is not None else one_ver,
                detail + "}", path, r0[2],
            )
        )
    return out


_INIT_GROUPS = ("comm", "commid", "rank", "nranks", "dev", "bus", "phase", "nvml")
_TOPO_GROUPS = ("comm", "rank", "nranks", "nnodes", "lrank")
_BY_PRIO_LINE = itemgetter(11, 2)


def _first(rs: list[list[Any]], i: int) -> Any:
    """The first value of field `i` among rows `rs` that is not None."""
    for r in rs:
        if r[i] is not None:
            return r[i]
    return None
