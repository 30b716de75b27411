"""Typed errors of the library; `forensics/cli.py` turns them into one line and an exit code."""


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
