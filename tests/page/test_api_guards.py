"""What a client of the HTTP API may send and take (issue 19): every endpoint that runs the model
(Send, Compare, the step-through's Next step and Run to end, Why this c?) keeps to the per-session
limits (one job queued or running, the message size, the seconds per request); odd input (lone
surrogates, NaN, strings for booleans) is refused or cleaned, never a traceback or a broken
session. The app is served on 127.0.0.1 with a scripted engine (tests/served_app.py)."""

from __future__ import annotations

import os
import time

import httpx
import pytest

from rest_core.ui.settings import Settings
from tests.app_fixtures import knob_args, step_knobs
from tests.page.test_limits import CountingTokenizer
from tests.served_app import serve

gradio_client = pytest.importorskip("gradio_client")
from gradio_client.exceptions import ValidationError  # noqa: E402

MESSAGE = "add two numbers"
C = 16  # the step-through's c
HEADER, STATUS = 0, 8  # in the step handlers' outputs (TeachPanel.view_components)


def step_args(message: str = MESSAGE, c=C, **knobs) -> list:
    """/next and /run_to_end's inputs: the message, the store, c, the other knobs (in order)."""
    return [message, "chat", c, *step_knobs(**knobs).values()]


def wait_for_a_call(engine, timeout: float = 30) -> None:
    end = time.monotonic() + timeout
    while not engine.calls and time.monotonic() < end:
        time.sleep(0.01)
    assert engine.calls, "the first request never reached the engine"


def test_the_step_through_takes_one_job_per_session(scripted, tmp_path):
    """One session filled the queue everyone shares with 33 /next requests: a step, Run to end
    and Why this c? are jobs like Send; a second one while one is queued or running is refused."""
    rt, engine = scripted
    with serve(rt, tmp_path) as (client, _):
        engine.step_s = 0.2  # Run to end takes a few seconds
        first = client.submit(*step_args(), api_name="/run_to_end")
        wait_for_a_call(engine)
        for args, api in ((step_args(), "/next"), ([C], "/why_c"), (["hi", "chat", *knob_args()], "/respond")):
            with pytest.raises(ValidationError, match="still queued or running"):
                client.predict(*args, api_name=api)
        assert "finished" in first.result()[HEADER] and len(engine.calls) == 1
        # once it ended, the session may step again
        assert "err" not in client.predict(*step_args("another one"), api_name="/next")[STATUS]
        assert len(engine.calls) == 2


def test_the_step_through_refuses_a_long_message_before_tokenizing_it(scripted, tmp_path):
    rt, engine = scripted
    engine.tokenizer = counting = CountingTokenizer(engine.tokenizer)
    with serve(rt, tmp_path, Settings(max_message_chars=100)) as (client, _):
        for api in ("/next", "/run_to_end"):
            status = client.predict(*step_args("y" * 101), api_name=api)[STATUS]
            assert "101 characters" in status and "at most 100" in status, status
        assert counting.uses == 0 and engine.calls == []
        # at the limit it is an ordinary message
        assert "err" not in client.predict(*step_args("y" * 100), api_name="/next")[STATUS]
        assert counting.uses > 0 and len(engine.calls) == 1


def test_run_to_end_stops_at_the_time_limit(scripted, tmp_path):
    """With --max-seconds 2, /run_to_end ran 5 s: it stops at the limit as Send does, the steps
    taken so far kept and shown."""
    rt, engine = scripted
    with serve(rt, tmp_path, Settings(max_seconds=1)) as (client, _):
        engine.step_s = 0.3  # 13 steps: about 4 s
        started = time.monotonic()
        out = client.predict(*step_args(), api_name="/run_to_end")
        took = time.monotonic() - started
        assert took < 2.5, took
        assert "server limit" in out[STATUS] and "1 s" in out[STATUS], out[STATUS]
        assert "Step " in out[HEADER] and "finished" not in out[HEADER]


def test_why_c_keeps_to_the_time_limit(scripted, tmp_path, monkeypatch):
    """Why this c? measures forwards of 1, 2, 4, ... 65 tokens; on a slow model it stops at the
    limit with the sizes measured so far (its figure drawn from them)."""
    from rest_core.decode import cost

    slow = cost.tree_forward

    def slow_forward(*args, **kwargs):  # every forward takes 0.15 s: the whole curve ~3.6 s
        time.sleep(0.15)
        return slow(*args, **kwargs)

    monkeypatch.setattr(cost, "tree_forward", slow_forward)
    rt, _ = scripted
    with serve(rt, tmp_path, Settings(max_seconds=0.5)) as (client, _):
        started = time.monotonic()
        figure, caption = client.predict(C, api_name="/why_c")
        took = time.monotonic() - started
    assert took < 2.2, took
    assert figure is not None and "could not" not in caption


# ------------------------------------------------------------------ odd text: lone surrogates

LONE = "a\ud800b"  # valid JSON ("\ud800"), not valid UTF-8: the page's JSON encoder refuses it


@pytest.fixture
def any_json(monkeypatch):
    """The client sends what any JSON text may hold: escaped lone surrogates, NaN and Infinity
    (httpx itself refuses to encode them; a hostile client writes its own JSON)."""
    import json

    import httpx._content

    def encode_json(obj):
        body = json.dumps(obj, ensure_ascii=True, separators=(",", ":"), allow_nan=True).encode("ascii")
        headers = {"Content-Length": str(len(body)), "Content-Type": "application/json"}
        return headers, httpx._content.ByteStream(body)

    monkeypatch.setattr(httpx._content, "encode_json", encode_json)


def test_a_lone_surrogate_never_poisons_the_session(scripted, tmp_path, any_json):
    """A lone surrogate in a message broke the session's stream for every later request; every
    text a user sends (messages, the step-through's, pasted corpus, names) is cleaned on entry."""
    rt, engine = scripted
    with serve(rt, tmp_path) as (client, _):
        chat, *_, status, box, _stores = client.predict(LONE, "chat", *knob_args(), api_name="/respond")
        assert "a\ufffdb" in chat and "err" not in status
        chat = client.predict(MESSAGE, "chat", *knob_args(), api_name="/respond")[0]  # the session goes on
        assert chat.count('class="tok d') > 0 and "a\ufffdb" in chat
        out = client.predict(*step_args(LONE), api_name="/next")
        assert "err" not in out[STATUS] and "Step 1" in out[HEADER]
        ((_, prompt), (_, step_prompt)) = [(c, engine.tokenizer.decode(c[0])) for c in engine.calls[::2]]
        assert "a\ufffdb" in prompt and "a\ufffdb" in step_prompt
        status = client.predict(None, "notes " + LONE * 50, "my\ud800notes", [], api_name="/build_corpus")[0]
        assert "Built <b>my-notes</b>" in status, status
        with pytest.raises(httpx.HTTPStatusError):  # not among the choices: refused when queued
            client.predict(MESSAGE, ["my-notes", "chat\ud800"], *knob_args(), api_name="/respond")
        status = client.predict(MESSAGE, ["my-notes"], *knob_args(), api_name="/respond")[5]
        assert "err" not in status and len(engine.calls) == 4


# ------------------------------------------------------------------ numbers and booleans


@pytest.mark.parametrize("c", [float("nan"), float("inf"), "many", 0, 65, 2.5, True])
def test_a_bad_step_c_is_refused_with_a_message(scripted, tmp_path, any_json, c):
    """c = NaN showed 'cannot convert float NaN to integer': the step-through's c is checked
    against its range (1..STEP_C_MAX) like every knob, on Next, Run to end and Why this c?."""
    rt, engine = scripted
    with serve(rt, tmp_path) as (client, _):
        try:
            outs = [client.predict(*step_args(c=c), api_name=api)[STATUS] for api in ("/next", "/run_to_end")]
            outs.append(client.predict(c, api_name="/why_c")[1])
        except httpx.HTTPStatusError as exc:  # or the widget refused it when it was queued
            detail = exc.response.json()["detail"]
            assert exc.response.status_code == 400 and ("imum value" in detail or "slider" in detail), detail
            return
    for status in outs:
        assert "c must be" in status and "convert" not in status, status
    assert engine.calls == []


def test_a_checkbox_knob_takes_true_or_false_only(scripted, tmp_path):
    """The string "no" for a checkbox knob was taken as True: it is refused, naming the knob."""
    rt, engine = scripted
    with serve(rt, tmp_path) as (client, _):
        for value in ("no", "false", 0):
            status = client.predict(MESSAGE, "chat", *knob_args(use_datastore=value), api_name="/respond")[5]
            assert "use_datastore must be true or false" in status, status
        status = client.predict(*step_args(use_context="no"), api_name="/next")[STATUS]
        assert "use_context must be true or false" in status, status
        assert engine.calls == []
        client.predict(MESSAGE, "chat", *knob_args(use_datastore=False), api_name="/respond")
        assert not engine.calls[-1][1].draft.use_datastore


# ------------------------------------------------------------------ the step-through: lifetime


def test_the_step_through_of_an_api_only_session_goes_when_it_expires(scripted, tmp_path):
    """Issue 30: the step-through's state had no time to live and no delete callback, so an API
    client's steps stayed held after its session expired (and after Clear). They are the
    visitor's Session's now, released with it after session_ttl without any request."""
    rt, engine = scripted
    with serve(rt, tmp_path, Settings(session_ttl=2)) as (client, built):
        status = client.predict(*step_args(), api_name="/run_to_end")[STATUS]
        assert "err" not in status, status
        session = built.handlers._held_session(client.session_hash)
        steps = session.steps
        assert steps.events and steps.started
        time.sleep(2)  # idle past the TTL: Gradio's expiry (checked every second) calls the delete callback
        end = time.monotonic() + 15
        while steps.events and time.monotonic() < end:
            time.sleep(0.2)
        assert steps.events == [] and not steps.started and steps.job is None


# ------------------------------------------------------------------ uploads: lifetime


def test_uploads_of_an_api_only_session_expire_after_the_session_ttl(scripted, tmp_path):
    """A session that only calls /build_corpus never updates its state, so Gradio's state TTL
    never started and its stores stayed (and stayed usable) until a restart: a session's
    uploads go after session_ttl without any request, whatever endpoints it used."""
    rt, engine = scripted
    with serve(rt, tmp_path, Settings(session_ttl=2)) as (client, built):
        status = client.predict(None, "notes " * 200, "notes", [], api_name="/build_corpus")[0]
        assert "Built <b>notes</b>" in status, status
        session = built.handlers._held_session(client.session_hash)
        folder = session.corpora.uploads["notes"]
        step = [MESSAGE, ["notes"], C, *step_knobs().values()]
        for k in range(4):  # in use (endpoints that never update the session's state): kept past the TTL
            time.sleep(0.7)
            status = client.predict(f"{k}: {MESSAGE}", *step[1:], api_name="/next")[STATUS]
            assert "err" not in status, status
        assert folder.is_dir()
        time.sleep(3.5)  # idle past the TTL: gone without any request
        assert not folder.exists() and not folder.parent.exists() and session.corpora.uploads == {}
        status = client.predict("again", *step[1:], api_name="/next")[STATUS]
        assert "is not built" in status, status


# ------------------------------------------------------------------ uploads: raw files


def raw_files(folder, name: str) -> list:
    """The raw uploads named `name` in Gradio's upload folder."""
    return list(folder.rglob(name))


def test_raw_uploads_go_once_built_and_on_clear(scripted, tmp_path, monkeypatch):
    """The files sent to the upload endpoint stayed in Gradio's upload folder for good: a build
    deletes its files once it has read them, and Clear the files the page holds unbuilt."""
    monkeypatch.setenv("GRADIO_TEMP_DIR", str(tmp_path / "gradio"))
    uploaded = tmp_path / "gradio"
    (tmp_path / "notes.md").write_text("# Notes\n\n" + "Retrieval drafts tokens. " * 40)
    (tmp_path / "later.md").write_text("# Later\n\n" + "Not built yet. " * 40)
    (tmp_path / "bad.bin").write_bytes(b"\0\1\2" * 100)
    rt, _ = scripted
    with serve(rt, tmp_path / "datastores") as (client, _):
        file = gradio_client.handle_file
        status = client.predict([file(str(tmp_path / "notes.md"))], "", "notes", [], api_name="/build_corpus")[0]
        assert "Built <b>notes</b>" in status and raw_files(uploaded, "notes.md") == [], status
        status = client.predict([file(str(tmp_path / "bad.bin"))], "", "bad", [], api_name="/build_corpus")[0]
        assert "Nothing built" in status and raw_files(uploaded, "bad.bin") == [], status  # a failed build too
        client.predict([file(str(tmp_path / "later.md"))], api_name="/files_added")  # picked, not built
        assert len(raw_files(uploaded, "later.md")) == 1
        client.predict(["notes"], api_name="/clear")
        assert raw_files(uploaded, "later.md") == []
    assert (tmp_path / "notes.md").is_file() and (tmp_path / "later.md").is_file()  # never the originals


def test_raw_uploads_count_against_the_cap_and_expire(scripted, tmp_path, monkeypatch):
    """Raw files nobody built count against the uploads disk cap, and go after the session TTL."""
    monkeypatch.setenv("GRADIO_TEMP_DIR", str(tmp_path / "gradio"))
    rt, _ = scripted
    settings = Settings(uploads_disk_mb=0.1, session_ttl=2)
    with serve(rt, tmp_path / "datastores", settings) as (client, _):
        url = client.src.rstrip("/") + "/gradio_api/upload"
        (orphan,) = httpx.post(url, files={"files": ("orphan.txt", b"x" * 120_000)}, timeout=30).json()
        status = client.predict(None, "a small corpus " * 20, "small", [], api_name="/build_corpus")[0]
        assert "space for uploaded corpora is full" in status, status
        end = time.monotonic() + 10
        while os.path.exists(orphan) and time.monotonic() < end:
            time.sleep(0.2)
        assert not os.path.exists(orphan)  # past the TTL
        status = client.predict(None, "a small corpus " * 20, "small", [], api_name="/build_corpus")[0]
        assert "Built <b>small</b>" in status, status
