"""The running app driven over its HTTP API (gradio_client, as the page's "Use via API" shows),
never running the page's load event: a built datastore can be chosen, and settings outside the
knobs' ranges are refused by the server. A scripted engine answers (no model); 127.0.0.1 only."""

from __future__ import annotations

import time

import httpx
import pytest

import app
from rest_core.knobs import APP_KNOBS
from rest_core.serve.client import free_port
from rest_core.ui.runtime import StoreBuilds
from rest_core.ui.session import Session
from rest_core.ui.settings import ROOT, Settings
from tests.app_fixtures import knob_args, knob_values, step_knobs

gradio_client = pytest.importorskip("gradio_client")
from gradio_client.exceptions import ValidationError  # noqa: E402


@pytest.fixture
def served(scripted, tmp_path):
    """(client, handlers, engine): the app on a folder holding a built store 'chat', served on 127.0.0.1."""
    runtime, engine = scripted
    (tmp_path / "chat").mkdir()
    (tmp_path / "chat" / "meta.json").write_text("{}")
    settings = Settings(datastores=tmp_path)
    runtime.settings = settings
    built = app.build_app(settings, runtime, StoreBuilds(settings))
    demo = built.demo
    demo.launch(server_name="127.0.0.1", server_port=free_port(), prevent_thread_lock=True, quiet=True)
    try:
        yield gradio_client.Client(demo.local_url, verbose=False), built.handlers, engine
    finally:
        demo.close()


def test_api_client_can_choose_a_built_store_without_the_load_event(served):
    client, h, engine = served
    fixed = dict(budget="fixed", c=8)  # the auto budget's drafts follow live timings: two runs could differ
    chat, stats, trie, inspector, step, status, box, _stores = client.predict(
        "add two numbers", "chat", *knob_args(**fixed), api_name="/respond"
    )
    assert not status and 'class="tok d' in chat
    ((prompt_ids, config),) = engine.calls
    assert config.draft.use_datastore  # the store was taken, not replaced by 'none'
    assert engine.tokenizer.decode(prompt_ids).count("add two numbers") == 1
    # the same page as the handler gives in-process: the whole answer, highlighted
    direct = list(h.respond("add two numbers", Session(), "chat", **knob_values(**fixed)))
    assert chat == direct[-1][h.ui.answer.chat]


def test_the_api_names_every_setting_and_has_one_endpoint_per_action(served):
    """Issue 28: the knobs were unnamed `param_3` ... `param_18`, and Enter in a message box made
    twin endpoints (/respond_1, /next_1). Every parameter now has the knob's name, so a client
    passes the settings it cares about by name and the others keep their defaults; docs/api.md
    shows a call of every endpoint."""
    client, _, engine = served
    named = client.view_api(print_info=False, return_format="dict")["named_endpoints"]
    assert not [api for api in named if api.endswith("_1")]
    knobs = [k.name for k in APP_KNOBS]
    params = {api: [p["parameter_name"] for p in named[api]["parameters"]] for api in named}
    assert params["/respond"] == params["/compare"] == ["message", "store", *knobs]
    assert params["/next"] == params["/run_to_end"] == ["message", "store", "c", *(k for k in knobs if k != "c")]
    assert not [name for names in params.values() for name in names if name.startswith("param_")]
    documented = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    assert not [api for api in named if f'"{api}"' not in documented and f"`{api}`" not in documented]
    client.predict(message="add two numbers", store="chat", max_new_tokens=7, m=5, api_name="/respond")
    ((_, config),) = engine.calls
    assert config.max_new_tokens == 7 and config.retrieval.m == 5


def test_api_client_cannot_pass_settings_outside_the_knobs_ranges(served):
    """The widgets carry the knobs' ranges, so the server refuses before the handler runs (the
    handler's own check, for callers that bypass the widgets, is in test_app.py)."""
    client, _, engine = served
    # Refused when queued (the per-session job check runs there, on the widgets' values): a 400
    # whose detail names the bound.
    with pytest.raises(httpx.HTTPStatusError) as err:
        client.predict("hi", "chat", *knob_args(max_matches=10**9), api_name="/respond")
    assert (
        err.value.response.status_code == 400
        and "greater than maximum value 5000" in err.value.response.json()["detail"]
    )
    with pytest.raises(httpx.HTTPStatusError) as err:
        client.predict("hi", "chat", *knob_args(c=500), api_name="/compare")
    assert "greater than maximum value 128" in err.value.response.json()["detail"]
    assert engine.calls == []


def test_a_session_gets_one_job_queued_or_running_at_a_time(served):
    """A second generation from the same session, while the first is queued or running, is
    refused when it would be queued (a message, not a place in the queue every user shares)."""
    client, _, engine = served
    engine.step_s = 0.05  # the first answer takes a while
    first = client.submit("add two numbers", "chat", *knob_args(), api_name="/respond")
    while not engine.calls:
        time.sleep(0.01)
    with pytest.raises(ValidationError, match="still queued or running"):
        client.predict("again", "chat", *knob_args(), api_name="/compare")
    chat = first.result()[0]
    assert 'class="tok d' in chat and len(engine.calls) == 1
    # once it finished, the session may send again
    client.predict("and again", "chat", *knob_args(), api_name="/respond")
    assert len(engine.calls) == 2


class CopyCounter:
    """Counts deep copies of itself: placed in the runtime, it tells whether serving a page copies
    the runtime (and with it the model and the datastores)."""

    copies = 0

    def __deepcopy__(self, memo):
        type(self).copies += 1
        return self


def test_a_page_load_never_copies_the_runtime(served):
    """Gradio deep-copies the page config on every GET / and /config; a bound method of the
    handlers in it (the session state's delete callback) dragged the runtime along: seconds and
    gigabytes per page load, and ten visitors at once took the server down (issue 19)."""
    client, handlers, _ = served
    runtime = handlers.runtime
    # First in the runtime's attributes: a deep copy reaches it before anything it cannot copy.
    runtime.__dict__ = {"copy_counter": CopyCounter(), **runtime.__dict__}
    CopyCounter.copies = 0
    client.predict("add two numbers", "chat", *knob_args(), api_name="/respond")  # after an answer
    client.predict("add two numbers", "chat", 16, *step_knobs().values(), api_name="/next")  # and a step
    for path in ("/config", "/", "/config"):
        r = httpx.get(client.src.rstrip("/") + path, timeout=30)
        assert r.status_code == 200
    assert CopyCounter.copies == 0


def test_closing_a_page_frees_the_session_gradio_holds(served):
    """The page's state can be created by two events at page load at once; the close must free
    the Session Gradio keeps for the page, not only the one the load event saw (issue 19: 1 of
    3 closes left the page's private upload on disk). Here no load event ran at all (an API
    client), so only the held state knows the session."""
    from types import SimpleNamespace

    client, handlers, _ = served
    client.predict("add two numbers", "chat", *knob_args(), api_name="/respond")
    held = handlers._held_session(client.session_hash)
    assert isinstance(held, Session) and held.chat.turns  # the answer is in the page's state
    handlers.closed(SimpleNamespace(session_hash=client.session_hash))
    assert held.chat.turns == [] and held.chat.view is None
