"""The datastore's document index (format 2): names and start offsets of every document,
document_at / context_around, its checks on open, stores of format 1, and `datastore info`."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from rest_core.store.build import build_datastore, build_from_token_ids
from rest_core.store.datastore import Datastore
from rest_core.store.format import DatastoreError
from tests.store.test_datastore import CharTokenizer, cli

DOCS = [("guide/intro.md", "hello world"), ("src/app.py", "x = 1"), ("conv-7 turn 1", "an answer here")]


@pytest.fixture
def named_store(tmp_path) -> Path:
    out = tmp_path / "store"
    # shard_tokens=16: each document lands in its own shard.
    build_datastore(DOCS, CharTokenizer(300), out, verbose=False, shard_tokens=16, source="docs")
    return out


def test_names_and_offsets_of_a_real_build(named_store):
    ds = Datastore.open(named_store)
    assert len(ds.shards) == 3 and ds.documents is not None and ds.documents_note is None
    starts, pos = [], 0
    for _, text in DOCS:
        starts.append(pos)
        pos += len(text) + 1  # one id per character, then the separator
    assert np.asarray(ds.documents.starts).tolist() == starts + [ds.n_tokens]
    for (name, text), start in zip(DOCS, starts):
        for p in range(start, start + len(text) + 1):  # every token and the closing separator
            assert ds.document_at(p) == (name, start, start + len(text))
    with pytest.raises(IndexError):
        ds.document_at(ds.n_tokens)
    # Shard-local positions (what retrieval reports) map to the stream.
    second = ds.stream_position(1, 0)
    assert second == ds.shards[0].n_tokens and ds.document_at(second).name == "src/app.py"


def test_context_around_stays_inside_the_document(named_store):
    ds = Datastore.open(named_store)
    start = ds.document_at(len("hello world") + 1).start  # "x = 1"
    ctx = ds.context_around(start + 2, before=100, after=100)
    assert "".join(map(chr, ctx)) == "x = 1"
    ctx = ds.context_around(start + 2, before=1, after=2)
    assert "".join(map(chr, ctx)) == " = " and ctx.dtype == np.int64  # 1 before, the token and 1 after
    assert "".join(map(chr, ds.context_around(0, 5, 3))) == "hel"


def test_a_document_split_across_shards_is_one_document(tmp_path):
    out = tmp_path / "s"
    build_from_token_ids([[1, 2, 3, 4, 5, 6, 7], [8, 9]], 10, out, shard_tokens=4)
    ds = Datastore.open(out)
    assert len(ds.shards) > 2 and ds.n_documents == 2
    first = ds.document_at(5)
    assert first == ("document 0", 0, ds.documents.starts[1] - 1)
    assert ds.context_around(2, 10, 10)[ds.context_around(2, 10, 10) != 10].tolist() == [1, 2, 3, 4, 5, 6, 7]
    assert ds.document_at(ds.n_tokens - 1).name == "document 1"


def test_in_memory_store_has_the_index():
    ds = Datastore.from_token_ids([[1, 2], [3]], 10, names=["a", "b"])
    assert ds.document_at(0) == ("a", 0, 2) and ds.document_at(3) == ("b", 3, 4)


def test_names_are_labels_never_paths(tmp_path):
    out = tmp_path / "s"
    build_datastore(
        [("../../etc/passwd\nline two\x1b[31m", "abc"), ("n" * 2000, "d")], CharTokenizer(300), out, verbose=False
    )
    ds = Datastore.open(out)
    assert ds.document_at(0).name == "../../etc/passwd?line two?[31m"  # control characters replaced
    assert len(ds.document_at(4).name.encode()) == 512  # cut
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s"]


def test_cli_build_names_documents_by_path_and_conversation(tmp_path, fake_model):
    folder = tmp_path / "corpus"
    (folder / "docs").mkdir(parents=True)
    (folder / "docs" / "a.md").write_text("alpha")
    (folder / "chat.json").write_text(json.dumps([{"id": "QWJh_0", "conversations": [{"from": "gpt", "value": "hi"}]}]))
    out = tmp_path / "ds"
    assert cli("datastore", "build", "--source", str(folder), "--out", str(out), "--model", fake_model, "--quiet") == 0
    ds = Datastore.open(out)
    assert [ds.documents.name(i) for i in range(len(ds.documents))] == ["QWJh_0 turn 0", "docs/a.md"]


# --- format 1 stores and damaged indexes ------------------------------------------------------------


def make_format_1(path: Path) -> None:
    """What a store built before the document index looks like."""
    meta = json.loads((path / "meta.json").read_text())
    for f in meta.pop("documents").values():
        if isinstance(f, str):
            (path / f).unlink()
    meta["format_version"] = 1
    meta["source_spec"] = "chat"
    (path / "meta.json").write_text(json.dumps(meta))


def test_format_1_store_opens_and_says_how_to_rebuild(named_store, capsys):
    make_format_1(named_store)
    ds = Datastore.open(named_store)
    assert ds.documents is None and ds.document_at(3) is None
    note = ds.documents_note
    assert f"python -m rest_core datastore build --source chat --out {named_store} --force" in note
    # The context window still stops at document ends (at separators).
    assert "".join(map(chr, ds.context_around(2, 100, 100))) == "hello world"
    assert cli("datastore", "info", str(named_store)) == 0
    out = capsys.readouterr().out
    assert "no document index" in out and "--force" in out
    assert cli("datastore", "info", str(named_store), "--json") == 0
    docs = json.loads(capsys.readouterr().out)["documents"]
    assert docs["indexed"] is False and docs["count"] == 3 and "--force" in docs["note"]


def edit(path: Path, **documents) -> None:
    meta = json.loads((path / "meta.json").read_text())
    meta["documents"].update(documents)
    (path / "meta.json").write_text(json.dumps(meta))


def write_i8(path: Path, values) -> None:
    path.write_bytes(np.asarray(values, dtype="<i8").tobytes())


@pytest.mark.parametrize(
    "damage,message",
    [
        (lambda p, n: write_i8(p / "doc-starts.bin", [0, 12, 10, n]), "document starts must increase"),
        (lambda p, n: write_i8(p / "doc-starts.bin", [0, 12, 18, n + 5]), "document starts must increase from 0"),
        (lambda p, n: write_i8(p / "doc-starts.bin", [0, 11, 18, n]), "not at a document boundary"),
        (lambda p, n: write_i8(p / "doc-name-offsets.bin", [0, 20, 5, 37]), "name offsets must not decrease"),
        (lambda p, n: (p / "doc-names.bin").write_bytes(b"short"), "document names: .* is truncated"),
        (lambda p, n: (p / "doc-starts.bin").unlink(), "document starts: file .* is missing"),
        (lambda p, n: edit(p, starts="../elsewhere.bin"), "must be a plain file name inside the store"),
        (lambda p, n: edit(p, names_bytes="37"), "names_bytes must be an integer"),
    ],
)
def test_damaged_document_index_is_refused(named_store, damage, message):
    ds = Datastore.open(named_store)
    assert np.asarray(ds.documents.starts).tolist() == [0, 12, 18, ds.n_tokens]
    assert int(ds.documents.name_offsets[-1]) == 37
    damage(named_store, ds.n_tokens)
    with pytest.raises(DatastoreError, match=message):
        Datastore.open(named_store)


def test_format_2_without_documents_entry_is_refused(named_store):
    meta = json.loads((named_store / "meta.json").read_text())
    del meta["documents"]
    (named_store / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(DatastoreError, match="'documents' must be an object"):
        Datastore.open(named_store)


def test_info_lists_largest_documents_and_skipped(tmp_path, fake_model, capsys):
    folder = tmp_path / "corpus"
    folder.mkdir()
    (folder / "big.md").write_text("b" * 40)
    (folder / "mid.py").write_text("m" * 20)
    (folder / "small.txt").write_text("s")
    (folder / "bad.txt").write_bytes(b"\xff\xfe\xfa")
    (folder / "img.png").write_bytes(b"\x89PNG\0\0")
    out = tmp_path / "ds"
    assert cli("datastore", "build", "--source", str(folder), "--out", str(out), "--model", fake_model, "--quiet") == 0
    capsys.readouterr()
    assert cli("datastore", "info", str(out), "--top", "2") == 0
    text = capsys.readouterr().out
    assert "documents   3\n" in text
    assert "largest     40 tokens  big.md\n            20 tokens  mid.py\n" in text
    assert "skipped     2 (1 binary file, 1 not UTF-8 text)" in text
    assert cli("datastore", "info", str(out), "--json") == 0
    info = json.loads(capsys.readouterr().out)
    assert info["documents"]["count"] == 3 and info["documents"]["indexed"] is True
    assert info["documents"]["largest"] == [
        {"name": "big.md", "tokens": 40},
        {"name": "mid.py", "tokens": 20},
        {"name": "small.txt", "tokens": 1},
    ]
    assert info["skipped"] == {"binary file": 1, "not UTF-8 text": 1}
