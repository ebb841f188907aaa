"""One user's chat with REST: the conversation, the answer streaming from a worker thread, and
the REST-vs-plain comparison. No Gradio here: every action yields `Update`s (what to show where,
None = leave as is) that app.py maps onto its components.

The engine runs in a worker thread (`Run`), so decoding never waits for the page to render; the
streaming loop drains its events and refreshes the text and the trie figure at a bounded rate.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
import traceback
from dataclasses import dataclass, field, replace
from typing import Any, Iterator

from rest_core import render
from rest_core.config import ConfigError, GenerationConfig
from rest_core.knobs import make_config
from rest_core.runtime import NO_STORE, Runtime

FIGURE_EVERY_S = 0.3  # live trie figure refresh (each costs ~10 ms to build + send)
TEXT_EVERY_S = 0.08  # live text refresh
PLACEHOLDER = "Ask something, or pick an example below. Tokens that REST drafted and the model accepted light up as they stream."
log = logging.getLogger("rest.app")


def status_html(message: str, kind: str = "info") -> str:
    """The banner above the page (kind: info, warn, err); `message` is HTML."""
    return f'<div class="status {kind}">{message}</div>' if message else ""


# ----------------------------------------------------------------------------------------------
# Knobs -> GenerationConfig


def request_config(store: str | None, knobs: dict[str, Any], base: GenerationConfig) -> tuple[GenerationConfig, str]:
    """The page's settings (knob name -> value, checked against the knobs' ranges) on `base`, and
    the datastore to draft from (NO_STORE when none is chosen or the datastore source is off)."""
    store = store or NO_STORE
    config = make_config(knobs, base)
    use_ds = config.draft.use_datastore and store != NO_STORE
    return replace(config, draft=replace(config.draft, use_datastore=use_ds)), (store if use_ds else NO_STORE)


def fit_context(prompt_len: int, config: GenerationConfig, limit: int | None) -> tuple[GenerationConfig, str]:
    """Shorten max_new_tokens to what the model's context (`limit` tokens) still holds, or refuse
    clearly; returns the config and a note for the user ("" when nothing changed)."""
    if not limit:
        return config, ""
    room = limit - prompt_len - config.draft.c - 1  # the draft tree needs room too
    if room < 8:
        raise ConfigError(
            f"The conversation is too long for the model: {prompt_len} prompt tokens, and the model's context holds {limit}. "
            "Press Clear to start a new conversation."
        )
    if config.max_new_tokens > room:
        return replace(config, max_new_tokens=room), f"answer limited to {room} tokens: the model's context holds {limit}"
    return config, ""


# ----------------------------------------------------------------------------------------------
# A background generation run


class Run:
    """Consumes the engine's step events in a worker thread, so decoding never waits for the page
    to render; the handler drains `events` and can cancel between two steps. `lock` is held while
    the engine runs (one model, one generation at a time)."""

    def __init__(self, engine: Any, prompt_ids: list[int], config: GenerationConfig, lock: threading.Lock) -> None:
        self.events: "queue.Queue[Any]" = queue.Queue()
        self._cancel = threading.Event()
        self.done = threading.Event()
        self._thread = threading.Thread(target=self._work, args=(engine, prompt_ids, config, lock), daemon=True, name="rest-run")
        self._thread.start()

    def _work(self, engine: Any, prompt_ids: list[int], config: GenerationConfig, lock: threading.Lock) -> None:
        try:
            with lock:
                steps = engine.generate(prompt_ids, config)
                try:
                    for ev in steps:
                        self.events.put(ev)
                        if self._cancel.is_set():
                            break
                finally:
                    close = getattr(steps, "close", None)
                    if close:
                        close()
        except Exception as exc:  # noqa: BLE001 - reported to the page as a message
            log.error("generation failed:\n%s", traceback.format_exc())
            self.events.put(exc)
        finally:
            self.done.set()
            self.events.put(None)

    def cancel(self) -> None:
        self._cancel.set()

    def drain(self, timeout: float) -> tuple[list[Any], bool]:
        """Events that arrived (waiting up to `timeout` for the first); True once the run ended."""
        out: list[Any] = []
        ended = False
        try:
            item = self.events.get(timeout=timeout)
            while True:
                if item is None:
                    ended = True
                    break
                out.append(item)
                item = self.events.get_nowait()
        except queue.Empty:
            pass
        return out, ended

    def collect(self) -> list[Any]:
        """All the run's events (blocking); a failure in the engine is raised here."""
        events: list[Any] = []
        while True:
            got, ended = self.drain(timeout=0.5)
            for ev in got:
                if isinstance(ev, Exception):
                    raise RuntimeError(f"generation failed: {ev}")
                events.append(ev)
            if ended:
                return events


# ----------------------------------------------------------------------------------------------
# What a step of an action changes on the page


@dataclass
class Update:
    """New contents for the page; None leaves a part as it is. `steps`: the replay slider's range
    (1..steps), 0 hides it. `box`: "" empties the message box."""

    chat: str | None = None
    stats: str | None = None
    trie: Any = None  # plotly Figure
    inspector: str | None = None
    steps: int | None = None
    status: str | None = None
    box: str | None = None
    comparison: str | None = None
    speed: Any = None  # plotly Figure


def _failure(exc: Exception, what: str) -> str:
    """The message for a failed request; unexpected failures also log their traceback."""
    if not isinstance(exc, (ConfigError, ValueError, FileNotFoundError)):
        log.error("%s failed:\n%s", what, traceback.format_exc())
    log.warning("%s refused: %s", what, exc)
    return str(exc)


# ----------------------------------------------------------------------------------------------
# The session


@dataclass
class Session:
    """One browser tab's conversation (the app keeps it in gr.State)."""

    messages: list[dict] = field(default_factory=list)  # chat history for the template
    turns: list[render.Turn] = field(default_factory=list)
    view: render.AnswerView | None = None  # the last answer's events and spans
    prompt_ids: list[int] | None = None  # the last answer's prompt (for Compare)
    store: str = NO_STORE
    active: bool = False
    run: Run | None = None

    def chat_html(self) -> str:
        return render.conversation_html(self.turns, PLACEHOLDER)

    def finish_turn(self, note: str) -> None:
        """Close the answer in progress (finished, stopped or failed) and keep it in the history."""
        if not self.active:
            return
        self.active = False
        if self.run is not None:
            self.run.cancel()
            self.run = None
        text = ""
        if self.view is not None:  # None when stopped before the first step
            self.view.finish()
            self.turns[-1].answer_html = self.view.html()
            text = self.view.text
        self.messages.append({"role": "assistant", "content": text})
        if note:
            self.turns[-1].note = note

    def step_view(self, tokenizer: Any, step: int | None = None) -> tuple[Any, str]:
        """The trie figure and inspector of `step` (1-based; None: the last step)."""
        view = self.view
        if view is None or not view.events:
            return render.trie_figure(None, tokenizer), render.inspector_html(None, tokenizer)
        k = len(view.events) - 1 if step is None else max(0, min(int(step) - 1, len(view.events) - 1))
        ev = view.events[k]
        return render.trie_figure(ev, tokenizer), render.inspector_html(ev, tokenizer, n_steps=len(view.events))

    def slider_steps(self, running: bool) -> int:
        """The replay slider shows once an answer of two or more steps is complete."""
        n = len(self.view.events) if self.view is not None else 0
        return 0 if running or n < 2 else n

    # -------------------------------------------------------------------------------- actions

    def respond(self, runtime: Runtime, message: str, store: str | None, knobs: dict[str, Any]) -> Iterator[Update]:
        """Send: stream the answer step by step into the chat, the stats, the trie and the inspector.
        `knobs`: knob name -> value (rest_core.knobs), `store`: the datastore chosen."""
        self.finish_turn("stopped")
        message = (message or "").strip()
        if not message:
            yield Update(status=status_html("Type a message first.", "warn"))
            return
        try:
            config, store = request_config(store, knobs, runtime.preset)
        except ConfigError as exc:
            yield Update(status=status_html(f"Settings: {render.esc(str(exc))}", "err"))
            return

        self.turns.append(render.Turn(user=message))
        self.messages.append({"role": "user", "content": message})
        self.view = None
        self.active = True
        if not runtime.ready:
            yield Update(chat=self.chat_html(), status=status_html("Loading the model (first request only)…"), box="")
        try:
            engine = runtime.engine(store)
            tokenizer = runtime.loaded().tokenizer
            prompt_ids = list(engine.encode(self.messages, chat=True))
            config, note = fit_context(len(prompt_ids), config, engine.max_positions)
        except Exception as exc:  # noqa: BLE001 - a message in the page, the traceback in the terminal
            error = _failure(exc, "request")
            self.turns[-1].note, self.turns[-1].error = error, True
            self.messages.pop()  # the model never answered it: keep it out of the history
            self.active = False
            yield Update(chat=self.chat_html(), status=status_html(render.esc(error), "err"), box="")
            return
        self.view = render.AnswerView(tokenizer)
        self.prompt_ids = prompt_ids
        self.store = store
        self.run = Run(engine, prompt_ids, config, runtime.lock)
        yield from self._stream(self.run, tokenizer, config, note)

    def _stream(self, run: Run, tokenizer: Any, config: GenerationConfig, note: str) -> Iterator[Update]:
        view = self.view
        assert view is not None
        status = status_html(render.esc(note), "warn") if note else ""
        yield Update(chat=self.chat_html(), stats=render.stats_html([]), steps=self.slider_steps(True), status=status, box="")
        last_text = last_fig = 0.0
        try:
            while True:
                events, ended = run.drain(timeout=TEXT_EVERY_S)
                error = next((e for e in events if isinstance(e, Exception)), None)
                for ev in events:
                    if not isinstance(ev, Exception):
                        view.add(ev)
                if error is not None:
                    self.finish_turn(f"generation failed: {error}")
                    self.turns[-1].error = True
                    fig, ins = self.step_view(tokenizer)
                    yield Update(self.chat_html(), render.stats_html(view.events), fig, ins, self.slider_steps(False), status_html(render.esc(f"generation failed: {error}"), "err"))
                    return
                if ended:
                    break
                now = time.perf_counter()
                if not events or now - last_text < TEXT_EVERY_S:
                    continue
                self.turns[-1].answer_html = view.html()
                fig = ins = None
                if now - last_fig >= FIGURE_EVERY_S and view.events:
                    fig = render.trie_figure(view.events[-1], tokenizer)
                    ins = render.inspector_html(view.events[-1], tokenizer, n_steps=len(view.events))
                    last_fig = now
                last_text = now
                yield Update(self.chat_html(), render.stats_html(view.events, running=True), fig, ins, status=status)
            last = view.events[-1] if view.events else None
            reason = {"eos": "", "length": f"stopped at the limit of {config.max_new_tokens} new tokens"}.get(last.finish_reason if last else None, "")
            self.finish_turn(" · ".join(x for x in (reason, note) if x))
            fig, ins = self.step_view(tokenizer)
            yield Update(self.chat_html(), render.stats_html(view.events), fig, ins, self.slider_steps(False), status)
        finally:
            run.cancel()  # also when the page cancelled this handler (Stop)

    def stop(self, runtime: Runtime) -> Update:
        """Stop: keep the answer so far (the page cancels the streaming handler itself)."""
        if self.active:
            n = self.view.totals.new_tokens if self.view is not None and self.view.totals else 0
            self.finish_turn(f"stopped after {n} tokens")
        stats = render.stats_html(self.view.events) if self.view is not None else render.stats_html([])
        fig = ins = None
        if self.view is not None and self.view.events and runtime.ready:
            fig, ins = self.step_view(runtime.loaded().tokenizer)
        return Update(self.chat_html(), stats, fig, ins, self.slider_steps(False), status="")

    def replay(self, runtime: Runtime, step: int) -> Update:
        """Step slider (after generation): that step's tree and inspector."""
        if self.view is None or not self.view.events or self.active:
            return Update()
        fig, ins = self.step_view(runtime.loaded().tokenizer, step)
        return Update(trie=fig, inspector=ins)

    def compare(self, runtime: Runtime, message: str, store: str | None, knobs: dict[str, Any]) -> Iterator[Update]:
        """Compare: REST and plain decoding on the same prompt and settings, back to back, nothing
        rendered in between; yields status lines, then the comparison and the speed figure."""
        try:
            config, store = request_config(store, knobs, runtime.preset)
        except ConfigError as exc:
            yield Update(status=status_html(f"Settings: {render.esc(str(exc))}", "err"))
            return
        if self.active:
            yield Update(status=status_html("Wait for the answer to finish (or Stop it) before comparing.", "warn"))
            return
        try:
            if not runtime.ready:
                yield Update(status=status_html("Loading the model (first request only)…"))
            engine = runtime.engine(store)
            typed = (message or "").strip()
            if self.prompt_ids is not None and not typed:
                prompt_ids, what = self.prompt_ids, "the last prompt"
            elif typed:
                prompt_ids, what = list(engine.encode([{"role": "user", "content": typed}], chat=True)), "the message in the box"
            else:
                yield Update(status=status_html("Send a message first, or type one to compare on.", "warn"))
                return
            config, note = fit_context(len(prompt_ids), config, engine.max_positions)
            results = {}
            for method, label in (("rest", "REST"), ("ar", "plain decoding")):
                run = Run(engine, prompt_ids, config.with_method(method), runtime.lock)
                try:
                    results[method] = run.collect()
                finally:
                    run.cancel()
                yield Update(status=status_html(f"Comparing on {what}: {label} done ({results[method][-1].totals.new_tokens} tokens)…"))
            cmp = render.compare(results["rest"], results["ar"], greedy=config.sampling.greedy)
            done = f"Compared on {what} with the current settings ({config.max_new_tokens} new tokens max)." + (f" {note}." if note else "")
            yield Update(status=status_html(render.esc(done)), comparison=render.comparison_html(cmp), speed=render.speed_figure(results["rest"], results["ar"]))
        except Exception as exc:  # noqa: BLE001 - a message in the page, the traceback in the terminal
            yield Update(status=status_html(render.esc(_failure(exc, "compare")), "err"))


def blank_view(runtime: Runtime) -> Update:
    """A new conversation's page: empty chat, stats, trie and inspector, slider hidden."""
    tok = runtime.loaded().tokenizer if runtime.ready else None
    return Update(Session().chat_html(), render.stats_html([]), render.empty_figure(), render.inspector_html(None, tok), steps=0, status="", box="")
