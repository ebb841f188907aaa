"""What one user may take of a shared server: the message size (refused before anything
tokenizes it, and kept nowhere), one generation queued or running per session, and a time limit
per request that keeps the partial answer. The settings come from flags and the environment."""

from __future__ import annotations

import pytest

import app
import chat_tab
from rest_core.ui.runtime import NO_STORE, Runtime, StoreBuilds
from rest_core.ui.session import Session
from rest_core.ui.settings import Settings, parse_args, settings_from_env
from tests.app_fixtures import knob_values


class CountingTokenizer:
    """Wraps a tokenizer and counts every use of it (calls, encode, chat template)."""

    def __init__(self, inner) -> None:
        self._inner = inner
        self.uses = 0

    def __call__(self, *args, **kwargs):
        self.uses += 1
        return self._inner(*args, **kwargs)

    def __getattr__(self, name):
        attr = getattr(self._inner, name)
        if callable(attr) and name in ("encode", "apply_chat_template", "tokenize"):

            def counted(*args, **kwargs):
                self.uses += 1
                return attr(*args, **kwargs)

            return counted
        return attr


def handlers(runtime: Runtime) -> chat_tab.Handlers:
    """The handlers of a page built on `runtime` (`h.ui`: the components their returns are keyed by)."""
    return app.build_app(runtime.settings, runtime, StoreBuilds(runtime.settings)).handlers


def test_a_message_over_the_limit_is_refused_before_tokenizing_and_kept_nowhere(scripted):
    rt, engine = scripted
    rt.settings = Settings(max_message_chars=100)
    engine.tokenizer = counting = CountingTokenizer(engine.tokenizer)
    h = handlers(rt)
    session = Session()
    long = "y" * 101
    out = list(h.respond(long, session, NO_STORE, **knob_values()))[-1]
    status = out[h.ui.answer.status]
    assert "101 characters" in status and "at most 100" in status
    assert out[h.ui.answer.box] == ""  # the box is emptied
    assert h.ui.answer.chat not in out  # the chat never holds it
    assert counting.uses == 0 and engine.calls == []  # never tokenized, never generated
    assert session.chat.turns == [] and session.chat.messages == [] and "yyyy" not in session.chat.chat_html()
    status = list(h.compare(long, session, NO_STORE, **knob_values()))[-1][h.ui.answer.compare_status]
    assert "at most 100" in status and counting.uses == 0
    # at the limit it is an ordinary message
    list(h.respond("y" * 100, session, NO_STORE, **knob_values()))
    assert counting.uses > 0 and len(engine.calls) == 1 and session.chat.messages[0]["content"] == "y" * 100


def test_the_message_box_carries_the_limit(tmp_path):
    demo = app.create_app(Settings(datastores=tmp_path, max_message_chars=123))
    for elem_id in ("prompt", "teach-prompt"):  # the chat's and the step-through's
        box = next(b for b in demo.blocks.values() if getattr(b, "elem_id", None) == elem_id)
        assert box.max_length == 123


def test_one_job_queued_or_running_per_session(scripted):
    """The validator of the generating events (run when a request is queued) admits one job per
    session until that job ends (or Stop); other sessions are not affected."""
    rt, engine = scripted
    h = handlers(rt)
    kw = knob_values()
    a, b = Session(), Session()
    ok = lambda verdicts: all(v["is_valid"] for v in verdicts)  # noqa: E731
    assert ok(h.admit("hi", a, NO_STORE, **kw))
    refused = h.admit("hi", a, NO_STORE, **kw)
    assert not ok(refused) and "still queued or running" in refused[0]["message"]
    assert ok(h.admit("hi", b, NO_STORE, **kw))  # another session
    list(h.respond("hi", a, NO_STORE, **kw))  # the admitted job runs and ends
    assert ok(h.admit("hi", a, NO_STORE, **kw))
    h.stop(a)  # Stop cancels the session's queued jobs
    assert ok(h.admit("hi", a, NO_STORE, **kw))


def test_a_generation_stops_at_the_time_limit_and_keeps_the_partial_answer():
    from tests.tiny_models import tiny_loaded

    rt = Runtime(Settings(max_seconds=0.3), loader=lambda: tiny_loaded("llama", max_positions=4096))
    h = handlers(rt)
    session = Session()
    out = list(h.respond("abc abc abc", session, NO_STORE, **knob_values(max_new_tokens=1024)))[-1]
    chat, status = out[h.ui.answer.chat], out[h.ui.answer.status]
    n = session.chat.view.totals.new_tokens
    assert 0 < n < 1024
    assert "stopped after 0.3 s (server limit)" in chat and "server limit" in status
    assert session.chat.messages[-1] == {
        "role": "assistant",
        "content": session.chat.view.text,
    }  # the partial answer is kept
    status = list(h.compare("", session, NO_STORE, **knob_values(max_new_tokens=1024)))[-1][h.ui.answer.compare_status]
    # Three methods share the limit: a third each, prompt lookup (transformers' generate) included.
    assert "stopped after 0.1 s (server limit)" in status and "prompt lookup" in status


def test_limits_from_flags_and_environment(tmp_path):
    env = {"REST_MAX_MESSAGE_CHARS": "500", "REST_MAX_SECONDS": "12.5", "REST_MAX_JOBS": "2", "REST_SESSION_TTL": "60"}
    s = parse_args([], env)
    assert (s.max_message_chars, s.max_seconds, s.max_jobs, s.session_ttl) == (500, 12.5, 2, 60)
    s = parse_args(["--max-message-chars", "9", "--max-seconds", "0", "--max-jobs", "0", "--session-ttl", "5"], env)
    assert (s.max_message_chars, s.max_seconds, s.max_jobs, s.session_ttl) == (9, 0, 0, 5)
    d = parse_args([], {})
    assert (d.max_message_chars, d.max_seconds, d.max_jobs) == (8000, 60.0, 1)
    for bad in (["--max-seconds", "-1"], ["--max-seconds", "nan"], ["--max-message-chars", "1.5"]):
        with pytest.raises(SystemExit) as exit_:
            parse_args(bad, {})
        assert exit_.value.code == 2
    with pytest.raises(ValueError, match="REST_MAX_SECONDS"):
        settings_from_env({"REST_MAX_SECONDS": "soon"})


def test_an_answer_cut_by_the_limit_on_a_busy_machine_says_so():
    """Steps much slower than this server's fastest (here: the model slowed by a sleep in its
    forward, as other work on the same cores slows it) are named as the reason."""
    import time

    from tests.tiny_models import tiny_loaded

    rt = Runtime(Settings(max_seconds=1.0), loader=lambda: tiny_loaded("llama", max_positions=4096))
    h = handlers(rt)
    fast = list(h.respond("abc abc abc", Session(), NO_STORE, **knob_values(max_new_tokens=24)))[-1][h.ui.answer.status]
    assert "busy" not in fast
    model = rt.loaded().model
    hook = model.register_forward_pre_hook(lambda *_: time.sleep(0.05))
    try:
        out = list(h.respond("abc abc abc", Session(), NO_STORE, **knob_values(max_new_tokens=1024)))[-1]
    finally:
        hook.remove()
    status = out[h.ui.answer.status]
    assert "server limit" in status and "new tokens" in status
    assert "The machine is busy" in status and "this server&#x27;s fastest" in status, status


def test_a_session_ttl_shorter_than_one_request_is_refused(capsys):
    """Gradio counts the TTL from the end of the last request: shorter than one request, a
    visitor's step-through expired during its own Run to end and the next call began it again."""
    from rest_core.ui.settings import parse_args

    with pytest.raises(SystemExit):
        parse_args(["--session-ttl", "60", "--max-seconds", "60"], env={})
    assert "expire while its own request runs" in capsys.readouterr().err
    assert parse_args(["--session-ttl", "90", "--max-seconds", "60"], env={}).session_ttl == 90
    assert parse_args(["--session-ttl", "0", "--max-seconds", "60"], env={}).session_ttl == 0  # no expiry
    assert parse_args(["--session-ttl", "5", "--max-seconds", "0"], env={}).session_ttl == 5  # no time limit
