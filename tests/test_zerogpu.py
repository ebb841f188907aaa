"""The app under ZeroGPU's contract: every call that `spaces.GPU` decorates runs in a process of
its own, its arguments and results are pickled, and nothing it did is there for the next call.

`ForkedGPU` is that decorator: each call forks a fresh process from this one (as ZeroGPU forks
the Space's), sends it the pickled arguments, and gets back the pickled result (or each yield of
a generator); the process then exits, taking whatever the call built (engines, KV caches,
measured curves) with it. The chat, the step-through (Next, Back, Run to end), Compare and "Why
this c?" run through the page's real handlers on a tiny real model, and must show what the
same handlers show without it. A forward hook counts the model's forwards in this process: none
may run here, so no click can lean on state a previous call left behind.
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import multiprocessing
import os
import pickle
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from rest_core.decode.engine import Engine
from rest_core.store.datastore import Datastore
from rest_core.ui.runtime import Runtime
from rest_core.ui.session import Session
from rest_core.ui.settings import Settings
from tests.app_fixtures import knob_values, step_knobs
from tests.tiny_models import VOCAB_SIZE, tiny_loaded, torch_threads

ROOT = Path(__file__).resolve().parents[1]
MESSAGE = "count: one two three, one two three"
STORE = "own"
KNOBS = dict(c=8, m=6, n_max=8, max_matches=3, use_context=True, max_new_tokens=32)
MODEL_CALLS = {"answer_stream", "take_steps", "compare_runs", "forward_cost"}


def _in_child(fn, blob: bytes, conn, stream: bool) -> None:
    try:
        args, kwargs = pickle.loads(blob)
        out = fn(*args, **kwargs)
        for item in out if stream else [out]:
            conn.send_bytes(pickle.dumps(("item", item)))
        conn.send_bytes(pickle.dumps(("end", None)))
    except BaseException as exc:  # noqa: BLE001 - sent back, raised in the caller
        conn.send_bytes(pickle.dumps(("error", RuntimeError(f"{type(exc).__name__}: {exc}"))))
    finally:
        conn.close()
        os._exit(0)  # no exit handlers: the process only ever ran this call


# The request a handler serves, as Gradio sets it: spaces.GPU reads it (for the user's quota)
# from the thread that makes the call, so a call made from another thread must carry it along.
REQUEST: contextvars.ContextVar[str] = contextvars.ContextVar("request")


class ForkedGPU:
    """A stand-in for `spaces.GPU`: each decorated call in a freshly forked process, arguments
    and results pickled, made where the handler's request is known (REQUEST). `calls` records
    (function name, child pid) per call."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []

    def __call__(self, fn):
        if inspect.isgeneratorfunction(fn):

            @functools.wraps(fn)
            def stream(*args, **kwargs):
                yield from self._run(fn, args, kwargs, stream=True)

            return stream

        @functools.wraps(fn)
        def call(*args, **kwargs):
            return next(self._run(fn, args, kwargs, stream=False))

        return call

    def _run(self, fn, args, kwargs, stream: bool):
        if REQUEST.get(None) is None:
            raise RuntimeError(f"{fn.__name__} was called outside the handler's request")
        blob = pickle.dumps((args, kwargs))  # what cannot cross to the GPU process fails here
        ctx = multiprocessing.get_context("fork")
        mine, theirs = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=_in_child, args=(fn, blob, theirs, stream), daemon=True)
        proc.start()
        theirs.close()
        self.calls.append((fn.__name__, proc.pid))
        try:
            while True:
                try:
                    kind, item = pickle.loads(mine.recv_bytes())
                except EOFError:
                    raise RuntimeError(f"the GPU process of {fn.__name__} died") from None
                if kind == "error":
                    raise item
                if kind == "end":
                    return
                yield item
        finally:
            if proc.is_alive():
                proc.kill()
            proc.join()
            mine.close()


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    with torch_threads(1):
        yield


@pytest.fixture(scope="module")
def lm():
    return tiny_loaded("llama")


def make_runtime(lm, folder: Path, gpu=None) -> Runtime:
    """A runtime on the tiny model whose store STORE holds the model's own greedy answer to
    MESSAGE (and noisy pieces of it): drafts are often right and sometimes branch."""
    (folder / STORE).mkdir(parents=True, exist_ok=True)
    (folder / STORE / "meta.json").write_text("{}")  # listed as built; the engine below serves it
    rt = Runtime(Settings(datastores=folder), loader=lambda: lm, gpu=gpu)
    plain = Engine(lm.model, lm.tokenizer)
    prompt = plain.encode([{"role": "user", "content": MESSAGE}], chat=True)
    ref = lm.model.generate(torch.tensor([prompt]), max_new_tokens=40, do_sample=False)[0, len(prompt) :].tolist()
    noise = [(t * 7 + 3) % 256 for t in ref]
    store = Datastore.from_token_ids([ref, ref[4:20] + noise[:12], ref[10:30]], vocab_size=VOCAB_SIZE)
    rt._engines[rt.resolve(STORE)] = Engine(lm.model, lm.tokenizer, datastores={STORE: store})
    return rt


def drive(runtime: Runtime) -> dict:
    """The chat (two turns), the step-through (Next x3, Back, Run to end, Why this c?) and
    Compare through the page's handlers; what each showed, and how many model calls it made."""
    import app

    built = app.build_app(runtime.settings, runtime)
    chat, teach = built.handlers, built.teaching
    knobs = knob_values(**KNOBS)
    gpu = getattr(runtime, "test_gpu", None)
    made = lambda: len(gpu.calls) if gpu else 0  # noqa: E731
    out: dict = {"calls": {}}
    session = Session()
    for turn in ("first", "second"):
        before = made()
        updates = list(chat.respond(MESSAGE if turn == "first" else "and again", session, STORE, **knobs))
        out[turn] = [t for e in session.chat.view.events for t in e.tokens]
        out["calls"][turn] = made() - before
        assert "err" not in (updates[-1].get(chat.ui.answer.status) or "")
    st, t = session.steps, teach.ui
    heads = []
    for move in ("next", "next", "next", "back", "end"):
        before = made()
        if move == "back":
            view = teach.back(session)
        else:
            handler = teach.next if move == "next" else teach.run_to_end
            view = handler(MESSAGE, session, STORE, 16, **step_knobs(**KNOBS))
        heads.append(re.search(r"Step \d+(?=</b>)", view[t.header]).group(0))
        out["calls"][move] = out["calls"].get(move, 0) + made() - before
    out["heads"], out["steps"] = heads, st.token_ids()
    out["rows"] = [e.row_tokens for e in st.events]
    out["status"] = view[t.status]
    before = made()
    caption = teach.why_c(session, 16)[t.why_cap]
    out["why_c"] = ("ms on this device" in caption and "On a GPU" in caption, made() - before)
    before = made()
    shown = [u for u in chat.compare("", session, STORE, **knobs) if isinstance(u, dict)]
    table = next(u[chat.ui.answer.compare_out] for u in reversed(shown) if chat.ui.answer.compare_out in u)
    out["compare"] = ("identical output" in table, "Prompt lookup (transformers" in table, made() - before)
    return out


def test_every_view_runs_through_fresh_gpu_processes_and_shows_the_same(lm, tmp_path):
    gpu = ForkedGPU()
    zero = make_runtime(lm, tmp_path / "zero", gpu)
    zero.test_gpu = gpu
    here: list[int] = []
    hook = lm.model.register_forward_pre_hook(lambda *_: here.append(os.getpid()))
    token = REQUEST.set("a page's request")
    try:
        got = drive(zero)
    finally:
        hook.remove()
        REQUEST.reset(token)
    assert here == [], "the model ran in the app's own process: a click leans on what it holds"
    pids = [pid for _, pid in gpu.calls]
    assert len(set(pids)) == len(pids) and os.getpid() not in pids  # a fresh process per call
    assert {name for name, _ in gpu.calls} == MODEL_CALLS
    # One call per answer, per step taken (Back takes none), for Run to end, Compare and Why this c?.
    assert got["calls"] == {"first": 1, "second": 1, "next": 3, "back": 0, "end": 1}
    assert got["why_c"] == (True, 1) and got["compare"] == (True, True, 1)
    for engine in zero._engines.values():  # nothing of a call stayed in this process
        assert engine._saved is None

    plain = drive(make_runtime(lm, tmp_path / "plain"))
    for key in ("first", "second", "heads", "steps", "rows", "status"):
        assert got[key] == plain[key], key
    assert got["heads"] == [
        "Step 1",
        "Step 2",
        "Step 3",
        "Step 2",
        f"Step {len(got['rows'])}",
    ]
    assert "complete" in got["status"]
    assert plain["why_c"][0] and plain["compare"][:2] == (True, True)


def test_an_unpicklable_argument_fails_as_on_zerogpu():
    """The harness itself refuses what ZeroGPU cannot send: a lock among the arguments."""
    import threading

    @ForkedGPU()
    def touch(x):
        return x

    with pytest.raises(RuntimeError, match="outside the handler's request"):
        touch([1, 2])
    token = REQUEST.set("a request")
    try:
        assert touch([1, 2]) == [1, 2]
        with pytest.raises(TypeError):
            touch(threading.Lock())
    finally:
        REQUEST.reset(token)


def test_app_hands_its_model_calls_to_spaces_gpu(tmp_path):
    """On a Space (a `spaces` module importable) app.py decorates the model calls once, at
    import (ZeroGPU looks for them at start-up), and no handler: a handler's `self` (the page,
    the runtime and its lock) cannot be pickled."""
    fake = tmp_path / "spaces.py"
    fake.write_text(
        textwrap.dedent(
            """
            DECORATED = []

            def GPU(fn=None, *, duration=None):
                if fn is None:
                    return lambda f: GPU(f, duration=duration)
                DECORATED.append(fn.__qualname__)
                return fn
            """
        )
    )
    code = "import app, spaces; assert app.HAVE_SPACES; print(sorted(set(spaces.DECORATED)))"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == str(sorted(MODEL_CALLS))
