"""OUT on a shared or object store: `-o s3://bucket/incident-42` (any fsspec URL the libraries support).

The stages write a local folder (atomic renames, Parquet parts, spill files need a real file system);
`local_out` gives them one and mirrors it to the URL: before the stage, the outputs already there are
fetched (analyze and report read the tables); after it, the files the stage wrote or changed are
uploaded, `manifest.json` last (its presence means a complete ingest, as in a local OUT). An ingest
removes the remote tables it replaces before uploading the new ones.

fsspec comes with the optional extra `gpu-forensics[dask]`; a URL's protocol may need its own package
(s3fs for s3://, gcsfs for gs://, adlfs for az://).
"""

from __future__ import annotations

import re
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from forensics.errors import OutputError, UsageError

_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
LAST = "manifest.json"


def is_url(out: str) -> bool:
    """True for a URL OUT (`s3://...`, `memory://...`); `file://` and plain paths are local."""
    return bool(_URL.match(out)) and not out.lower().startswith("file://")


def local_path(out: str) -> Path:
    """A local OUT as a Path (a `file://` URL is accepted)."""
    return Path(out[len("file://") :] if out.lower().startswith("file://") else out)


def _filesystem(url: str) -> tuple[Any, str]:
    try:
        import fsspec
    except ImportError:
        raise UsageError(
            f"output '{url}' is a URL: writing to it needs fsspec (pip install 'gpu-forensics[dask]')"
        ) from None
    try:
        return fsspec.core.url_to_fs(url)
    except (ImportError, ValueError) as exc:
        raise UsageError(f"cannot use output '{url}': {exc}") from None


def _snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    return {
        p.relative_to(folder).as_posix(): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in folder.rglob("*")
        if p.is_file()
    }


@contextmanager
def local_out(out: str, *, fetch: bool, force: bool = False) -> Iterator[Path]:
    """A local folder standing for OUT while a stage runs; for a URL, mirrored to it afterwards.

    Args:
        out: the -o/--out value or the OUT argument (a path or a URL).
        fetch: download what OUT holds first (analyze, report); an ingest starts from an empty folder
            and refuses a URL that already holds a manifest unless `force`.
        force: an ingest may replace the outputs at the URL.

    Raises:
        UsageError: fsspec (or the protocol's package) is missing.
        OutputError: the URL holds a previous ingest and `force` is not set, or it cannot be read or
            written.
    """
    if not is_url(out):
        yield local_path(out)
        return
    fs, root = _filesystem(out)
    root = root.rstrip("/")
    tmp = Path(tempfile.mkdtemp(prefix="forensics-out-"))
    local = tmp / "out"
    try:
        try:
            exists = fs.exists(f"{root}/{LAST}")
            if fetch:
                local.mkdir()
                if fs.exists(root):
                    for remote in fs.find(root):
                        rel = remote[len(root) :].lstrip("/")
                        (local / rel).parent.mkdir(parents=True, exist_ok=True)
                        fs.get_file(remote, str(local / rel))
            elif exists and not force:
                raise OutputError(
                    f"output '{out}' already holds a previous ingest; use --force to replace it"
                )
        except OSError as exc:
            raise OutputError(f"cannot read output '{out}': {exc}") from None
        before = _snapshot(local) if local.exists() else {}
        try:
            yield local
        except (OutputError, UsageError) as exc:  # name the URL the user gave, not the local stand-in
            raise type(exc)(str(exc).replace(str(local), out.rstrip("/"))) from None
        after = _snapshot(local)
        changed = sorted(
            rel for rel, sig in after.items() if before.get(rel) != sig and ".forensics-work" not in rel
        )
        try:
            if not fetch:
                if exists:
                    fs.rm(f"{root}/{LAST}")
                if fs.exists(f"{root}/tables"):
                    fs.rm(f"{root}/tables", recursive=True)
            for rel in sorted(changed, key=lambda r: r == LAST):
                parent = f"{root}/{rel}".rsplit("/", 1)[0]
                fs.makedirs(parent, exist_ok=True)
                fs.put_file(str(local / rel), f"{root}/{rel}")
        except OSError as exc:
            raise OutputError(f"cannot write output '{out}': {exc}") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
