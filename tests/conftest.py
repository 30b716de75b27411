"""Shared test options and builders."""

from __future__ import annotations

import gzip
import io
import tarfile
import zipfile
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-goldens",
        action="store_true",
        default=False,
        help="rewrite tests/fixtures/**/*.expected.jsonl from the current parsers",
    )


@pytest.fixture
def update_goldens(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--update-goldens"))


def make_bundle(root: Path, files: dict[str, str | bytes], archive: str | None = None) -> Path:
    """Write `files` (path inside the bundle -> content) as a folder, or as an archive of that kind.

    archive: None (folder), 'tar', 'tar.gz', 'tgz', 'tar.zst' or 'zip'. Members ending in .gz are gzipped.
    """
    root.mkdir(parents=True, exist_ok=True)
    blobs: dict[str, bytes] = {}
    for rel, content in files.items():
        data = content.encode() if isinstance(content, str) else content
        if rel.endswith(".gz"):
            data = gzip.compress(data)
        blobs[rel] = data
    if archive is None:
        base = root / "bundle"
        for rel, data in blobs.items():
            p = base / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(data)
        return base
    target = root / f"bundle.{archive}"
    if archive == "zip":
        with zipfile.ZipFile(target, "w") as zf:
            for rel, data in blobs.items():
                zf.writestr(f"bundle/{rel}", data)
        return target
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        for rel, data in blobs.items():
            info = tarfile.TarInfo(f"bundle/{rel}")
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    raw = buf.getvalue()
    if archive in ("tar.gz", "tgz"):
        raw = gzip.compress(raw)
    elif archive == "tar.zst":
        import zstandard

        raw = zstandard.ZstdCompressor().compress(raw)
    target.write_bytes(raw)
    return target
