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
import hashlib
import itertools
import lzma
import os
import re
import shutil
import stat
import tarfile
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO

from forensics.errors import BundleError

COMPRESSED = {".gz": "gz", ".zst": "zst", ".xz": "xz", ".bz2": "bz2"}
ARCHIVE_SUFFIXES = (".tar", ".tar.gz", ".tgz", ".tar.zst", ".tar.xz", ".tar.bz2", ".zip")
HEAD_BYTES = 16384
"""Bytes of a file's head that sniffers see (cut after the last line end): sniffing costs Python
regex work per line, and 16 KiB (100-300 lines) is plenty to recognise every format in tests/fixtures."""
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

    max_file_bytes: int = 32 * 1024**3
    """Largest file (after decompression) that is read; larger ones are skipped with a reason.

    Memory does not grow with file size (files are parsed in chunks), so this is about time and
    decompression bombs, not RAM: a 5 GB log is read with a few hundred MB."""
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
    # a GPU's folder is gpu0..gpu99 (gpu_3, gpu-12); gpu01, gpu017, gpu0042, gpu-123 are hosts' names
    r"^(?:gpu[-_]?(?:\d|[1-9]\d)|"
    r"(?:rank|dev|device|cuda|local|proc|pid|run|job|step|iter|part|shard|worker|log|out|err|"
    r"attempt|try|seq|chunk|slurm|core|lsf|pbs|mlx\d*|ib|eth|en\w*|sd[a-z]|nvme|hca|port|default|test|sample|v|r)[-_]?\d+"
    r"|\d+(?:[-_.]\d+)*|v?\d+(?:\.\d+)+|[a-z]\d{2,3}|\d{4}-?\d\d-?\d\d\w*|x86[-_]64|utf-?8|nccl\d*|"
    r"py\d+|cu\d+|sm\d+|\d+[a-z]+"
    # technical words with a number that name no host: xid119, pr318, tp2, bf16, c10d, k8s, p2p, sxm4,
    # rtx4090, h100x8, 8x400g, error12, exit255, nemo2509, gpt345m, dcgm331, ...
    r"|(?:xid|sxid|pr|issue|error|err|status|exit|code|tp|pp|dp|ep|cp|pg|bf|fp|int|uint|c10d|k8s|p2p|nvl?|nvlink|"
    r"sxm|pcie|cx|connectx|dcgm|rtx|gtx|gcn|ddp|fsdp|zero|nemo|gpt|llama|bert|freq|minus|plus|evo|mlperf|"
    r"torch|python|ubuntu|rhel|el|centos|debian|ofi|efa|roce|hdr|ndr|edr|gen|iter|epoch|batch|seed|top|"
    r")(?:\d+[a-z]*)+|[a-z]\d+[a-z]?|[a-z]?\d+x\d+\w*|\d+e[-+]?\d+|[a-z]+20[0-4]\d)$"
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


def _parts(path: str) -> tuple[str, ...]:
    """`PurePosixPath(path).parts`, without making the path object for a plain relative path (no empty or `.`
    component): the walk asks it of every file of a bundle, several times."""
    parts = tuple(path.split("/"))
    if "" in parts or "." in parts:
        return PurePosixPath(path).parts
    return parts


def node_from_path(rel: str) -> str | None:
    """Return the node a bundle path names: a per-host folder first, else a host token in the file name."""
    parts = _parts(rel)
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


def open_bundle(
    path: Path, staging: Path, limits: Limits | None = None, walked: Callable[[Bundle], None] | None = None
) -> Bundle:
    """List every file of the bundle at `path`, extracting archives into `staging`.

    `walked` is called with the bundle listed so far after each folder of the walk (so the caller may start
    work that the walk's size decides, while it goes on).

    Raises:
        BundleError: the path does not exist or is neither a folder nor a readable tar/zip archive.
    """
    limits = limits or Limits()
    if not path.exists() and not path.is_symlink():
        raise BundleError(f"cannot open bundle '{path}': no such file or directory")
    bundle = Bundle(root=str(path))
    budget = _Budget(limits.max_expand_bytes)
    damage = None
    if path.is_dir():
        root = path
    elif path.is_file() and is_archive(path.name):
        root = staging / "bundle"
        try:
            damage = _extract(path, root, budget, bundle, label=path.name)
        except BundleError:
            raise
        except _archive_errors() as exc:
            raise BundleError(f"cannot open bundle '{path}': unreadable archive ({exc})") from None
    elif path.is_file():
        # A single log file is a bundle of one.
        bundle.files.append(_bundle_file(path, path.name, path.name))
        bundle.collected_at = path.stat().st_mtime
        return bundle
    else:
        raise BundleError(f"cannot open bundle '{path}': not a directory, tar or zip archive")
    _walk(root, root, bundle, staging, budget, depth=0, walked=walked)
    _strip_common_wrapper(bundle)
    if damage:
        bundle.files.append(_skipped(path.name, _damaged(damage)))
    return bundle


MAX_MEMBERS = 1_000_000
"""Most archive members extracted in all: a bomb of millions of empty files is refused like a big one."""


class _Budget:
    def __init__(self, limit: int) -> None:
        self.left = limit
        self.limit = limit
        self.members = 0

    def take(self, n: int, what: str) -> None:
        self.left -= n
        if self.left < 0:
            raise BundleError(
                f"archive expansion limit reached while extracting {what}: more than {self.limit} bytes "
                "(raise it with --max-expand)"
            )


def _walk(
    root: Path,
    top: Path,
    bundle: Bundle,
    staging: Path,
    budget: _Budget,
    depth: int,
    walked: Callable[[Bundle], None] | None = None,
) -> None:
    real_top = top.resolve()
    for dirpath, dirnames, filenames in os.walk(top, followlinks=False):
        if walked is not None:
            walked(bundle)
        dirnames.sort()
        dpath = Path(dirpath)
        # (a file's path relative to `root` made as a string from its folder's: `Path.relative_to` and
        # `as_posix` per file were most of the walk's CPU on a bundle of thousands of files)
        rel_dir = dpath.relative_to(root).as_posix()
        rel_dir = "" if rel_dir == "." else rel_dir + "/"
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
            rel = rel_dir + name
            try:
                st = os.lstat(p)
            except OSError as exc:
                bundle.files.append(_skipped(rel, f"cannot stat: {exc.strerror}"))
                continue
            if stat.S_ISLNK(st.st_mode):
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
                    damage = _extract(p, dest, budget, bundle, label=rel)
                except (BundleError, *_archive_errors()) as exc:
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
                if damage:
                    bundle.files.append(_skipped(rel, _damaged(damage)))
                continue
            bundle.files.append(_bundle_file(p, rel, rel, st.st_size))


def _damaged(damage: str) -> str:
    return f"archive damaged ({damage}); the members before the damage were read"


def _skipped(rel: str, reason: str) -> BundleFile:
    node = node_from_path(rel)
    return BundleFile(rel, None, 0, node or "unknown", "path" if node else "unknown", skip_reason=reason)


def _bundle_file(p: Path, rel: str, name: str, size: int | None = None) -> BundleFile:
    node = node_from_path(rel)
    comp = COMPRESSED.get(_suffix(name).lower())
    return BundleFile(
        rel, p, p.stat().st_size if size is None else size, node or "unknown", "path" if node else "unknown", comp
    )


def _suffix(name: str) -> str:
    """`Path(name).suffix` (the last component's final `.ext`; none for a name that starts or ends with its
    only dot) of a plain relative path (no empty or `.` component: what the walk makes), without making the
    path object."""
    base = name.rsplit("/", 1)[-1]
    i = base.rfind(".")
    return base[i:] if 0 < i < len(base) - 1 else ""


def _strip_common_wrapper(bundle: Bundle) -> None:
    """Drop a single top-level folder every file shares (an archive's wrapper) before attributing nodes.

    `incident-2026-11-29/node-017/dmesg.log` → `node-017/dmesg.log`, so the wrapper's name is never
    taken for a host — unless the wrapper is the only folder there is (a one-node bundle).
    """
    parts = [_parts(f.path) for f in bundle.files]
    tops = {p[0] for p in parts if len(p) > 1}
    if len(tops) != 1 or any(len(p) == 1 for p in parts):
        return
    top = tops.pop()
    if all(len(p) == 2 for p in parts):
        return  # only files under the wrapper: it may be the node's own folder
    new = []
    for f, p in zip(bundle.files, parts, strict=True):
        rel = "/".join(p[1:])  # (`PurePosixPath(*p[1:]).as_posix()`: the parts hold no "/" or empty part)
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


def _extract(archive: Path, dest: Path, budget: _Budget, bundle: Bundle, label: str) -> str | None:
    """Extract regular files of a tar or zip into `dest`, checked member by member.

    Returns what was wrong when the archive ends early or a member is cut (the members before are
    kept), else None. Raises for an archive that cannot be read at all or a blown expansion budget.
    """
    damage: str | None = None
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
        return None
    with _open_tar(archive) as tf:
        while True:
            try:
                member = tf.next()
            except _archive_errors() as exc:
                bundle.notes.append(f"{label}: archive ends early ({exc}); the members before are kept")
                damage = f"ends early: {exc}"
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
            except _archive_errors() as exc:
                bundle.notes.append(f"{label}: member '{member.name}' is truncated ({exc}); kept as far as read")
                damage = f"member '{member.name}' is truncated: {exc}"
                break
            if member.mtime:
                os.utime(target, (member.mtime, member.mtime))
    return damage


def _archive_errors() -> tuple[type[Exception], ...]:
    """What reading a damaged archive or compressed stream may raise."""
    return (
        OSError,
        EOFError,
        ValueError,
        tarfile.TarError,
        zipfile.BadZipFile,
        lzma.LZMAError,
        zlib_error(),
        _zstd_error(),
        NotImplementedError,  # zip compression methods we cannot read
    )


def zlib_error() -> type[Exception]:
    import zlib

    return zlib.error


@contextmanager
def _open_tar(archive: Path) -> Iterator[tarfile.TarFile]:
    low = archive.name.lower()
    if low.endswith(".tar.zst"):
        with open(archive, "rb") as fh, tarfile.open(fileobj=_ZstdReader(fh), mode="r|") as tf:
            yield tf
        return
    with tarfile.open(archive, mode="r:*") as tf:
        yield tf


def _copy_limited(src: BinaryIO, out: BinaryIO, budget: _Budget, what: str) -> None:
    budget.members += 1
    if budget.members > MAX_MEMBERS:
        raise BundleError(f"archive member limit reached while extracting {what}: more than {MAX_MEMBERS} files")
    while chunk := src.read(1 << 20):
        budget.take(len(chunk), what)
        out.write(chunk)


# ----------------------------------------------------------------------------- reading

CHUNK_BYTES = 16 * 1024**2
"""Large files are handed to parsers in pieces of about this many bytes, cut after a line end."""
_BLOCK = 4 * 1024**2
_READ_ERRORS: tuple[type[Exception], ...] = (EOFError, OSError, lzma.LZMAError, ValueError)


class ReadResult:
    """Bytes of a file plus whether reading stopped early (truncated stream, size limit)."""

    __slots__ = ("data", "truncated", "reason")

    def __init__(self, data: bytes, truncated: bool = False, reason: str | None = None) -> None:
        self.data = data
        self.truncated = truncated
        self.reason = reason


def size_limit_reason(cap: int) -> str:
    """The status reason of a file over the per-file size limit."""
    return f"larger than the size limit of {cap} bytes (--max-file-size)"


class ChunkReader:
    """Stream a bundle file's bytes (decompressed) in chunks that end at a line end.

    Iterating yields `bytes` chunks of about `chunk_bytes` (the last may be shorter); a line longer
    than `chunk_bytes` is cut (the only case where a chunk does not end at a line end). Reading never
    raises for bad content: a truncated or corrupt compressed stream, a read error or a file that
    changes while it is read ends the iteration and sets `truncated` and `reason`. Opening the file
    raises OSError (missing, unreadable) on the first `next()`.

    After iteration: `bytes_read` (decompressed bytes seen), `sha256` (hex digest of the raw file's
    bytes, set when the whole file was read), `too_large` (the size limit stopped reading).
    Memory: at most about `chunk_bytes` + one read block are held, whatever the file size.

    `record_of(head)`: how a line opening a record of the file's format is found (`Record`: its parser's
    `RECORD_START` literal, e.g. an `nvidia-smi -q` dump's banner, or its `record_start` finder), asked once,
    from the first bytes, when a first cut is due: chunks then end before the last such line within
    `RECORD_PROBE` bytes of their end (`_line_cut`), so that no record is cut in two. `chunk_of(head)`: the
    chunk size of the file's format (at least `chunk_bytes`), asked then too (`ingest.chunk_factor`).
    """

    def __init__(
        self,
        f: BundleFile,
        limits: Limits,
        chunk_bytes: int = CHUNK_BYTES,
        span: tuple[int, int] | None = None,
        record_of: Callable[[bytes], Record | None] | None = None,
        chunk_of: Callable[[bytes], int] | None = None,
    ) -> None:
        assert f.source is not None
        assert span is None or f.compression is None, "byte ranges of compressed files cannot be read"
        self.file = f
        self.span = span
        """(start, end): read only these bytes of an uncompressed file (`sha256` is then not set)."""
        self.record_of = record_of
        self._record: Record | None | bool = False  # (False: not asked yet)
        self.chunk_of = chunk_of
        self.cap = limits.max_file_bytes
        self.chunk_bytes = max(1, chunk_bytes)
        self.truncated = False
        self.reason: str | None = None
        self.too_large = False
        self.bytes_read = 0
        self.sha256: str | None = None

    def _stop(self, reason: str) -> None:
        self.truncated = True
        self.reason = self.reason or reason

    def _record_start(self, buf: bytearray) -> Record | None:
        if self._record is False:
            self._record = self.record_of(bytes(buf[:HEAD_BYTES])) if self.record_of is not None else None
        return self._record  # type: ignore[return-value]

    def __iter__(self) -> Iterator[bytes]:
        f = self.file
        assert f.source is not None
        with open(f.source, "rb") as raw:
            before = os.fstat(raw.fileno())
            left = None
            if self.span is not None:
                raw.seek(self.span[0])
                left = self.span[1] - self.span[0]
            if left is not None and left <= self.chunk_bytes:  # a range of `line_spans` is one chunk
                hasher = None
                try:
                    block = raw.read(left)
                except _READ_ERRORS as exc:
                    self._stop(f"read error ({exc})")
                    block = b""
                self.bytes_read = len(block)
                if block:
                    yield block
            else:
                # a byte range is not hashed here: `hash_file` takes the whole file's checksum in one pass
                hasher = _HashingReader(raw) if self.span is None else None
                source = raw if hasher is None else hasher
                stream = _decompressor(source, f.compression)
                buf = bytearray()
                # (a file's first block, while it is all there is: yielded as read, not copied in and out of
                # `buf`)
                held = b""
                # (a plain file read whole is read in blocks no larger than what is left of it, plus one byte
                # to meet its end: a read of `_BLOCK` allocates that much first. A bundle of 11,500 per-node
                # files: ~-0.9 s of the workers' CPU)
                size = before.st_size if f.compression is None and self.span is None else None
                # read1: a decompressor's read(n) loses what it decoded when the stream breaks mid-call
                read = getattr(stream, "read1", stream.read) if stream is not source else stream.read
                try:
                    while True:
                        try:
                            n = _BLOCK if left is None else min(_BLOCK, left)
                            if size is not None and self.bytes_read <= size:
                                n = min(n, size - self.bytes_read + 1)
                            block = read(n)
                            if left is not None:
                                left -= len(block)
                        except (*_READ_ERRORS, zlib_error(), _zstd_error()) as exc:
                            what = "read error" if not f.compression else "compressed stream ends early or is corrupt"
                            self._stop(f"{what} ({exc})")
                            break
                        if not block:
                            if isinstance(stream, _ZstdReader) and not stream.complete:
                                self._stop("compressed stream ends early (truncated zstd frame)")
                            break
                        if self.bytes_read + len(block) > self.cap:
                            block = block[: self.cap - self.bytes_read]
                            self.too_large = True
                            self._stop(size_limit_reason(self.cap))
                        self.bytes_read += len(block)
                        if not buf and not held and len(block) < self.chunk_bytes:
                            held = block
                        else:
                            buf += held
                            held = b""
                            buf += block
                            if self.chunk_of is not None and len(buf) >= self.chunk_bytes:
                                # (the first cut is due: the format's own chunk size, from the head)
                                size = self.chunk_of(bytes(buf[:HEAD_BYTES]))
                                self.chunk_bytes = max(self.chunk_bytes, size)
                                self.chunk_of = None
                            while len(buf) >= self.chunk_bytes:
                                cut = _line_cut(buf, self.chunk_bytes, self._record_start(buf))
                                yield bytes(buf[:cut])
                                del buf[:cut]
                        if self.too_large:
                            break
                    if held:
                        yield held
                    elif buf:
                        yield bytes(buf)
                        buf.clear()
                finally:
                    if stream is not source:
                        try:
                            stream.close()
                        except Exception:  # noqa: BLE001,S110 - closing a broken stream must not raise
                            pass
            if not self.truncated:
                self.sha256 = hasher.hexdigest() if hasher is not None else None
                expected = before.st_size if self.span is None else self.span[1] - self.span[0]
                after = _stat_or_none(f.source)
                if after is None:
                    self._stop("file vanished while it was read")
                elif (after.st_size, after.st_mtime_ns) != (before.st_size, before.st_mtime_ns) or (
                    f.compression is None and self.bytes_read != expected
                ):
                    self._stop("file changed while it was read")


def line_spans(
    f: BundleFile, span_bytes: int, probe: int = 1024**2, record: Record | None = None
) -> list[tuple[int, int]]:
    """Cut an uncompressed file into the byte ranges `ChunkReader(f, ..., span_bytes)` would yield (with a
    `record_of` that gives `record`).

    Each range ends after its last line end within `span_bytes` (`_line_cut`), or before its last line
    opening a record (`record`) within the last `RECORD_PROBE` bytes, so parsing the ranges apart gives the
    same chunks, hence the same rows, as reading the file through. Only the bytes before each cut are read,
    backwards in blocks of `probe` until a line end is found: a multi-GB file is planned in milliseconds.

    Raises:
        OSError: the file cannot be opened.
    """
    assert f.source is not None and f.compression is None
    size = os.stat(f.source).st_size
    cuts = [0]
    with open(f.source, "rb") as fh:
        while size - cuts[-1] >= span_bytes:
            lo, hi = cuts[-1], cuts[-1] + span_bytes
            cut = (
                (_record_cut(fh, lo, hi, record) if record else None)
                or _last_after(fh, lo, hi, b"\n", probe)
                or _last_after(fh, lo, hi, b"\r", probe)
                or hi
            )
            cuts.append(cut)
    if cuts[-1] < size:
        cuts.append(size)
    return list(itertools.pairwise(cuts))


def span_first_lines(f: BundleFile, spans: list[tuple[int, int]]) -> Iterator[int]:
    """The line number of the first line of each of `spans` (from `line_spans`), range by range, counting
    lines as `parsers.base.lines_from_bytes` does in each range: the rows of a range can be numbered where
    the range is parsed, without the ranges before it. Reads the file up to the last range (~0.3 s a GB,
    one core).

    Raises:
        OSError: the file cannot be read.
    """
    assert f.source is not None and f.compression is None
    line = 1
    with open(f.source, "rb") as fh:
        for start, end in spans:
            yield line
            fh.seek(start)
            line += count_lines(fh.read(end - start))


def count_lines(data: bytes) -> int:
    """How many lines `parsers.base.lines_from_bytes(data)` makes: `\\n` ends a line (`\\r` in text
    without `\\n`), a last line without its end counts, a chunk of one line end alone makes none."""
    for sep in (b"\n", b"\r"):
        if sep in data:
            return 0 if data == sep else _count(data, sep) + (not data.endswith(sep))
    return 1 if data else 0


_COUNT_BLOCK = 1 << 18
"""Bytes `_count` compares at once: the Boolean block stays in the core's cache (a 16 MB range in one compare
wrote, then read again, a 16 MB array: ~6 -> ~4 ms of CPU under load, ~250 ranges of a 4 GB bundle)."""


def _count(data: bytes, sep: bytes) -> int:
    """`data.count(sep)` for a one-byte `sep`; from 1 MB on with numpy's vectorised compare, a block at a time
    (the parent counts the ranges of the split files with steps or gpu_samples rows)."""
    if len(data) < 1 << 20:
        return data.count(sep)
    import numpy as np  # (only a bundle with files large enough to split gets here)

    a = np.frombuffer(data, np.uint8)
    hit = np.empty(_COUNT_BLOCK, dtype=np.bool_)
    n = 0
    for i in range(0, len(a), _COUNT_BLOCK):
        block = a[i : i + _COUNT_BLOCK]
        out = hit[: len(block)]
        np.equal(block, sep[0], out=out)
        n += int(np.count_nonzero(out))
    return n


def _last_after(fh: BinaryIO, lo: int, hi: int, sep: bytes, probe: int) -> int | None:
    """Offset just after the last `sep` in bytes [lo, hi) of `fh`, or None."""
    end = hi
    while end > lo:
        start = max(lo, end - probe)
        fh.seek(start)
        i = fh.read(end - start).rfind(sep)
        if i >= 0:
            return start + i + 1
        end = start
    return None


def hash_file(f: BundleFile) -> str | None:
    """sha256 of an uncompressed file's bytes (None when it cannot be read): the manifest's checksum of
    a file whose byte ranges were parsed apart."""
    assert f.source is not None
    h = hashlib.sha256()
    # (read into one buffer that stays in the cache, not a fresh 4 MB block each time: a 1.2 GB log's hash
    # ~0.9 -> ~0.8 s of CPU)
    buf = memoryview(bytearray(_HASH_BLOCK))
    try:
        with open(f.source, "rb", buffering=0) as fh:
            while n := fh.readinto(buf):
                h.update(buf[:n])
    except OSError:
        return None
    return h.hexdigest()


_HASH_BLOCK = 1 << 20


def _stat_or_none(p: Path) -> os.stat_result | None:
    try:
        return os.stat(p)
    except OSError:
        return None


RECORD_PROBE = 1024**2
"""How far back from a chunk's end a line that starts a record (`ChunkReader(record_of=)`) is looked for: an
`nvidia-smi -q` dump of 8 GPUs is ~60 KB. A record longer than that may be cut at a line end, as any log."""


Record = bytes | Callable[[bytes], int]
"""How a line that opens a record is found: the literal such a line starts with, or a function that gives
where in a window of bytes the last such line starts (-1: none)."""


_PREFIX = re.compile(rb"[ \t]*[\w.:\[\]-]{1,64}: ?")
"""A launcher's line prefix (pdsh `host: `, srun ` 7: `, torchrun `[rank3]:`) before a record's literal."""


def _record_in(window: bytes, record: Record) -> int:
    """Where in `window` the last line opening a record starts (a line start after its first byte), or -1.

    A literal opens a record where it starts a line (`\n`, `\r\n` or `\r` line ends), or follows a launcher's
    prefix there (`_PREFIX`: pdsh and srun print every line of a loop behind one)."""
    if not isinstance(record, bytes):
        return record(window)
    end = len(window)
    for _ in range(64):
        i = window.rfind(record, 0, end)
        if i <= 0:
            return -1
        start = max(window.rfind(b"\n", 0, i), window.rfind(b"\r", 0, i)) + 1
        if start > 0 and (start == i or _PREFIX.fullmatch(window, start, i)):
            return start
        end = i
    return -1


def _record_cut(fh: BinaryIO, lo: int, hi: int, record: Record) -> int | None:
    """`_line_cut`'s record cut of the file's bytes [lo, hi), read from `fh`: where the last line opening a
    record begins, if it lies after `lo` and within the last `RECORD_PROBE` bytes."""
    start = lo + max(1, hi - lo - RECORD_PROBE)
    fh.seek(start)
    i = _record_in(fh.read(hi - start), record)
    return start + i if i >= 0 else None


def _line_cut(buf: bytearray, chunk_bytes: int, record: Record | None = None) -> int:
    """Where to cut `buf` (≥ chunk_bytes long): before its last line opening a record (`record`) within the
    first chunk_bytes and the last `RECORD_PROBE` of them, if any (a record is not cut in two), else after
    its last line end within the first chunk_bytes.

    A line longer than a chunk is cut at chunk_bytes.
    """
    if record:
        start = max(1, chunk_bytes - RECORD_PROBE)
        i = _record_in(bytes(buf[start:chunk_bytes]), record)
        if i >= 0:
            return start + i
    i = buf.rfind(b"\n", 0, chunk_bytes)
    if i < 0:
        i = buf.rfind(b"\r", 0, chunk_bytes)
    return i + 1 if i >= 0 else chunk_bytes


class _HashingReader:
    """A raw file wrapper that feeds every byte read to sha256 (the manifest's checksum of the file)."""

    def __init__(self, raw: BinaryIO) -> None:
        self.raw = raw
        self.h = hashlib.sha256()

    def read(self, n: int = -1) -> bytes:
        data = self.raw.read(n)
        self.h.update(data)
        return data

    def readinto(self, b: bytearray | memoryview) -> int:
        data = self.read(len(b))
        b[: len(data)] = data
        return len(data)

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def close(self) -> None:  # the owner closes the raw file
        pass

    @property
    def closed(self) -> bool:
        return self.raw.closed

    def hexdigest(self) -> str:
        # hash whatever the decompressor did not consume (trailing garbage still belongs to the file; mostly
        # nothing: a read allocates its size first, so not `_BLOCK` at a time)
        while data := self.raw.read(1 << 16):
            self.h.update(data)
        return self.h.hexdigest()


class _ZstdReader:
    """zstd stream reader over concatenated frames that can tell a truncated last frame."""

    def __init__(self, raw: Any) -> None:
        import zstandard

        self.raw = raw
        self.dctx = zstandard.ZstdDecompressor()
        self.obj = self.dctx.decompressobj()
        self.pending = b""
        self.started = False
        self.complete = True

    def read(self, n: int) -> bytes:
        while len(self.pending) < n:
            data = self.raw.read(1 << 20)
            if not data:
                break
            while data:
                out = self.obj.decompress(data)
                self.started = True
                self.pending += out
                if self.obj.eof:
                    data = self.obj.unused_data
                    self.obj = self.dctx.decompressobj()
                    self.started = False
                else:
                    data = b""
            self.complete = not self.started
        out, self.pending = self.pending[:n], self.pending[n:]
        return out

    def close(self) -> None:
        pass


def read_file(f: BundleFile, limits: Limits) -> ReadResult:
    """Read a bundle file's bytes, decompressing .gz/.zst/.xz/.bz2; stop at the size limit.

    A truncated compressed stream yields what was decompressed with `truncated=True`. Holds the
    whole file in memory: `ChunkReader` is what ingest uses.
    Raises OSError when the file cannot be opened at all.
    """
    reader = ChunkReader(f, limits, chunk_bytes=max(1, limits.max_file_bytes) + 1)
    data = b"".join(reader)
    return ReadResult(data, reader.truncated, reader.reason)


def _zstd_error() -> type[Exception]:
    import zstandard

    return zstandard.ZstdError


def _decompressor(raw: Any, compression: str | None) -> Any:
    if compression == "gz":
        return gzip.GzipFile(fileobj=raw)
    if compression == "bz2":
        return bz2.BZ2File(raw)
    if compression == "xz":
        return lzma.LZMAFile(raw)
    if compression == "zst":
        return _ZstdReader(raw)
    return raw


def logical_name(path: str) -> str:
    """The file name without its compression suffix (what sniffing and name hints look at)."""
    p = PurePosixPath(path)
    return p.stem if p.suffix.lower() in COMPRESSED else p.name


def cleanup(staging: Path) -> None:
    """Remove the staging folder of extracted archives."""
    shutil.rmtree(staging, ignore_errors=True)
