"""The "Chat" view of the page (Gradio): the answer column (chat, message row, stats, the step's
trie and inspector, Compare), the side panel (datastores, "Your corpus", one widget per knob),
their handlers and their wiring, and the page's load and close. Every handler returns
{component: new value} for what it changes; what it decides without Gradio is rest_core/ui/'s
(chat.py, compare.py, corpus.py, lifecycle.py). app.py lays out the page around it."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import gradio as gr

import teach_tab
from rest_core.knobs import APP_KNOBS, Knob
from rest_core.sources import MAX_STORES
from rest_core.ui import answer_view, lifecycle, tree_key, trie_view, words
from rest_core.ui.chat import Chat, Update, blank_view
from rest_core.ui.compare import compare
from rest_core.ui.corpus import build_corpus, file_paths
from rest_core.ui.inspector import inspector_html
from rest_core.ui.lifecycle import as_session
from rest_core.ui.runtime import Runtime, StoreBuilds, choose_stores, selected_names
from rest_core.ui.session import Session
from rest_core.ui.settings import Settings
from rest_core.ui.stats import stats_html
from rest_core.ui.store_pick import StorePick, pick_for
from rest_core.ui.style import status_html
from rest_core.ui.vllm_calls import VllmCalls

# ----------------------------------------------------------------------------------------------
# The components the handlers update, by panel


@dataclass(frozen=True, kw_only=True)
class AnswerPanel:
    """The chat column: the chat, the message row, the stats, the step's trie and inspector, the comparison."""

    chat: gr.HTML
    box: gr.Textbox
    send: gr.Button
    stop: gr.Button
    clear: gr.Button
    status: gr.HTML  # Send's status line, under the message row: where the visitor is looking
    stats: gr.HTML
    trie: gr.Plot
    step: gr.Slider  # replay any step of the last answer
    inspector: gr.HTML
    compare: gr.Button
    compare_status: gr.HTML  # Compare's progress and outcome, under its button
    compare_out: gr.HTML
    timeline: gr.Plot
    speed: gr.Plot


@dataclass(frozen=True, kw_only=True)
class CorpusPanel:
    """Your corpus: files and pasted text -> a datastore of this page's."""

    files: gr.File
    pasted: gr.Textbox
    name: gr.Textbox
    build: gr.Button
    status: gr.HTML


@dataclass(frozen=True, kw_only=True)
class ChatPage:
    """The chat page: the visitor's state (a Session: chat, Compare, uploads, step-through), the banners, the datastore choice, the knobs (name ->
    widget, in rest_core.knobs order) and the panels."""

    session: gr.State
    legend: gr.HTML
    banner: gr.HTML  # the page's own news (the start-up datastore builds); a control's status sits beside it
    timer: gr.Timer  # polls the start-up datastore builds while they run
    store: gr.Dropdown
    knobs: dict[str, gr.components.Component]
    answer: AnswerPanel
    corpus: CorpusPanel


# ----------------------------------------------------------------------------------------------
# Layout


def knob_component(knob: Knob, value: Any) -> gr.components.Component:
    """The widget of a knob (rest_core.knobs): its label, range and the device preset's value."""
    common: dict[str, Any] = dict(
        label=knob.label, elem_id=knob.elem_id, info=knob.help or None
    )  # every knob says what it does
    if knob.widget == "checkbox":
        return gr.Checkbox(value, **common)
    if knob.widget == "radio":
        return gr.Radio(list(knob.choices), value=value, **common)
    if knob.widget == "number":
        precision = 0 if knob.kind is int else None
        return gr.Number(
            value,
            minimum=knob.minimum,
            maximum=knob.maximum,
            step=knob.step,
            precision=precision,
            min_width=100,
            **common,
        )
    return gr.Slider(knob.minimum, knob.maximum, value=value, step=knob.step, **common)


# The knobs in sight under the datastores; the others (the lookup's n_max, n_min, m and K, the
# sources' weights, top-p and top-k) fold under "More settings", their elem_ids unchanged.
OPEN_KNOBS = ("use_datastore", "use_context", "c", "budget", "temperature", "max_new_tokens")


def _settings_column(runtime: Runtime) -> tuple[gr.Dropdown, CorpusPanel, dict[str, gr.components.Component]]:
    """The side panel: the datastores (the stores built by now; the page's load event, the timer
    and this page's uploads add later ones), the "Your corpus" panel and one widget per knob:
    OPEN_KNOBS in sight, the rest under "More settings" (the dict in the knobs' order)."""
    choices, value = choose_stores(runtime.store_names(), None, default_first=True)
    store = gr.Dropdown(
        choices,
        value=value,
        multiselect=True,
        label="Datastores",
        info="each drafts in its own colour; none: the conversation alone",
        elem_id="store",
    )
    corpus = _corpus_panel(runtime.settings)
    preset = runtime.preset
    made = {k.name: knob_component(k, k.default(preset)) for k in APP_KNOBS if k.name in OPEN_KNOBS}
    with gr.Accordion("More settings", open=False, elem_id="more-settings"):
        made |= {k.name: knob_component(k, k.default(preset)) for k in APP_KNOBS if k.name not in OPEN_KNOBS}
    return store, corpus, {k.name: made[k.name] for k in APP_KNOBS}


def _corpus_panel(settings: Settings) -> CorpusPanel:
    """Your corpus: files (or a zip of a folder) and pasted text -> a datastore of this page's."""
    private = (
        "everyone on this server sees it"
        if settings.publish_uploads
        else "only this page sees it; Clear or closing the page deletes it"
    )
    with gr.Accordion("Your corpus", open=False, elem_id="corpus"):
        gr.Markdown(
            f"Draft from your own text: .txt, .md, source files, .jsonl, ShareGPT .json or a .zip of a folder "
            f"(up to {settings.max_upload_mb:g} MB), or paste it. Built with the model's tokenizer; {private}.",
            elem_id="corpus-help",
        )
        files = gr.File(file_count="multiple", type="filepath", label="Upload files", elem_id="corpus-files")
        pasted = gr.Textbox(
            lines=3,
            max_lines=8,
            label="Or paste text",
            elem_id="corpus-text",
            max_length=int(settings.max_upload_mb * 1e6) or None,
        )
        name = gr.Textbox(label="Name", placeholder="my-corpus", max_length=40, elem_id="corpus-name")
        build = gr.Button("Build", elem_id="corpus-build")
        status = gr.HTML("", elem_id="corpus-status")
    return CorpusPanel(files=files, pasted=pasted, name=name, build=build, status=status)


def _answer_column(max_chars: int, legend: gr.HTML | None = None) -> AnswerPanel:
    """The colour key (`legend`, made by app.py), the chat, the message row, the stats, the step's
    trie and inspector and the comparison."""
    if legend is not None:
        legend.render()
    chat = gr.HTML(Chat().chat_html(), elem_id="chat")
    with gr.Row(elem_id="send-row"):
        box = gr.Textbox(
            placeholder="Message…",
            show_label=False,
            lines=1,
            max_lines=6,
            scale=5,
            min_width=160,
            elem_id="prompt",
            max_length=max_chars or None,
        )
        send = gr.Button("Send", variant="primary", scale=0, min_width=72, elem_id="send")
        stop = gr.Button("Stop", variant="stop", scale=0, min_width=64, elem_id="stop")
        clear = gr.Button("Clear", scale=0, min_width=64, elem_id="clear")
    status = gr.HTML("", elem_id="chat-status")
    gr.Examples(words.EXAMPLES, inputs=[box], label="Examples: code and chat")
    stats = gr.HTML(stats_html([]), elem_id="stats")
    with gr.Row(equal_height=False):
        with gr.Column(scale=3, min_width=300):
            trie = gr.Plot(trie_view.empty_figure(), label="Draft tree of the step", elem_id="trie")
            gr.HTML(tree_key.tree_legend_html(), elem_id="tree-legend")
            step = gr.Slider(
                1,
                2,
                value=1,
                step=1,
                label="Step: replay any step (or click a token)",
                visible=False,
                elem_id="step-slider",
            )
        with gr.Column(scale=2, min_width=260):
            inspector = gr.HTML(inspector_html(None, None), elem_id="inspector", label="Step inspector")
    compare, compare_status, compare_out, timeline, speed = _compare_box()
    return AnswerPanel(
        chat=chat,
        box=box,
        send=send,
        stop=stop,
        clear=clear,
        status=status,
        stats=stats,
        trie=trie,
        step=step,
        inspector=inspector,
        compare=compare,
        compare_status=compare_status,
        compare_out=compare_out,
        timeline=timeline,
        speed=speed,
    )


def _compare_box() -> tuple[gr.Button, gr.HTML, gr.HTML, gr.Plot, gr.Plot]:
    """Compare: its button, its status line under it, the table, the timeline and the speed figure."""
    with gr.Accordion("Speed: REST vs plain decoding", open=True, elem_id="compare-box"):
        gr.Markdown(
            "Runs REST, plain decoding and transformers' prompt lookup on the last prompt (or the message in the box) "
            "with the current settings, back to back, and compares decode speed (prefill excluded)."
        )
        compare = gr.Button("Compare with plain decoding", elem_id="compare")
        compare_status = gr.HTML("", elem_id="compare-status")
        compare_out = gr.HTML("", elem_id="compare-out")
        timeline = gr.Plot(label="One block per forward pass, on one clock", elem_id="timeline", visible=False)
        speed = gr.Plot(label="Tokens over time", elem_id="speed", visible=False)
    return compare, compare_status, compare_out, timeline, speed


def build(
    settings: Settings, runtime: Runtime, legend: gr.HTML | None = None
) -> tuple[AnswerPanel, gr.Dropdown, CorpusPanel, dict[str, Any]]:
    """The Chat view, inside the page's tabs: the answer column (the colour key `legend` over the
    chat), then the side panel (on a phone it comes after the message box, assets/app.css, and
    starts folded, app.js)."""
    with (
        gr.Tab("Chat", id=teach_tab.CHAT_VIEW, elem_id="view-chat"),
        gr.Row(equal_height=False, elem_id="main-row"),
    ):
        with gr.Column(scale=3, min_width=320, elem_id="answer-col"):
            answer = _answer_column(settings.max_message_chars, legend)
        with (
            gr.Column(scale=1, min_width=250, elem_id="knobs"),
            gr.Accordion("Settings", open=True, elem_id="settings-acc"),
        ):
            store, corpus, knobs = _settings_column(runtime)
    return answer, store, corpus, knobs


# ----------------------------------------------------------------------------------------------
# Handlers: what rest_core.ui returns -> {component: value} (a component left out stays as it is)


def _given(pairs: Iterable[tuple[Any, Any]]) -> dict:
    """{component: value} for the values given; None leaves a component as it is."""
    return {component: value for component, value in pairs if value is not None}


def _slider(steps: int | None, shown: int | None = None) -> Any:
    """The replay slider: hidden (0), or over steps 1..steps standing at `shown` (None: the last)."""
    if steps is None:
        return None
    if steps == 0:
        return gr.update(visible=False)
    return gr.update(visible=True, interactive=True, minimum=1, maximum=steps, value=shown or steps, step=1)


def _shown(figure: Any) -> Any:
    return None if figure is None else gr.update(value=figure, visible=True)


class Handlers:
    """The chat page's event handlers over what all sessions share (the runtime, the store builds
    and the open pages). Generating handlers take (message, session, store, *knob values in
    rest_core.knobs order)."""

    def __init__(self, runtime: Runtime, builds: StoreBuilds, pages: lifecycle.OpenPages, ui: ChatPage) -> None:
        self.runtime = runtime
        self.builds = builds
        self.pages = pages
        self.ui = ui
        self.demo: gr.Blocks | None = None  # set once the page is built (closed() reads its state)

    def _answer(self, u: Update, session: Session) -> dict:
        a = self.ui.answer
        parts = (
            (a.chat, u.chat),
            (a.stats, u.stats),
            (a.trie, u.trie),
            (a.inspector, u.inspector),
            (a.step, _slider(u.steps, u.shown)),
            (a.status, u.status),
            (a.box, u.box),
        )
        return {**_given(parts), self.ui.session: session}

    def _stores(self, current: Any, session: Session, default_first: bool = False) -> Any:
        """The datastore multi-select: everyone's stores and this visitor's own (never another
        visitor's); the user's choice is kept while its stores exist."""
        choices, value = choose_stores(session.corpora.store_choices(self.runtime), current, default_first)
        return gr.update(choices=choices, value=value)

    def model_inputs(self) -> tuple[list[Any], dict[str, Any]]:
        """Send's and Compare's inputs: (the message, the visitor's state, the stores) and the
        knobs by name (the HTTP API's parameters take their names)."""
        return [self.ui.answer.box, self.ui.session, self.ui.store], dict(self.ui.knobs)

    def admit(self, message: str, session: Session, store: str, request: gr.Request = None, **knobs: Any) -> list[dict]:
        """Validator of the generating events, run when a request is queued (before it waits):
        a session may have `max_jobs` generations queued or running and a client address
        `client_jobs` over all its sessions; one more is refused with a message (on the message
        box) instead of taking a place in the queue every user shares. One verdict per input."""
        why = lifecycle.admit_job(self.runtime, as_session(session), request)
        positional, named = self.model_inputs()
        return teach_tab.verdicts(why, [*positional, *named.values()], shown_on=self.ui.answer.box)

    def respond(self, message: str, session: Session, store: str, **knobs: Any) -> Iterator[dict]:
        """Send: stream the answer into the chat, stats, trie, inspector, step slider, status line
        and box; while the visitor has chosen no datastores, the message's own (store_pick), shown
        in the datastore list and said in the status line."""
        session = as_session(session)
        pick = self._pick(message, session)
        store = pick.stores if pick else store
        try:
            answer = session.chat.respond(self.runtime, message, store, knobs, session.corpora.uploads, session.key)
            with contextlib.closing(answer) as updates:
                for k, u in enumerate(updates):
                    out = self._answer(u, session)
                    if pick and (k == 0 or u.status is not None):  # the pick's word stays above the answer's
                        out[self.ui.answer.status] = pick.note + (u.status or "")
                    if pick and k == 0:
                        out[self.ui.store] = self._stores(pick.stores, session)
                    yield out
        finally:
            lifecycle.job_done(self.runtime, session)

    def _pick(self, message: str, session: Session) -> StorePick | None:
        """The stores this message drafts from when the page picks them (session.stores_auto), else None."""
        if not session.stores_auto or not (message or "").strip():
            return None
        return pick_for(message, self.runtime.store_names())

    def stores_chosen(self, session: Session) -> None:
        """The visitor chose datastores in the list: from now on every message drafts from them."""
        as_session(session).stores_auto = False

    def stop(self, session: Session) -> dict:
        """Stop: the queued generator is cancelled by Gradio; here the answer so far is kept."""
        session = as_session(session)
        lifecycle.drop_jobs(self.runtime, session)  # Stop cancels this session's queued requests too
        return self._answer(session.chat.stop(self.runtime), session)

    def clear(self, session: Session, current: Any = None) -> dict:
        """Clear: forget everything the visitor holds (Session.release): the conversation, its
        events, the comparison, the step-through, the saved KV cache, and its uploaded corpora
        (their build stops, their folder goes)."""
        session = self.pages.release(as_session(session))
        a, hidden = self.ui.answer, gr.update(value=None, visible=False)
        return {
            **self._answer(blank_view(self.runtime), session),
            a.compare_out: "",
            a.compare_status: "",
            a.speed: hidden,
            a.timeline: hidden,
            self.ui.store: self._stores(current, session),
            self.ui.corpus.status: "",
            self.ui.corpus.files: gr.update(value=None),  # its raw files were deleted
        }

    def closed(self, request: gr.Request) -> None:
        """Page closed: Gradio keeps a closed page's state for an hour; its data goes now. Both
        the Session the load event saw and the one Gradio holds are freed: two events at page
        load can each create the page's state, and the last one written is the one kept."""
        page_id = request.session_hash if request is not None else None
        self.pages.closed(page_id, held=self._held_session(page_id))

    def _held_session(self, page_id: str | None) -> Any:
        holder = getattr(self.demo, "state_holder", None) if self.demo is not None else None
        if not page_id or holder is None or page_id not in holder:
            return None
        return holder.session_data[page_id].state_data.get(self.ui.session._id)

    def replay(self, step: float, session: Session) -> Any:
        """Step slider (after generation): that step's tree and inspector."""
        u = as_session(session).chat.replay(self.runtime, int(step))
        return _given(((self.ui.answer.trie, u.trie), (self.ui.answer.inspector, u.inspector))) or gr.skip()

    def compare(self, message: str, session: Session, store: str, **knobs: Any) -> Iterator[Any]:
        """Compare with plain decoding and prompt lookup: the comparison, the speed and timeline figures, its status line."""
        session = as_session(session)
        a = self.ui.answer
        pick = self._pick(message, session)  # the message's stores, or the last answer's
        if session.stores_auto and not pick and session.chat.prompt_ids is not None:
            store = list(session.chat.store)
        store = pick.stores if pick else store
        runs = compare(self.runtime, session.chat, message, store, knobs, session.corpora.uploads, session.key)
        try:
            with contextlib.closing(runs) as updates:
                for u in updates:
                    if u.plain_forward is not None:  # Why this c? shows its own measurement beside it
                        session.plain_forward = u.plain_forward
                    if u.measured is not None:  # Why this c? sets its prediction beside it (same prompt)
                        session.measured = u.measured
                    status = pick.note + u.status if pick and u.status else u.status
                    parts = (
                        (a.compare_out, u.comparison),
                        (a.speed, _shown(u.speed)),
                        (a.compare_status, status),
                        (a.timeline, _shown(u.timeline)),
                    )
                    yield _given(parts) or gr.skip()
        finally:
            lifecycle.job_done(self.runtime, session)

    def refresh_stores(self, current: Any, session: Session, default_first: bool = False) -> dict:
        """Timer (while builds run): datastore choices and the build banner; the choice is kept."""
        return {
            self.ui.store: self._stores(current, as_session(session), default_first),
            self.ui.banner: status_html(self.builds.message()),
            self.ui.timer: gr.update(active=self.builds.active),
        }

    def on_load(self, current: Any, session: Session, request: gr.Request = None) -> dict:
        """Page load: remember which Session the page holds (so closing it frees it); the stores
        built since the app started, the first built store by default."""
        session = as_session(session)
        session.stores_auto = True  # the page picks each message's stores until the visitor chooses
        self.pages.opened(request.session_hash if request is not None else None, session)
        return self.refresh_stores(current, session, default_first=True)

    def legend(self, current: Any) -> str:
        """The colour key of the chosen stores (the first ones, when more are chosen than can
        draft at once: generation says so)."""
        return answer_view.legend_html(selected_names(current)[:MAX_STORES])

    def files_added(self, files: Any, session: Session) -> None:
        """Files put in the file input (uploaded, not built yet): the session's raw uploads,
        deleted on Clear or when it expires unless a build reads them first."""
        session = as_session(session)
        self.pages.uploading(session)  # deleted when the session expires, if nothing reads them
        session.corpora.raw.update(file_paths(files))

    def build_corpus(self, files: Any, pasted: str, name: str, session: Session, current: Any) -> Iterator[dict]:
        """Build: a datastore from the uploaded files and pasted text, in the background; the
        status line follows it, then the new store is selected and the file input emptied."""
        c = self.ui.corpus
        session = as_session(session)
        self.pages.sweep()  # idle sessions' uploads go first: their disk is free for this one
        self.pages.uploading(session)
        for step in build_corpus(self.runtime, session.corpora, session.key, files, pasted, name, current):
            session.touch()  # idle from the build's end, not its start
            if step.selected is not None:
                session.stores_auto = False  # the new store is the visitor's choice
            if step.selected is None:
                yield {c.status: step.status, **({c.files: gr.update(value=None)} if step.used else {})}
            else:
                yield {
                    c.status: step.status,
                    self.ui.store: self._stores(step.selected, session),
                    c.files: gr.update(value=None),
                }


# ----------------------------------------------------------------------------------------------
# Wiring


def wire(h: Handlers, ui: ChatPage) -> None:
    """Send, Stop, Clear, Compare and the step slider onto their handlers."""
    a = ui.answer
    inputs, named = h.model_inputs()
    shown = [a.chat, a.stats, a.trie, a.inspector, a.step, a.status, ui.session]
    # One model: generations queue behind each other, one queued or running per session. A vLLM
    # backend batches them: as many run at once as it batches.
    vllm = isinstance(h.runtime.calls, VllmCalls)
    limit = h.runtime.settings.vllm_max_seqs if vllm else 1
    model = dict(inputs_kwargs=named, concurrency_limit=limit, concurrency_id="model", validator=h.admit)
    send_ev = a.send.click(h.respond, inputs, [*shown, a.box, ui.store], **model)
    # Enter in the box sends as Send does: the page's, not a second API endpoint.
    submit_ev = a.box.submit(h.respond, inputs, [*shown, a.box, ui.store], api_visibility="private", **model)
    # Compare is a long job: its own lane (one at a time), giving the model to Send between its steps.
    long = dict(model, concurrency_limit=1, concurrency_id="long")
    compare_ev = a.compare.click(h.compare, inputs, [a.compare_out, a.speed, a.compare_status, a.timeline], **long)
    generating = [send_ev, submit_ev, compare_ev]
    compared = [a.compare_out, a.compare_status, a.speed, a.timeline]
    a.stop.click(h.stop, [ui.session], shown, cancels=generating, concurrency_limit=None)
    a.clear.click(
        h.clear,
        [ui.session, ui.store],
        [*shown, a.box, *compared, ui.store, ui.corpus.status, ui.corpus.files],
        cancels=generating,
        concurrency_limit=None,
    )
    a.step.change(h.replay, [a.step, ui.session], [a.trie, a.inspector], concurrency_limit=None)


def wire_page(h: Handlers, ui: ChatPage, demo: gr.Blocks) -> None:
    """Page load and close, the start-up builds' timer, the legend and the corpus build."""
    h.demo = demo
    demo.load(h.on_load, [ui.store, ui.session], [ui.store, ui.banner, ui.timer])
    demo.unload(h.closed)
    ui.timer.tick(h.refresh_stores, [ui.store, ui.session], [ui.store, ui.banner, ui.timer])
    ui.store.change(h.legend, [ui.store], [ui.legend], concurrency_limit=None, show_progress="hidden")
    hidden = dict(concurrency_limit=None, show_progress="hidden", api_visibility="private")
    ui.store.input(h.stores_chosen, [ui.session], None, **hidden)  # the visitor's own choice, not the page's
    # Builds run beside generation (their own thread, lower priority): not in the model's queue.
    c = ui.corpus
    c.files.upload(h.files_added, [c.files, ui.session], None, concurrency_limit=None, show_progress="hidden")
    c.build.click(
        h.build_corpus,
        [c.files, c.pasted, c.name, ui.session, ui.store],
        [c.status, ui.store, c.files],
        concurrency_limit=None,
        concurrency_id="corpus",
    )
