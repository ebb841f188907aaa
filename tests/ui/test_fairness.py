"""Fair sharing of the model between strangers: who a request is from, per-client job counts,
and the gate that lets short jobs go before the next chunk of a long one."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import pytest

from rest_core.ui.fairness import LONG, SHORT, ClientJobs, ModelGate, client_address, request_address


def test_a_client_cannot_pick_its_own_address_behind_a_trusted_proxy():
    # the client wrote "1.2.3.4"; the Space's proxy appended the address it really came from
    headers = {"X-Forwarded-For": "1.2.3.4, 203.0.113.9"}
    assert client_address(headers, "10.0.0.2", trusted_proxies=1) == "203.0.113.9"
    assert client_address(headers, "10.0.0.2", trusted_proxies=2) == "1.2.3.4"
    # no trusted proxy: the header is ignored, whatever it says
    assert client_address(headers, "127.0.0.1", trusted_proxies=0) == "127.0.0.1"
    assert client_address({}, "127.0.0.1", trusted_proxies=1) == "127.0.0.1"
    assert client_address({"x-forwarded-for": "198.51.100.7"}, None, trusted_proxies=3) == "198.51.100.7"
    req = SimpleNamespace(headers={"x-forwarded-for": "a, b"}, client=SimpleNamespace(host="peer"))
    assert request_address(req, 1) == "b" and request_address(req, 0) == "peer" and request_address(None) == "unknown"


def test_each_client_holds_at_most_its_limit_over_all_its_sessions():
    jobs = ClientJobs(limit=2, horizon_s=60)
    assert jobs.admit("a") and jobs.admit("a")
    assert not jobs.admit("a")  # a third job from the same address, whichever session it uses
    assert jobs.admit("b")  # another visitor is not held back
    jobs.done("a")
    assert jobs.admit("a") and jobs.count("a") == 2
    for _ in range(3):
        jobs.done("a")
    jobs.done("b")
    assert jobs.clients() == 0  # nothing kept for clients that left


def test_jobs_the_queue_dropped_unrun_stop_counting_after_the_horizon():
    jobs = ClientJobs(limit=1, horizon_s=0.05)
    assert jobs.admit("a") and not jobs.admit("a")
    time.sleep(0.08)
    assert jobs.admit("a")


def test_short_jobs_take_the_model_before_the_next_chunk_of_a_long_one():
    gate = ModelGate()
    order: list[str] = []
    started = threading.Event()

    def take(lane: str, name: str, first: threading.Event | None = None) -> None:
        with gate.hold(lane):
            if first is not None:
                first.set()
                time.sleep(0.2)  # the chunk under way while the others queue
            order.append(name)

    holder = threading.Thread(target=take, args=(LONG, "chunk 1", started))
    holder.start()
    started.wait(5)
    long_next = threading.Thread(target=take, args=(LONG, "chunk 2"))
    long_next.start()
    while gate.waiting(LONG) < 1:
        time.sleep(0.005)
    short = threading.Thread(target=take, args=(SHORT, "send"))  # came later, goes first
    short.start()
    while gate.waiting(SHORT) < 1:
        time.sleep(0.005)
    for t in (holder, long_next, short):
        t.join(5)
    assert order == ["chunk 1", "send", "chunk 2"]
    assert not gate.locked() and gate.waiting() == 0
    with pytest.raises(ValueError, match="unknown lane"):
        with gate.hold("vip"):
            pass


def test_a_long_job_lets_a_waiting_send_in_between_two_steps_and_goes_on():
    gate = ModelGate()
    order: list[str] = []
    gate.acquire(LONG)  # the long job's first step
    assert gate.let_short_in(LONG) == 0.0 and gate.locked()  # nobody waits: it keeps the model
    send = threading.Thread(target=lambda: (gate.acquire(SHORT), order.append("send"), gate.release()))
    send.start()
    while not gate.waiting(SHORT):
        time.sleep(0.005)
    assert gate.let_short_in(SHORT) == 0.0  # a short holder never gives way
    paused = gate.let_short_in(LONG)  # between two steps: the Send runs, then the long job goes on
    order.append("step 2")
    send.join(5)
    gate.release()
    assert order == ["send", "step 2"] and paused >= 0.0 and not gate.locked()


def test_shut_waits_for_the_holder_and_lets_nobody_in_again():
    """At exit (SIGTERM) the gate waits for the job inside the model to give it back, then keeps
    every later job out, so no thread is inside the model while the interpreter finalizes."""
    import threading
    import time

    from rest_core.ui.fairness import LONG, ModelGate

    gate = ModelGate()
    gate.acquire(LONG)
    threading.Timer(0.3, gate.release).start()
    t0 = time.monotonic()
    assert gate.shut(5.0) and time.monotonic() - t0 >= 0.25
    entered = threading.Event()
    threading.Thread(target=lambda: (gate.acquire(), entered.set()), daemon=True).start()
    assert not entered.wait(0.5)  # nobody takes the model after shut
    gate2 = ModelGate()
    gate2.acquire()
    assert not gate2.shut(0.2)  # a holder that does not give it back in time: shut says so
