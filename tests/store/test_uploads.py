"""What a user brings: files, folders and zips read in memory under limits (rest_core.store.files.read_files),
and the upload build with progress, cancellation and a summary (rest_core.store.uploads)."""

from __future__ import annotations

import json
import os
import threading
import zipfile
from pathlib import Path

import pytest

from rest_core.store.build import BuildCancelled
from rest_core.store.corpora import CorpusError
from rest_core.store.datastore import Datastore
from rest_core.store.files import ReadLimits, read_files
from rest_core.store.format import DatastoreError
from rest_core.store.uploads import BuildSummary, build_from_files
from tests.store.test_datastore import CharTokenizer


def make_zip(path: Path, members: dict[str, bytes], *, links: dict[str, str] | None = None) -> Path:
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
        for name, target in (links or {}).items():
            info = zipfile.ZipInfo(name)
            info.external_attr = 0o120777 << 16  # a symbolic link, as `zip --symlinks` stores it
            zf.writestr(info, target)
    return path


SHAREGPT = [
    {"id": "conv-a", "conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "hello there"}]},
    {"conversations": [{"from": "human", "value": "q"}, {"from": "gpt", "value": "an answer"}]},
]


def test_zip_of_a_folder_reads_every_format_with_names(tmp_path):
    z = make_zip(
        tmp_path / "project.zip",
        {
            "project/README.md": b"# Project\nnotes",
            "project/src/app.py": b"def main():\n    return 0\n",
            "project/data/chat.json": json.dumps(SHAREGPT).encode(),
            "project/data/lines.jsonl": b'{"text": "line one"}\n{"id": "L2", "text": "line two"}\n',
            "project/empty.txt": b"",
        },
    )
    c = read_files([z])
    docs = list(c.documents())
    assert [(d.name, d.text) for d in docs] == [
        ("project/README.md", "# Project\nnotes"),
        ("project/src/app.py", "def main():\n    return 0\n"),
        ("conv-a turn 1", "hello there"),  # a conversation's id names its turns
        ("project/data/chat.json#2 turn 1", "an answer"),  # no id: file and record number
        ("project/data/lines.jsonl:1", "line one"),
        ("L2", "line two"),
    ]
    assert c.stats.skipped == {"empty document": 1}
    assert c.stats.bytes_read == c.info["bytes"]


def test_zip_unsafe_members_are_skipped_and_nothing_is_written(tmp_path):
    upload = tmp_path / "upload"
    upload.mkdir()
    z = make_zip(
        upload / "evil.zip",
        {
            "../escaped.txt": b"zip slip",
            "/etc/absolute.txt": b"absolute",
            "a/../../up.txt": b"zip slip inside",
            "C:/windows.txt": b"drive",
            ".git/config": b"hidden",
            "ok.txt": b"fine text",
        },
        links={"link.txt": "/etc/passwd"},
    )
    before = sorted(os.listdir(tmp_path)), sorted(os.listdir(upload))
    c = read_files([z])
    assert [(d.name, d.text) for d in c.documents()] == [("ok.txt", "fine text")]
    assert c.stats.skipped == {"unsafe path in zip": 4, "link in zip": 1, "hidden file": 1}
    assert (sorted(os.listdir(tmp_path)), sorted(os.listdir(upload))) == before  # read in memory only
    assert not (tmp_path / "escaped.txt").exists()


def test_zip_bomb_ratio_is_refused(tmp_path):
    z = make_zip(tmp_path / "bomb.zip", {"zeros.txt": b"a" * 5_000_000, "small.txt": b"ok"})
    assert zipfile.ZipFile(z).getinfo("zeros.txt").compress_size < 50_000  # ratio ~1000
    c = read_files([z])  # 5 MB declared: within the 20 MB budget, so refused while reading
    with pytest.raises(CorpusError, match="refused as a zip bomb: zeros.txt expands .* times"):
        list(c)


def test_declared_size_over_the_limit_is_refused_before_reading(tmp_path):
    z = make_zip(tmp_path / "big.zip", {f"f{i}.txt": os.urandom(600).hex().encode() for i in range(3)})
    with pytest.raises(CorpusError, match=r"too much text: 3\.6 kB to read, the limit is 3\.0 kB"):
        read_files([z], limits=ReadLimits(max_bytes=3000))
    plain = tmp_path / "big.txt"
    plain.write_text("x" * 5000)
    with pytest.raises(CorpusError, match="too much text"):
        read_files([plain], limits=ReadLimits(max_bytes=3000))


def test_bytes_are_counted_as_read_not_only_as_declared(tmp_path):
    # A file that grows between the check of its size and the read (or a zip whose sizes lie)
    # is still held to the limit.
    f = tmp_path / "grows.txt"
    f.write_text("x" * 100)
    c = read_files([f], limits=ReadLimits(max_bytes=1000))
    f.write_text("x" * 5000)
    with pytest.raises(CorpusError, match="too much text: grows.txt takes the total past the 1.0 kB limit"):
        list(c)


def test_too_many_members(tmp_path):
    z = make_zip(tmp_path / "many.zip", {f"f{i}.txt": b"x" for i in range(6)})
    with pytest.raises(CorpusError, match="too many files: more than 5"):
        list(read_files([z], limits=ReadLimits(max_files=5)))


def test_binary_and_non_utf8_members_are_skipped(tmp_path):
    z = make_zip(
        tmp_path / "mixed.zip",
        {
            "img.png": b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR",
            "latin.txt": "caf\xe9".encode("latin-1"),
            "inner.zip": b"PK\x03\x04\0\0",
            "t.md": b"text",
        },
    )
    c = read_files([z])
    assert [d.name for d in c.documents()] == ["t.md"]
    assert c.stats.skipped == {"binary file": 2, "not UTF-8 text": 1}


def test_not_a_zip_and_empty_and_missing(tmp_path):
    fake = tmp_path / "fake.zip"
    fake.write_bytes(b"not a zip at all")
    with pytest.raises(CorpusError, match="fake.zip: not a readable zip archive"):
        list(read_files([fake]))
    with pytest.raises(CorpusError, match="nothing to read"):
        read_files([])
    with pytest.raises(CorpusError, match="not found: gone.txt"):
        read_files([tmp_path / "gone.txt"])


def test_uploaded_files_keep_their_original_names(tmp_path):
    # Gradio hands over temp paths; the page passes the names the user's files had.
    a = tmp_path / "tmp123"
    a.write_text("alpha")
    c = read_files([a], names=["notes.md"])
    assert [d.name for d in c.documents()] == ["notes.md"]


# --- build_from_files ---------------------------------------------------------------------------


def test_build_from_files_progress_names_and_summary(tmp_path):
    z = make_zip(tmp_path / "docs.zip", {"guide/intro.md": b"intro text " * 50, "guide/bin.dat": b"\0\1\2"})
    md = tmp_path / "readme.txt"
    md.write_text("readme body")
    seen = []
    out = tmp_path / "store"
    summary = build_from_files(
        [z, md], out, CharTokenizer(300), names=["docs.zip", "README.txt"], pasted="typed in", progress=seen.append
    )
    assert isinstance(summary, BuildSummary)
    assert summary.documents == 3 and summary.files == 3
    assert summary.tokens == len("typed in") + len("intro text " * 50) + len("readme body")
    assert summary.skipped == {"binary file": 1}
    assert summary.line().startswith("3 documents, 569 tokens from 3 file(s) in ")
    assert summary.line().endswith("; skipped: 1 binary file")
    phases = [p.phase for p in seen]
    assert phases[0] == "reading" and phases[-1] == "done" and "suffix array" in phases
    assert phases.index("suffix array") > max(i for i, p in enumerate(phases) if p == "reading")
    fractions = [p.fraction for p in seen]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0
    assert seen[-1].documents == 3
    ds = Datastore.open(out)
    names = [ds.documents.name(i) for i in range(len(ds.documents))]
    assert names == ["pasted text", "guide/intro.md", "README.txt"]
    assert ds.meta["read_stats"]["skipped_by_reason"] == {"binary file": 1}


def test_build_from_files_cancel_leaves_nothing(tmp_path):
    src = tmp_path / "a.txt"
    src.write_text("some text")
    cancel = threading.Event()

    def progress(p):
        cancel.set()  # the user leaves as soon as the build starts

    out = tmp_path / "store"
    with pytest.raises(BuildCancelled, match="cancelled"):
        build_from_files([src], out, CharTokenizer(300), progress=progress, cancel=cancel)
    assert sorted(os.listdir(tmp_path)) == ["a.txt"]  # no store, no temp folder


def test_build_from_files_refusals_are_one_line(tmp_path):
    tok = CharTokenizer(300)
    binary = tmp_path / "blob.bin"
    binary.write_bytes(b"\0" * 10)
    with pytest.raises(DatastoreError, match=r"^no usable text in the upload \(skipped: 1 binary file\)$"):
        build_from_files([binary], tmp_path / "s1", tok)
    with pytest.raises(CorpusError, match="^nothing to build from"):
        build_from_files([], tmp_path / "s2", tok, pasted="  \n")
    big = tmp_path / "big.txt"
    big.write_text("x" * 2000)
    with pytest.raises(CorpusError, match="^too much text"):
        build_from_files([big], tmp_path / "s3", tok, limits=ReadLimits(max_bytes=1000))
    with pytest.raises(CorpusError, match="^too much text"):  # pasted text counts against the same budget
        build_from_files([big], tmp_path / "s4", tok, pasted="y" * 600, limits=ReadLimits(max_bytes=2500))
    slip = make_zip(tmp_path / "slip.zip", {"../../x.txt": b"escape"})
    with pytest.raises(DatastoreError, match=r"no usable text in the upload \(skipped: 1 unsafe path in zip\)"):
        build_from_files([slip], tmp_path / "s5", tok)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.txt", "blob.bin", "slip.zip"]


def test_cli_builds_from_a_zip(tmp_path, monkeypatch, capsys):
    import rest_core.decode.models
    from rest_core.cli import main

    monkeypatch.setattr(rest_core.decode.models, "load_tokenizer", lambda spec=None: CharTokenizer(300, name="fake"))
    z = make_zip(tmp_path / "notes.zip", {"notes/a.md": b"first note", "notes/b.md": b"second", "../x.md": b"bad"})
    out = tmp_path / "ds"
    assert main(["datastore", "build", "--source", str(z), "--out", str(out), "--model", "fake", "--quiet"]) == 0
    assert "skipped: 1 unsafe path in zip" in capsys.readouterr().out
    ds = Datastore.open(out)
    assert [ds.document_at(p).name for p in (0, ds.n_tokens - 1)] == ["notes/a.md", "notes/b.md"]
