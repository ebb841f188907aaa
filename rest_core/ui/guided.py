"""Guided examples for the teaching part: each sets the prompt, the datastore, the mode (step
through, send or compare) and the knobs together, and says what to watch; `guided_example`
resolves one for this server (its store may not be built here). No Gradio here."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rest_core.knobs import APP_KNOBS
from rest_core.ui import style, words
from rest_core.ui.runtime import NO_STORE, Runtime


@dataclass(frozen=True)
class GuidedExample:
    """One lesson: what to type, which store, where to run it (mode) and the settings, plus
    what to watch. mode: "step" (the step-through), "send" (stream the answer), "compare"."""

    title: str
    prompt: str
    store: str  # a store's name, or "none"
    mode: str
    knobs: tuple[tuple[str, Any], ...]  # knob name -> value; the others keep the device preset's
    watch: str


GUIDED_EXAMPLES: tuple[GuidedExample, ...] = (
    GuidedExample(
        "Code step by step: the code store and the conversation draft (c = 16)",
        "Write a Python script that parses command-line arguments with argparse.",
        "code",
        "step",
        (("c", 16), ("budget", "fixed"), ("use_datastore", True), ("use_context", True), ("temperature", 0.0)),
        "Press Next step: each step shows the suffix it matched, the trie of what followed, the mask of the one forward "
        "and the walk that accepts drafts. The first steps mostly keep one or two tokens (an answer's opening is "
        "generic); the code itself drafts better. Press Run to end, then click a dark highlighted token to open a "
        "step that accepted several drafts, and “Where it came from” to see the code files behind them.",
    ),
    GuidedExample(
        "A question the corpus knows nothing about: few drafts, about plain speed",
        "Name three rivers of Mongolia and say where each one flows.",
        "code",
        "compare",
        (("use_datastore", True), ("use_context", False), ("n_min", 3), ("temperature", 0.0)),
        "The code store has little to say about Mongolian rivers: with n_min = 3, most steps find no match and draft nothing, "
        "so REST runs at about plain decoding's speed (press Compare), and never changes the text.",
    ),
    GuidedExample(
        "Ask the same thing twice: the conversation drafts the second answer",
        "Explain the difference between a list and a tuple in Python, in three sentences.",
        "none",
        "send",
        (("use_datastore", False), ("use_context", True), ("temperature", 0.0)),
        "Send it, then send the same message again. The second answer repeats the first, so the conversation "
        "source (amber, “conversation”) drafts whole runs of it and M jumps.",
    ),
    GuidedExample(
        f"Sampling at temperature 0.8: {words.SAME_DISTRIBUTION}",
        "What are three tips for staying productive when working from home?",
        "chat",
        "send",
        (("temperature", 0.8), ("top_p", 0.95), ("use_datastore", True), ("use_context", True)),
        "The model now samples. A draft token is kept only when it equals the model's own draw there, so each token "
        f"follows the model's odds: {words.SAME_DISTRIBUTION}. The drafts change the speed, never the odds.",
    ),
)


def example_settings(example: GuidedExample, knob_values: Mapping[str, Any]) -> dict[str, Any]:
    """The page's knob values (name -> value) with the example's settings applied."""
    unknown = [k for k, _ in example.knobs if k not in knob_values]
    if unknown:
        raise ValueError(f"example {example.title!r} sets unknown knobs: {', '.join(unknown)}")
    return {**knob_values, **dict(example.knobs)}


@dataclass(frozen=True, kw_only=True)
class GuidedChoice:
    """A guided example resolved for this server: its prompt and mode ("step", "send" or
    "compare"), the step-through's c, the datastore selection (its store, or the first built one
    when it is missing), the note to show and every knob's value (knob name -> value)."""

    prompt: str
    mode: str
    c: int
    stores: list[str]
    note: str
    knobs: dict[str, Any]


def guided_example(runtime: Runtime, title: str, knobs: Mapping[str, Any]) -> GuidedChoice | None:
    """The guided example of that title on the current knob values (knob name -> value)."""
    ex = next((e for e in GUIDED_EXAMPLES if e.title == title), None)
    if ex is None:
        return None
    values = example_settings(ex, knobs)
    names = runtime.store_names()
    store = ex.store if ex.store in names or ex.store == NO_STORE else (names[0] if names else NO_STORE)
    missing = f" (the {ex.store} store is not built here: using {store})" if store != ex.store else ""
    where = {"step": "In Step through", "send": "In Chat: Send", "compare": "In Chat: Compare with plain decoding"}[
        ex.mode
    ]
    view = "step-through" if ex.mode == "step" else "chat"  # the view it opens (teach_tab's ids)
    note = f'<p class="example-note" data-for="{view}"><b>{style.esc(where)}.</b> {style.esc(ex.watch)}{style.esc(missing)}</p>'
    stores = [] if store == NO_STORE else [store]
    knobs_set = {k.name: values[k.name] for k in APP_KNOBS}
    return GuidedChoice(prompt=ex.prompt, mode=ex.mode, c=int(values["c"]), stores=stores, note=note, knobs=knobs_set)
