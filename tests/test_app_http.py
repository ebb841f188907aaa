"""The running app driven over its HTTP API (gradio_client, as the page's "Use via API" shows),
never running the page's load event: a built datastore can be chosen, and settings outside the
knobs' ranges are refused by the server. A scripted engine answers (no model); 127.0.0.1 only."""

from __future__ import annotations

import socket

import pytest

import app
from rest_core.runtime import Settings, StoreBuilds
from rest_core.session import Session
from tests.app_fixtures import knob_args

gradio_client = pytest.importorskip("gradio_client")
from gradio_client.exceptions import AppError  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def served(scripted, tmp_path):
    """(client, engine): the app on a folder holding a built store 'chat', served on 127.0.0.1."""
    runtime, engine = scripted
    (tmp_path / "chat").mkdir()
    (tmp_path / "chat" / "meta.json").write_text("{}")
    settings = Settings(datastores=tmp_path)
    runtime.settings = settings
    demo = app.create_app(settings, runtime, StoreBuilds(settings))
    demo.launch(server_name="127.0.0.1", server_port=free_port(), prevent_thread_lock=True, quiet=True)
    try:
        yield gradio_client.Client(demo.local_url, verbose=False), runtime, engine
    finally:
        demo.close()


def test_api_client_can_choose_a_built_store_without_the_load_event(served):
    client, runtime, engine = served
    chat, stats, trie, inspector, step, status, box = client.predict("add two numbers", "chat", *knob_args(), api_name="/respond")
    assert not status and 'class="tok d' in chat
    (prompt_ids, config), = engine.calls
    assert config.draft.use_datastore  # the store was taken, not replaced by 'none'
    assert engine.tokenizer.decode(prompt_ids).count("add two numbers") == 1
    # the same page as the handler gives in-process: the whole answer, highlighted
    direct = list(app.Handlers(runtime, StoreBuilds(runtime.settings)).respond("add two numbers", Session(), "chat", *knob_args()))
    assert chat == direct[-1][0]


def test_api_client_cannot_pass_settings_outside_the_knobs_ranges(served):
    """The widgets carry the knobs' ranges, so the server refuses before the handler runs (the
    handler's own check, for callers that bypass the widgets, is in test_app.py)."""
    client, _, engine = served
    with pytest.raises(AppError, match="greater than maximum value 5000"):
        client.predict("hi", "chat", *knob_args(max_matches=10**9), api_name="/respond")
    with pytest.raises(AppError, match="greater than maximum value 128"):
        client.predict("hi", "chat", *knob_args(c=500), api_name="/compare")
    assert engine.calls == []
