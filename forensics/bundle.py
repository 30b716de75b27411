"""Bundle discovery: list the files of a folder or archive, open compressed files, attribute each to a node.

A bundle is a directory or an archive (.tar, .tar.gz/.tgz, .tar.zst, .tar.xz, .tar.bz2, .zip). Archives
are extracted into a staging folder inside OUT with every member checked: no absolute paths, no `..`,
no links, no devices, an expansion limit against bombs; archives found inside (per-node archives)
are opened the same way, one level down at most. Single compressed files (.gz, .zst, .xz, .bz2) are
decompressed when read, up to the per-file size limit. Symlinks are never followed out of the bundle.
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import os
import re
import shutil
import stat
import tarfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from forensics.errors import BundleError

COMPRESSED = {".gz": "gz", ".zst": "zst", ".xz": "xz", ".bz2": "bz2"}
ARCHIVE_SUFFIXES = (".tar", ".tar.gz", ".tgz", ".tar.zst", ".tar.xz", ".tar.bz2", ".zip")
HEAD_BYTES = 65536
MAX_NESTING = 1
"""Archives inside the bundle (e.g. per-node tarballs) are opened one level down; deeper ones are skipped."""


class FileStatus(str, Enum):
    """Outcome of reading one file (the `status` column; skipped/error carry a reason after a colon)."""

    OK = "ok"
    PARTIAL = "partial"
    SKIPPED = "skipped"
    ERROR = "error"


@dataclass(frozen=True)
class Limits:
    """Size limits the user can change (`--max-file-size`, `--max-expand`)."""

    max_file_bytes: int = 4 * 1024**3
    """Largest file (after decompression) that is read; larger ones are skipped with a reason."""
    max_expand_bytes: int = 64 * 1024**3
    """Most bytes extracting the bundle's archives may write in all (zip/tar bomb guard)."""


@dataclass(frozen=True)
class BundleFile:
    """One file of the bundle, ready to be read."""

    path: str
    """Posix path inside the bundle, as quoted in evidence."""
    source: Path | None
    """Where its bytes are on disk (original or staged); None for entries that cannot be read."""
    size: int
    node: str
    node_source: str
    """'path' when the path names the node, else 'unknown' (content may name it later)."""
    compression: str | None = None
    skip_reason: str | None = None
    """Set when the file is recorded but not read (symlink out of the bundle, device, nested too deep...)."""


@dataclass
class Bundle:
    """All files of a bundle and what discovery had to say about the bundle itself."""

    root: str
    files: list[BundleFile] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    collected_at: float | None = None
    """Newest modification time seen (epoch seconds): the best guess of when the bundle was collected."""


# ----------------------------------------------------------------------------- node attribution

_HOST_TOKEN = re.compile(r"^(?=.*[a-z])(?=.*\d)[a-z0-9][a-z0-9-]*[a-z0-9]$")
_NOT_HOST = re.compile(
    r"^(?:(?:rank|gpu|dev|device|cuda|local|proc|pid|run|job|step|iter|part|shard|worker|log|out|err|"
    r"attempt|try|seq|chunk|mlx\d*|ib|eth|en\w*|sd[a-z]|nvme|hca|port|default|test|sample|v|r)[-_]?\d+"
    r"|\d+(?:[-_.]\d+)*|v?\d+(?:\.\d+)+|[a-z]\d{2,3}|\d{4}-?\d\d-?\d\d\w*|x86[-_]64|utf-?8|nccl\d*|"
    r"py\d+|cu\d+|sm\d+|\d+[a-z]+)$"
)
_FORMAT_WORDS = re.compile(
    r"^(?:dmesg|kern|kernel|syslog|messages|journal|journalctl|nvidia-smi|nvsmi|smi|nccl|torch|train|"
    r"training|stdout|stderr|ibstat|perfquery|dcgm|dcgmi|steps?|log|logs)[-_]"
    r"|[-_](?:dmesg|kern|syslog|journal|nvidia-smi|nvsmi|nccl|train|stdout|stderr|ibstat|perfquery|log)$"
)


def looks_like_host(token: str) -> bool:
    """True for tokens shaped like cluster host names (node-017, gpu-a100-03, dgx01, ip-10-0-1-23)."""
    t = token.lower()
    return bool(_HOST_TOKEN.match(t)) and not _NOT_HOST.match(t) and len(t) <= 63


def node_from_path(rel: str) -> str | None:
    """Return the node a bundle path names: a per-host folder first, else a host token in the file name."""
    parts = PurePosixPath(rel).parts
    for d in parts[:-1]:
        if looks_like_host(d):
            return d
    name = parts[-1]
    for suffix in (*COMPRESSED, ".log", ".txt", ".csv", ".xml", ".json", ".jsonl", ".out", ".err"):
        if name.lower().endswith(suffix):
            name = name[: -len(suffix)]
    for token in re.split(r"[_.\s]+", name):
        token = _FORMAT_WORDS.sub("", token.lower())
        token = _FORMAT_WORDS.sub("", token)
        if looks_like_host(token):
            return token
    return None


# ----------------------------------------------------------------------------- discovery


def is_archive(name: str) -> bool:
    """True when the file name says tar or zip archive."""
    low = name.lower()
    return low.endswith(ARCHIVE_SUFFIXES)


def _archive_stem(name: str) -> str:
    low = name.lower()
    for s in sorted(ARCHIVE_SUFFIXES, key=len, reverse=True):
        if low.endswith(s):
            return name[: -len(s)]
    return name


def open_bundle(path: Path, staging: Path, limits: Limits | None = None) -> Bundle:
    """List every file of the bundle at `path`, extracting archives into `staging`.

    Raises:
        BundleError: the path does not exist or is neither a folder nor a readable tar/zip archive.
    """
    limits = limits or Limits()
    if not path.exists() and not path.is_symlink():
        raise BundleError(f"cannot open bundle '{path}': no such file or directory")
    bundle = Bundle(root=str(path))
    budget = _Budget(limits.max_expand_bytes)
    if path.is_dir():
        root = path
    elif path.is_file() and is_archive(path.name):
        root = staging / "bundle"
        try:
            _extract(path, root, budget, bundle, label=path.name)
        except BundleError:
            raise
        except (OSError, tarfile.TarError, zipfile.BadZipFile, EOFError, ValueError) as exc:
            raise BundleError(f"cannot open bundle '{path}': unreadable archive ({exc})") from None
    elif path.is_file():
        # A single log file is a bundle of one.
        bundle.files.append(_bundle_file(path, path.name, path.name))
        bundle.collected_at = path.stat().st_mtime
        return bundle
    else:
        raise BundleError(f"cannot open bundle '{path}': not a directory, tar or zip archive")
    _walk(root, root, bundle, staging, budget, depth=0)
    _strip_common_wrapper(bundle)
    return bundle


class _Budget:
    def __init__(self, limit: int) -> None:
        self.left = limit
        self.limit = limit

    def take(self, n: int, what: str) -> None:
        self.left -= n
        if self.left < 0:
            raise BundleError(
                f"archive expansion limit reached while extracting {what}: more than {self.limit} bytes "
                "(raise it with --max-expand)"
            )


def _walk(root: Path, top: Path, bundle: Bundle, staging: Path, budget: _Budget, depth: int) -> None:
    real_top = top.resolve()
    for dirpath, dirnames, filenames in os.walk(top, followlinks=False):
        dirnames.sort()
        dpath = Path(dirpath)
        for d in list(dirnames):
            p = dpath / d
            if p.is_symlink():
                dirnames.remove(d)
                rel = p.relative_to(root).as_posix()
                bundle.files.append(
                    BundleFile(rel, None, 0, "unknown", "unknown", skip_reason="symlink to a folder not followed")
                )
        for name in sorted(filenames):
            p = dpath / name
            rel = p.relative_to(root).as_posix()
            if p.is_symlink():
                try:
                    target = p.resolve(strict=True)
                except (OSError, RuntimeError):
                    bundle.files.append(_skipped(rel, "symlink that is broken or loops"))
                    continue
                if not target.is_relative_to(real_top):
                    bundle.files.append(_skipped(rel, "symlink pointing outside the bundle"))
                    continue
                bundle.files.append(_skipped(rel, f"symlink to {target.relative_to(real_top).as_posix()}"))
                continue
            try:
                st = p.lstat()
            except OSError as exc:
                bundle.files.append(_skipped(rel, f"cannot stat: {exc.strerror}"))
                continue
            if not stat.S_ISREG(st.st_mode):
                bundle.files.append(_skipped(rel, "not a regular file"))
                continue
            bundle.collected_at = max(bundle.collected_at or 0.0, st.st_mtime)
            if is_archive(name):
                if depth >= MAX_NESTING:
                    bundle.files.append(_skipped(rel, "archive nested too deep"))
                    continue
                dest = staging / f"nested-{len(bundle.files)}" / _archive_stem(name)
                try:
                    _extract(p, dest, budget, bundle, label=rel)
                except (BundleError, OSError, tarfile.TarError, zipfile.BadZipFile, EOFError, ValueError) as exc:
                    bundle.files.append(
                        BundleFile(rel, None, st.st_size, "unknown", "unknown", skip_reason=f"unreadable archive: {exc}")
                    )
                    continue
                sub = Bundle(root=rel)
                _walk(dest, dest, sub, staging, budget, depth + 1)
                prefix = (PurePosixPath(rel).parent / _archive_stem(name)).as_posix().lstrip("./")
                for f in sub.files:
                    inner = f"{prefix}/{f.path}" if prefix else f.path
                    node = node_from_path(inner)
                    bundle.files.append(
                        BundleFile(
                            inner,
                            f.source,
                            f.size,
                            node or "unknown",
                            "path" if node else "unknown",
                            f.compression,
                            f.skip_reason,
                        )
                    )
                bundle.notes.extend(sub.notes)
                continue
            bundle.files.append(_bundle_file(p, rel, rel, st.st_size))


def _skipped(rel: str, reason: str) -> BundleFile:
    node = node_from_path(rel)
    return BundleFile(rel, None, 0, node or "unknown", "path" if node else "unknown", skip_reason=reason)


def _bundle_file(p: Path, rel: str, name: str, size: int | None = None) -> BundleFile:
    node = node_from_path(rel)
    comp = COMPRESSED.get(Path(name).suffix.lower())
    return BundleFile(
        rel, p, p.stat().st_size if size is None else size, node or "unknown", "path" if node else "unknown", comp
    )


def _strip_common_wrapper(bundle: Bundle) -> None:
    """Drop a single top-level folder every file shares (an archive's wrapper) before attributing nodes.

    `incident-2026-11-29/node-017/dmesg.log` → `node-017/dmesg.log`, so the wrapper's name is never
    taken for a host — unless the wrapper is the only folder there is (a one-node bundle).
    """
    tops = {PurePosixPath(f.path).parts[0] for f in bundle.files if len(PurePosixPath(f.path).parts) > 1}
    if len(tops) != 1 or any(len(PurePosixPath(f.path).parts) == 1 for f in bundle.files):
        return
    top = tops.pop()
    deeper = [PurePosixPath(f.path).parts[1:] for f in bundle.files]
    if all(len(p) == 1 for p in deeper):
        return  # only files under the wrapper: it may be the node's own folder
    new = []
    for f in bundle.files:
        rel = PurePosixPath(*PurePosixPath(f.path).parts[1:]).as_posix()
        node = node_from_path(rel)
        new.append(
            BundleFile(
                rel, f.source, f.size, node or "unknown", "path" if node else "unknown", f.compression, f.skip_reason
            )
        )
    bundle.files = new
    bundle.notes.append(f"common top-level folder '{top}' taken as the bundle's wrapper")


# ----------------------------------------------------------------------------- archives


def _safe_member_path(dest: Path, name: str, label: str) -> Path:
    """Resolve an archive member name inside `dest`, refusing absolute paths and traversal."""
    pure = PurePosixPath(name.replace("\\", "/"))
    if pure.is_absolute() or ".." in pure.parts or not pure.parts:
        raise _Unsafe(f"member '{name}' of {label} escapes the bundle")
    target = (dest / Path(*pure.parts)).resolve()
    if not target.is_relative_to(dest.resolve()):
        raise _Unsafe(f"member '{name}' of {label} escapes the bundle")
    return target


class _Unsafe(Exception):
    pass


def _extract(archive: Path, dest: Path, budget: _Budget, bundle: Bundle, label: str) -> None:
    """Extract regular files of a tar or zip into `dest`, checked member by member."""
    dest.mkdir(parents=True, exist_ok=True)
    if archive.name.lower().endswith(".zip"):
        with zipfile.ZipFile(archive) as zf:
            for info in zf.infolist():
                if info.is_dir():
                    continue
                mode = (info.external_attr >> 16) & 0o170000
                if mode and not stat.S_ISREG(mode):
                    bundle.notes.append(f"{label}: member '{info.filename}' is not a regular file; not extracted")
                    continue
                try:
                    target = _safe_member_path(dest, info.filename, label)
                except _Unsafe as exc:
                    bundle.notes.append(f"{exc}; not extracted")
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                with zf.open(info) as src, open(target, "wb") as out:
                    _copy_limited(src, out, budget, f"{label}:{info.filename}")
        return
    with _open_tar(archive) as tf:
        while True:
            try:
                member = tf.next()
            except (tarfile.ReadError, EOFError, OSError) as exc:
                bundle.notes.append(f"{label}: archive ends early ({exc}); the members before are kept")
                break
            if member is None:
                break
            if member.isdir():
                continue
            if not member.isfile():
                kind = "link" if (member.issym() or member.islnk()) else "special file"
                bundle.notes.append(f"{label}: member '{member.name}' is a {kind}; not extracted")
                continue
            try:
                target = _safe_member_path(dest, member.name, label)
            except _Unsafe as exc:
                bundle.notes.append(f"{exc}; not extracted")
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            src = tf.extractfile(member)
            if src is None:
                continue
            try:
                with open(target, "wb") as out:
                    _copy_limited(src, out, budget, f"{label}:{member.name}")
            except (tarfile.ReadError, EOFError, OSError, zlib_error()) as exc:
                bundle.notes.append(f"{label}: member '{member.name}' is truncated ({exc}); kept as far as read")
                break
            if member.mtime:
                os.utime(target, (member.mtime, member.mtime))


def zlib_error() -> type[Exception]:
    import zlib

    return zlib.error


def _open_tar(archive: Path) -> tarfile.TarFile:
    low = archive.name.lower()
    if low.endswith(".tar.zst"):
        import zstandard

        fh = open(archive, "rb")
        reader = zstandard.ZstdDecompressor().stream_reader(fh)
        return tarfile.open(fileobj=reader, mode="r|")
    return tarfile.open(archive, mode="r:*")


def _copy_limited(src: BinaryIO, out: BinaryIO, budget: _Budget, what: str) -> None:
    while chunk := src.read(1 << 20):
        budget.take(len(chunk), what)
        out.write(chunk)


# ----------------------------------------------------------------------------- reading


class ReadResult:
    """Bytes of a file plus whether reading stopped early (truncated stream, size limit)."""

    __slots__ = ("data", "truncated", "reason")

    def __init__(self, data: bytes, truncated: bool = False, reason: str | None = None) -> None:
        self.data = data
        self.truncated = truncated
        self.reason = reason


def read_file(f: BundleFile, limits: Limits) -> ReadResult:
    """Read a bundle file's bytes, decompressing .gz/.zst/.xz/.bz2; stop at the size limit.

    A truncated compressed stream yields what was decompressed with `truncated=True`.
    Raises OSError when the file cannot be opened at all.
    """
    assert f.source is not None
    cap = limits.max_file_bytes
    with open(f.source, "rb") as raw:
        stream = _decompressor(raw, f.compression)
        chunks: list[bytes] = []
        total = 0
        try:
            for chunk in _chunks(stream):
                chunks.append(chunk)
                total += len(chunk)
                if total > cap:
                    return ReadResult(
                        b"".join(chunks)[:cap], True, f"larger than the size limit of {cap} bytes (--max-file-size)"
                    )
        except (EOFError, OSError, lzma.LZMAError, ValueError, zlib_error(), _zstd_error()) as exc:
            return ReadResult(b"".join(chunks), True, f"compressed stream ends early or is corrupt ({exc})")
    return ReadResult(b"".join(chunks))


def _zstd_error() -> type[Exception]:
    import zstandard

    return zstandard.ZstdError


def _chunks(stream: BinaryIO) -> Iterator[bytes]:
    while chunk := stream.read(1 << 22):
        yield chunk


def _decompressor(raw: BinaryIO, compression: str | None) -> BinaryIO:
    if compression == "gz":
        return gzip.GzipFile(fileobj=raw)  # type: ignore[return-value]
    if compression == "bz2":
        return bz2.BZ2File(raw)  # type: ignore[return-value]
    if compression == "xz":
        return lzma.LZMAFile(raw)  # type: ignore[return-value]
    if compression == "zst":
        import zstandard

        return zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True)  # type: ignore[return-value]
    return raw


def logical_name(path: str) -> str:
    """The file name without its compression suffix (what sniffing and name hints look at)."""
    p = PurePosixPath(path)
    return p.stem if p.suffix.lower() in COMPRESSED else p.name


def cleanup(staging: Path) -> None:
    """Remove the staging folder of extracted archives."""
    shutil.rmtree(staging, ignore_errors=True)
