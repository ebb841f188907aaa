"""The app's Gradio handlers, driven directly (no browser): what each event sends to the page's
components, with a scripted engine for the UI logic and the real engine on a tiny random model.
The session and runtime logic behind them is tested on its own in test_session.py and
test_runtime.py."""

from __future__ import annotations

import re

import pytest

import app
from rest_core.runtime import NO_STORE, Runtime, Settings
from rest_core.session import KNOB_NAMES, Session
from tests.scripted_engine import scripted_runtime
from tests.tiny_models import tiny_loaded, tiny_tokenizer

ANSWER = 'def add(a, b):\n    return a + b  # <ok> & "done" 世界\n\nprint(add(1, 2))\n'

DEFAULTS = dict(
    store=NO_STORE, n_max=16, n_min=1, c=8, m=6, max_matches=5000, budget="fixed", use_datastore=True,
    use_context=True, datastore_weight=1.0, context_weight=1.0, temperature=0.0, top_p=1.0, max_new_tokens=200,
)


def knobs(**over) -> list:
    values = {**DEFAULTS, **over}
    return [values[k] for k in KNOB_NAMES]


@pytest.fixture
def scripted(monkeypatch):
    """app.RUNTIME replaced by one whose every engine replays ANSWER."""
    rt, engine = scripted_runtime(tiny_tokenizer(), ANSWER)
    monkeypatch.setattr(app, "RUNTIME", rt)
    return engine


def run_all(gen) -> list[tuple]:
    return list(gen)


def final(outputs: list[tuple]) -> tuple:
    return outputs[-1]


def test_import_builds_the_page_without_loading_a_model():
    assert app.demo is not None
    assert not app.RUNTIME.ready  # the model loads on the first request


def test_respond_streams_highlighted_answer_and_keeps_history(scripted):
    session = Session()
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


def test_bad_settings_give_a_message_not_a_traceback(scripted):
    session = Session()
    outs = run_all(app.respond("hi", session, *knobs(n_min=10, n_max=2)))
    status = final(outs)[5]
    assert "Settings:" in status and "n_max" in status
    assert session.turns == []
    outs = run_all(app.respond("   ", session, *knobs()))
    assert "Type a message" in final(outs)[5]


def test_stop_keeps_the_partial_answer_and_cancels_the_run(scripted):
    scripted.step_s = 0.05
    session = Session()
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


def test_context_overflow_is_a_clear_message(scripted, monkeypatch):
    monkeypatch.setattr(app.RUNTIME, "context_limit", lambda: 40)
    session = Session()
    outs = run_all(app.respond("x" * 60, session, *knobs()))
    status = final(outs)[5]
    assert "too long" in status and "Clear" in status
    assert session.turns[-1].error and not session.active


def test_answer_is_shortened_to_fit_the_context(scripted, monkeypatch):
    monkeypatch.setattr(app.RUNTIME, "context_limit", lambda: 60)
    session = Session()
    outs = run_all(app.respond("hi", session, *knobs(max_new_tokens=500)))
    _, config = scripted.calls[-1]
    assert config.max_new_tokens < 60
    assert "answer limited" in final(outs)[0]


def test_replay_shows_any_step(scripted):
    session = Session()
    run_all(app.respond("go", session, *knobs()))
    fig, ins = app.replay(1, session)
    assert "Step 1 of" in ins
    fig_last, ins_last = app.replay(len(session.view.events), session)
    assert f"Step {len(session.view.events)} of" in ins_last


def test_clear_resets_everything(scripted):
    out = app.clear()
    chat, stats, fig, ins, slider, banner, session, box, cmp, speed = out
    assert isinstance(session, Session) and session.turns == []
    assert "placeholder" in chat and box == ""


def test_compare_reports_speedup_and_identity(scripted):
    session = Session()
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
    outs = run_all(app.compare("", Session(), *knobs()))
    assert "Send a message first" in final(outs)[2]


def test_refresh_stores_lists_built_stores(tmp_path, monkeypatch):
    (tmp_path / "chat").mkdir()
    (tmp_path / "chat" / "meta.json").write_text("{}")
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "meta.json").write_text("{}")
    (tmp_path / "half-built").mkdir()
    rt = Runtime(Settings(datastores=tmp_path))
    monkeypatch.setattr(app, "RUNTIME", rt)
    dropdown, banner, timer = app.on_load(NO_STORE)
    assert dropdown["choices"] == ["chat", "mine", NO_STORE]
    assert dropdown["value"] == "chat"  # the first built store by default
    assert app.refresh_stores(NO_STORE)[0]["value"] == NO_STORE  # a user's choice is kept
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
    rt = Runtime(Settings(), loader=lambda: tiny_loaded("llama"))
    monkeypatch.setattr(app, "RUNTIME", rt)
    return rt


def test_real_engine_tiny_model_respond_and_compare(tiny_runtime):
    session = Session()
    outs = run_all(app.respond("abc abc abc", session, *knobs(max_new_tokens=24)))
    chat, stats, fig, inspector, slider, status, session, box = final(outs)
    assert 'class="tok' in chat and not status.startswith('<div class="status err')
    assert session.view.totals.new_tokens > 0
    assert session.view.text == tiny_runtime.loaded().tokenizer.decode(
        [t for e in session.view.events for t in e.tokens], skip_special_tokens=True
    )
    html = final(run_all(app.compare("", session, *knobs(max_new_tokens=24))))[0]
    assert "identical output" in html  # greedy REST == greedy plain decoding


def test_model_load_failure_is_a_message(monkeypatch):
    def broken():
        raise OSError("no model at 'nowhere' (offline?)")

    monkeypatch.setattr(app, "RUNTIME", Runtime(Settings(), loader=broken))
    session = Session()
    status = final(run_all(app.respond("hi", session, *knobs())))[5]
    assert "no model at" in status and 'class="status err"' in status
    assert session.messages == [] and not session.active
    assert "no model at" in final(run_all(app.compare("hi", session, *knobs())))[2]


def test_real_engine_tiny_model_auto_budget_and_sampling(tiny_runtime):
    session = Session()
    chat, stats, fig, inspector, slider, status, session, box = final(
        run_all(app.respond("abc abc", session, *knobs(max_new_tokens=16, budget="auto", temperature=0.8, top_p=0.9)))
    )
    assert 'class="status err' not in status and session.view.totals.new_tokens > 0
    html = final(run_all(app.compare("", session, *knobs(max_new_tokens=16, temperature=0.8))))[0]
    assert "speedup" in html and "identical output" not in html  # no identity claim when sampling
