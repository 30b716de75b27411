"""Bundle discovery: folders and archives, per-node archives, node attribution, hostile members, symlinks."""

from __future__ import annotations

import gzip
import io
import os
import tarfile
import zipfile
from pathlib import Path, PurePosixPath

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import forensics.bundle as bundle_mod
from forensics.bundle import (
    BundleFile,
    ChunkReader,
    Limits,
    node_from_path,
    open_bundle,
    read_file,
)
from forensics.errors import BundleError
from tests.conftest import make_bundle

DMESG = "[  10.000000] NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.\n"


def _paths(bundle) -> dict[str, BundleFile]:
    return {f.path: f for f in bundle.files}


FILES = {
    "node-001/dmesg.log": DMESG,
    "node-002/dmesg.log": DMESG,
    "node-002/nvsmi.txt.gz": "hello\n",
}


@pytest.mark.parametrize("kind", [None, "tar", "tar.gz", "tgz", "tar.zst", "zip"])
def test_discovery_over_folders_and_every_archive_kind(tmp_path: Path, kind: str | None) -> None:
    src = make_bundle(tmp_path / "src", FILES, archive=kind)
    b = open_bundle(src, tmp_path / "staging")
    got = _paths(b)
    # make_bundle wraps archives in a 'bundle/' folder: the wrapper is stripped
    assert sorted(got) == sorted(FILES)
    assert got["node-001/dmesg.log"].node == "node-001"
    assert got["node-002/nvsmi.txt.gz"].compression == "gz"
    for f in b.files:
        assert f.source is not None and f.source.is_file()
        if kind is not None:  # extracted into the staging folder, never beside the archive
            assert f.source.resolve().is_relative_to((tmp_path / "staging").resolve())
    assert read_file(got["node-002/nvsmi.txt.gz"], Limits()).data == b"hello\n"


def _tar_bytes(members: dict[str, bytes], mode: str = "w") -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode=mode) as tf:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def test_per_node_archives_are_opened_one_level_down(tmp_path: Path) -> None:
    root = tmp_path / "b"
    root.mkdir()
    (root / "node-007.tar.gz").write_bytes(gzip.compress(_tar_bytes({"var/log/dmesg.log": DMESG.encode()})))
    with zipfile.ZipFile(root / "node-008.zip", "w") as zf:
        zf.writestr("dmesg.log", DMESG)
    inner = _tar_bytes({"dmesg.log": DMESG.encode()})
    (root / "node-009.tar").write_bytes(_tar_bytes({"deeper/node-010.tar": inner, "kern.log": DMESG.encode()}))
    got = _paths(open_bundle(root, tmp_path / "staging"))
    assert got["node-007/var/log/dmesg.log"].node == "node-007"
    assert got["node-008/dmesg.log"].node == "node-008"
    assert got["node-009/kern.log"].node == "node-009"
    deep = got["node-009/deeper/node-010.tar"]
    assert deep.source is None and deep.skip_reason == "archive nested too deep"


def test_corrupt_nested_archive_is_recorded_not_fatal(tmp_path: Path) -> None:
    root = tmp_path / "b"
    root.mkdir()
    (root / "node-001.tar.gz").write_bytes(b"\x1f\x8bnot really gzip")
    (root / "node-002.log").write_text(DMESG)
    got = _paths(open_bundle(root, tmp_path / "staging"))
    assert got["node-001.tar.gz"].skip_reason.startswith("unreadable archive")
    assert got["node-002.log"].source is not None


@pytest.mark.parametrize(
    ("path", "node"),
    [
        ("node-017/dmesg.log", "node-017"),  # per-host folder
        ("logs/gpu-a100-03/var/log/kern.log", "gpu-a100-03"),
        ("dmesg_node-042.log", "node-042"),  # host in the file name
        ("nccl-dgx01.log.gz", "dgx01"),
        ("ip-10-0-1-23.txt", "ip-10-0-1-23"),
        ("rank-3/train.log", None),  # ranks, GPUs, dates and versions are not hosts
        ("gpu0/nvsmi.txt", None),
        ("gpu_12/nvsmi.txt", None),
        ("gpu0000/dmesg.log", "gpu0000"),  # hosts named gpu + a zero-padded or 3-digit number
        ("gpu017/nccl.log", "gpu017"),
        ("gpu-042/kern.log", "gpu-042"),
        ("gpu01/train.log", "gpu01"),
        ("2026-11-29/dmesg.log", None),
        ("nccl_2.18.5.log", None),
        ("dmesg.log", None),
    ],
)
def test_node_from_path(path: str, node: str | None) -> None:
    assert node_from_path(path) == node


def test_wrapper_folder_is_stripped_before_attribution(tmp_path: Path) -> None:
    src = make_bundle(
        tmp_path, {"incident-2026a1/node-017/dmesg.log": DMESG, "incident-2026a1/node-018/dmesg.log": DMESG}
    )
    b = open_bundle(src, tmp_path / "staging")
    assert {f.path: f.node for f in b.files} == {"node-017/dmesg.log": "node-017", "node-018/dmesg.log": "node-018"}
    assert any("wrapper" in n for n in b.notes)


def test_a_lone_folder_of_files_is_kept_as_the_node(tmp_path: Path) -> None:
    src = make_bundle(tmp_path, {"node-017/dmesg.log": DMESG, "node-017/kern.log": DMESG})
    b = open_bundle(src, tmp_path / "staging")
    assert {f.path: f.node for f in b.files} == {"node-017/dmesg.log": "node-017", "node-017/kern.log": "node-017"}


def test_unknown_path_gets_node_from_content(tmp_path: Path) -> None:
    """A syslog file in a path naming no host: the content's host field names the node."""
    from forensics.ingest import ingest

    syslog = "".join(
        f"Nov 29 10:00:0{i} gpu-node-42 kernel: [  {i}.000000] NVRM: Xid (PCI:0000:3b:00): 79, pid=1, "
        "GPU has fallen off the bus.\n"
        for i in range(3)
    )
    src = make_bundle(tmp_path, {"misc/syslog": syslog})
    m = ingest(src, tmp_path / "out")
    (f,) = m["files"]
    assert f["format"] == "kernel-log"
    assert (f["node"], f["node_source"]) == ("gpu-node-42", "content")


# ----------------------------------------------------------------------------- hostile archives


def _hostile_tar(path: Path) -> None:
    with tarfile.open(path, "w") as tf:

        def add(name: str, data: bytes = b"x\n", **kw: object) -> None:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            for k, v in kw.items():
                setattr(info, k, v)
            tf.addfile(info, io.BytesIO(data) if info.type == tarfile.REGTYPE else None)

        add("good/node-001/dmesg.log", DMESG.encode())
        add("../escape.log")
        add("good/../../escape2.log")
        add("/tmp/absolute-escape.log")
        add("good/link", type=tarfile.SYMTYPE, linkname="/etc/passwd")
        add("good/hard", type=tarfile.LNKTYPE, linkname="/etc/passwd")
        add("good/dev", type=tarfile.CHRTYPE)
        add("good/fifo", type=tarfile.FIFOTYPE)


def test_tar_members_never_land_outside_the_staging_folder(tmp_path: Path) -> None:
    arch = tmp_path / "in" / "evil.tar"
    arch.parent.mkdir()
    _hostile_tar(arch)
    staging = tmp_path / "out" / "staging"
    b = open_bundle(arch, staging)
    assert [f.path for f in b.files] == ["node-001/dmesg.log"]
    assert not (tmp_path / "escape.log").exists()
    assert not (tmp_path / "out" / "escape.log").exists()
    assert not Path("/tmp/absolute-escape.log").exists()
    for p in tmp_path.rglob("*"):
        assert not p.is_symlink()
        if p.is_file() and p != arch:
            assert p.resolve().is_relative_to(staging.resolve())
    notes = "\n".join(b.notes)
    for name in ("../escape.log", "good/../../escape2.log", "/tmp/absolute-escape.log"):
        assert f"member '{name}' of evil.tar escapes the bundle" in notes
    assert "'good/link' is a link" in notes and "'good/hard' is a link" in notes
    assert "'good/dev' is a special file" in notes


def test_zip_with_traversal_and_absolute_members(tmp_path: Path) -> None:
    arch = tmp_path / "evil.zip"
    with zipfile.ZipFile(arch, "w") as zf:
        zf.writestr("node-001/dmesg.log", DMESG)
        zf.writestr("../../zip-escape.log", "x")
        zf.writestr("/abs-zip-escape.log", "x")
        zf.writestr("a\\..\\..\\win-escape.log", "x")
        link = zipfile.ZipInfo("node-001/link")
        link.external_attr = (0o120777) << 16
        zf.writestr(link, "/etc/passwd")
    b = open_bundle(arch, tmp_path / "staging")
    assert [f.path for f in b.files] == ["node-001/dmesg.log"]
    assert not list(tmp_path.parent.glob("*zip-escape.log"))
    assert not (tmp_path / "win-escape.log").exists()
    assert not Path("/abs-zip-escape.log").exists()
    assert sum("escapes the bundle" in n for n in b.notes) == 3
    assert any("'node-001/link' is not a regular file" in n for n in b.notes)


def test_expansion_limit_stops_a_bomb(tmp_path: Path) -> None:
    src = make_bundle(tmp_path, {"a.log": "0" * 200_000, "b.log": "1" * 200_000}, archive="tar.gz")
    with pytest.raises(BundleError, match="archive expansion limit reached.*--max-expand"):
        open_bundle(src, tmp_path / "staging", Limits(max_expand_bytes=300_000))


def test_truncated_top_level_tar_keeps_members_before_the_cut(tmp_path: Path) -> None:
    raw = _tar_bytes({"node-001/a.log": b"a\n" * 1000, "node-002/b.log": b"b\n" * 100_000})
    arch = tmp_path / "cut.tar"
    arch.write_bytes(raw[: len(raw) // 2])
    b = open_bundle(arch, tmp_path / "staging")
    assert "node-001/a.log" in _paths(b)
    assert any("truncated" in n or "ends early" in n for n in b.notes)


def test_garbage_top_level_archive_is_a_clear_error(tmp_path: Path) -> None:
    arch = tmp_path / "bundle.tar.gz"
    arch.write_bytes(b"this is not an archive")
    with pytest.raises(BundleError, match=r"cannot open bundle '.*bundle.tar.gz': unreadable archive"):
        open_bundle(arch, tmp_path / "staging")


def test_missing_bundle_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(BundleError, match="no such file or directory"):
        open_bundle(tmp_path / "nope", tmp_path / "staging")


# ----------------------------------------------------------------------------- symlinks in folders


def test_symlinks_out_of_the_bundle_and_loops_are_recorded_not_followed(tmp_path: Path) -> None:
    src = make_bundle(tmp_path, {"node-001/dmesg.log": DMESG})
    (tmp_path / "secret.txt").write_text("secret\n")
    os.symlink(tmp_path / "secret.txt", src / "node-001/out.log")
    os.symlink("loop-b", src / "node-001/loop-a")
    os.symlink("loop-a", src / "node-001/loop-b")
    os.symlink("dmesg.log", src / "node-001/inside.log")
    os.symlink(tmp_path, src / "node-001/dirlink")
    got = _paths(open_bundle(src, tmp_path / "staging"))
    assert got["node-001/dmesg.log"].source is not None
    assert got["node-001/out.log"].skip_reason == "symlink pointing outside the bundle"
    assert got["node-001/loop-a"].skip_reason == "symlink that is broken or loops"
    assert got["node-001/inside.log"].skip_reason == "symlink to node-001/dmesg.log"
    assert got["node-001/dirlink"].skip_reason == "symlink to a folder not followed"
    assert all(f.source is None for p, f in got.items() if p != "node-001/dmesg.log")


def test_single_file_bundle(tmp_path: Path) -> None:
    p = tmp_path / "dmesg_node-005.log"
    p.write_text(DMESG)
    b = open_bundle(p, tmp_path / "staging")
    assert [(f.path, f.node) for f in b.files] == [("dmesg_node-005.log", "node-005")]


# ----------------------------------------------------------------------------- chunked reading


def _bf(p: Path, comp: str | None = None) -> BundleFile:
    return BundleFile(p.name, p, p.stat().st_size, "unknown", "unknown", comp)


@pytest.mark.parametrize("ending", [b"\n", b"\r\n", b"\r"])
def test_chunks_end_at_line_ends_and_rejoin_to_the_file(tmp_path: Path, ending: bytes) -> None:
    data = b"".join(b"line %d %s" % (i, b"x" * (i % 37)) + ending for i in range(5000))
    p = tmp_path / "f.log"
    p.write_bytes(data)
    r = ChunkReader(_bf(p), Limits(), chunk_bytes=4096)
    chunks = list(r)
    assert b"".join(chunks) == data
    assert len(chunks) > 10
    assert all(c.endswith(ending) for c in chunks)
    assert r.sha256 is not None and not r.truncated and r.bytes_read == len(data)


@pytest.mark.parametrize("block", [1000, 4 * 1024**2])
@pytest.mark.parametrize("size", [1, 999, 1000, 1001, 4095, 4096, 4097, 3 * 4096 + 5])
def test_a_plain_file_read_in_blocks_of_what_is_left_gives_its_bytes_and_checksum(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, size: int, block: int
) -> None:
    # (reads sized by what is left of the file; its first block yielded as read while it is all there is)
    import hashlib

    monkeypatch.setattr(bundle_mod, "_BLOCK", block)
    data = (b"0123456789abcdef\n" * (size // 17 + 1))[:size]
    p = tmp_path / "f.log"
    p.write_bytes(data)
    r = ChunkReader(_bf(p), Limits(), chunk_bytes=4096)
    chunks = list(r)
    assert b"".join(chunks) == data
    assert all(len(c) <= 4096 for c in chunks) and (len(chunks) == 1) == (size < 4096)
    assert r.sha256 == hashlib.sha256(data).hexdigest() and r.bytes_read == size and not r.truncated


def test_a_file_longer_than_it_was_when_opened_is_read_to_its_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # (a log still written to: the reads sized by the size seen at opening go on past it in whole blocks)
    data = b"".join(b"line %d\n" % i for i in range(3000))
    p = tmp_path / "f.log"
    p.write_bytes(data)
    real_fstat = os.fstat

    def fstat(fd: int) -> os.stat_result:
        st = list(real_fstat(fd))
        st[6] = 100  # (st_size, as when the file was opened)
        return os.stat_result(st)

    monkeypatch.setattr(bundle_mod.os, "fstat", fstat)
    r = ChunkReader(_bf(p), Limits(), chunk_bytes=4096)
    assert b"".join(r) == data
    assert r.truncated and r.reason == "file changed while it was read"


def test_a_line_longer_than_a_chunk_is_cut(tmp_path: Path) -> None:
    data = b"a" * 10_000 + b"\nshort\n"
    p = tmp_path / "f.log"
    p.write_bytes(data)
    chunks = list(ChunkReader(_bf(p), Limits(), chunk_bytes=4096))
    assert b"".join(chunks) == data


@pytest.mark.parametrize("comp", ["gz", "zst", "bz2", "xz"])
def test_truncated_compressed_streams_give_what_they_hold(tmp_path: Path, comp: str) -> None:
    import bz2
    import lzma

    import zstandard

    data = b"".join(b"%08d some log text that compresses\n" % i for i in range(200_000))
    packed = {
        "gz": gzip.compress,
        "zst": zstandard.ZstdCompressor().compress,
        "bz2": bz2.compress,
        "xz": lzma.compress,
    }[comp](data)
    p = tmp_path / f"f.log.{comp}"
    p.write_bytes(packed[: len(packed) * 2 // 3])
    r = ChunkReader(_bf(p, comp), Limits(), chunk_bytes=1 << 20)
    got = b"".join(r)
    assert r.truncated and "ends early" in (r.reason or "")
    assert data.startswith(got)
    assert r.sha256 is None


def test_size_limit_stops_a_compressed_bomb(tmp_path: Path) -> None:
    p = tmp_path / "bomb.log.gz"
    p.write_bytes(gzip.compress(b"\0" * 50_000_000))
    r = ChunkReader(_bf(p, "gz"), Limits(max_file_bytes=1_000_000), chunk_bytes=1 << 16)
    total = sum(len(c) for c in r)
    assert total == 1_000_000 and r.too_large and "--max-file-size" in (r.reason or "")


def test_member_count_limit_stops_a_bomb_of_empty_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from forensics import bundle as bundle_mod

    monkeypatch.setattr(bundle_mod, "MAX_MEMBERS", 50)
    src = make_bundle(tmp_path, {f"f{i}.log": "" for i in range(60)}, archive="zip")
    with pytest.raises(BundleError, match="archive member limit reached"):
        open_bundle(src, tmp_path / "staging")


_PATH_PIECES = st.sampled_from(["", ".", "..", "/", "a", "b.c", ".x", "y.", "n-01", "d.tar.gz", " ", "é.LOG"])


@settings(max_examples=400, deadline=None)
@given(st.lists(_PATH_PIECES, min_size=1, max_size=6).map("/".join))
def test_path_parts_and_suffix_as_pathlib_gives_them(path: str) -> None:
    """The walk's string helpers give what the path objects they replace give, on any path shape."""
    assert bundle_mod._parts(path) == PurePosixPath(path).parts
    pieces = path.split("/")
    if "" not in pieces and "." not in pieces:  # (the relative paths the walk makes)
        assert bundle_mod._suffix(path) == Path(path).suffix


@pytest.mark.parametrize("size", [0, 1, (1 << 20) - 1, 1 << 20, (2 << 20) + 7])
def test_a_files_checksum_is_its_bytes_sha256(tmp_path: Path, size: int) -> None:
    """`hash_file` (the checksum of a file parsed in byte ranges) is the sha256 of the file's bytes, whatever
    its size against the block it reads at a time (`_HASH_BLOCK`, 1 MB); None for a file that cannot be read."""
    import hashlib

    p = tmp_path / "f.log"
    data = os.urandom(size)
    p.write_bytes(data)
    assert bundle_mod.hash_file(_bf(p)) == hashlib.sha256(data).hexdigest()
    p.unlink()
    assert bundle_mod.hash_file(BundleFile("f.log", p, size, "unknown", "unknown")) is None
