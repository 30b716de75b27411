"""`kernel_log._syslog_lane` against a Python reading of its contract, on seeded random RFC 3164 lines.

A lane line is 'Mon DD HH:MM:SS[.frac] host tag[pid]: msg' whose part before the first ': ' matches
`_LANE_PREFIX` (ASCII); its fields are cut by position: msg after that ': ', mon/day/hms at fixed places,
host and tag the two words of 'host tag[pid]'. Every other row is returned untouched as `other`.
"""

from __future__ import annotations

import random
import re

import polars as pl
import pytest

from parsers import kernel_log as kl

HOSTS = ["gpu-01", "node.x.y", "10.0.0.1", "ĥost", "h:o", "h[1]", "a b", "", "x]"]
TAGS = [
    "kernel",
    "sshd[12]",
    "systemd[1]",
    "kubelet[28074]",
    "CRON[9",
    "tag:",
    "t ag",
    "ŧag[3]",
    "[x]",
    "a[b]",
]
MSGS = [
    "[42381.687855] nvidia-peermem x",
    "NVRM: Xid (PCI:0000:18:00): 79, pid=1, GPU has fallen off the bus.",
    "hello: world",
    "",
    "[UFW BLOCK] IN=eth0",
    "ünïcode: ok",
]


def _pick(r: random.Random, good: list[str], bad: list[str], p: float = 0.9) -> str:
    return r.choice(good) if r.random() < p or not bad else r.choice(bad)


def _line(r: random.Random, precise: bool) -> str:
    mon = _pick(r, ["Nov", "Jan", "Dec"], ["nov", "Foo"])
    day = _pick(r, [" 5", "15", "05", "31"], ["5 ", "4x"])
    hms = _pick(r, ["10:46:42", "00:00:01"], ["1:46:42", "10:46:4x"])
    if precise and r.random() < 0.8:
        hms += r.choice([".123456", ".1", ".", ""])
    sep = _pick(r, [": ", ":  "], [":", " : ", ": :"])
    host, tag = _pick(r, HOSTS[:3], HOSTS[3:]), _pick(r, TAGS[:4], TAGS[4:])
    s = f"{mon} {day} {hms} {host} {tag}{sep}{r.choice(MSGS)}"
    if r.random() < 0.03:
        s = s.replace(" ", "  ", 1)
    if r.random() < 0.02:
        s = s[: r.randrange(len(s) + 1)]
    return s


def _reference(bodies: list[str], precise: bool) -> tuple[list[dict[str, object]], list[int]]:
    rx = re.compile(kl._LANE_PREFIX if precise else kl._LANE_PREFIX.replace(kl._LANE_FRAC, ""))
    lane: list[dict[str, object]] = []
    other: list[int] = []
    for i, b in enumerate(bodies):
        c = b.find(": ")
        prefix = b[:c] if c >= 0 else None
        if prefix is None or not prefix.isascii() or not rx.search(prefix):
            other.append(i)
            continue
        first = 16 + prefix[15:].find(" ") if precise else 16
        host, tag = prefix[first:].split(" ")
        lane.append(
            {
                "line": i,
                "msg": b[c + 2 :],
                "mon": b[0:3],
                "day": b[4:6].removeprefix(" "),
                "hms": b[7:15],
                "host": host,
                "tag": tag,
            }
        )
    return lane, other


@pytest.mark.parametrize("seed", range(8))
def test_syslog_lane_matches_reference(seed: int) -> None:
    r = random.Random(seed)
    precise = seed % 2 == 1
    bodies = [_line(r, precise) for _ in range(r.choice([40, 1500]))]
    if precise:
        # `_syslog_lane` decides on fractions from the head: make sure the head shows one
        bodies[0] = "Nov 29 10:46:42.123456 gpu-01 kernel: x"
    sub = pl.DataFrame({"line": pl.Series(range(len(bodies)), dtype=pl.Int64), "body": bodies})
    lane, other = kl._syslog_lane(sub)
    want_lane, want_other = _reference(bodies, precise)
    cols = ["line", "msg", "mon", "day", "hms", "host", "tag"]
    assert lane.select(cols).to_dicts() == want_lane
    assert other.get_column("line").to_list() == want_other
    assert other.columns == ["line", "body"]
