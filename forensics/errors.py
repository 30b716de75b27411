"""Typed errors of the library; `forensics/cli.py` turns them into one line and an exit code."""

from __future__ import annotations

from polars.exceptions import PanicException


class ForensicsError(Exception):
    """Base of every error the library raises on purpose."""


class BundleError(ForensicsError):
    """The bundle cannot be read: missing path, unknown archive kind, unreadable archive."""


class OutputError(ForensicsError):
    """The output folder cannot be used: a file, not ingested, or not empty without --force."""


class SchemaError(ForensicsError):
    """A DataFrame does not match its table, or a Parquet file is not one of ours."""


class UsageError(ForensicsError):
    """The user asked for something that does not exist (an unknown XID, fault kind, ...)."""


CONTAINED: tuple[type[BaseException], ...] = (Exception, PanicException)
"""What a step that contains failures (one file, one batch, one stage) catches: every error, and a panic
inside polars. pyo3's `PanicException` derives from BaseException, not Exception, so `except Exception` let
one, such as polars 2.1's `pl.format` over a column holding an empty chunk (pola-rs/polars#25187), end the
whole run."""
