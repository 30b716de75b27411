"""Python warnings in training logs are understood (no row), with the source line Python prints under them."""

from __future__ import annotations

import polars as pl

from parsers import step_log
from parsers.base import FileContext, check_accounting

CTX = FileContext(path="n1/train.log", node="n1")
STEP = (
    "[rank0]:[titan] 2025-03-03 08:00:00,123 - root - INFO - step: 5  loss: 10.6432  grad_norm: 0.8994  "
    "memory: 61.42GiB(77.64%)  tps: 4,920  tflops: 236.17  mfu: 23.88%"
)


def _unrecognized(lines: list[str]) -> list[str]:
    r = step_log.parse(pl.Series("line", lines), CTX)
    assert check_accounting(r, pl.Series("line", lines))
    return [text for _, text in r.unrecognized_examples]


def test_a_warning_and_its_source_line_are_understood() -> None:
    lines = [
        STEP,
        "[rank2]:/usr/lib/python3.10/site-packages/te/module/base.py:630: UserWarning: Recipe has changed",
        "[rank2]:  warnings.warn(",
        "<frozen importlib._bootstrap>:241: RuntimeWarning: numpy.ndarray size changed",
        "  return f(*args, **kwds)",
        " 2: /usr/lib/python3/dist-packages/torch/utils/checkpoint.py:61: UserWarning: None of the inputs",
        "C:\\work\\train.py:12: FutureWarning: on Windows",
    ]
    assert _unrecognized(lines) == []


def test_what_only_looks_like_a_source_line_stays_unrecognized() -> None:
    lines = [
        STEP,
        "/x/y.py:3: FutureWarning: no source line follows",
        "[rank1]:  an indented line of another prefix",
        "[rank3]:/a/b.py:9: DeprecationWarning: other prefix",
        "[rank4]:  x = 1",
        "/x/y.py:4: UserWarning: deeper indent follows",
        "    four = spaces",
        "the Warning: word alone",
        "  orphan indented line",
    ]
    assert _unrecognized(lines) == [
        "[rank1]:  an indented line of another prefix",
        "[rank4]:  x = 1",
        "    four = spaces",
        "the Warning: word alone",
        "  orphan indented line",
    ]


def test_warnings_read_the_same_in_a_batch() -> None:
    a = [STEP, "/x/y.py:3: UserWarning: last line of a file"]
    b = ["  looks like a's source line, but it is the next file's first", STEP]
    items = [(pl.Series("line", x), FileContext(path=f"n{i}/t.log", node="n")) for i, x in enumerate((a, b))]
    for (lines, ctx), got in zip(items, step_log.parse_many(items), strict=True):
        want = step_log.parse(lines, ctx)
        assert (got.parsed, got.unrecognized, got.unrecognized_examples) == (
            want.parsed, want.unrecognized, want.unrecognized_examples
        )
    assert step_log.parse_many(items)[1].unrecognized == 1
