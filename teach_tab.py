"""The teaching part of the page (Gradio): the guided examples (above the views: the way in),
the "Step through" view (one REST step per click, its four phase panels and "Why this c?") and
the "How REST works" view (the diagram, why one forward over many tokens pays, the glossary).
app.py lays out the page and its "Chat" view and wires this; what its handlers decide without
Gradio is rest_core/ui/page.py, the captions and figures one module per view in rest_core/ui/
(phases, trie_view, tree_mask, why_c_view)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import gradio as gr

from rest_core.ui import guided, page, trie_view
from rest_core.ui.runtime import Runtime
from rest_core.ui.settings import ROOT
from rest_core.ui.stepper import STEP_C_MAX, Stepper

if TYPE_CHECKING:
    from app import ChatPage

ASSETS = ROOT / "assets"

# The page's views (gr.Tab ids): the address's #chat, #step-through or #how-rest opens one.
CHAT_VIEW, STEP_VIEW, HOW_VIEW = "chat", "step-through", "how-rest"


@dataclass(frozen=True, kw_only=True)
class TeachPanel:
    """Guided examples and "Step through": its controls, one panel per phase, "Why this c?";
    `views`: the page's tabs (a guided example opens the view it runs in)."""

    pick: gr.Radio
    note: gr.HTML
    views: gr.Tabs
    msg: gr.Textbox
    c: gr.Slider
    next: gr.Button
    back: gr.Button
    end: gr.Button
    restart: gr.Button
    status: gr.HTML
    header: gr.HTML
    answer: gr.HTML
    retrieve: gr.HTML
    trie_cap: gr.HTML
    trie: gr.Plot
    mask: gr.Plot
    verify: gr.HTML
    accept: gr.HTML
    why_btn: gr.Button
    why_fig: gr.Plot
    why_cap: gr.HTML
    stepper: gr.State

    def view_components(self) -> list:
        """What every step-through handler updates: the step's panels and the stepper."""
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
            self.stepper,
        ]


def how_rest_works() -> None:
    """The "How REST works" view, open: the diagram, why verifying many tokens in one forward
    beats one forward per token, the glossary and how to read the draft tree."""
    svg = ASSETS / "how_rest_works.svg"
    with gr.Tab("How REST works", id=HOW_VIEW, elem_id="view-how-rest"), gr.Column(elem_id="how-rest"):
        gr.HTML(f'<div class="how-svg">{svg.read_text(encoding="utf-8") if svg.exists() else ""}</div>')
        gr.Markdown(page.ONE_FORWARD, elem_id="one-forward")
        gr.Markdown(page.GLOSSARY, elem_id="glossary")
        gr.HTML(trie_view.tree_legend_html())


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
            info="draft tokens verified per step (fixed here)",
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
    header = gr.HTML("", elem_id="teach-head")
    answer = gr.HTML("", elem_id="teach-answer")
    gr.Markdown("#### 1. Retrieve, and where it came from")
    retrieve = gr.HTML("", elem_id="teach-retrieve")
    with gr.Row(equal_height=False):
        with gr.Column(min_width=320):
            gr.Markdown("#### 2. Build the trie")
            trie_cap = gr.HTML("", elem_id="teach-trie-cap")
            trie = gr.Plot(
                trie_view.empty_figure("Press Next step.", height=260), elem_id="teach-trie", show_label=False
            )
            gr.HTML(trie_view.tree_legend_html())
        with gr.Column(min_width=320):
            gr.Markdown("#### 3. Verify in one forward")
            mask = gr.Plot(
                trie_view.empty_figure("Press Next step.", height=260), elem_id="teach-mask", show_label=False
            )
            verify = gr.HTML("", elem_id="teach-verify")
    gr.Markdown("#### 4. Accept")
    accept = gr.HTML("", elem_id="teach-accept")
    return dict(
        status=status, header=header, answer=answer, retrieve=retrieve, trie_cap=trie_cap, trie=trie, mask=mask,
        verify=verify, accept=accept,
    )  # fmt: skip


def _why_c() -> dict[str, Any]:
    with gr.Accordion("Why this c?", open=False, elem_id="why-c"):
        gr.Markdown(page.WHY_C_NOTE)
        why_btn = gr.Button("Measure and explain", elem_id="why-c-btn")
        why_fig = gr.Plot(visible=False, elem_id="why-c-fig", show_label=False)
        why_cap = gr.HTML("", elem_id="why-c-cap")
    return dict(why_btn=why_btn, why_fig=why_fig, why_cap=why_cap)


def build(views: gr.Tabs, guide: tuple[gr.Radio, gr.HTML], max_chars: int = 0) -> TeachPanel:
    """The "Step through" and "How REST works" views, inside the page's `views`: the controls (a
    message of at most `max_chars`, the server's limit), one panel per phase and "Why this c?";
    `guide`: the guided examples (guided_panel), which open the view they run in."""
    with gr.Tab("Step through", id=STEP_VIEW, elem_id="view-step-through"), gr.Column(elem_id="teach"):
        gr.Markdown(page.STEP_NOTE)
        controls = _step_controls(max_chars)
        panels = _phase_panels()
        why = _why_c()
        stepper = gr.State(Stepper())
    how_rest_works()
    pick, note = guide
    return TeachPanel(pick=pick, note=note, views=views, stepper=stepper, **controls, **panels, **why)


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


def verdicts(admitted: bool, n: int, shown_on: int = 0, refusal: str = page.BUSY) -> list[dict]:
    """A job validator's answer for its `n` inputs (app.py's too): all valid, or `refusal`
    shown on input `shown_on`."""
    return [gr.validate(admitted or i != shown_on, "" if admitted or i != shown_on else refusal) for i in range(n)]


class TeachHandlers:
    """The guided examples' and the step-through's handlers; each step handler updates
    `TeachPanel.view_components()`."""

    def __init__(self, runtime: Runtime, ui: TeachPanel, chat: ChatPage) -> None:
        self.runtime = runtime
        self.ui = ui
        self.chat = chat

    def _show(self, v: page.StepView) -> dict:
        t = self.ui
        return {
            t.header: v.header,
            t.answer: v.answer,
            t.retrieve: v.retrieve,
            t.trie_cap: v.trie_caption,
            t.trie: v.trie,
            t.verify: v.verify,
            t.mask: v.mask,
            t.accept: v.accept,
            t.status: v.status,
            t.stepper: v.stepper,
        }

    def ask_next(self, st: Any) -> dict:
        """A click of Next step, at once (before the model's queue): the step-through's status
        says whether it waits for the model, is being taken, or was refused (page.ask_step)."""
        return {self.ui.status: page.ask_step(self.runtime, page.as_stepper(st), "step")}

    def ask_end(self, st: Any) -> dict:
        """A click of Run to end, at once: as ask_next."""
        return {self.ui.status: page.ask_step(self.runtime, page.as_stepper(st), "run")}

    def admit(self, message: str, st: Any, session: Any, store: Any, c: float, *knobs: Any) -> list[dict]:
        """Validator of Next step and Run to end: the page's verdict on the click (ask_next),
        or for an API call one job queued or running per session, as Send's; the refusal is
        shown on the message box (and, for a click, in the status already)."""
        st = page.as_stepper(st)
        clicked = bool(st.tickets)
        ok = page.admit_click(self.runtime, st, session)
        return verdicts(ok, 5 + len(knobs), refusal=page.STEPS_WAITING if clicked else page.BUSY)

    def admit_why(self, st: Any, session: Any, c: float) -> list[dict]:
        """Validator of Why this c? (a job on the model too); the refusal is shown on c."""
        return verdicts(page.admit_job(self.runtime, session), 3, shown_on=2)

    def next(self, message: str, st: Any, session: Any, store: Any, c: float, *knobs: Any) -> dict:
        """Next step: starts an answer to the message when none is under way."""
        st = page.as_stepper(st)
        try:
            return self._show(page.advance(self.runtime, Stepper.next, message, st, session, store, c, knobs))
        finally:
            page.click_done(st, session)

    def run_to_end(self, message: str, st: Any, session: Any, store: Any, c: float, *knobs: Any) -> dict:
        """Run to end: every remaining step, within the server's time limit per request."""
        move = page.run_to_end(self.runtime.settings.max_seconds)
        st = page.as_stepper(st)
        try:
            return self._show(page.advance(self.runtime, move, message, st, session, store, c, knobs))
        finally:
            page.click_done(st, session)

    def back(self, st: Any) -> dict:
        st = page.as_stepper(st)
        return self._show(page.run_step(st, st.back))

    def restart(self, st: Any) -> dict:
        """Back to start / new prompt: the held generation is closed."""
        st = page.as_stepper(st)
        st.close()
        return self._show(page.step_view(st))

    def why_c(self, st: Any, session: Any, c: float) -> dict:
        """The measured forward-cost curve and the expected speedup against c (figure, caption)."""
        try:
            fig, caption = page.why_c(self.runtime, page.as_stepper(st), session, c)
        finally:
            page.job_done(session)
        shown = {} if fig is None else {self.ui.why_fig: gr.update(value=fig, visible=True)}
        return {**shown, self.ui.why_cap: caption}

    def example(self, title: str, *knobs: Any) -> Any:
        """A guided example: its prompt into the box of its mode, its store and knobs set, the
        view of its mode opened (Step through, or Chat for Send and Compare)."""
        ex = page.guided_example(self.runtime, title, knobs)
        if ex is None:
            return gr.skip()
        t, p = self.ui, self.chat
        out = {p.store: ex.stores, t.note: ex.note, **{p.knobs[name]: value for name, value in ex.knobs.items()}}
        if ex.mode == "step":
            return {**out, t.msg: ex.prompt, t.c: ex.c, t.views: gr.update(selected=STEP_VIEW)}
        return {**out, p.answer.box: ex.prompt, t.views: gr.update(selected=CHAT_VIEW)}


def wire(h: TeachHandlers, t: TeachPanel, ui: ChatPage) -> None:
    """The step-through's buttons and the guided examples onto their handlers."""
    knobs = list(ui.knobs.values())
    outs = t.view_components()
    # A step is a forward of the one model: queued with Send's jobs (h.admit). Every click
    # counts (none is dropped while an earlier one waits); its status shows at once.
    every = dict(trigger_mode="multiple")  # the click and its queued step alike: Gradio's "once" drops repeats
    model = dict(concurrency_limit=1, concurrency_id="model", validator=h.admit, show_progress="minimal", **every)
    now = dict(concurrency_limit=None, show_progress="hidden", api_visibility="undocumented", **every)
    inputs = [t.msg, t.stepper, ui.session, ui.store, t.c, *knobs]
    t.next.click(h.ask_next, [t.stepper], [t.status], **now).then(h.next, inputs, outs, **model)
    t.end.click(h.ask_end, [t.stepper], [t.status], **now).then(h.run_to_end, inputs, outs, **model)
    t.back.click(h.back, [t.stepper], outs, concurrency_limit=None)
    t.restart.click(h.restart, [t.stepper], outs, concurrency_limit=None)
    t.msg.submit(h.ask_next, [t.stepper], [t.status], **now).then(h.next, inputs, outs, **model)
    why = dict(concurrency_limit=1, concurrency_id="model", validator=h.admit_why)
    t.why_btn.click(h.why_c, [t.stepper, ui.session, t.c], [t.why_fig, t.why_cap], **why)
    t.pick.input(
        h.example,
        [t.pick, *knobs],
        [ui.answer.box, t.msg, t.c, ui.store, t.views, t.note, *knobs],
        concurrency_limit=None,
    )
