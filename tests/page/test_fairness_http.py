"""One stranger's script against the shared model (issue 30): a client address holds at most
`client_jobs` places in the queue over all its sessions, whatever X-Forwarded-For it claims, and
a Send goes between two steps of another visitor's Run to end instead of waiting for all of it.
The app is served on 127.0.0.1 with a scripted engine (tests/served_app.py)."""

from __future__ import annotations

import time

import pytest

from rest_core.ui.settings import Settings
from tests.app_fixtures import knob_args
from tests.page.test_api_guards import HEADER, step_args, wait_for_a_call
from tests.served_app import serve

gradio_client = pytest.importorskip("gradio_client")
from gradio_client.exceptions import ValidationError  # noqa: E402


def test_one_address_holds_at_most_its_places_whatever_sessions_and_headers_it_uses(scripted, tmp_path, monkeypatch):
    # as app.main has it: uvicorn does not take a loopback peer's X-Forwarded-For as its address
    monkeypatch.setenv("FORWARDED_ALLOW_IPS", "")
    rt, engine = scripted
    with serve(rt, tmp_path, Settings(client_jobs=2)) as (_, built):
        url = built.demo.local_url
        engine.step_s = 0.2  # a Run to end takes a few seconds
        first = gradio_client.Client(url, verbose=False).submit(*step_args(), api_name="/run_to_end")
        wait_for_a_call(engine)
        second = gradio_client.Client(url, verbose=False).submit(*step_args("another"), api_name="/run_to_end")
        time.sleep(0.5)  # queued behind the first
        for headers in (None, {"X-Forwarded-For": "198.51.100.7"}):  # a new session; a made-up address
            third = gradio_client.Client(url, verbose=False, headers=headers)
            with pytest.raises(ValidationError, match="already hold 2 places"):
                third.predict("hi", "chat", *knob_args(), api_name="/respond")
        assert "finished" in first.result()[HEADER] and "finished" in second.result()[HEADER]
        # its jobs done, the address may queue again
        out = gradio_client.Client(url, verbose=False).predict("hi", "chat", *knob_args(), api_name="/respond")
        assert "err" not in str(out[5])


def test_a_send_goes_between_the_steps_of_another_visitors_run_to_end(scripted, tmp_path):
    rt, engine = scripted
    with serve(rt, tmp_path) as (_, built):
        url = built.demo.local_url
        engine.step_s = 0.3  # about 4 s for the whole answer
        long = gradio_client.Client(url, verbose=False).submit(*step_args(), api_name="/run_to_end")
        wait_for_a_call(engine)
        time.sleep(0.5)  # a step or two of it taken
        gradio_client.Client(url, verbose=False).predict("hi", "chat", *knob_args(), api_name="/respond")
        assert not long.done()  # the Send was answered while Run to end still had steps to take
        assert "finished" in long.result()[HEADER]
        assert len(engine.calls) == 2
