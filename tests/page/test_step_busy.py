"""A step click while the model is busy (another answer holds it): the click is queued, the
step-through says at once that it waits for the model, and each click then takes its step when
the model is free; past MAX_WAITING waiting clicks one is refused with a message. No click is
ever dropped without a word: the page's buttons submit every click (trigger mode "multiple"),
where Gradio's default ignores clicks while an earlier one is pending."""

from __future__ import annotations

import threading

import app
from rest_core.ui import step_through
from rest_core.ui.runtime import NO_STORE, Runtime, StoreBuilds
from rest_core.ui.session import Session
from tests.app_fixtures import step_knobs

MESSAGE = "add two numbers"


def teach(runtime: Runtime):
    built = app.build_app(runtime.settings, runtime, StoreBuilds(runtime.settings))
    return built, built.teaching


def click(h, session: Session, ask=None, move=None):
    """One click as the page makes it: the status at once, the queue's validator, then (in a
    thread: it waits for the model) the step. Returns (status shown at once, admitted, thread, result)."""
    ask, move = ask or h.ask_next, move or h.next
    status = ask(session)[h.ui.status]
    args, kw = (MESSAGE, session, NO_STORE, 16), step_knobs()
    admitted = all(v["is_valid"] for v in h.admit(*args, **kw))
    result: dict = {}
    thread = None
    if admitted:
        thread = threading.Thread(target=lambda: result.update(move(*args, **kw)), daemon=True)
        thread.start()
    return status, admitted, thread, result


def test_step_clicks_while_another_answer_runs_wait_visibly_then_each_takes_its_step(scripted):
    rt, _ = scripted
    _, h = teach(rt)
    session = Session()
    st = session.steps
    rt.lock.acquire()  # another user's answer holds the model
    try:
        clicks = [click(h, session) for _ in range(3)]
        for k, (status, admitted, thread, _) in enumerate(clicks):
            assert admitted and "Waiting for the model: another answer is running" in status
            assert (f"{k} earlier click" in status) == (k > 0)
            thread.join(timeout=0.3)
            assert thread.is_alive()  # it waits for the model, it was not dropped
        assert st.events == []
    finally:
        rt.lock.release()
    heads = []
    for _, _, thread, result in clicks:
        thread.join(timeout=60)
        heads.append(result[h.ui.header])
    assert len(st.events) == 3 and st.pos == 2  # three clicks, three steps
    assert any("<b>Step 3</b>" in head for head in heads)
    assert st.waiting == 0 and not st.tickets and not st.admitted
    status, admitted, thread, result = click(h, session)  # the model is free: taken at once
    assert admitted and "Taking step 4" in status and "Waiting" not in status
    thread.join(timeout=60)
    assert "<b>Step 4</b>" in result[h.ui.header]


def test_a_click_past_the_waiting_limit_is_refused_with_a_message(scripted):
    rt, _ = scripted
    _, h = teach(rt)
    session = Session()
    st = session.steps
    rt.lock.acquire()
    try:
        waiting = [click(h, session) for _ in range(step_through.MAX_WAITING)]
        assert all(admitted for _, admitted, _, _ in waiting)
        status, admitted, thread, _ = click(h, session, h.ask_end, h.run_to_end)
        assert not admitted and thread is None
        assert "this one was not queued" in status and 'class="status warn' in status
        refusal = [v for v in h.admit(MESSAGE, session, NO_STORE, 16, **step_knobs()) if not v["is_valid"]]
        assert refusal == []  # no ticket left: an API call now goes by the per-session job limit
    finally:
        rt.lock.release()
    for _, _, thread, _ in waiting:
        thread.join(timeout=60)
    assert len(st.events) == step_through.MAX_WAITING and st.waiting == 0


def test_run_to_end_while_busy_says_it_waits(scripted):
    rt, _ = scripted
    _, h = teach(rt)
    rt.lock.acquire()
    try:
        status = h.ask_end(Session())[h.ui.status]
    finally:
        rt.lock.release()
    assert "Waiting for the model" in status and "Running to the end as soon as it is done" in status


def test_the_step_buttons_submit_every_click(scripted):
    """Gradio's default trigger mode ("once") ignores a click, and the queued step it starts,
    while the last one is pending: three clicks during a long answer were lost without a word."""
    rt, _ = scripted
    built, h = teach(rt)
    config = built.demo.get_config_file()
    ids = {c["id"]: c.get("props", {}).get("elem_id") for c in config["components"]}
    deps = {d["id"]: d for d in config["dependencies"]}
    modes = {}
    for dep in deps.values():
        for target, _event in dep["targets"]:
            if ids.get(target) in ("teach-next", "teach-end", "teach-prompt"):
                modes[(ids[target], dep["api_name"])] = dep["trigger_mode"]
        after = deps.get(dep.get("trigger_after"))
        if after is not None and after["api_name"].startswith("ask_"):  # the queued step a click starts
            modes[(after["api_name"], dep["api_name"])] = dep["trigger_mode"]
    assert modes == {
        ("teach-next", "ask_next"): "multiple",
        ("ask_next", "next"): "multiple",
        ("teach-end", "ask_end"): "multiple",
        ("ask_end", "run_to_end"): "multiple",
        ("teach-prompt", "ask_next_1"): "multiple",
        ("ask_next_1", "next_1"): "multiple",
    }
