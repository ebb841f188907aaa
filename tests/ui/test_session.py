"""One user's chat session without Gradio: settings -> GenerationConfig, the conversation kept
across turns, the streamed Updates, and the cost of what the page renders per step."""

from __future__ import annotations

import subprocess
import sys
import time
from dataclasses import replace

import pytest

from rest_core.config import PRESETS, ConfigError, GenerationConfig
from rest_core.ui import answer_view, stats, trie_view
from rest_core.ui.chat import fit_context, request_config
from rest_core.ui.runtime import NO_STORE
from rest_core.ui.session import Session
from tests.app_fixtures import ANSWER, compare_on, respond
from tests.app_fixtures import knob_values as knobs
from tests.tiny_models import tiny_tokenizer

BASE = PRESETS["cpu"]


def test_session_and_runtime_never_import_gradio():
    code = "import sys, rest_core.ui.session, rest_core.ui.runtime; sys.exit('gradio' in sys.modules or 'torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


def test_request_config_validates_and_maps_the_store():
    config, store = request_config("code", knobs(), BASE)
    assert store == ("code",) and config.draft.use_datastore and config.draft.c == 8
    assert config.draft.stores == (("code", 1.0),)
    config, store = request_config(NO_STORE, knobs(), BASE)
    assert store == () and not config.draft.use_datastore
    config, store = request_config([], knobs(), BASE)
    assert store == () and not config.draft.use_datastore
    config, store = request_config("code", knobs(use_datastore=False), BASE)
    assert store == () and not config.draft.use_datastore and config.draft.stores is None
    # several stores: each drafts as a source of its own, at an equal share
    config, store = request_config(["code", "mine", "code"], knobs(), BASE)
    assert store == ("code", "mine") and config.draft.stores == (("code", 1.0), ("mine", 1.0))
    with pytest.raises(ConfigError, match="n_max"):
        request_config("code", knobs(n_min=8, n_max=4), BASE)
    with pytest.raises(ConfigError, match="max_matches is empty"):
        request_config("code", knobs(max_matches=None), BASE)
    with pytest.raises(ConfigError, match="top_p"):
        request_config("code", knobs(top_p=0), BASE)


def test_user_text_is_made_valid_unicode():
    from rest_core.ui.runtime import selected_names
    from rest_core.ui.style import clean_text

    assert clean_text("a\ud800b") == "a\ufffdb" and clean_text("\udfffx\ud800") == "\ufffdx\ufffd"
    assert clean_text("\ud83d\ude00") == "\U0001f600" and clean_text("plain, 世界") == "plain, 世界"
    assert clean_text(None) == "" and selected_names(["my\ud800", "chat"]) == ("my\ufffd", "chat")


def test_fit_context_shortens_or_refuses():
    config = GenerationConfig(max_new_tokens=500)
    assert fit_context(100, config, None) == (config, "")
    shorter, note = fit_context(10, config, 100)
    assert shorter.max_new_tokens == 100 - 10 - config.draft.c - 1 and "answer limited" in note
    with pytest.raises(ConfigError, match="too long"):
        fit_context(95, config, 100)


def test_respond_yields_updates_and_keeps_history(scripted):
    rt, engine = scripted
    session = Session()
    updates = list(respond(session, rt, "add two numbers", NO_STORE, knobs()))
    assert "Loading the model" in updates[0].status and updates[0].box == ""  # first request only
    assert updates[1].steps == 0 and updates[1].stats is not None  # streaming: the replay slider is hidden
    chats = [u.chat for u in updates if u.chat is not None]
    assert all("add two numbers" in chat for chat in chats)
    n_tokens = [chat.count('class="tok') for chat in chats]
    assert n_tokens == sorted(n_tokens) and n_tokens[-1] > n_tokens[0]  # the answer only grows
    last = updates[-1]
    assert 'class="tok d' in last.chat and "tokens/s" in last.stats and "Step" in last.inspector and last.trie.data
    assert last.steps == len(session.chat.view.events) and last.box is None
    assert session.chat.messages[-1] == {"role": "assistant", "content": ANSWER} and not session.chat.active
    again = list(respond(session, rt, "more", NO_STORE, knobs()))
    assert not any("Loading the model" in (u.status or "") for u in again)


def test_second_turn_sends_the_whole_conversation(scripted):
    rt, engine = scripted
    session = Session()
    list(respond(session, rt, "first", NO_STORE, knobs()))
    list(respond(session, rt, "second", NO_STORE, knobs()))
    prompt_ids, _ = engine.calls[-1]
    text = tiny_tokenizer().decode(prompt_ids)
    assert "first" in text and "second" in text and "return a + b" in text
    assert len(session.chat.turns) == 2 and len(session.chat.messages) == 4


def test_sessions_do_not_share_conversations(scripted):
    rt, _ = scripted
    a, b = Session(), Session()
    list(respond(a, rt, "hello from a", NO_STORE, knobs()))
    list(respond(b, rt, "hello from b", NO_STORE, knobs()))
    assert [t.user for t in a.chat.turns] == ["hello from a"]
    assert [t.user for t in b.chat.turns] == ["hello from b"]


def test_new_message_after_an_abandoned_answer_closes_it(scripted):
    rt, engine = scripted
    engine.step_s = 0.02
    session = Session()
    gen = respond(session, rt, "one", NO_STORE, knobs())
    next(gen)
    gen.close()  # the page went away mid-answer
    engine.step_s = 0.0
    list(respond(session, rt, "two", NO_STORE, knobs()))
    assert session.chat.turns[0].note == "stopped"
    assert [m["role"] for m in session.chat.messages] == ["user", "assistant", "user", "assistant"]


def test_closing_the_stream_cancels_the_run(scripted):
    rt, engine = scripted
    engine.step_s = 0.05
    session = Session()
    gen = respond(session, rt, "go", NO_STORE, knobs())
    for _ in gen:
        if session.chat.view is not None and session.chat.view.events:
            break
    run = session.chat.run
    gen.close()
    assert run.done.wait(5)
    rest = [e for e in run.events.queue if e is not None]
    assert not (rest or session.chat.view.events)[-1].finished  # the worker stopped before the end


def test_compare_yields_status_then_result(scripted):
    rt, engine = scripted
    session = Session()
    updates = list(compare_on(session, rt, "add two numbers", NO_STORE, knobs()))
    assert "REST done" in updates[-3].status and "plain decoding done" in updates[-2].status
    assert "identical output" in updates[-1].comparison and updates[-1].speed is not None
    assert session.chat.turns == []  # comparing does not touch the conversation


def test_real_engine_render_cost_per_step(tiny_runtime):
    """Everything the page does per step (highlight, stats, throttled figure) stays cheap."""
    tok = tiny_runtime.loaded().tokenizer
    engine = tiny_runtime.engine(NO_STORE)
    config, _ = request_config(NO_STORE, knobs(max_new_tokens=48), BASE)
    events = list(engine.generate(engine.encode("abc abc abc", chat=True), config))
    view = answer_view.AnswerView(tok)
    t0 = time.perf_counter()
    for e in events:
        view.add(e)
        view.html()
        stats.stats_html(view.events)
    per_step_ms = 1000 * (time.perf_counter() - t0) / len(events)
    t0 = time.perf_counter()
    for e in events[:10]:
        trie_view.trie_figure(e, tok).to_json()
    fig_ms = 1000 * (time.perf_counter() - t0) / min(10, len(events))
    print(f"render per step {per_step_ms:.2f} ms, trie figure {fig_ms:.1f} ms")
    assert per_step_ms < 10
    assert fig_ms < 200


def test_a_chat_answer_carries_the_inspectors_feeds(tiny_runtime):
    """Send asks the engine for the inspector's feeds (what fed each step's branches); Compare's
    runs and the benchmark do not pay for them (Engine.generate(inspect=...))."""
    session = Session()
    list(respond(session, tiny_runtime, "abc abc abc abc abc abc", NO_STORE, knobs(max_new_tokens=24)))
    events = session.chat.view.events
    assert any(e.feeds for e in events), "no step of the chat answer kept what fed its branches"


def test_the_chat_names_each_steps_count_beside_the_most_c(tiny_runtime):
    """Settings' c is the most an auto budget may draft per step; the chat's inspector and tree
    name a step's own count as 'drafted N (auto budget, at most c = 16)', never as a second c."""
    session = Session()
    values = knobs(max_new_tokens=24, budget="auto", c=16)
    list(respond(session, tiny_runtime, "abc abc abc abc abc abc", NO_STORE, values))
    tok = tiny_runtime.loaded().tokenizer
    views = [session.chat.step_view(tok, k) for k in range(1, len(session.chat.view.events) + 1)]
    drafted = [(fig, ins) for fig, ins in views if "auto budget" in ins]
    assert drafted, [ins[:200] for _, ins in views]
    assert all("at most c = 16" in ins for _, ins in drafted)
    titles = [fig.layout.title.text for fig, _ in drafted if fig.layout.title and fig.layout.title.text]
    assert titles and all("at most c = 16" in t for t in titles), titles


def test_an_ended_answer_opens_its_tree_at_the_last_step_that_drafted(tiny_runtime):
    """An auto budget's last steps often draft nothing (its probe, or no draft worth its cost):
    the ended answer's tree, inspector and replay slider open at the last step that drafted,
    so the figure shows a draft; any step stays one slide away."""
    session = Session()
    values = knobs(max_new_tokens=24, budget="fixed", c=4)
    updates = list(respond(session, tiny_runtime, "abc abc abc abc abc abc", NO_STORE, values))
    events = session.chat.view.events
    drafted = [i + 1 for i, e in enumerate(events) if e.draft is not None and len(e.draft)]
    assert drafted and len(events) >= 2
    # the answer as if its last step had drafted nothing: the view opens one step earlier
    last = events[-1]
    session.chat.view.events[-1] = replace(last, draft=None)
    want = max(k for k in drafted if k < len(events)) if any(k < len(events) for k in drafted) else len(events)
    assert session.chat.shown_step() == want
    fig, ins = session.chat.step_view(tiny_runtime.loaded().tokenizer)
    assert f"Step {want} of {len(events)}" in ins
    session.chat.view.events[-1] = last
    assert session.chat.shown_step() == drafted[-1]
    end = updates[-1]
    assert end.steps == len(events) and end.shown == drafted[-1]
