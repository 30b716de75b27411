"""hf12: the step-log preparation's regex and literal passes over a big chunk, against the code it replaced
(verbatim in tests/parsers/_hf12_ref.py).

`_env_stack`: each line's stack of envelopes found one envelope at a time with `_ENV_CAP` (the regex the
prefixes are read with anyway) instead of the `_ENV_STACK` regex, whose compilation cost ~9 ms a range;
`_segments`: the four literal flags read in one Aho-Corasick pass; `_prepare` (own times), `_noise_lines`,
`_warning_lines`: their regexes run on a few gathered lines with ASCII classes when those lines are ASCII;
`_mixed._step_chunk`, `_mixed._both`, `step_log.parse`: whether the lines (the blanked lines) are ASCII
worked out once, from one pass over the chunk's lines.

Compared on envelope stacks and their mutations (null, empty, non-ASCII, CRLF lines, both ASCII scopes), on
`_segments`' answers, and on whole `_mixed.parse` results of the benchmark's Hugging Face logs (cut at random
line offsets, with envelopes, mutated lines, CRLF, non-ASCII lines among the dated, warning and noise lines,
the flags' literals), chunks whose non-ASCII lines are NCCL lines (blanked), the other generated training
logs and the fixtures grown past the big-chunk size.
"""

from __future__ import annotations

import itertools
import random
from pathlib import Path

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench import big_steps
from parsers import _mixed as M  # noqa: N812
from parsers import step_log as S  # noqa: N812
from parsers.base import FileContext, ParseResult
from tests.conftest import assert_same_result, mutated
from tests.parsers import _hf12_ref as R  # noqa: N812
from tests.parsers.test_hf10 import _hf_log
from tests.parsers.test_steplog_s8 import _GENS, _files, _grown

# ----------------------------------------------------------------------------- _env_stack

_ENVS = [
    "[1,3]<stdout>:",
    "[1,3]<stderr>: ",
    "stdout: ",
    "stderr F ",
    "(RayTrainWorker pid=123, ip=10.0.0.1) ",
    "(Actor pid=9) ",
    "  3: ",
    "12: ",
    "[default0]:",
    "[default3]: ",
    "[rank7]:",
    "[node-1.x:3] ",
    "[rank: 2] ",
    "gpu-node-343: ",
    "10.1.2.3: ",
    "RuntimeError: ",
    "[Rank 3] ",
    "\u0663: ",  # (a non-ASCII digit: `\d` takes it unless the scope is ASCII)
    "\u2003 4: ",
    "",
]
_BODIES = ["loss 1.5", " 3: x", "[default1]: y", "", "\r", "é: z", "gpu-node-1: ", '  File "x.py"', "12:"]


def _stack_same(lines: list[str | None], ascii: bool) -> None:
    text = pl.Series("rest", lines, dtype=pl.String)
    with S.ascii_scope(ascii):
        got = S._env_stack(text)
        want = text.str.extract(S._rx(S._ENV_STACK), 0)
    assert got.dtype == want.dtype
    assert got.equals(want, null_equal=True), [
        (x, a, b) for x, a, b in zip(lines, got.to_list(), want.to_list(), strict=True) if a != b
    ]


def test_env_stack_combinations() -> None:
    lines = ["".join(p) + b for p in itertools.product(_ENVS, repeat=3) for b in _BODIES[:3]]
    lines += ["".join(p) + b for p in itertools.product(_ENVS[:6], repeat=4) for b in _BODIES]
    lines += [None, "", "\r\n", "3: 4: 5: 6: 7: rest"]
    _stack_same(lines, False)
    _stack_same([x for x in lines if x is None or x.isascii()], True)
    _stack_same([], False)
    _stack_same([None, "no envelope"], False)


_ALPHABET = " :[]()<>,.0123456789abdefltuorsnkpi=\u00e9\u0663\u2003\r\n\t-|"


@settings(max_examples=80, deadline=None)
@given(
    st.lists(st.tuples(st.lists(st.sampled_from(_ENVS), max_size=4), st.sampled_from(_BODIES)), max_size=40),
    st.integers(0, 10**6),
)
def test_env_stack_mutated(stacks: list[tuple[list[str], str]], seed: int) -> None:
    rnd = random.Random(seed)
    lines = [mutated(rnd, "".join(envs) + body, _ALPHABET, edits=3, span=3) for envs, body in stacks]
    _stack_same(lines, False)
    _stack_same([x for x in lines if x.isascii()], True)


# ----------------------------------------------------------------------------- _segments

_FLAG_LINES = [
    "\x1b[32mINFO\x1b[0m step 3",
    "[32mpasted colour[0m",
    "------Begin global rank 3 STDOUT------",
    "[Rank 0] memory allocated",
    ':::MLLOG {"key": "run_start"}',
    "[Rank [Rank  global rankglobal rank :::MLLOG:::MLLOG",
    "global ran",
    "[Rank",
    "::MLLOG",
]


@pytest.mark.parametrize("k", range(len(_FLAG_LINES) + 1))
def test_segments_flags(k: int) -> None:
    rnd = random.Random(k)
    base = _hf_log(rnd, 300, envelope=rnd.choice(["", "w1: "]))
    extra = _FLAG_LINES[k : k + 2] if k < len(_FLAG_LINES) else []
    for lines in (base + extra, [None, *extra, ""], extra, []):
        ser = pl.Series("line", lines, dtype=pl.String)
        ctx = FileContext(path="n1/train.log", node="n1", first_line=7)
        got, want = S._segments(ser, ctx), R._segments(ser, ctx)
        for a, b in zip(got[:2], want[:2], strict=True):
            assert a.schema == b.schema
            assert a.equals(b, null_equal=True)
        assert got[2:4] == want[2:4]
        assert str(got[4]) == str(want[4])


# ----------------------------------------------------------------------------- whole chunks


def _ctx(first: int = 1) -> FileContext:
    return FileContext(path="gpu-node-003/train.log", node="gpu-node-003", first_line=first, year_hint=2025)


_REFS = ("_segments", "_strip_envelopes", "_prepare", "_noise_lines", "_warning_lines", "parse")


def _same(lines: list[str | None], first: int = 1) -> ParseResult:
    s = pl.Series("literal", lines, dtype=pl.String)
    got = M.parse(S, s, _ctx(first))
    with pytest.MonkeyPatch.context() as m:
        for fn in _REFS:
            m.setattr(S, fn, getattr(R, fn))
        m.setattr(M, "_step_chunk", R._step_chunk)
        m.setattr(M, "_both", R._both)
        want = M.parse(S, s, _ctx(first))
    assert_same_result(got, want)
    return got


_ODD_DIGITS = [
    "[INFO|trainer.py:2128] 2025-03-0\u0664 09:00:00,123 >> ***** Running training *****",
    "[INFO|trainer.py:2128] 2025-03-04 09:00:00,12\u0663 >> Saving model checkpoint to /out/c",
    "gpu-node-1: /x/y.py:1\u0662: UserWarning: \u00e9 deprecated",
    "gpu-node-1:   warnings.warn(",
    "I0304 09:00:0\u0661.123456 140234 train.py:540] loading",
    "***** Running training *****\u2003",
    "  Num examples = 1\u0662",
]


def _bench_hf(seed: int, skip: int, n: int) -> list[str]:
    gen = big_steps._hf(big_steps._Job(seed, 2, 8))
    return list(itertools.islice(gen, skip, skip + n))


_MUT = " .:()0123456789,ab-_/[]|{}'%\u00e9\u2003\r\x1b"


@pytest.mark.parametrize(
    ("seed", "how"), [(3, "flags"), (7, "envelope"), (11, "mutated crlf"), (19, "unicode nulls")]
)
def test_benchmark_hf_logs(seed: int, how: str) -> None:
    rnd = random.Random(seed)
    # (a big chunk; the others, of ~8k segments, are prepared alike)
    n = S._MEG_MIN + 100 if how == "flags" else 1200
    lines: list = _bench_hf(seed, rnd.randrange(0, 3000), n)
    if "envelope" in how:
        env = rnd.choice(["[default0]:", "gpu-node-7: ", "3: [rank3]: ", "[1,3]<stdout>: 2: "])
        lines = [env + x if rnd.random() < 0.7 else x for x in lines]
    if "mutated" in how:
        lines = [mutated(rnd, x, _MUT, 3, 3) if rnd.random() < 0.05 else x for x in lines]
    if "crlf" in how:
        lines = [x + "\r" if rnd.random() < 0.1 else x for x in lines]
    if "unicode" in how:
        lines = [x.replace("1", "\u0661", 1) if rnd.random() < 0.01 else x for x in lines]
        lines[rnd.randrange(len(lines))] = "\u0663: é line"
        for x in _ODD_DIGITS:  # (`\\d` takes these where the classes are Unicode ones, `[0-9]` does not)
            lines.insert(rnd.randrange(len(lines)), x)
    if "flags" in how:
        for x in _FLAG_LINES:
            lines.insert(rnd.randrange(len(lines)), x)
    if "nulls" in how:
        lines = [None if rnd.random() < 0.01 else ("" if rnd.random() < 0.01 else x) for x in lines]
    got = _same(lines, first=rnd.choice([1, 1001]))
    assert got.tables["steps"].height > 500


def test_blanked_lines_ascii() -> None:
    """Non-ASCII lines in the NCCL lines only (blanked: the step-log grammar reads ASCII lines), in a step
    line too, in neither (the chunk all ASCII), and no NCCL line (one grammar)."""
    rnd = random.Random(3)
    base = [x.split("\r")[-1].replace("█", "#") for x in _bench_hf(3, 100, S._MEG_MIN + 50)]
    nccl = "gpu-node-1:201:261 [0] NCCL WARN NET/IB : Got async event : port error \u00e9"
    for lines in (
        [nccl if i % 50 == 7 else x for i, x in enumerate(base)],
        [nccl if i % 50 == 7 else (x + " \u00e9" if i == 99 else x) for i, x in enumerate(base)],
        [nccl.replace("\u00e9", "e") if i % 50 == 7 else x for i, x in enumerate(base)],
        [x + " \u00e9" if rnd.random() < 0.01 else x for x in base],
    ):
        _same(lines)


def test_hf_logs() -> None:
    rnd = random.Random(1)
    _same(_hf_log(rnd, 5000, envelope="worker-1: "))


@pytest.mark.parametrize("gen", sorted(_GENS))
def test_other_logs(gen: str) -> None:
    rnd = random.Random(5)
    lines = list(_GENS[gen](rnd, 1500))
    lines = [mutated(rnd, x, _MUT, 2, 3) if rnd.random() < 0.01 else x for x in lines]
    _same(lines)
    _same(lines[:300])


@pytest.mark.parametrize("path", _files(), ids=lambda p: p.name)
def test_files_grown(path: Path) -> None:
    _same(_grown(path.read_text(errors="replace").splitlines(), S._MEG_MIN + 300))
