"""The sniffers' exact shortcuts of round 7 (nccl, kernel-log): the scores stay those of the sniffers as
they were, kept here verbatim as references, on every fixture head and on mutated, mixed and random heads."""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parsers import kernel_log as klm
from parsers import nccl as ncm
from parsers._sniff import contains, head_text
from tests.parsers._heads import FIXTURES, POOL, check, fixture_heads

# ----------------------------------------------------------------------------- references (verbatim)


def old_nccl_sniff(head: bytes, name: str) -> float:
    """The NCCL sniffer before round 7."""
    text = head_text(head)
    nccl = contains(text, ncm._SNIFF_G_NCCL)
    comms = contains(text, ncm._SNIFF_G_COMMS)
    ofi = ncm._any_in(text, ncm._SNIFF_G_OFI, ncm._SNIFF_OFI_LITS is not None)
    if not nccl and not comms and not ofi:
        return 0.0  # no NCCL line, bare version line, ncclras report or OFI line can match (each needs one)
    lines = [ln for ln in text.splitlines()[:400] if ln.strip() and not ln.startswith("#SOURCE")]
    if not lines:
        return 0.0
    hits = ncm._sniff_hits(text) if nccl else 0  # (it is 0 without "NCCL ")
    tests = ncm._any_in(text, ncm._SNIFF_G_NCCLTESTS, ncm._SNIFF_NCCLTESTS_LITS is not None)
    if tests and ncm._SNIFF_NCCLTESTS.search(text):
        return 0.4 if hits else 0.0  # nccl-tests output carries NCCL lines too; its parser should win
    if (comms or (nccl and contains(text, ncm._SNIFF_G_VERSION))) and ncm._SNIFF_RAS.search(text):
        return 0.9
    if ofi and ncm._SNIFF_OFI.search(text):
        return 0.8
    may_bare = ncm._any_in(text, ncm._SNIFF_G_BARE, ncm._SNIFF_BARE_LITS is not None)
    bare = len(ncm._SNIFF_BARE.findall(text)) if may_bare else 0
    if not hits and not bare:
        return 0.0
    share = (hits + bare) / len(lines)
    if share >= 0.4:
        return 0.95
    if share >= 0.15:
        return 0.85
    return 0.6


def old_kernel_sniff(head: bytes, name: str) -> float:
    """The kernel-log sniffer before round 7."""
    text = head_text(head)
    if "\x1b" in text and "\x1b[" in text:
        text = re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", text)
    # literal guards first: `^\s*` in multi-line mode is quadratic over thousands of blank lines
    # (each literal's two rarest characters looked for first: a memchr each)
    btime = contains(text, klm._SNIFF_BTIME)
    if btime and klm._PROC_STAT.search(text) and re.search(r"^cpu\d* +\d+ \d+", text, re.M):
        return 0.9  # /proc/stat: gives the boot time (btime)
    if (
        contains(text, klm._SNIFF_TZ)
        and klm._TIMEDATECTL.search(text)
        and "Local time: " in text
        and re.search(r"^\s*Local time: ", text, re.M)
    ):
        return 0.9  # timedatectl: gives the zone of the node's local-time logs
    maybe_bare = klm._BARE_LITERALS is None or any(contains(text, lit) for lit in klm._BARE_GUARDED)
    if not maybe_bare:
        # no bare line: the score is 0 unless strong lines are >= 40 % of the n counted lines (n <= 300);
        # `strong <= bound` and `n >= klm._lines_at_least`, and 5 * strong < 2 * n is `strong / n < 0.4`
        bound = klm._strong_bound(text, 120)
        if bound == 0 or (bound < 120 and 5 * bound < 2 * klm._lines_at_least(text)):
            return 0.0
    # (`ln and not ln.isspace()` is `ln.strip()`'s truth without a copy)
    lines = [ln for ln in text.splitlines()[:300] if ln and not ln.isspace() and ln[0] != "#"]
    if not lines:
        return 0.0
    n = len(lines)
    # The lines with a strong prefix are counted first, alone, the first 60 % of the lines at once: unless
    # the head may hold bare kernel lines, the score is 0 when the lines left cannot bring them to 40 % (a
    # strong share below it scores 0, and so does no strong line without bare ones), which most heads of
    # other formats reach there. The weak prefixes are tried on the other lines only where the score
    # depends on them.
    bodies = lines
    if ": " in text:  # (`PDSH_RE` needs one)
        pdsh = list(map(klm._SNIFF_PDSH.match, lines))
        if pdsh.count(None) < n:
            bodies = [ln if m is None else m.group("rest") for ln, m in zip(lines, pdsh)]
    cut = n if maybe_bare else min(n, int(0.6 * n) + 1)
    hits = list(map(klm._SNIFF_STRONG_ANY.match, bodies[:cut]))
    strong = cut - hits.count(None)
    if cut < n:
        if (strong + n - cut) / n < 0.4:
            return 0.0
        hits += map(klm._SNIFF_STRONG_ANY.match, bodies[cut:])
        strong = n - hits.count(None)
    if strong == 0:
        # K12: kernel lines pasted without their stamp ('kernel: NVRM: Xid ...'); NVRM lines are unambiguous
        bare = sum(1 for ln in lines if klm._BARE.match(ln))
        return 0.6 if bare / n >= 0.6 else 0.0
    if strong / n < 0.4:
        return 0.0
    weak = sum(1 for ln, hit in zip(lines, hits) if hit is None and klm._SNIFF_WEAK_ANY.match(ln))
    share = (strong + weak) / n
    if share < 0.6:
        return 0.0
    kernelish = bool(klm._KERNELISH.search(text))
    if kernelish:
        return 0.95 if share > 0.9 else 0.85
    return 0.6 if share > 0.9 else 0.4


# ----------------------------------------------------------------------------- heads


SPECIAL = [
    "",
    "   ",
    "\t",
    "#SOURCE node1 a:1:2 [0] NCCL INFO x",
    "#SOURCE x",
    "# comment",
    "NCCL version 2.18.5+cuda12.2",
    "node1: NCCL version 2.21.5+cuda12.4",
    "a:1:2 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>",
    "a:1:2 [0] NCCL WARN Call to ibv_poll_cq failed",
    "gpu-01:1234:1290 [7] NCCL INFO Channel 00/02 :    0   1",
    "a:1:2 [0] NCCL INFOx",
    "x a:1:2 [0] NCCL INFO a:1:2 [0] NCCL INFO",
    "Communicators... (0.00s)",
    "#0-1 (0123abcd) OK",
    "Job summary",
    "#  nThread 1 nGpus 8 minBytes 8",
    "#       size         count      type   redop    root     time   algbw   busbw",
    "# Avg bus bandwidth    : 12.3",
    "INFO: Function: ofi_init Line: 1200: NET/OFI Selected provider is efa",
    "[  12.345678] NVRM: Xid (PCI:0000:18:00): 79, pid=1, GPU has fallen off the bus.",
    "Mar  3 10:00:01 node1 kernel: [  12.3] mlx5_core 0000:1a:00.0: link down",
]


NCCLISH = [ln for ln in POOL if "NCCL" in ln] or SPECIAL[8:11]


def _random_heads(
    seed: int,
    count: int,
    shares: int,
    pick: Callable[[list[float], float], list[str]],
    seps: list[str],
    colour: bool = False,
) -> list[bytes]:
    """`count` heads of 1 to 450 lines: per head `shares` random numbers, then each line drawn from the list
    `pick(those numbers, a random number)` gives; lines joined by one of `seps`, maybe with a last line end,
    (`colour`: a tenth of them with ANSI colours), cut to 16,384, 2,000 or 300 bytes."""
    rnd = random.Random(seed)
    out = []
    for _ in range(count):
        n = rnd.choice([1, 2, 3, 5, 8, 13, 30, 80, 200, 450])
        mix = [rnd.random() for _ in range(shares)]
        lines = [rnd.choice(pick(mix, rnd.random())) for _i in range(n)]
        sep = rnd.choice(seps)
        text = sep.join(lines) + rnd.choice(["", "\n"])
        if colour and rnd.random() < 0.1:
            text = "\x1b[1m" + text.replace(" ", " \x1b[0m", 3)
        out.append(text.encode("utf-8", "replace")[: rnd.choice([16384, 16384, 2000, 300])])
    return out


def _nccl_pick(mix: list[float], r: float) -> list[str]:
    return NCCLISH if r < mix[0] else SPECIAL if r < mix[0] + 0.15 else POOL


def _mixed_heads(seed: int, count: int) -> list[bytes]:
    return _random_heads(seed, count, 1, _nccl_pick, ["\n", "\n", "\n", "\r\n", "\r", "\x0c", "\u2028"])


# ----------------------------------------------------------------------------- nccl


def test_nccl_sniff_same_on_fixture_heads() -> None:
    check(ncm.sniff, old_nccl_sniff, fixture_heads())


@pytest.mark.parametrize("seed", range(4))
def test_nccl_sniff_same_on_mixed_heads(seed: int) -> None:
    check(ncm.sniff, old_nccl_sniff, _mixed_heads(seed, 600))


NCCL_PARTS = [*SPECIAL, *NCCLISH[:50], "x", "NCCL ", " NCCL INFO", "a:1:2 [0]"]


@settings(max_examples=300)
@given(
    st.lists(st.sampled_from(NCCL_PARTS), max_size=60),
    st.sampled_from(["\n", "\r\n", "\r", " "]),
)
def test_nccl_sniff_same_on_random_heads(parts: list[str], sep: str) -> None:
    head = sep.join(parts).encode()
    assert ncm.sniff(head, "f") == old_nccl_sniff(head, "f")


def test_share_need_is_the_least_count_at_the_share() -> None:
    for most in range(1, 401):
        k = ncm._share_need(most)
        assert k / most >= 0.4 and (k == 1 or (k - 1) / most < 0.4)


@settings(max_examples=200)
@given(st.text(alphabet="ab \n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029", max_size=80))
def test_line_bound_is_a_bound(text: str) -> None:
    assert ncm._line_bound(text) >= min(400, len(text.splitlines()))


# ----------------------------------------------------------------------------- kernel-log

KERNELISH = [ln for ln in POOL if re.search(r"NVRM|kernel|\[ *\d+\.\d+\]|btime|Time zone", ln)]
LEADS = [
    "NVRM: Xid (PCI:0000:18:00): 79",
    "kernel: NVRM: GPU at PCI:0000:18:00",
    "nvidia-nvswitch3: link down",
    "nvidia-peermem: loaded",
    "mlx5_core: fw",
    "pcieport: AER",
    "btime 1700000000",
    "cpu  1 2 3 4",
    "cpu0 1 2 3",
    "       Time zone: UTC (UTC, +0000)",
    "      Local time: Mon 2024-01-01 00:00:00 UTC",
    "kernel:   NVRM: x",
    " NVRM: not at start",
]


def _kernel_pick(mix: list[float], r: float) -> list[str]:
    if r < mix[0] * 0.5:
        return KERNELISH or LEADS
    if r < mix[0] * 0.5 + mix[1] * 0.3:
        return LEADS
    return SPECIAL if r < mix[0] * 0.5 + mix[1] * 0.3 + 0.1 else POOL


def _kernel_heads(seed: int, count: int) -> list[bytes]:
    seps = ["\n", "\n", "\n", "\r\n", "\r", "\x0c", "\u2028", "\x1e"]
    return _random_heads(seed, count, 3, _kernel_pick, seps, colour=True)


def test_kernel_sniff_same_on_fixture_heads() -> None:
    check(klm.sniff, old_kernel_sniff, fixture_heads())


@pytest.mark.parametrize("seed", range(4))
def test_kernel_sniff_same_on_mixed_heads(seed: int) -> None:
    check(klm.sniff, old_kernel_sniff, _kernel_heads(seed, 600))


@settings(max_examples=300)
@given(
    st.lists(st.sampled_from(LEADS + SPECIAL + KERNELISH[:60] + ["x", "", "[ 1.0] a"]), max_size=60),
    st.sampled_from(["\n", "\r\n", "\r", " ", "\x0b"]),
)
def test_kernel_sniff_same_on_random_heads(parts: list[str], sep: str) -> None:
    head = sep.join(parts).encode()
    assert klm.sniff(head, "f") == old_kernel_sniff(head, "f")


def _kernel_lines() -> list[str]:
    out = []
    for p in sorted((FIXTURES / "kernel-log").rglob("*")):
        if p.is_file():
            out += p.read_bytes()[:20000].decode("utf-8", "replace").splitlines()[:200]
    return out + LEADS + KERNELISH


def test_every_strong_line_opens_with_the_opener() -> None:
    # `kernel_log._opened_lines`: a line a strong style or a pdsh prefix matches opens with `_OPENER`
    assert klm._OPENS_KNOWN  # (a changed style or pdsh prefix: work `_OPENER` out again, then its hash)
    assert tuple(klm._SNIFF_STRONG) == tuple(klm._STYLE_RE[s] for s in klm._STRONG_STYLES)
    lines = _kernel_lines()
    real = Path("/work/shared/real-logs")
    if real.is_dir():
        for p in sorted(real.rglob("*")):
            if p.is_file():
                lines += p.read_bytes()[:8000].decode("utf-8", "replace").splitlines()[:60]
    assert sum(1 for ln in lines if klm._SNIFF_STRONG_ANY.match(ln)) > 100  # (the sample holds strong lines)
    rnd = random.Random(3)
    heads = [
        *("", " ", "\t", "#", "<6>", "<13>1 ", "[", "[ ", "{", "r06n09:1:2 ", "node01: ", "gpu1: "),
        *("kern  :warn  : ", "Mar", "März", "3月", "x", "é", "1", "a1", "ab", "A", "_", ".", "-", ":"),
        *("]", ">"),
        *("a:", "a :", "\x1c"),
    ]
    sample = list(lines)
    for ln in lines:
        for _ in range(4):
            cut = rnd.randrange(min(len(ln), 12) + 1)
            sample.append(rnd.choice(heads) + ln[cut:])
    strong = 0
    for ln in sample:
        if not ln.isascii():  # (`sniff` looks at the line starts of ASCII heads only)
            continue
        if klm._SNIFF_PDSH.match(ln) or (klm._SNIFF_STRONG_ANY.match(ln) and not ln.startswith("#")):
            strong += 1
            assert klm._OPENS.match(ln), ln
    assert strong > 500


# `_OPENER` as worked out from the styles, with the classes of the styles (`\s`, `\d`, `\w`) and no possessive
# repeat: on ASCII text `_OPENER` matches where it does
OPENER_REFERENCE = (
    r"(?!#)(?:[0-9{]|<\d|\[(?:\s*\d|[^\s\d\[\]]{2,5}\.?,? )|[a-z]+\s*:|[^\s\d:\[\]<>]{2,6}\.?\s+\d|[\w.-]+: )"
)


@settings(max_examples=500)
@given(st.text(alphabet="aZ09 \t\x0b\x1c\x1f#<>[]{}:._-,\n", max_size=14))
def test_opener_is_its_reference_on_ascii(text: str) -> None:
    assert bool(klm._OPENS.match(text)) == bool(re.match(OPENER_REFERENCE, text))


def test_opener_is_its_reference_on_ascii_lines() -> None:
    for ln in _kernel_lines() + POOL:
        if ln.isascii():
            for cut in range(min(len(ln), 8)):
                rest = ln[cut:]
                assert bool(klm._OPENS.match(rest)) == bool(re.match(OPENER_REFERENCE, rest)), rest


def test_bare_and_btime_lines_open_with_a_lead_word() -> None:
    lines = _kernel_lines()
    bare = [ln for ln in lines if klm._BARE.match(ln)]
    assert bare
    assert all(klm._LEAD.match(ln) for ln in bare)
    stat = [m.group(0) for ln in [*lines, "btime 1700000000"] if (m := klm._PROC_STAT.search(ln))]
    assert stat
    assert all(klm._LEAD.match(x) for x in stat)
    # (`sniff` skips their scan in a long head none of whose lines opens: each of them opens)
    assert all(klm._OPENS.match(x) for x in bare + stat if x.isascii())


INDENTED = ["    Product Name           : NVIDIA H100", '\t<gpu id="00000000:18:00.0">', "  x", "\tLink 0: 2"]
CLOSED = ["r06n09:1910366:1910440 [0] NCCL INFO Using network IB", "[rank0]:[titan] step: 5", "Timestamp : x"]


def _long_heads(seed: int, count: int) -> list[bytes]:
    """ASCII heads of over 9,000 characters ('\\n' lines) of indented, closed, opening and kernel lines: the
    line-start shortcuts' ground."""
    rnd = random.Random(seed)
    kernel = [ln for ln in KERNELISH + LEADS if ln.isascii()]
    out = []
    for _ in range(count):
        mix = [rnd.random() ** 2 for _ in range(4)]
        if rnd.random() < 0.3:
            mix[2] = mix[3] = 0.0  # (no line opens, or a few: 'btime', 'Time zone' lines only)
            mix[1] += 0.01
        lines: list[str] = []
        while sum(map(len, lines)) < 9500:
            r = rnd.random() * sum(mix)
            pick = INDENTED if r < mix[0] else CLOSED if r < mix[0] + mix[1] else kernel
            pick = SPECIAL if r >= sum(mix[:3]) else pick
            lines.append(rnd.choice(pick) if rnd.random() > 0.002 else rnd.choice(LEADS))
        out.append(("\n".join(lines) + "\n").encode()[:16384])
    return out


@pytest.mark.parametrize("seed", range(3))
def test_kernel_sniff_same_on_long_heads(seed: int) -> None:
    heads = _long_heads(seed, 400)
    assert sum(1 for h in heads if len(h) > klm.OPENED_FIRST) == len(heads)
    check(klm.sniff, old_kernel_sniff, heads)


def test_kernelish_by_parts_is_the_alternation() -> None:
    assert klm._KERNELISH_SPLIT
    heads = [head_text(h) for h in fixture_heads()[::3] + _kernel_heads(9, 300)]
    words = [
        *("kernel:", "NVRM", "Linux version", "xLinux version", "ACPI", "ACPIx", "pci 0000:", "usb 1"),
        *("sd 0", "ata1", "AERx", " AER ", "EDAC", "mce: ", "systemd[1]", "IPv6: ", "NET: ", "EXT4-fs"),
        *("Hardware Error", "nvidia", "x", "_", "a1"),
    ]
    rnd = random.Random(2)
    heads += [" ".join(rnd.choice(words) for _ in range(rnd.randrange(4))) for _ in range(3000)]
    for t in heads:
        assert klm._kernelish(t) == bool(klm._KERNELISH.search(t)), t[:200]


def test_pdsh_lines_open_with_the_pdsh_opener() -> None:
    lines = [ln for ln in _kernel_lines() + POOL if ln.isascii()]
    rnd = random.Random(6)
    names = ["node01", "a", "gpu-1.x", "r06n09:1", "_x", "1", "a b", "a.b-c_d", "n1:"]
    sample = lines + [f"{rnd.choice(names)}{rnd.choice([': ', ':', ' : '])}{ln}" for ln in lines]
    hits = 0
    for ln in sample:
        if klm._SNIFF_PDSH.match(ln):
            hits += 1
            assert klm._PDSH_OPEN.match(ln), ln
    assert hits > 100
