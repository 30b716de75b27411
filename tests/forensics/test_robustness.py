"""Bad input never crashes or lies: a corpus of nasty files, property tests, interrupted runs, CLI errors.

Property tests follow the Hypothesis profile of tests/conftest.py ("ci" by default, seconds);
`HYPOTHESIS_PROFILE=long pytest tests/forensics/test_robustness.py` runs thousands of examples.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import signal
import subprocess
import sys
import tarfile
import time
import zipfile
from pathlib import Path

import polars as pl
import pytest
import zstandard
from hypothesis import example, given
from hypothesis import strategies as st
from typer.testing import CliRunner

from forensics import bundle as bundle_mod
from forensics.bundle import BundleFile, ChunkReader, Limits
from forensics.cli import app
from forensics.ingest import ingest, ingest_file
from forensics.outputs import read_tables, require_ingested
from parsers.base import lines_from_bytes
from tests.conftest import make_bundle

XID = "[  {i}.000000] NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.\n"


def xids(n: int) -> str:
    return "".join(XID.format(i=i + 10) for i in range(n))


STATUS_OK = ("ok", "partial", "partial: ", "skipped: ", "error: ")


def corrupt_gz(n: int) -> bytes:
    """A gzip member whose first deflate block has the reserved type: corrupt at its first byte of data, with
    random bytes after. (Random bytes right after the magic decode to some garbage before the error now and
    then, which reads as a binary file instead: a flaky test.)"""
    return b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03\x07" + os.urandom(n)


def corrupt_zst(n: int) -> bytes:
    """A zstd frame whose first block has the reserved type (corrupt before any output), random bytes
    after."""
    return b"\x28\xb5\x2f\xfd\x00\x00\x07\x00\x00" + os.urandom(n)


def _status_ok(s: str) -> bool:
    return s in ("ok", "partial") or s.startswith(("partial: ", "skipped: ", "error: "))


def _nasty_corpus(root: Path) -> Path:
    good = xids(20).encode()
    many = xids(5000).encode()  # varied lines: compressed blocks small enough to cut in the middle
    gz = gzip.compress(many)
    zst = zstandard.ZstdCompressor().compress(many)
    tar_buf = io.BytesIO()
    with tarfile.open(fileobj=tar_buf, mode="w:gz") as tf:
        info = tarfile.TarInfo("dmesg.log")
        info.size = len(good)
        tf.addfile(info, io.BytesIO(good))
    zip_buf = io.BytesIO()
    with zipfile.ZipFile(zip_buf, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("dmesg.log", good)
    bomb = io.BytesIO()
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("huge.log", b"A" * 20_000_000)
    files: dict[str, bytes] = {
        "node-001/dmesg.log": good,
        "node-002/empty.log": b"",
        "node-002/random.bin": os.urandom(5000),
        "node-002/truncated.log.gz": gz[: len(gz) // 2],
        "node-002/corrupt.log.gz": corrupt_gz(500),
        "node-002/truncated.log.zst": zst[: len(zst) // 2],
        "node-002/corrupt.log.zst": corrupt_zst(500),
        "node-003.tar.gz": tar_buf.getvalue()[: len(tar_buf.getvalue()) // 2],
        "node-004.zip": zip_buf.getvalue()[:-30],
        "node-005.zip": bomb.getvalue(),
        "node-006/latin1.log": XID.format(i=1).encode() + "caf\xe9 \xff\xfe\n".encode("latin-1") + good,
        "node-006/nul.log": good + b"\0\0\0 in the middle\n" + good,
        "node-006/longline.log": good + b"x" * 3_000_000 + b"\n" + good,
        "node-006/crlf.log": good.replace(b"\n", b"\r\n"),
        "node-006/cr.log": good.replace(b"\n", b"\r"),
        "node-006/bomb.log.gz": gzip.compress(b"B" * 30_000_000),
        "node-006/only-newlines.log": b"\n" * 10000,
        "node-006/bom.log": b"\xef\xbb\xbf" + good,
    }
    base = root / "bundle"
    for rel, data in files.items():
        p = base / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    os.symlink("loop-b", base / "node-002/loop-a")
    os.symlink("loop-a", base / "node-002/loop-b")
    os.symlink("/etc/passwd", base / "node-002/passwd")
    return base


def test_nasty_corpus_is_ingested_with_a_status_for_every_file(tmp_path: Path) -> None:
    src = _nasty_corpus(tmp_path)
    out = tmp_path / "out"
    m = ingest(src, out, limits=Limits(max_file_bytes=10_000_000, max_expand_bytes=10_000_000), jobs=1)
    files = {f["path"]: f for f in m["files"]}
    for f in files.values():
        assert _status_ok(f["status"]), f
    st_ = {p: f["status"] for p, f in files.items()}
    assert st_["node-001/dmesg.log"] == "ok"
    assert st_["node-002/empty.log"] == "skipped: empty file"
    assert st_["node-002/random.bin"].startswith("skipped: binary content")
    assert st_["node-002/truncated.log.gz"].startswith("partial: compressed stream ends early")
    assert st_["node-002/truncated.log.zst"].startswith("partial: compressed stream ends early")
    assert st_["node-002/corrupt.log.gz"].startswith("error: compressed stream ends early or is corrupt")
    assert st_["node-002/corrupt.log.zst"].startswith("error: compressed stream ends early or is corrupt")
    assert st_["node-003.tar.gz"].startswith("skipped: unreadable archive") or "node-003/dmesg.log" in st_
    assert st_["node-004.zip"].startswith("skipped: unreadable archive")
    assert st_["node-005.zip"].startswith("skipped: unreadable archive: archive expansion limit reached")
    assert st_["node-006/bomb.log.gz"] == "skipped: larger than the size limit of 10000000 bytes (--max-file-size)"
    assert st_["node-002/loop-a"] == "skipped: symlink that is broken or loops"
    assert st_["node-002/passwd"] == "skipped: symlink pointing outside the bundle"
    assert st_["node-006/only-newlines.log"] == "skipped: format not recognised"
    for name in ("latin1", "nul", "longline", "crlf", "cr", "bom"):
        f = files[f"node-006/{name}.log"]
        assert f["format"] == "kernel-log" and f["status"] == "ok", f
    assert files["node-006/crlf.log"]["parsed"] == files["node-006/cr.log"]["parsed"] == 20
    assert files["node-006/longline.log"]["lines"] == 41
    ev = read_tables(out)["events"]
    by_file = dict(ev.group_by("file").len().iter_rows())
    assert by_file["node-001/dmesg.log"] == 20
    assert by_file["node-006/nul.log"] == 40
    assert by_file["node-006/crlf.log"] == by_file["node-006/cr.log"] == 20
    assert by_file["node-002/truncated.log.gz"] > 0
    # nothing escaped the output folder, nothing left behind
    assert sorted(p.name for p in out.iterdir()) == ["manifest.json", "tables"]


def test_unreadable_file_is_an_error_row(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src = make_bundle(tmp_path, {"node-001/dmesg.log": xids(3), "node-001/secret.log": xids(3)})
    real_open = open

    def guarded(path, *a, **kw):  # type: ignore[no-untyped-def]
        if str(path).endswith("secret.log"):
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, *a, **kw)

    monkeypatch.setattr(bundle_mod, "open", guarded, raising=False)
    m = ingest(src, tmp_path / "out", jobs=1)
    st_ = {f["path"]: f["status"] for f in m["files"]}
    assert st_ == {"node-001/dmesg.log": "ok", "node-001/secret.log": "error: cannot read (Permission denied)"}


def _bf(p: Path) -> BundleFile:
    return BundleFile(p.name, p, p.stat().st_size, "node-001", "path")


def test_file_that_changes_while_read(tmp_path: Path) -> None:
    p = tmp_path / "grow.log"
    p.write_text(xids(2000))
    r = ChunkReader(_bf(p), Limits(), chunk_bytes=10_000)
    for i, _chunk in enumerate(r):
        if i == 0:
            with open(p, "a") as fh:
                fh.write(xids(1))
    assert r.truncated and r.reason == "file changed while it was read"


def test_file_that_vanishes_while_read(tmp_path: Path) -> None:
    p = tmp_path / "gone.log"
    p.write_text(xids(2000))
    r = ChunkReader(_bf(p), Limits(), chunk_bytes=10_000)
    n = 0
    for _chunk in r:
        if n == 0:
            p.unlink()
        n += 1
    assert n > 1 and r.truncated and r.reason == "file vanished while it was read"


def test_file_that_vanished_before_read(tmp_path: Path) -> None:
    p = tmp_path / "gone.log"
    p.write_text(xids(2))
    f = _bf(p)
    p.unlink()
    o = ingest_file(f, Limits(), None, None)
    assert o.row["status"] == "error: cannot read (No such file or directory)"


# ----------------------------------------------------------------------------- properties

_names = st.sampled_from(["dmesg.log", "x.log.gz", "nvidia-smi.txt", "train.log", "data.csv", "a.xml", "f"])


@given(data=st.binary(max_size=3000), name=_names, chunk=st.integers(1, 600))
@example(data=b"\x1f\x8b", name="x.log.gz", chunk=10)
def test_ingest_file_never_raises_and_accounts(tmp_path_factory: pytest.TempPathFactory, data: bytes, name: str,
                                              chunk: int) -> None:
    d = tmp_path_factory.mktemp("p")
    p = d / name
    p.write_bytes(data)
    comp = "gz" if name.endswith(".gz") else None
    o = ingest_file(BundleFile(name, p, len(data), "node-001", "path", comp), Limits(), 2026, None,
                    chunk_bytes=chunk)
    row = o.row
    assert _status_ok(row["status"]), row
    assert row["parsed"] + row["unrecognized"] <= row["lines"] or row["lines"] == 0
    if row["status"] in ("ok", "partial") or row["status"].startswith("partial"):
        assert row["format"] is not None
    for df in o.tables.values():
        assert df.height == 0 or df["file"].unique().to_list() == [name]


_text_line = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n"), max_size=80
)


@given(lines=st.lists(_text_line, max_size=200), chunk=st.integers(90, 2000), crlf=st.booleans())
def test_chunked_lines_equal_whole_file_lines(tmp_path_factory: pytest.TempPathFactory, lines: list[str],
                                              chunk: int, crlf: bool) -> None:
    end = "\r\n" if crlf else "\n"
    data = "".join(x + end for x in lines).encode()
    p = tmp_path_factory.mktemp("c") / "f.log"
    p.write_bytes(data)
    pieces = list(ChunkReader(_bf(p), Limits(), chunk_bytes=chunk * 4))
    assert b"".join(pieces) == data
    got = pl.concat([lines_from_bytes(c) for c in pieces]) if pieces else lines_from_bytes(b"")
    assert got.to_list() == lines_from_bytes(data).to_list()


@given(data=st.binary(max_size=2000), kind=st.sampled_from(["tar", "tar.gz", "zip", "tar.zst"]))
def test_damaged_archives_never_crash_discovery(tmp_path_factory: pytest.TempPathFactory, data: bytes,
                                               kind: str) -> None:
    d = tmp_path_factory.mktemp("a")
    real = make_bundle(d / "src", {"node-001/dmesg.log": xids(5)}, archive=kind).read_bytes()
    cut = real[: len(data) % (len(real) + 1)] + data[: len(data) // 3]
    arch = d / f"b.{kind}"
    arch.write_bytes(cut)
    from forensics.errors import BundleError

    try:
        b = bundle_mod.open_bundle(arch, d / "staging")
    except BundleError as exc:
        assert str(exc).startswith("cannot open bundle")
        return
    for f in b.files:
        assert f.source is None or f.source.resolve().is_relative_to((d / "staging").resolve())


# ----------------------------------------------------------------------------- interrupted runs


def _big_bundle(root: Path, n: int = 26) -> Path:
    return make_bundle(root, {f"node-{i:03d}/dmesg.log": xids(10000) for i in range(n)})


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL])
def test_killed_ingest_never_leaves_a_complete_looking_output(tmp_path: Path, sig: int) -> None:
    """Ctrl-C (to the whole process group, as a terminal sends it) or kill -9 in the middle of an ingest."""
    src = _big_bundle(tmp_path)
    out = tmp_path / "out"
    ingest(make_bundle(tmp_path / "old", {"node-999/dmesg.log": xids(1)}), out)
    proc = subprocess.Popen(
        [sys.executable, "-m", "forensics.cli", "ingest", str(src), "-o", str(out), "--force", "-q", "-j", "2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    deadline = time.monotonic() + 60
    while not (out / ".forensics-work" / "staging").exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(1.0)  # workers started, files being parsed
    if proc.poll() is None:
        os.killpg(proc.pid, sig)
    _, stderr = proc.communicate(timeout=60)  # a hang after Ctrl-C fails here
    text = stderr.decode()
    assert "Traceback" not in text
    if (out / "manifest.json").exists():  # finished before the signal: then it is whole
        m = require_ingested(out)
        assert m["totals"]["files"] == 26
        assert read_tables(out)["events"].height == 26 * 10000
    else:
        if sig == signal.SIGINT:
            assert proc.returncode == 130, text
            assert "Interrupted" in text
        # the old ingest is gone, not mixed with the new one
        assert not (out / "tables").exists() or "node-999" not in set(read_tables(out)["events"]["node"])
    # and the next run works
    ingest(make_bundle(tmp_path / "new", {"node-001/dmesg.log": xids(2)}), out, force=True)
    assert read_tables(out)["events"].height == 2


# ----------------------------------------------------------------------------- clear errors (CLI)


def _cli(args: list[str]) -> tuple[int, str]:
    r = CliRunner().invoke(app, args)
    return r.exit_code, r.stderr


def test_cli_missing_bundle(tmp_path: Path) -> None:
    code, err = _cli(["ingest", str(tmp_path / "nope"), "-o", str(tmp_path / "out")])
    assert code == 2
    assert err == (
        f"Error: cannot open bundle '{tmp_path / 'nope'}': no such file or directory "
        "(give a folder or a .tar/.tar.gz/.tgz/.tar.zst/.zip archive)\n"
    )


def test_cli_out_is_a_file(tmp_path: Path) -> None:
    src = make_bundle(tmp_path, {"node-001/dmesg.log": xids(1)})
    (tmp_path / "out").write_text("x")
    code, err = _cli(["ingest", str(src), "-o", str(tmp_path / "out")])
    assert code == 2
    assert err == f"Error: output '{tmp_path / 'out'}' is a file, not a folder; give -o/--out a folder path\n"


def test_cli_analyze_never_ingested(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    code, err = _cli(["analyze", str(tmp_path / "out")])
    assert code == 2
    o = tmp_path / "out"
    assert err == f"Error: '{o}' holds no ingested bundle (no manifest.json); run 'forensics ingest BUNDLE -o {o}' first\n"


def test_cli_existing_out_without_force(tmp_path: Path) -> None:
    src = make_bundle(tmp_path, {"node-001/dmesg.log": xids(1)})
    out = tmp_path / "out"
    assert _cli(["ingest", str(src), "-o", str(out), "-q"])[0] == 0
    code, err = _cli(["ingest", str(src), "-o", str(out), "-q"])
    assert code == 2
    assert err == f"Error: output folder '{out}' already holds a previous ingest; use --force to replace it\n"


def test_cli_unknown_fault_kind(tmp_path: Path) -> None:
    code, err = _cli(["simulate", "-o", str(tmp_path / "b"), "--fault", "bogus_kind"])
    assert code == 2
    assert err.startswith("Error: unknown fault kind 'bogus_kind'; known: ")
    assert err.count("\n") == 1


def test_cli_bad_input_bundle_gives_summary_not_traceback(tmp_path: Path) -> None:
    src = make_bundle(
        tmp_path,
        {
            "node-001/dmesg.log": xids(3),
            "node-001/random.bin": os.urandom(3000),
            "node-001/corrupt.log.gz": corrupt_gz(300),
            "node-002.tar.gz": corrupt_gz(300),
        },
    )
    gz = src / "node-001/corrupt.log.gz"
    gz.write_bytes(corrupt_gz(300))  # make_bundle gzips .gz members: corrupt it again
    r = CliRunner().invoke(app, ["ingest", str(src), "-o", str(tmp_path / "out"), "-q", "--max-file-size", "10M"])
    assert r.exit_code == 0, r.output
    assert "Traceback" not in r.output + r.stderr
    assert r.stdout.startswith("Ingested 4 file(s), 3 line(s): 3 parsed, 0 not understood; 2 skipped, 1 with errors")
    assert json.loads((tmp_path / "out" / "manifest.json").read_text())["totals"]["files"] == 4


def test_cli_dask_without_the_extra(tmp_path: Path) -> None:
    import importlib.util

    if importlib.util.find_spec("distributed") is not None:
        pytest.skip("dask is installed here")
    src = make_bundle(tmp_path, {"node-001/dmesg.log": xids(1)})
    code, err = _cli(["ingest", str(src), "-o", str(tmp_path / "out"), "--dask", "tcp://127.0.0.1:8786"])
    assert code == 2
    assert err == "Error: --dask needs Dask distributed: pip install 'gpu-forensics[dask]'\n"
    assert not (tmp_path / "out" / "manifest.json").exists()
