"""The teaching part of the page: "How REST works" (diagram, glossary, tree legend) and "Step
through" (one REST step per click, each shown as its phases, and "Why this c").

Layout and wiring only, like app.py, which calls `build_teach_tab` once; the state is a
`rest_core.stepper.Stepper`, the captions and figures come from `rest_core.teach`.
"""

from __future__ import annotations

import logging
import traceback
from typing import Any

import gradio as gr

from rest_core import render, teach
from rest_core.config import ConfigError
from rest_core.knobs import values_in_order
from rest_core.runtime import ROOT, Runtime
from rest_core.session import status_html
from rest_core.stepper import STEP_C_MAX, Stepper

ASSETS = ROOT / "assets"
log = logging.getLogger("rest.app")

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
| **trie** | the continuations merged into a tree: continuations that share a beginning share a branch |
| **weight, heaviest** | a node's weight is the share of continuations that pass through it (each source's weight spread over its own continuations); the heaviest nodes are the likeliest drafts |
| **c** | the draft budget: how many trie nodes (the heaviest, always a connected subtree) are verified per step |
| **tree attention mask** | lets every draft node see the cached context, its ancestors and itself only, so one forward pass checks every branch at once |
| **root** | the last emitted token: it starts each step's forward pass (its KV is not cached yet) |
| **M** | mean tokens emitted per forward pass (plain decoding: 1) |
| **prefill** | the one forward over the whole prompt before the first step; excluded from tokens/s |
| **lossless** | the output is exactly what plain decoding writes: a draft token is kept only where it equals the model's own choice (or, sampling, the model's own draw) |
"""

TREE_LEGEND = """
**The draft-tree figure.** ■ the **root** (the last emitted token; depth 0). Circles to its right are trie nodes, one per token,
deeper to the right, sized by weight, coloured by source (blue datastore, amber context, violet both).
● **filled** circle: drafted (in the top-c subtree) and verified; faded when the model disagreed (rejected).
○ **hollow** grey circle: retrieved but not drafted (outside the budget c). A **green** outline and thick green edge: the accepted path.
★ with a **dashed** line: the model's own token that ends the step (where it hangs off the accepted path). ∅ labels a token that
prints as nothing (a special token); · is a space, ↵ a newline.
"""


def _svg() -> str:
    path = ASSETS / "how_rest_works.svg"
    return path.read_text(encoding="utf-8") if path.exists() else ""


def _stepper(value: Any) -> Stepper:
    return value if isinstance(value, Stepper) else Stepper()


def _new_answer(st: Stepper, message: str) -> bool:
    """Whether Next / Run to end start a new answer: none is under way, or the box holds another message."""
    typed = (message or "").strip()
    return not st.started or bool(typed and typed != st.message)


class TeachHandlers:
    """Step-through handlers. Each returns the step view: (header, answer, retrieve, trie caption,
    trie figure, verify, mask figure, accept, status, stepper)."""

    N_OUT = 10

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    def view(self, st: Stepper, status: str = "") -> tuple:
        ev = st.event
        if ev is None:
            empty = render.empty_figure("Press Next step.", height=260)
            return ("", "", "", "", empty, "", empty, "", status, st)
        p = teach.step_panels(ev, st.context(), st.tokenizer, st.config.retrieval if st.config else None, n_steps=len(st.events))
        answer = render.highlight_html(st.events[: st.pos + 1], st.tokenizer)
        return (p.header, f'<div class="answer">{answer}</div>', p.retrieve, p.trie_caption, p.trie, p.verify, p.mask, p.accept, status, st)

    def _guard(self, st: Stepper, action) -> tuple:
        try:
            action()
        except (ConfigError, ValueError) as exc:
            return self.view(st, status_html(render.esc(str(exc)), "err"))
        except Exception as exc:  # noqa: BLE001 - a message in the page, the traceback in the terminal
            log.error("step-through failed:\n%s", traceback.format_exc())
            st.close()
            return self.view(st, status_html(render.esc(f"step-through failed: {exc}"), "err"))
        note = "The answer is complete." if st.finished and st.pos == len(st.events) - 1 else ""
        return self.view(st, status_html(note) if note else "")

    def next(self, message: str, st: Any, store: str, c: float, *knobs: Any) -> tuple:
        """Next step: starts an answer to the message when none is under way."""
        st = _stepper(st)

        def act() -> None:
            if _new_answer(st, message):
                st.start(self.runtime, message, store, values_in_order(knobs), int(c))
            st.next()

        return self._guard(st, act)

    def run_to_end(self, message: str, st: Any, store: str, c: float, *knobs: Any) -> tuple:
        st = _stepper(st)

        def act() -> None:
            if _new_answer(st, message):
                st.start(self.runtime, message, store, values_in_order(knobs), int(c))
            st.run_to_end()

        return self._guard(st, act)

    def back(self, st: Any) -> tuple:
        st = _stepper(st)
        return self._guard(st, st.back)

    def restart(self, st: Any) -> tuple:
        """Back to start / new prompt: the held generation is closed."""
        st = _stepper(st)
        st.close()
        return self.view(st)

    def why_c(self, st: Any, session: Any, c: float) -> tuple:
        """The measured forward-cost curve and the expected speedup against c (figure, caption)."""
        st = _stepper(st)
        events = list(st.events)
        if not events and getattr(session, "view", None) is not None:
            events = list(session.view.events)
        try:
            engine = self.runtime.engine("none")
            with self.runtime.lock:
                curve = engine.forward_cost(STEP_C_MAX + 1)
        except Exception as exc:  # noqa: BLE001
            log.error("cost curve failed:\n%s", traceback.format_exc())
            return gr.skip(), status_html(render.esc(f"could not measure the forward cost: {exc}"), "err")
        chosen = events[-1].budget if events else int(c)
        fig = teach.why_c_figure(curve, events, chosen, max_c=STEP_C_MAX)
        return gr.update(value=fig, visible=True), f'<p class="tt-cap">{render.esc(teach.why_c_caption(curve, events, chosen))}</p>'


def build_teach_tab(runtime: Runtime, store: gr.Dropdown, knobs: list, session: gr.State) -> None:
    """The "How REST works" and "Step through" sections, wired to the page's datastore and knobs."""
    h = TeachHandlers(runtime)
    with gr.Accordion("How REST works", open=False, elem_id="how-rest"):
        gr.HTML(f'<div class="how-svg">{_svg()}</div>')
        gr.Markdown(GLOSSARY)
        gr.Markdown(TREE_LEGEND)
    with gr.Accordion("Step through: one REST step per click", open=False, elem_id="teach"):
        gr.Markdown(STEP_NOTE)
        stepper = gr.State(Stepper())
        with gr.Row(elem_id="teach-row"):
            msg = gr.Textbox(placeholder="A message to step through…", show_label=False, lines=1, scale=5, min_width=160, elem_id="teach-prompt")
            c = gr.Slider(1, STEP_C_MAX, value=16, step=1, label="c in step mode", scale=2, min_width=140, elem_id="teach-c")
        with gr.Row():
            nxt = gr.Button("Next step", variant="primary", elem_id="teach-next", min_width=90)
            back = gr.Button("Back", elem_id="teach-back", min_width=70)
            end = gr.Button("Run to end", elem_id="teach-end", min_width=90)
            restart = gr.Button("New answer", elem_id="teach-restart", min_width=90)
        status = gr.HTML("", elem_id="teach-status")
        header = gr.HTML("", elem_id="teach-head")
        answer = gr.HTML("", elem_id="teach-answer")
        gr.Markdown("#### 1. Retrieve")
        retrieve = gr.HTML("", elem_id="teach-retrieve")
        gr.Markdown("#### 2. Build the trie")
        trie_cap = gr.HTML("", elem_id="teach-trie-cap")
        trie = gr.Plot(render.empty_figure("Press Next step.", height=260), elem_id="teach-trie", show_label=False)
        gr.Markdown("#### 3. Verify in one forward")
        mask = gr.Plot(render.empty_figure("Press Next step.", height=260), elem_id="teach-mask", show_label=False)
        verify = gr.HTML("", elem_id="teach-verify")
        gr.Markdown("#### 4. Accept")
        accept = gr.HTML("", elem_id="teach-accept")
        with gr.Accordion("Why this c?", open=False, elem_id="why-c"):
            gr.Markdown("Measures the forward pass on this device for 1, 2, 4, … 65 tokens (a few seconds the first time) and combines it with this session's acceptance.")
            why_btn = gr.Button("Measure and explain", elem_id="why-c-btn")
            why_fig = gr.Plot(visible=False, elem_id="why-c-fig", show_label=False)
            why_cap = gr.HTML("", elem_id="why-c-cap")

    outs = [header, answer, retrieve, trie_cap, trie, verify, mask, accept, status, stepper]
    model = dict(concurrency_limit=1, concurrency_id="model")  # a step is a forward of the one model
    inputs = [msg, stepper, store, c, *knobs]
    nxt.click(h.next, inputs, outs, **model)
    end.click(h.run_to_end, inputs, outs, **model)
    back.click(h.back, [stepper], outs, concurrency_limit=None)
    restart.click(h.restart, [stepper], outs, concurrency_limit=None)
    msg.submit(h.next, inputs, outs, **model)
    why_btn.click(h.why_c, [stepper, session, c], [why_fig, why_cap], **model)
