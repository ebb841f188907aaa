"""The page on the vLLM backend (app.py --backend vllm), against the stand-in vLLM server of
tests/fake_vllm.py (a mock: vLLM does not install in the app's environment; the real server is
tests/serve/test_vllm.py): the chat queue runs as many answers at once as the server batches,
the page says who answers, a streamed answer's accepted drafts are highlighted, an early answer
says that the engine is starting, and an answer the server cut says so."""

from __future__ import annotations

import threading

import app
from rest_core.ui.runtime import NO_STORE, StoreBuilds
from rest_core.ui.session import Session
from rest_core.ui.vllm_calls import VllmCalls
from tests.app_fixtures import knob_values
from tests.ui.test_vllm_calls import ANSWER, STEPS, backend, fake_backend  # noqa: F401


def test_the_page_batches_answers_on_vllm_and_highlights_their_drafts(scripted, backend):  # noqa: F811
    rt, _ = scripted
    rt.calls = VllmCalls(backend)
    built = app.build_app(rt.settings, rt, StoreBuilds(rt.settings))
    limits = {fn.name: fn.concurrency_limit for fn in built.demo.fns.values()}
    assert limits["respond"] == rt.settings.vllm_max_seqs > 1  # not one at a time
    assert "served by <b>vLLM</b>" in str(built.demo.config) and "during a restart" in str(built.demo.config)
    h, session = built.handlers, Session()
    outs = list(h.respond("Tell me something", session, NO_STORE, **knob_values()))
    chat = [o[h.ui.answer.chat] for o in outs if h.ui.answer.chat in o][-1]
    assert chat.count('class="tok d ') == sum(a for _, a in STEPS) == 7  # each accepted draft token
    assert backend.fake.bodies[0]["prompt"][-1] != ANSWER[0] and session.chat.view.totals.steps == 6


def test_the_page_says_the_engine_is_starting_and_that_the_server_cut_an_answer(scripted, tmp_path):
    rt, _ = scripted
    built = threading.Event()
    with fake_backend(tmp_path, before=built.wait) as backend:  # noqa: F811
        rt.calls = VllmCalls(backend)
        h = app.build_app(rt.settings, rt, StoreBuilds(rt.settings)).handlers
        session = Session()
        threading.Timer(2.0, built.set).start()
        outs = list(h.respond("Tell me something", session, NO_STORE, **knob_values()))
        banners = [o[h.ui.answer.status] for o in outs if h.ui.answer.status in o]
        assert any("Starting the serving engine (vLLM): waiting for" in b for b in banners)
        assert "Starting" not in banners[-1] and session.chat.view.totals.steps == len(STEPS)
        backend.fake.cut_after = 2  # the server goes away after 5 tokens
        outs = list(h.respond("And then?", session, NO_STORE, **knob_values()))
    chat = [o[h.ui.answer.chat] for o in outs if h.ui.answer.chat in o][-1]
    assert "generation failed: the answer was cut after 5 tokens" in chat
    assert "closed the stream before the answer" in [o[h.ui.answer.status] for o in outs if h.ui.answer.status in o][-1]
