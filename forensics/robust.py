"""Robust statistics shared by the analyses: median/MAD z-scores against the fleet."""

from __future__ import annotations

import polars as pl

MAD_SCALE = 1.4826
"""Makes the MAD a consistent estimator of the standard deviation for normal data."""
MIN_REL_SPREAD = 0.01
"""Floor of the spread, as a share of the median: identical fleets (MAD 0) must not make 1% look infinite."""


def robust_z(col: str, over: str | list[str] | None = None) -> pl.Expr:
    """(x − median) / (1.4826 × MAD), with the spread floored at MIN_REL_SPREAD × |median|."""
    x = pl.col(col)
    med = x.median() if over is None else x.median().over(over)
    mad = (x - med).abs().median() if over is None else (x - med).abs().median().over(over)
    spread = pl.max_horizontal(MAD_SCALE * mad, MIN_REL_SPREAD * med.abs(), pl.lit(1e-9))
    return (x - med) / spread
