"""The teaching part of the page (Gradio): the guided examples (above the views: the way in),
the "Step through" view (one REST step per click, its four phase panels and "Why this c?") and
the "How REST works" view (the diagram, why one forward over many tokens pays, the glossary).
app.py lays out the page and its "Chat" view and wires this, handing it the chat's controls the
teaching views share (`ChatControls`); what its handlers decide without Gradio is
rest_core/ui/step_through.py, why_c.py and guided.py, the captions and figures one module per
view in rest_core/ui/ (phases, trie_view, tree_mask, why_c_view). It never imports app.py."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import gradio as gr

from rest_core.ui import guided, step_through, tree_key, trie_view, words
from rest_core.ui.lifecycle import admit_job, as_session, job_done
from rest_core.ui.runtime import Runtime
from rest_core.ui.session import Session
from rest_core.ui.settings import ROOT
from rest_core.ui.stepper import STEP_C_MAX, Stepper
from rest_core.ui.style import esc, status_html
from rest_core.ui.why_c import check_on_prompt, why_c
from rest_core.ui.why_c import stale as why_c_stale

ASSETS = ROOT / "assets"

# The page's views (gr.Tab ids): the address's #chat, #step-through or #how-rest opens one.
CHAT_VIEW, STEP_VIEW, HOW_VIEW = "chat", "step-through", "how-rest"


@dataclass(frozen=True, kw_only=True)
class ChatControls:
    """What the teaching views share with the Chat view: the visitor's state (a Session, whose
    `steps` is the step-through), the datastore choice, the knobs (name -> widget) and the
    chat's message box (a guided example of Send or Compare fills it)."""

    session: gr.State
    store: gr.Dropdown
    knobs: dict[str, gr.components.Component]
    box: gr.Textbox


@dataclass(frozen=True, kw_only=True)
class TeachPanel:
    """Guided examples and "Step through": its controls, one panel per phase, "Why this c?";
    `views`: the page's tabs (a guided example opens the view it runs in)."""

    pick: gr.Radio
    note: gr.HTML
    views: gr.Tabs
    step_view: gr.Tab  # the "Step through" view (opening it checks that Why this c? still fits)
    msg: gr.Textbox
    c: gr.Slider
    next: gr.Button
    back: gr.Button
    end: gr.Button
    restart: gr.Button
    status: gr.HTML
    header: gr.HTML
    answer: gr.HTML
    goto: gr.Slider
    retrieve: gr.HTML
    trie_cap: gr.HTML
    trie: gr.Plot
    mask: gr.Plot
    verify: gr.HTML
    accept: gr.HTML
    why_btn: gr.Button
    why_check: gr.Button
    why_fig: gr.Plot
    why_cap: gr.HTML

    def view_components(self) -> list:
        """What every step-through handler updates: the step's panels (and the visitor's
        state, `ChatControls.session`, so that its time to live starts again)."""
        return [
            self.header,
            self.answer,
            self.retrieve,
            self.trie_cap,
            self.trie,
            self.verify,
            self.mask,
            self.accept,
            self.status,
            self.goto,  # last: an API client's outputs keep their places
        ]


def how_rest_works() -> None:
    """The "How REST works" view, open: the diagram, why verifying many tokens in one forward
    beats one forward per token, the glossary and how to read the draft tree."""
    svg = ASSETS / "how_rest_works.svg"
    with gr.Tab("How REST works", id=HOW_VIEW, elem_id="view-how-rest"), gr.Column(elem_id="how-rest"):
        gr.HTML(f'<div class="how-svg">{svg.read_text(encoding="utf-8") if svg.exists() else ""}</div>')
        gr.Markdown(words.ONE_FORWARD, elem_id="one-forward")
        gr.Markdown(words.GLOSSARY, elem_id="glossary")
        gr.HTML(tree_key.tree_legend_html())


def guided_panel() -> tuple[gr.Radio, gr.HTML]:
    """The guided examples, above the views (on a phone they start folded: assets/app.js)."""
    with gr.Accordion("Start here: guided examples", open=True, elem_id="guided"):
        gr.Markdown(
            "Each sets the prompt, the datastore, the mode and the settings, and opens the view to watch it in."
        )
        pick = gr.Radio([e.title for e in guided.GUIDED_EXAMPLES], value=None, show_label=False, elem_id="guided-pick")
        note = gr.HTML("", elem_id="guided-note")
    return pick, note


def _step_controls(max_chars: int) -> dict[str, Any]:
    """The message (at most `max_chars`, 0: any), c, and the Next / Back / Run to end / New answer buttons."""
    with gr.Row(elem_id="teach-row"):
        msg = gr.Textbox(
            placeholder="A message to step through…",
            show_label=False,
            lines=1,
            scale=5,
            min_width=160,
            elem_id="teach-prompt",
            max_length=max_chars or None,
        )
        c = gr.Slider(
            1,
            STEP_C_MAX,
            value=16,
            step=1,
            label="c in step mode",
            info=words.STEP_C_HELP,
            scale=2,
            min_width=140,
            elem_id="teach-c",
        )
    with gr.Row():
        next_ = gr.Button("Next step", variant="primary", elem_id="teach-next", min_width=90)
        back = gr.Button("Back", elem_id="teach-back", min_width=70)
        end = gr.Button("Run to end", elem_id="teach-end", min_width=90)
        restart = gr.Button("New answer", elem_id="teach-restart", min_width=90)
    return dict(msg=msg, c=c, next=next_, back=back, end=end, restart=restart)


def _phase_panels() -> dict[str, Any]:
    """The step's status, header and answer, then one panel per phase: retrieve, trie, verify,
    accept (the trie and the verify forward side by side where the screen is wide enough)."""
    status = gr.HTML("", elem_id="teach-status")
    header = gr.HTML(step_through.EMPTY_HEAD, elem_id="teach-head")
    answer = gr.HTML("", elem_id="teach-answer")
    goto = gr.Slider(1, 2, value=1, step=1, label=words.STEP_GOTO, visible=False, elem_id="teach-step")
    gr.Markdown("#### 1a. Look up: retrieve, and where it came from")
    retrieve = gr.HTML("", elem_id="teach-retrieve")
    with gr.Row(equal_height=False):
        with gr.Column(min_width=320):
            gr.Markdown("#### 1b. Look up: build the trie")
            trie_cap = gr.HTML("", elem_id="teach-trie-cap")
            trie = gr.Plot(trie_view.empty_figure("Press Next step."), elem_id="teach-trie", show_label=False)
            gr.HTML(tree_key.tree_legend_html())
        with gr.Column(min_width=320):
            gr.Markdown("#### 2. Verify in one forward")
            mask = gr.Plot(
                trie_view.empty_figure("Press Next step.", height=260), elem_id="teach-mask", show_label=False
            )
            verify = gr.HTML("", elem_id="teach-verify")
    gr.Markdown("#### 3. Keep: accept")
    accept = gr.HTML("", elem_id="teach-accept")
    return dict(
        status=status, header=header, answer=answer, goto=goto, retrieve=retrieve, trie_cap=trie_cap, trie=trie, mask=mask,
        verify=verify, accept=accept,
    )  # fmt: skip


def _why_c() -> dict[str, Any]:
    with gr.Accordion("Why this c?", open=False, elem_id="why-c"):
        gr.Markdown(words.WHY_C_NOTE)
        with gr.Row():
            why_btn = gr.Button("Measure and explain", elem_id="why-c-btn")
            why_check = gr.Button(words.CHECK_LABEL, elem_id="why-c-check")
        why_fig = gr.Plot(visible=False, elem_id="why-c-fig", show_label=False)
        why_cap = gr.HTML("", elem_id="why-c-cap")
    return dict(why_btn=why_btn, why_check=why_check, why_fig=why_fig, why_cap=why_cap)


def build(views: gr.Tabs, guide: tuple[gr.Radio, gr.HTML], max_chars: int = 0) -> TeachPanel:
    """The "Step through" and "How REST works" views, inside the page's `views`: the controls (a
    message of at most `max_chars`, the server's limit), one panel per phase and "Why this c?";
    `guide`: the guided examples (guided_panel), which open the view they run in."""
    with gr.Tab("Step through", id=STEP_VIEW, elem_id="view-step-through") as step_view, gr.Column(elem_id="teach"):
        gr.Markdown(words.STEP_NOTE)
        controls = _step_controls(max_chars)
        panels = _phase_panels()
        why = _why_c()
    how_rest_works()
    pick, note = guide
    return TeachPanel(pick=pick, note=note, views=views, step_view=step_view, **controls, **panels, **why)


def deep_links(views: gr.Tabs) -> dict[str, str]:
    """Every id inside the page's views -> the id of the view (tab) that holds it, the views'
    own ids included: assets/app.js opens that view for the address's #id (#why-c: Step through)."""
    links: dict[str, str] = {}
    for view in views.children:
        todo = [view]
        while todo:
            block = todo.pop()
            if getattr(block, "elem_id", None):
                links[block.elem_id] = view.id
            todo.extend(getattr(block, "children", ()))
        links[view.id] = view.id
    return links


def verdicts(refusal: str, inputs: Sequence[Any], shown_on: Any) -> list[dict]:
    """A job validator's answer, one verdict per component of its event's `inputs` (positional,
    then keyword: the list the event is wired with): all valid when `refusal` is "" (admitted),
    else `refusal` shown on the component `shown_on`."""
    return [gr.validate(not refusal or c is not shown_on, refusal if c is shown_on else "") for c in inputs]


class TeachHandlers:
    """The guided examples' and the step-through's handlers; each step handler updates
    `TeachPanel.view_components()` and the visitor's state. The step-through is the visitor's
    `Session.steps`: Clear, expiry and page close free it with the rest."""

    def __init__(self, runtime: Runtime, ui: TeachPanel, chat: ChatControls) -> None:
        self.runtime = runtime
        self.ui = ui
        self.chat = chat

    def _show(self, v: step_through.StepView, session: Session) -> dict:
        t = self.ui
        return {
            t.header: v.header,
            t.answer: v.answer,
            t.goto: gr.update(visible=v.steps >= 2, minimum=1, maximum=max(v.steps, 2), value=max(v.shown, 1)),
            t.retrieve: v.retrieve,
            t.trie_cap: v.trie_caption,
            t.trie: v.trie,
            t.verify: v.verify,
            t.mask: v.mask,
            t.accept: v.accept,
            t.status: v.status,
            self.chat.session: session,
        }

    def ask_next(self, session: Session) -> dict:
        """A click of Next step, at once (before the model's queue): the step-through's status
        says whether it waits for the model, is being taken, or was refused (step_through.ask_step)."""
        return {self.ui.status: step_through.ask_step(self.runtime, as_session(session).steps, "step")}

    def ask_end(self, session: Session) -> dict:
        """A click of Run to end, at once: as ask_next."""
        return {self.ui.status: step_through.ask_step(self.runtime, as_session(session).steps, "run")}

    def step_inputs(self) -> tuple[list[Any], dict[str, Any]]:
        """Next step's and Run to end's inputs: (the message, the visitor's state, the stores,
        the step-through's c) and the other knobs by name (the HTTP API's parameters take their
        names; the step-through's own c stands in for the c knob)."""
        named = {name: widget for name, widget in self.chat.knobs.items() if name != "c"}
        return [self.ui.msg, self.chat.session, self.chat.store, self.ui.c], named

    def admit(
        self, message: str, session: Session, store: Any, c: float, request: gr.Request = None, **knobs: Any
    ) -> list[dict]:
        """Validator of Next step and Run to end: the page's verdict on the click (ask_next),
        or for an API call the jobs per session and per client that Send's admission allows;
        the refusal is shown on the message box (and, for a click, in the status already)."""
        why = step_through.admit_click(self.runtime, as_session(session), request)
        positional, named = self.step_inputs()
        return verdicts(why, [*positional, *named.values()], shown_on=self.ui.msg)

    def admit_why(self, session: Session, c: float, request: gr.Request = None) -> list[dict]:
        """Validator of Why this c? (a job on the model too); the refusal is shown on c."""
        why = admit_job(self.runtime, as_session(session), request)
        return verdicts(why, [self.chat.session, self.ui.c], shown_on=self.ui.c)

    def next(self, message: str, session: Session, store: Any, c: float, **knobs: Any) -> dict:
        """Next step: starts an answer to the message when none is under way."""
        return self._move(Stepper.next, message, session, store, c, knobs)

    def run_to_end(self, message: str, session: Session, store: Any, c: float, **knobs: Any) -> dict:
        """Run to end: every remaining step, within the server's time limit per request."""
        move = step_through.run_to_end(self.runtime.settings.max_seconds)
        return self._move(move, message, session, store, c, knobs)

    def _move(self, move: Any, message: str, session: Session, store: Any, c: float, knobs: dict[str, Any]) -> dict:
        session = as_session(session)
        try:
            return self._show(step_through.advance(self.runtime, move, message, session, store, c, knobs), session)
        finally:
            step_through.click_done(self.runtime, session)

    def goto(self, step: float, session: Session) -> Any:
        """The step slider (or a click on a token of the answer): that step's panels, from the
        steps already taken; nothing when it is the step shown."""
        session = as_session(session)
        if not session.steps.go(int(step)):
            return gr.skip()
        return self._show(step_through.step_view(session.steps), session)

    def back(self, session: Session) -> dict:
        session = as_session(session)
        return self._show(step_through.run_step(session.steps, session.steps.back), session)

    def restart(self, session: Session) -> dict:
        """New answer: the step-through's answer and its steps are forgotten."""
        session = as_session(session)
        session.steps.close()
        return self._show(step_through.step_view(session.steps), session)

    def why_c(self, session: Session, c: float, check: bool = False) -> dict:
        """The measured forward-cost curve and the expected speedup against c (figure, caption);
        `check`: first Compare on the step-through's prompt (why_c.check_on_prompt), whose
        measurement the caption then sets beside the prediction."""
        session = as_session(session)
        try:
            problem = check_on_prompt(self.runtime, session) if check else ""
            fig, caption = why_c(self.runtime, session, c)
        finally:
            job_done(self.runtime, session)
        caption = (status_html(esc(problem), "warn") if problem else "") + caption
        shown = {} if fig is None else {self.ui.why_fig: gr.update(value=fig, visible=True)}
        return {**shown, self.ui.why_cap: caption}

    def why_c_check(self, session: Session, c: float) -> dict:
        """“Compare it on this prompt”, then Why this c? with its measurement."""
        return self.why_c(session, c, check=True)

    def why_c_current(self, session: Session) -> Any:
        """After the step view changed or was opened: Why this c?'s figure and caption go once
        the answer they describe is no longer the one on screen (a new answer, Clear)."""
        session = as_session(session)
        if not why_c_stale(session):
            return gr.skip()
        session.why_c_of = None
        return {self.ui.why_fig: gr.update(value=None, visible=False), self.ui.why_cap: ""}

    def example(self, title: str, session: Session | None = None, **knobs: Any) -> Any:
        """A guided example: its prompt into the box of its mode, its store and knobs set (the
        store is now the visitor's choice), the view of its mode opened (Step through, or Chat
        for Send and Compare)."""
        ex = guided.guided_example(self.runtime, title, knobs)
        if ex is None:
            return gr.skip()
        if session is not None:
            as_session(session).stores_auto = False
        t, p = self.ui, self.chat
        out = {p.store: ex.stores, t.note: ex.note, **{p.knobs[name]: value for name, value in ex.knobs.items()}}
        if ex.mode == "step":
            return {**out, t.msg: ex.prompt, t.c: ex.c, t.views: gr.update(selected=STEP_VIEW)}
        return {**out, p.box: ex.prompt, t.views: gr.update(selected=CHAT_VIEW)}


def wire(h: TeachHandlers, t: TeachPanel, ui: ChatControls) -> None:
    """The step-through's buttons and the guided examples onto their handlers."""
    knobs = list(ui.knobs.values())
    outs = [*t.view_components(), ui.session]
    inputs, named = h.step_inputs()
    every_knob = dict(ui.knobs)
    # A step is a forward of the one model: queued with Send's jobs (h.admit). Every click
    # counts (none is dropped while an earlier one waits); its status shows at once.
    every = dict(trigger_mode="multiple")  # the click and its queued step alike: Gradio's "once" drops repeats
    model = dict(concurrency_limit=1, concurrency_id="model", validator=h.admit, show_progress="minimal", **every)
    model["inputs_kwargs"] = named  # the knobs by name
    now = dict(concurrency_limit=None, show_progress="hidden", api_visibility="undocumented", **every)
    t.next.click(h.ask_next, [ui.session], [t.status], **now).then(h.next, inputs, outs, **model)
    # Run to end is a long job: its own lane (one at a time), giving the model to a Send or a
    # Next step between two of its steps.
    long = dict(model, concurrency_id="long")
    t.end.click(h.ask_end, [ui.session], [t.status], **now).then(h.run_to_end, inputs, outs, **long)
    t.back.click(h.back, [ui.session], outs, concurrency_limit=None)
    t.goto.change(h.goto, [t.goto, ui.session], outs, concurrency_limit=None, show_progress="hidden")
    t.restart.click(h.restart, [ui.session], outs, concurrency_limit=None)
    # Enter in the message box takes a step as Next step does: the page's, not a second API endpoint.
    t.msg.submit(h.ask_next, [ui.session], [t.status], **now).then(
        h.next, inputs, outs, **{**model, "api_visibility": "private"}
    )
    why = dict(concurrency_limit=1, concurrency_id="long", validator=h.admit_why)
    t.why_btn.click(h.why_c, [ui.session, t.c], [t.why_fig, t.why_cap], **why)
    t.why_check.click(h.why_c_check, [ui.session, t.c], [t.why_fig, t.why_cap], **why)
    fresh = dict(concurrency_limit=None, show_progress="hidden", api_visibility="private")
    for changed in (t.header.change, t.step_view.select):  # a step shown, New answer; the view opened
        changed(h.why_c_current, [ui.session], [t.why_fig, t.why_cap], **fresh)
    t.pick.input(
        h.example,
        [t.pick, ui.session],
        [ui.box, t.msg, t.c, ui.store, t.views, t.note, *knobs],
        inputs_kwargs=every_knob,
        concurrency_limit=None,
    )
