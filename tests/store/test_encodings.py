"""Text encodings the readers take: UTF-8, and text marked by a byte order mark (UTF-8, UTF-16
and UTF-32, either byte order), in every reader: folders (with and without a glob), uploads, zip
members, the upload build."""

from __future__ import annotations

import codecs
import zipfile

from rest_core.store.corpora import read_source_folder, read_text_files
from rest_core.store.files import read_files
from rest_core.store.named import open_source
from rest_core.store.uploads import build_from_files
from tests.store.test_datastore import CharTokenizer

TEXT = "h\xe9llo w\xf6rld \u2014 \u2603 \U0001f600\nsecond line\n"
MARKED = {
    "utf16le.txt": codecs.BOM_UTF16_LE + TEXT.encode("utf-16-le"),
    "utf16be.txt": codecs.BOM_UTF16_BE + TEXT.encode("utf-16-be"),
    "utf32le.txt": codecs.BOM_UTF32_LE + TEXT.encode("utf-32-le"),
    "utf32be.txt": codecs.BOM_UTF32_BE + TEXT.encode("utf-32-be"),
    "utf8bom.txt": codecs.BOM_UTF8 + TEXT.encode("utf-8"),
}


def write_files(folder, files: dict[str, bytes]) -> list:
    folder.mkdir()
    paths = []
    for name, data in files.items():
        (folder / name).write_bytes(data)
        paths.append(folder / name)
    return paths


def texts(corpus) -> dict[str, str]:
    return {d.name: d.text for d in corpus.documents()}


def test_text_with_a_byte_order_mark_is_read_as_text_the_mark_left_out(tmp_path):
    paths = write_files(tmp_path / "src", MARKED)
    expected = dict.fromkeys(sorted(MARKED), TEXT)
    for corpus in (
        open_source(str(tmp_path / "src")),  # datastore build --source DIR
        open_source(str(tmp_path / "src"), pattern="*.txt"),  # ... --glob '*.txt'
        read_source_folder(tmp_path / "src", "*.txt"),
        read_files(paths, names=[p.name for p in paths]),  # an upload in the app
    ):
        assert texts(corpus) == expected, corpus.description
        assert corpus.stats.skipped == {}, corpus.description
    z = tmp_path / "marked.zip"
    with zipfile.ZipFile(z, "w") as zf:
        for name, data in MARKED.items():
            zf.writestr(name, data)
    assert texts(read_files([z])) == expected
    summary = build_from_files(paths[:1], tmp_path / "store", CharTokenizer(300), names=["notes.txt"])
    assert summary.documents == 1 and summary.skipped == {}


def test_marked_text_with_nuls_is_binary_and_a_mark_that_does_not_decode_is_no_mark(tmp_path):
    files = {
        "nuls.txt": codecs.BOM_UTF16_LE + "ab\0\0cd".encode("utf-16-le"),
        "odd.txt": codecs.BOM_UTF16_LE + b"abc",  # a byte short of a code unit: not UTF-16
        "fake8.txt": codecs.BOM_UTF8 + b"caf\xe9",  # a UTF-8 mark on latin-1
    }
    paths = write_files(tmp_path / "src", files)
    for corpus in (read_files(paths), read_source_folder(tmp_path / "src", "*.txt")):
        assert texts(corpus) == {}
        assert corpus.stats.skipped == {"binary file": 1, "not UTF-8 text": 2}


def test_text_without_a_mark_is_read_as_before(tmp_path):
    files = {
        "latin.txt": "caf\xe9".encode("latin-1"),  # not UTF-8, no mark: skipped
        "bare16.txt": "text".encode("utf-16-le"),  # UTF-16 without a mark: NULs, binary to read_files
        "plain.txt": TEXT.encode("utf-8"),
    }
    paths = write_files(tmp_path / "src", files)
    uploaded = read_files(paths)
    assert texts(uploaded) == {"plain.txt": TEXT}
    assert uploaded.stats.skipped == {"not UTF-8 text": 1, "binary file": 1}
    listed = read_source_folder(tmp_path / "src", "*.txt")
    assert texts(listed) == {"bare16.txt": "text".encode("utf-16-le").decode(), "plain.txt": TEXT}  # NULs and all
    assert listed.stats.skipped == {"not UTF-8 text": 1}


def test_explicit_text_files_take_no_mark(tmp_path):
    # read_text_files (the `code` corpus: Python sources, never UTF-16) reads UTF-8 as before.
    paths = write_files(tmp_path / "src", {"utf16le.txt": MARKED["utf16le.txt"]})
    corpus = read_text_files(paths)
    assert texts(corpus) == {} and corpus.stats.skipped == {"not UTF-8 text": 1}


def test_cli_build_reads_a_utf16_file_in_the_folder(tmp_path, fake_model, capsys):
    from rest_core.cli import main
    from rest_core.store.datastore import Datastore

    write_files(tmp_path / "src", {"notes.txt": MARKED["utf16le.txt"]})
    out = tmp_path / "ds"
    args = ["datastore", "build", "--source", str(tmp_path / "src"), "--out", str(out), "--model", fake_model]
    assert main([*args, "--quiet"]) == 0, capsys.readouterr().err
    assert capsys.readouterr().out.endswith("; skipped: none\n")
    ds = Datastore.open(out)
    assert ds.documents.name(0) == "notes.txt" and ds.n_tokens == len(TEXT) + 1  # the text and one separator
