"""One user's chat with REST: the conversation, the answer streaming from a worker thread, and
the REST-vs-plain comparison. No Gradio here: every action yields `Update`s (what to show where,
None = leave as is) that app.py maps onto its components.

The engine runs in a worker thread (`Run`, rest_core/ui/run.py), so decoding never waits for the
page to render; the streaming loop drains its events and refreshes the text and the trie figure
at a bounded rate.
"""

from __future__ import annotations

import logging
import time
import traceback
import uuid
from collections.abc import Generator, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from rest_core.bench.prompt_lookup import LookupRun
from rest_core.config import ConfigError, GenerationConfig
from rest_core.knobs import make_config
from rest_core.ui.answer_view import AnswerView, Turn, conversation_html
from rest_core.ui.busy import FastestSteps, time_limit_message
from rest_core.ui.compare_view import (
    compare,
    comparison_html,
    event_blocks,
    lookup_blocks,
    speed_figure,
    speedup_explained,
    timeline_figure,
)
from rest_core.ui.inspector import inspector_html
from rest_core.ui.model_calls import ModelJob, Notice
from rest_core.ui.run import Run
from rest_core.ui.runtime import Runtime, selected_names, trim_memory
from rest_core.ui.stats import stats_html
from rest_core.ui.style import clean_text, esc
from rest_core.ui.trie_view import empty_figure, trie_figure
from rest_core.ui.upload_jobs import UploadJob, UploadRefused, store_name

FIGURE_EVERY_S = 0.3  # live trie figure refresh (each costs ~10 ms to build + send)
TEXT_EVERY_S = 0.08  # live text refresh
PLACEHOLDER = (
    "Ask something, or pick an example below. Tokens that REST drafted and the model accepted light up as they stream."
)
log = logging.getLogger("rest.app")


def status_html(message: str, kind: str = "info") -> str:
    """The banner above the page (kind: info, warn, err); `message` is HTML."""
    return f'<div class="status {kind}">{message}</div>' if message else ""


# ----------------------------------------------------------------------------------------------
# Knobs -> GenerationConfig


def request_config(
    stores: str | Sequence[str] | None, knobs: dict[str, Any], base: GenerationConfig
) -> tuple[GenerationConfig, tuple[str, ...]]:
    """The page's settings (knob name -> value, checked against the knobs' ranges) on `base`, and
    the datastores to draft from: each chosen store a source of its own, at an equal share of the
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
    timeline: Any = None  # plotly Figure: one lane per method, one block per forward


def _failure(exc: Exception, what: str) -> str:
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
# The session


@dataclass
class Session:
    """One browser tab's conversation (the app keeps it in gr.State)."""

    messages: list[dict] = field(default_factory=list)  # chat history for the template
    turns: list[Turn] = field(default_factory=list)
    view: AnswerView | None = None  # the last answer's events and spans
    prompt_ids: list[int] | None = None  # the last answer's prompt (for Compare)
    store: tuple[str, ...] = ()  # the datastores of the last answer
    active: bool = False
    run: Run | None = None
    # Whose conversation an engine's saved KV cache holds (Runtime.forget); unique per session.
    key: str = field(default_factory=lambda: uuid.uuid4().hex)
    jobs: list[float] = field(default_factory=list)  # admission times of the generations queued or running
    # This session's own datastores (name -> folder), built from its uploads; no other session sees them.
    uploads: dict[str, Path] = field(default_factory=dict)
    build: UploadJob | None = None  # the upload build in progress (or just ended)
    published: int = 0  # stores this session published (--publish-uploads): they count to its limit
    last_used: float = field(default_factory=time.monotonic)  # when a request last used it (touch)
    raw: set[str] = field(default_factory=set)  # its raw uploads not built yet (runtime.uploads.raw)

    def admit(self, max_jobs: int, horizon_s: float) -> bool:
        """Admit one more generation unless `max_jobs` (0: no limit) are queued or running
        already. A job the queue dropped unrun (cancelled while waiting) never reports back:
        admissions older than `horizon_s` (the longest a job can wait and run) no longer count."""
        now = self.last_used = time.monotonic()
        self.jobs = [t for t in self.jobs if now - t < horizon_s]
        if max_jobs and len(self.jobs) >= max_jobs:
            return False
        self.jobs.append(now)
        return True

    def job_done(self) -> None:
        self.touch()
        if self.jobs:
            self.jobs.pop(0)

    def touch(self) -> None:
        """A request used this session (its idle time starts again)."""
        self.last_used = time.monotonic()

    def idle_s(self, horizon_s: float, now: float | None = None) -> float:
        """Seconds since a request last used this session; 0 while it has work under way (an
        answer streaming, a build, a job admitted less than `horizon_s` ago)."""
        now = time.monotonic() if now is None else now
        building = self.build is not None and not self.build.done.is_set()
        waiting = bool(self.jobs) and now - self.jobs[-1] < horizon_s
        return 0.0 if self.active or building or waiting else now - self.last_used

    def release(self, runtime: Runtime | None = None) -> None:
        """Forget everything (Clear, or the state expired): the run, the conversation, the
        events, the prompt; and the engines' saved KV cache if it holds this conversation.
        A run still going is cancelled and given a moment to end (it saves its cache last)."""
        run, self.run = self.run, None
        if run is not None:
            run.cancel()
            run.done.wait(timeout=5)
        self.messages = []
        self.turns = []
        self.view = None
        self.prompt_ids = None
        self.store = ()
        self.active = False
        self.jobs = []
        build, self.build = self.build, None
        if build is not None:  # the user left: their build stops (and removes what it wrote)
            build.stop()
        self.uploads = {}
        raw, self.raw = self.raw, set()
        if runtime is not None:
            runtime.uploads.raw.remove(raw)
            runtime.forget(self.key)
            runtime.drop_owner(self.key)  # engines over this session's stores, and their folder
            trim_memory()

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

    def step_view(self, tokenizer: Any, step: int | None = None) -> tuple[Any, str]:
        """The trie figure and inspector of `step` (1-based; None: the last step)."""
        view = self.view
        if view is None or not view.events:
            return trie_figure(None, tokenizer), inspector_html(None, tokenizer)
        k = len(view.events) - 1 if step is None else max(0, min(int(step) - 1, len(view.events) - 1))
        ev = view.events[k]
        return trie_figure(ev, tokenizer), inspector_html(ev, tokenizer, n_steps=len(view.events))

    def slider_steps(self, running: bool) -> int:
        """The replay slider shows once an answer of two or more steps is complete."""
        n = len(self.view.events) if self.view is not None else 0
        return 0 if running or n < 2 else n

    # -------------------------------------------------------------------------------- actions

    def respond(
        self, runtime: Runtime, message: str, store: str | Sequence[str] | None, knobs: dict[str, Any]
    ) -> Iterator[Update]:
        """Send: stream the answer step by step into the chat, the stats, the trie and the inspector.
        `knobs`: knob name -> value (rest_core.knobs), `store`: the datastore chosen."""
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
            stores = runtime.resolve(store, self.uploads, self.key)
            engine = runtime.engine(stores)
            tokenizer = runtime.loaded().tokenizer
            prompt_ids = list(engine.encode(self.messages, chat=True))
            config, note = fit_context(len(prompt_ids), config, engine.max_positions)
        except Exception as exc:  # noqa: BLE001 - a message in the page, the traceback in the terminal
            error = _failure(exc, "request")
            self.turns[-1].note, self.turns[-1].error = error, True
            self.messages.pop()  # the model never answered it: keep it out of the history
            self.active = False
            yield Update(chat=self.chat_html(), status=status_html(esc(error), "err"), box="")
            return
        self.view = AnswerView(tokenizer)
        self.prompt_ids = prompt_ids
        self.store = stores.names
        runtime.claim_cache(stores, self.key)
        job = ModelJob(runtime.key, stores, tuple(prompt_ids), config, runtime.settings.max_seconds)
        self.run = Run(lambda: runtime.calls.answer(job))
        yield from self._stream(self.run, tokenizer, config, note, runtime.settings.max_seconds, runtime.clock)

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
        last_text = last_fig = 0.0
        try:
            while True:
                events, ended = run.drain(timeout=TEXT_EVERY_S)
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
                    fig, ins = self.step_view(tokenizer)
                    yield Update(
                        self.chat_html(),
                        stats_html(view.events),
                        fig,
                        ins,
                        self.slider_steps(False),
                        status_html(esc(f"generation failed: {error}"), "err"),
                    )
                    return
                if ended:
                    break
                now = time.perf_counter()
                if not events or now - last_text < TEXT_EVERY_S:
                    continue
                self.turns[-1].answer_html = view.html()
                fig = ins = None
                if now - last_fig >= FIGURE_EVERY_S and view.events:
                    fig = trie_figure(view.events[-1], tokenizer)
                    ins = inspector_html(view.events[-1], tokenizer, n_steps=len(view.events))
                    last_fig = now
                last_text = now
                yield Update(self.chat_html(), stats_html(view.events, running=True), fig, ins, status=status)
            reason, status = _ending(view.events, config, run.timed_out, max_seconds, clock, status)
            self.finish_turn(" · ".join(x for x in (reason, note) if x))
            fig, ins = self.step_view(tokenizer)
            yield Update(self.chat_html(), stats_html(view.events), fig, ins, self.slider_steps(False), status)
        finally:
            run.cancel()  # also when the page cancelled this handler (Stop)

    def stop(self, runtime: Runtime) -> Update:
        """Stop: keep the answer so far (the page cancels the streaming handler itself)."""
        if self.active:
            n = self.view.totals.new_tokens if self.view is not None and self.view.totals else 0
            self.finish_turn(f"stopped after {n} tokens")
        stats = stats_html(self.view.events) if self.view is not None else stats_html([])
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

    def compare(
        self, runtime: Runtime, message: str, store: str | Sequence[str] | None, knobs: dict[str, Any]
    ) -> Iterator[Update]:
        """Compare: REST and plain decoding on the same prompt and settings, back to back, nothing
        rendered in between; yields status lines, then the comparison and the speed figure."""
        message = clean_text(message)
        try:
            config, store = request_config(store, knobs, runtime.preset)
        except ConfigError as exc:
            yield Update(status=status_html(f"Settings: {esc(str(exc))}", "err"))
            return
        refused = self._compare_refused(runtime, message)
        if refused is not None:
            yield refused
            return
        try:
            if not runtime.ready:
                yield Update(status=status_html("Loading the model (first request only)…"))
            stores = runtime.resolve(store, self.uploads, self.key)
            engine = runtime.engine(stores)
            prompt = self._compare_prompt(engine, message)
            if prompt is None:
                yield Update(status=status_html("Send a message first, or type one to compare on.", "warn"))
                return
            prompt_ids, what = prompt
            config, note = fit_context(len(prompt_ids), config, engine.max_positions)
            # The three runs together keep to the request's time limit: a third each.
            limit = runtime.settings.max_seconds / 3
            runtime.claim_cache(stores, self.key)
            job = ModelJob(runtime.key, stores, tuple(prompt_ids), config, limit)
            results, lookup, cut = yield from _compared_runs(runtime, job, what)
            table, speed, timeline = _comparison_views(runtime, results, lookup, config, cut)
            done = _compared_note(what, config, note, cut, limit, runtime.settings.max_seconds)
            del results  # only the figures and the table stay
            yield Update(status=status_html(esc(done)), comparison=table, speed=speed, timeline=timeline)
        except Exception as exc:  # noqa: BLE001 - a message in the page, the traceback in the terminal
            yield Update(status=status_html(esc(_failure(exc, "compare")), "err"))

    def _compare_refused(self, runtime: Runtime, message: str) -> Update | None:
        """Why Compare cannot start now (an answer is streaming, the message is too long), or None."""
        if self.active:
            return Update(status=status_html("Wait for the answer to finish (or Stop it) before comparing.", "warn"))
        refused = message_too_long(message, runtime.settings.max_message_chars)
        if refused:
            return Update(status=status_html(esc(refused), "warn"), box="")
        return None

    def _compare_prompt(self, engine: Any, message: str) -> tuple[list[int], str] | None:
        """The prompt to compare on and how the status line names it: the message in the box, else
        the last answer's prompt; None when there is neither."""
        typed = message.strip()
        if self.prompt_ids is not None and not typed:
            return self.prompt_ids, "the last prompt"
        if typed:
            return list(engine.encode([{"role": "user", "content": typed}], chat=True)), "the message in the box"
        return None

    # -------------------------------------------------------------------------------- uploads

    def store_choices(self, runtime: Runtime) -> list[str]:
        """The datastores this session may choose: everyone's, then its own."""
        public = runtime.store_names()
        return public + [n for n in self.uploads if n not in public]

    def start_upload(
        self, runtime: Runtime, paths: Sequence[str], names: Sequence[str], pasted: str, name: str = ""
    ) -> UploadJob:
        """Start building a datastore from uploaded files and pasted text in the background (with
        the model's tokenizer), or refuse with UploadRefused (one line for the page)."""
        if self.build is not None and not self.build.done.is_set():
            raise UploadRefused("a corpus of yours is being built already: wait for it to finish")
        if not paths and not (pasted or "").strip():
            raise UploadRefused("nothing to build from: upload files or paste some text")
        limit = runtime.settings.max_stores_per_session
        if limit and len(self.uploads) + self.published >= limit:
            raise UploadRefused(
                f"you have {limit} corpora already, the most one session may build: press Clear to remove them"
            )
        final = store_name(name, self.store_choices(runtime) + list(runtime.published()))
        tokenizer = runtime.build_tokenizer()
        self.build = runtime.uploads.start(self.key, final, paths, names, pasted, tokenizer, busy=runtime.lock.locked)
        self.raw -= set(paths)  # the build deletes them once read
        return self.build

    def finish_upload(self, runtime: Runtime) -> str:
        """A finished build joins this session's stores (or everyone's, when published);
        returns its one-line summary. Raises UploadRefused with the build's error."""
        job = self.build
        if job is None or not job.done.is_set():
            raise UploadRefused("no corpus build has finished")
        self.build = None
        if job.error is not None or job.summary is None:
            raise UploadRefused(job.error or "the build failed")
        if job.public:
            (job.folder / "name.txt").write_text(job.name, encoding="utf-8")
            self.published += 1
        else:
            self.uploads[job.name] = job.folder
        return job.summary.line()


def lookup_html(lookup: LookupRun | None, ar_events: list, greedy: bool) -> str:
    """One line on the prompt lookup run beside the REST-vs-plain table."""
    if lookup is None:
        return '<p class="pld-line">Prompt lookup could not run on this model.</p>'
    plain = ar_events[-1].totals if ar_events else None
    speedup = f", {lookup.tokens_per_s / plain.tokens_per_s:.2f}× plain" if plain and plain.tokens_per_s else ""
    same = ""
    if greedy and ar_events:
        ar_ids = [t for e in ar_events for t in e.tokens]
        n = min(len(ar_ids), len(lookup.token_ids))
        same = (
            " · same text as plain decoding"
            if list(lookup.token_ids[:n]) == ar_ids[:n]
            else " · text differs from plain decoding"
        )
    return (
        f'<p class="pld-line">Prompt lookup (transformers, k = {lookup.k} draft tokens copied from earlier in the conversation): '
        f"{lookup.tokens_per_s:.1f} tokens/s{speedup}, M = {lookup.mean_generated_length:.2f} tokens per forward{same}.</p>"
    )


def _compared_runs(
    runtime: Runtime, job: ModelJob, what: str
) -> Generator[Update, None, tuple[dict[str, list], LookupRun | None, list[str]]]:
    """REST, plain decoding and prompt lookup in one model call (each for at most
    job.max_seconds), a status line as each ends; returns (each method's events, the prompt
    lookup run or None, the labels of the runs the limit cut short)."""
    results: dict[str, list] = {}
    lookup, cut = None, []
    labels = {"rest": "REST", "ar": "plain decoding"}
    for lane in runtime.calls.compare(job):
        if lane.method == "lookup":
            lookup = lane.lookup
            if lookup is not None and lookup.timed_out:
                cut.append("prompt lookup")
            continue
        results[lane.method] = list(lane.events)
        if lane.cut:
            cut.append(labels[lane.method])
        n = lane.events[-1].totals.new_tokens if lane.events else 0
        yield Update(status=status_html(f"Comparing on {what}: {labels[lane.method]} done ({n} tokens)…"))
    return results, lookup, cut


def _comparison_views(
    runtime: Runtime, results: dict[str, list], lookup: LookupRun | None, config: GenerationConfig, cut: list[str]
) -> tuple[str, Any, Any]:
    """Compare's table (with the prompt lookup line and why the speedup is not M), speed figure
    and timeline. When a run was cut short, "same output" compares the text both wrote."""
    cmp = compare(results["rest"], results["ar"], greedy=config.sampling.greedy)
    if cut and cmp.identical is not None:  # a run cut short: compare the text both wrote
        rest_ids, ar_ids = ([t for e in results[m] for t in e.tokens] for m in ("rest", "ar"))
        n = min(len(rest_ids), len(ar_ids))
        cmp = replace(cmp, identical=rest_ids[:n] == ar_ids[:n])
    speed = speed_figure(results["rest"], results["ar"])
    lanes = [("plain", event_blocks(results["ar"]))]
    if lookup is not None:
        lanes.append((f"prompt lookup k={lookup.k}", lookup_blocks(lookup.token_ids, lookup.counts, lookup.ends_ms)))
    lanes.append(("REST", event_blocks(results["rest"])))
    timeline = timeline_figure(lanes, runtime.loaded().tokenizer)
    why = speedup_explained(results["rest"], results["ar"])
    table = comparison_html(cmp) + lookup_html(lookup, results["ar"], config.sampling.greedy)
    table += f'<p class="why-m">{esc(why)}</p>' if why else ""
    return table, speed, timeline


def _compared_note(
    what: str, config: GenerationConfig, note: str, cut: list[str], limit: float, max_seconds: float
) -> str:
    """The status line once Compare is done: what it compared on, and which runs the limit cut."""
    done = f"Compared on {what} with the current settings ({config.max_new_tokens} new tokens max)." + (
        f" {note}." if note else ""
    )
    if cut:
        done += f" {' and '.join(cut)} {time_limit_note(limit)}: each method may use a third of the {max_seconds:g} s limit."
    return done


def blank_view(runtime: Runtime) -> Update:
    """A new conversation's page: empty chat, stats, trie and inspector, slider hidden."""
    tok = runtime.loaded().tokenizer if runtime.ready else None
    return Update(
        Session().chat_html(), stats_html([]), empty_figure(), inspector_html(None, tok), steps=0, status="", box=""
    )
