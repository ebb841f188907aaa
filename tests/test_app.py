"""The app's handlers, driven directly (no browser): a scripted engine for the UI logic, and the
real engine on a tiny random model for the end-to-end path through rest_core."""

from __future__ import annotations

import re
import time

import pytest

import app
from rest_core import render
from rest_core.config import ConfigError
from tests.scripted_engine import FakeLoaded, ScriptedEngine, _Model
from tests.tiny_models import tiny_loaded, tiny_tokenizer

ANSWER = 'def add(a, b):\n    return a + b  # <ok> & "done" 世界\n\nprint(add(1, 2))\n'

DEFAULTS = dict(
    store=app.NO_STORE, n_max=16, n_min=1, c=8, m=6, max_matches=5000, budget="fixed", use_datastore=True,
    use_context=True, datastore_weight=1.0, context_weight=1.0, temperature=0.0, top_p=1.0, max_new_tokens=200,
)


def knobs(**over) -> list:
    values = {**DEFAULTS, **over}
    return [values[k] for k in app.KNOB_NAMES]


@pytest.fixture
def scripted(monkeypatch):
    """app.RUNTIME replaced by one whose every engine replays ANSWER."""
    tok = tiny_tokenizer()
    engine = ScriptedEngine(tok, ANSWER)
    rt = app.Runtime(app.Settings(), loader=lambda: FakeLoaded(_Model(), tok))
    monkeypatch.setattr(rt, "engine", lambda store: (rt.loaded(), engine)[1])
    monkeypatch.setattr(app, "RUNTIME", rt)
    return engine


def run_all(gen) -> list[tuple]:
    return list(gen)


def final(outputs: list[tuple]) -> tuple:
    return outputs[-1]


def test_import_builds_the_page_without_loading_a_model():
    assert app.demo is not None
    assert not app.RUNTIME.ready  # the model loads on the first request


def test_make_config_validates_and_maps_the_store():
    config, store = app.make_config(dict(zip(app.KNOB_NAMES, knobs(store="code"))))
    assert store == "code" and config.draft.use_datastore and config.draft.c == 8
    config, store = app.make_config(dict(zip(app.KNOB_NAMES, knobs(store=app.NO_STORE))))
    assert store == app.NO_STORE and not config.draft.use_datastore
    with pytest.raises(ConfigError, match="n_max"):
        app.make_config(dict(zip(app.KNOB_NAMES, knobs(n_min=8, n_max=4))))
    with pytest.raises(ConfigError, match="empty or not a number"):
        app.make_config(dict(zip(app.KNOB_NAMES, knobs(max_matches=None))))
    with pytest.raises(ConfigError, match="top_p"):
        app.make_config(dict(zip(app.KNOB_NAMES, knobs(top_p=0))))


def test_respond_streams_highlighted_answer_and_keeps_history(scripted):
    session = app.Session()
    outs = run_all(app.respond("add two numbers", session, *knobs()))
    chat, stats, fig, inspector, slider, status, session, box = final(outs)
    assert 'class="tok d' in chat and 'class="tok m' in chat
    # escaped model output (the byte-level tokenizer makes one span per byte / character)
    assert ">&lt;</span>" in chat and ">&amp;</span>" in chat and ">&quot;</span>" in chat
    assert ">世</span>" in chat and ">界</span>" in chat
    assert session.messages == [{"role": "user", "content": "add two numbers"}, {"role": "assistant", "content": ANSWER}]
    assert not session.active and session.view.text == ANSWER
    assert slider["visible"] is True and slider["maximum"] == len(session.view.events)
    assert "tokens/s" in stats and "generating" not in stats
    assert "Step" in inspector
    assert fig.data  # a plotly figure of the last step


def test_second_turn_sends_the_whole_conversation(scripted):
    session = app.Session()
    run_all(app.respond("first", session, *knobs()))
    run_all(app.respond("second", session, *knobs()))
    prompt_ids, _ = scripted.calls[-1]
    text = tiny_tokenizer().decode(prompt_ids)
    assert "first" in text and "second" in text and "return a + b" in text
    assert len(session.turns) == 2 and len(session.messages) == 4


def test_sessions_do_not_share_conversations(scripted):
    a, b = app.Session(), app.Session()
    run_all(app.respond("hello from a", a, *knobs()))
    run_all(app.respond("hello from b", b, *knobs()))
    assert [t.user for t in a.turns] == ["hello from a"]
    assert [t.user for t in b.turns] == ["hello from b"]


def test_bad_settings_give_a_message_not_a_traceback(scripted):
    session = app.Session()
    outs = run_all(app.respond("hi", session, *knobs(n_min=10, n_max=2)))
    status = final(outs)[5]
    assert "Settings:" in status and "n_max" in status
    assert session.turns == []
    outs = run_all(app.respond("   ", session, *knobs()))
    assert "Type a message" in final(outs)[5]


def test_stop_keeps_the_partial_answer_and_cancels_the_run(scripted):
    scripted.step_s = 0.05
    session = app.Session()
    gen = app.respond("go", session, *knobs())
    for out in gen:
        if session.view is not None and session.view.events:
            break
    run = session.run
    chat, *_ = app.stop(session)
    gen.close()
    assert not session.active and run is not None
    assert run.done.wait(5)
    assert "stopped after" in chat
    assert session.messages[-1]["role"] == "assistant"
    assert len(session.view.text) < len(ANSWER)


def test_new_message_after_an_abandoned_answer_closes_it(scripted):
    scripted.step_s = 0.02
    session = app.Session()
    gen = app.respond("one", session, *knobs())
    next(gen)
    gen.close()  # the page went away mid-answer
    scripted.step_s = 0.0
    run_all(app.respond("two", session, *knobs()))
    assert session.turns[0].note == "stopped"
    assert [m["role"] for m in session.messages] == ["user", "assistant", "user", "assistant"]


def test_context_overflow_is_a_clear_message(scripted, monkeypatch):
    monkeypatch.setattr(app.RUNTIME, "context_limit", lambda: 40)
    session = app.Session()
    outs = run_all(app.respond("x" * 60, session, *knobs()))
    status = final(outs)[5]
    assert "too long" in status and "Clear" in status
    assert session.turns[-1].error and not session.active


def test_answer_is_shortened_to_fit_the_context(scripted, monkeypatch):
    monkeypatch.setattr(app.RUNTIME, "context_limit", lambda: 60)
    session = app.Session()
    outs = run_all(app.respond("hi", session, *knobs(max_new_tokens=500)))
    _, config = scripted.calls[-1]
    assert config.max_new_tokens < 60
    assert "answer limited" in final(outs)[0]


def test_replay_shows_any_step(scripted):
    session = app.Session()
    run_all(app.respond("go", session, *knobs()))
    fig, ins = app.replay(1, session)
    assert "Step 1 of" in ins
    fig_last, ins_last = app.replay(len(session.view.events), session)
    assert f"Step {len(session.view.events)} of" in ins_last


def test_clear_resets_everything(scripted):
    out = app.clear()
    chat, stats, fig, ins, slider, banner, session, box, cmp, speed = out
    assert isinstance(session, app.Session) and session.turns == []
    assert "placeholder" in chat and box == ""


def test_compare_reports_speedup_and_identity(scripted):
    session = app.Session()
    run_all(app.respond("go", session, *knobs()))
    outs = run_all(app.compare("", session, *knobs()))
    html, fig, status = final(outs)
    assert re.search(r'id="speedup-value">[0-9.]+×', html)
    assert "identical output" in html
    assert fig["visible"] is True
    assert [t.name for t in fig["value"].data] == ["REST", "plain"]
    methods = [c.method for _, c in scripted.calls[-2:]]
    assert methods == ["rest", "ar"]


def test_compare_without_any_prompt_asks_for_one(scripted):
    outs = run_all(app.compare("", app.Session(), *knobs()))
    assert "Send a message first" in final(outs)[2]


def test_refresh_stores_lists_built_stores(tmp_path, monkeypatch):
    (tmp_path / "chat").mkdir()
    (tmp_path / "chat" / "meta.json").write_text("{}")
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "meta.json").write_text("{}")
    (tmp_path / "half-built").mkdir()
    rt = app.Runtime(app.Settings(datastores=tmp_path))
    monkeypatch.setattr(app, "RUNTIME", rt)
    dropdown, banner, timer = app.on_load(app.NO_STORE)
    assert dropdown["choices"] == ["chat", "mine", app.NO_STORE]
    assert dropdown["value"] == "chat"  # the first built store by default
    assert app.refresh_stores(app.NO_STORE)[0]["value"] == app.NO_STORE  # a user's choice is kept
    assert app.refresh_stores("mine")[0]["value"] == "mine"


def test_settings_from_flags_and_env(monkeypatch, tmp_path):
    monkeypatch.setenv("REST_PORT", "9999")
    monkeypatch.setenv("REST_DEVICE", "cpu")
    s = app.parse_args([])
    assert s.port == 9999 and s.device == "cpu" and s.model == "embedded"
    s = app.parse_args(["--port", "7000", "--datastores", str(tmp_path), "--no-build", "--model", "x"])
    assert s.port == 7000 and s.datastores == tmp_path and not s.build and s.model == "x"


# --------------------------------------------------------------- the real engine, tiny model


@pytest.fixture
def tiny_runtime(monkeypatch):
    pytest.importorskip("rest_core.engine")
    rt = app.Runtime(app.Settings(), loader=lambda: tiny_loaded("llama"))
    monkeypatch.setattr(app, "RUNTIME", rt)
    return rt


def test_real_engine_tiny_model_respond_and_compare(tiny_runtime):
    session = app.Session()
    outs = run_all(app.respond("abc abc abc", session, *knobs(max_new_tokens=24)))
    chat, stats, fig, inspector, slider, status, session, box = final(outs)
    assert 'class="tok' in chat and not status.startswith('<div class="status err')
    assert session.view.totals.new_tokens > 0
    assert session.view.text == tiny_runtime.loaded().tokenizer.decode(
        [t for e in session.view.events for t in e.tokens], skip_special_tokens=True
    )
    html = final(run_all(app.compare("", session, *knobs(max_new_tokens=24))))[0]
    assert "identical output" in html  # greedy REST == greedy plain decoding


def test_real_engine_render_cost_per_step(tiny_runtime):
    """Everything the page does per step (highlight, stats, throttled figure) stays cheap."""
    tok = tiny_runtime.loaded().tokenizer
    engine = tiny_runtime.engine(app.NO_STORE)
    config, _ = app.make_config(dict(zip(app.KNOB_NAMES, knobs(max_new_tokens=48))))
    events = list(engine.generate(engine.encode("abc abc abc", chat=True), config))
    view = render.AnswerView(tok)
    t0 = time.perf_counter()
    for e in events:
        view.add(e)
        view.html()
        render.stats_html(view.events)
    per_step_ms = 1000 * (time.perf_counter() - t0) / len(events)
    t0 = time.perf_counter()
    for e in events[:10]:
        render.trie_figure(e, tok).to_json()
    fig_ms = 1000 * (time.perf_counter() - t0) / min(10, len(events))
    print(f"render per step {per_step_ms:.2f} ms, trie figure {fig_ms:.1f} ms")
    assert per_step_ms < 10
    assert fig_ms < 200


def test_model_load_failure_is_a_message(monkeypatch):
    def broken():
        raise OSError("no model at 'nowhere' (offline?)")

    monkeypatch.setattr(app, "RUNTIME", app.Runtime(app.Settings(), loader=broken))
    session = app.Session()
    status = final(run_all(app.respond("hi", session, *knobs())))[5]
    assert "no model at" in status and 'class="status err"' in status
    assert session.messages == [] and not session.active
    assert "no model at" in final(run_all(app.compare("hi", session, *knobs())))[2]


def test_missing_default_store_is_built_at_startup(tmp_path, monkeypatch):
    """The startup build (a child process running `datastore build`), on a small slice."""
    monkeypatch.setattr(app, "DEFAULT_STORES", ("chat",))
    settings = app.Settings(datastores=tmp_path)
    builds = app.StoreBuilds(settings, extra_args=("--limit-docs", "20", "--quiet"))
    assert builds.missing() == ["chat"]
    builds.start()
    assert builds.active and "chat" in builds.message()
    builds.join(timeout=300)
    assert builds.state == {"chat": "ready"}, builds.state
    assert not builds.active and builds.message() == ""
    assert app.Runtime(settings).store_names() == ["chat"]


def test_real_engine_tiny_model_auto_budget_and_sampling(tiny_runtime):
    session = app.Session()
    chat, stats, fig, inspector, slider, status, session, box = final(
        run_all(app.respond("abc abc", session, *knobs(max_new_tokens=16, budget="auto", temperature=0.8, top_p=0.9)))
    )
    assert 'class="status err' not in status and session.view.totals.new_tokens > 0
    html = final(run_all(app.compare("", session, *knobs(max_new_tokens=16, temperature=0.8))))[0]
    assert "speedup" in html and "identical output" not in html  # no identity claim when sampling
