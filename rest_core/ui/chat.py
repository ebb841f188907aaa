"""One visitor's chat with REST: the conversation and the answer streaming from a worker thread.
No Gradio here: every action yields `Update`s (what to show where, None = leave as is) that
app.py maps onto its components.

The engine runs in a worker thread (`Run`, rest_core/ui/run.py), so decoding never waits for the
page to render; the streaming loop drains its events and refreshes the text and the trie figure
at a bounded rate.
"""

from __future__ import annotations

import logging
import time
import traceback
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from rest_core.config import ConfigError, GenerationConfig
from rest_core.decode.events import StepEvent
from rest_core.knobs import make_config
from rest_core.ui.answer_view import AnswerView, Turn, conversation_html
from rest_core.ui.busy import FastestSteps, time_limit_message
from rest_core.ui.inspector import inspector_html
from rest_core.ui.model_calls import ModelJob, Notice
from rest_core.ui.run import Run
from rest_core.ui.runtime import Runtime, StoreSet, selected_names
from rest_core.ui.stats import stats_html
from rest_core.ui.style import clean_text, esc, status_html
from rest_core.ui.trie_view import empty_figure, trie_figure

# The live page: the answer's text, the stats, the trie figure and the inspector, refreshed together
# (so the text is never a step ahead of the panels that describe it); the figure costs ~10 ms.
REFRESH_S = 0.2
PLACEHOLDER = (
    "Ask something, or pick an example below. Tokens that REST drafted and the model accepted light up as they stream."
)
log = logging.getLogger("rest.app")

# ----------------------------------------------------------------------------------------------
# Knobs -> GenerationConfig


def request_config(
    stores: str | Sequence[str] | None, knobs: dict[str, Any], base: GenerationConfig
) -> tuple[GenerationConfig, tuple[str, ...]]:
    """The page's settings (knob name -> value, checked against the knobs' ranges) on `base`, and
    the datastores to draft from: each chosen store a source of its own, each at the whole
    datastore weight (none when no store is chosen or the datastore source is off)."""
    names = selected_names(stores)
    config = make_config(knobs, base)
    use_ds = config.draft.use_datastore and bool(names)
    names = names if use_ds else ()
    draft = replace(config.draft, use_datastore=use_ds, stores=tuple((n, 1.0) for n in names) if names else None)
    return replace(config, draft=draft), names


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
        return replace(
            config, max_new_tokens=room
        ), f"answer limited to {room} tokens: the model's context holds {limit}"
    return config, ""


# ----------------------------------------------------------------------------------------------
# What a step of an action changes on the page


@dataclass(frozen=True, kw_only=True)
class Update:
    """New contents for the page; None leaves a part as it is. `steps`: the replay slider's range
    (1..steps), 0 hides it; `shown`: the step it stands at (None: the last). `box`: "" empties the
    message box."""

    chat: str | None = None
    stats: str | None = None
    trie: Any = None  # plotly Figure
    inspector: str | None = None
    steps: int | None = None
    shown: int | None = None
    status: str | None = None
    box: str | None = None


def failure(exc: Exception, what: str) -> str:
    """The message for a failed request; unexpected failures also log their traceback."""
    if not isinstance(exc, (ConfigError, ValueError, FileNotFoundError)):
        log.error("%s failed:\n%s", what, traceback.format_exc())
    log.warning("%s refused: %s", what, exc)
    return str(exc)


def time_limit_note(seconds: float) -> str:
    return f"stopped after {seconds:g} s (server limit)"


def _ending(
    events: Sequence[Any],
    config: GenerationConfig,
    timed_out: bool,
    max_seconds: float,
    clock: FastestSteps | None,
    status: str,
) -> tuple[str, str]:
    """An ended answer's reason (for the chat) and status line; its steps join the clock's record.
    A time-limited answer keeps its partial text and says why it stopped."""
    last = events[-1] if events else None
    reason = {"eos": "", "length": f"stopped at the limit of {config.max_new_tokens} new tokens"}.get(
        last.finish_reason if last else None, ""
    )
    if timed_out:
        reason = time_limit_note(max_seconds)
        status = status_html(esc(time_limit_message(max_seconds, events, clock)), "warn")
    if clock is not None:
        clock.observe(events)
    return reason, status


def message_too_long(message: str, limit: int) -> str | None:
    """The refusal for a message over `limit` characters (0: no limit), else None. Checked
    before anything tokenizes it: a 10 MB message would hold the model slot for seconds."""
    if limit and len(message) > limit:
        return f"The message has {len(message):,} characters; this server takes at most {limit:,}. Shorten it and send again."
    return None


# ----------------------------------------------------------------------------------------------
# The conversation


@dataclass
class Chat:
    """One visitor's conversation: its turns, the last answer's events and the run streaming it.
    Held by the visitor's Session (rest_core/ui/session.py), which releases it."""

    messages: list[dict] = field(default_factory=list)  # chat history for the template
    turns: list[Turn] = field(default_factory=list)
    view: AnswerView | None = None  # the last answer's events and spans
    prompt_ids: list[int] | None = None  # the last answer's prompt (for Compare)
    store: tuple[str, ...] = ()  # the datastores of the last answer
    c_max: int | None = None  # the last answer's c where its auto budget chose each step's count
    answers: int = 0  # answers started so far: the number of the last (a view knows what it shows)
    active: bool = False
    run: Run | None = None

    def release(self) -> None:
        """Forget the conversation; a run still going is cancelled and given a moment to end
        (it saves its cache last)."""
        run, self.run = self.run, None
        if run is not None:
            run.cancel()
            run.done.wait(timeout=5)
        self.messages = []
        self.turns = []
        self.view = None
        self.prompt_ids = None
        self.store = ()
        self.c_max = None
        self.active = False

    def chat_html(self) -> str:
        return conversation_html(self.turns, PLACEHOLDER)

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

    def shown_step(self) -> int:
        """The step an ended answer's tree shows first (1-based): the last one that drafted, so
        the figure shows a draft (an auto budget's last steps often draft nothing); the last step
        where none did."""
        events = self.view.events if self.view is not None else []
        drafted = [i for i, ev in enumerate(events) if ev.draft is not None and len(ev.draft)]
        return (drafted[-1] if drafted else len(events) - 1) + 1

    def step_view(self, tokenizer: Any, step: int | None = None) -> tuple[Any, str]:
        """The trie figure and inspector of `step` (1-based; None: `shown_step`)."""
        view = self.view
        if view is None or not view.events:
            return trie_figure(None, tokenizer), inspector_html(None, tokenizer)
        step = self.shown_step() if step is None else step
        k = max(0, min(int(step) - 1, len(view.events) - 1))
        ev = view.events[k]
        return trie_figure(ev, tokenizer, c_max=self.c_max), inspector_html(
            ev, tokenizer, n_steps=len(view.events), c_max=self.c_max
        )

    def slider_steps(self, running: bool) -> int:
        """The replay slider shows once an answer of two or more steps is complete."""
        n = len(self.view.events) if self.view is not None else 0
        return 0 if running or n < 2 else n

    # -------------------------------------------------------------------------------- actions

    def respond(
        self,
        runtime: Runtime,
        message: str,
        store: str | Sequence[str] | None,
        knobs: dict[str, Any],
        private: Mapping[str, Path],
        owner: str,
    ) -> Iterator[Update]:
        """Send: stream the answer step by step into the chat, the stats, the trie and the inspector.
        `knobs`: knob name -> value (rest_core.knobs), `store`: the datastores chosen, `private`:
        the visitor's own (name -> folder), `owner`: the visitor's key (whose KV cache it is)."""
        self.finish_turn("stopped")
        message = clean_text(message)
        refused = message_too_long(message, runtime.settings.max_message_chars)
        if refused:  # the box is emptied and the chat never holds it
            yield Update(status=status_html(esc(refused), "warn"), box="")
            return
        message = message.strip()
        if not message:
            yield Update(status=status_html("Type a message first.", "warn"))
            return
        try:
            config, store = request_config(store, knobs, runtime.preset)
        except ConfigError as exc:
            yield Update(status=status_html(f"Settings: {esc(str(exc))}", "err"))
            return

        self.turns.append(Turn(user=message))
        self.messages.append({"role": "user", "content": message})
        self.view = None
        self.active = True
        if not runtime.ready:
            yield Update(chat=self.chat_html(), status=status_html("Loading the model (first request only)…"), box="")
        try:
            stores = runtime.resolve(store, private, owner)
            engine = runtime.engine(stores)
            tokenizer = runtime.loaded().tokenizer
            prompt_ids = list(engine.encode(self.messages, chat=True))
            config, note = fit_context(len(prompt_ids), config, engine.max_positions)
        except Exception as exc:  # noqa: BLE001 - a message in the page, the traceback in the terminal
            error = failure(exc, "request")
            self.turns[-1].note, self.turns[-1].error = error, True
            self.messages.pop()  # the model never answered it: keep it out of the history
            self.active = False
            yield Update(chat=self.chat_html(), status=status_html(esc(error), "err"), box="")
            return
        self.run = self._start(runtime, stores, tokenizer, prompt_ids, config, owner)
        yield from self._stream(self.run, tokenizer, config, note, runtime.settings.max_seconds, runtime.clock)

    def _start(
        self,
        runtime: Runtime,
        stores: StoreSet,
        tokenizer: Any,
        prompt_ids: list[int],
        config: GenerationConfig,
        owner: str,
    ) -> Run:
        """Open the answer's view, claim the engine's KV cache for `owner` and start the model job."""
        self.view = AnswerView(tokenizer)
        self.answers += 1
        self.prompt_ids = prompt_ids
        self.store = stores.names
        self.c_max = config.draft.c if config.draft.budget == "auto" else None
        runtime.claim_cache(stores, owner)
        job = ModelJob(
            stores=stores,
            prompt_ids=tuple(prompt_ids),
            config=config,
            max_seconds=runtime.settings.max_seconds,
            inspect=True,
        )
        return Run(runtime.calls.answer, job)

    def _stream(
        self,
        run: Run,
        tokenizer: Any,
        config: GenerationConfig,
        note: str,
        max_seconds: float = 0.0,
        clock: FastestSteps | None = None,
    ) -> Iterator[Update]:
        view = self.view
        assert view is not None
        status = base = status_html(esc(note), "warn") if note else ""
        yield Update(chat=self.chat_html(), stats=stats_html([]), steps=self.slider_steps(True), status=status, box="")
        last_refresh = 0.0
        shown_status = status
        try:
            while True:
                events, ended = run.drain(timeout=REFRESH_S)
                if not self.active:  # Stop closed the turn: send its final view, never a live one after it
                    break
                error = next((e for e in events if isinstance(e, Exception)), None)
                for ev in events:
                    if isinstance(ev, Notice):  # the engine's word while it waits (vLLM starting)
                        status = status_html(esc(ev.text), ev.kind) if ev.text else base
                    elif not isinstance(ev, Exception):
                        view.add(ev)
                if error is not None:
                    self.finish_turn(f"generation failed: {error}")
                    self.turns[-1].error = True
                    yield self._ended(tokenizer, status_html(esc(f"generation failed: {error}"), "err"))
                    return
                if ended:
                    break
                now = time.perf_counter()
                if status != shown_status and not view.events:  # the engine's word while it waits (vLLM starting)
                    shown_status = status
                    yield Update(status=status)
                if not events or not view.events or now - last_refresh < REFRESH_S:
                    continue
                shown_status = status
                self.turns[-1].answer_html = view.html()
                running, fig, ins = live_panels(view.events, tokenizer, self.c_max)
                last_refresh = now
                yield Update(chat=self.chat_html(), stats=running, trie=fig, inspector=ins, status=status)
            reason, status = _ending(view.events, config, run.timed_out, max_seconds, clock, status)
            self.finish_turn(" · ".join(x for x in (reason, note) if x))
            yield self._ended(tokenizer, status)
        finally:
            run.cancel()  # also when the page cancelled this handler (Stop)

    def _ended(self, tokenizer: Any, status: str) -> Update:
        """The page once the answer ended: the whole chat, the stats, the trie and inspector of
        the last step that drafted, the replay slider at that step and the status line."""
        view = self.view
        assert view is not None
        shown = self.shown_step()
        fig, ins = self.step_view(tokenizer, shown)
        stats = stats_html(view.events)
        return Update(
            chat=self.chat_html(),
            stats=stats,
            trie=fig,
            inspector=ins,
            steps=self.slider_steps(False),
            shown=shown,
            status=status,
        )

    def stop(self, runtime: Runtime) -> Update:
        """Stop: keep the answer so far (the page cancels the streaming handler itself)."""
        if self.active:
            n = self.view.totals.new_tokens if self.view is not None and self.view.totals else 0
            self.finish_turn(f"stopped after {n} tokens")
        stats = stats_html(self.view.events) if self.view is not None else stats_html([])
        fig = ins = None
        steps = self.slider_steps(False)
        shown = self.shown_step() if steps else None
        if self.view is not None and self.view.events and runtime.ready:
            fig, ins = self.step_view(runtime.loaded().tokenizer, shown)
        return Update(chat=self.chat_html(), stats=stats, trie=fig, inspector=ins, steps=steps, shown=shown, status="")

    def replay(self, runtime: Runtime, step: int) -> Update:
        """Step slider (after generation): that step's tree and inspector."""
        if self.view is None or not self.view.events or self.active:
            return Update()
        fig, ins = self.step_view(runtime.loaded().tokenizer, step)
        return Update(trie=fig, inspector=ins)


def blank_view(runtime: Runtime) -> Update:
    """A new conversation's page: empty chat, stats, trie and inspector, slider hidden."""
    tok = runtime.loaded().tokenizer if runtime.ready else None
    return Update(
        chat=Chat().chat_html(),
        stats=stats_html([]),
        trie=empty_figure(),
        inspector=inspector_html(None, tok),
        steps=0,
        status="",
        box="",
    )


def live_panels(events: Sequence[StepEvent], tokenizer: Any, c_max: int | None = None) -> tuple[str, Any, str]:
    """A streaming answer's (stats, trie figure, inspector), all of the same step, refreshed
    together with the answer's text (every REFRESH_S), so "9 steps" never stands beside a
    tree or an inspector of step 8, nor the text a step ahead of them."""
    stats = stats_html(events, running=True)
    if not events:
        return stats, None, inspector_html(None, tokenizer)
    last = events[-1]
    return (
        stats,
        trie_figure(last, tokenizer, c_max=c_max),
        inspector_html(last, tokenizer, c_max=c_max),  # no "of N": while it streams, N is not the end
    )
