"""The page's words: the header, the example prompts, the step-through's notes, why one forward
over many tokens pays, and the glossary. Plain strings (Markdown or HTML) that app.py and
teach_tab.py put on the page, and the device's name in the page's words (`device_phrase`)."""

from __future__ import annotations

import contextlib
from pathlib import Path

from rest_core.budget.auto import PROBE_GAP
from rest_core.config import PRESETS, RetrievalConfig
from rest_core.cpus import available_cpus
from rest_core.knobs import FIXED_MEANS
from rest_core.ui.style import NO_OWN_TOKEN


def gpu_model() -> str:
    """The first NVIDIA GPU's model, read from the driver without importing torch ("" if none)."""
    for info in sorted(Path("/proc/driver/nvidia/gpus").glob("*/information")):
        with contextlib.suppress(OSError):
            for line in info.read_text().splitlines():
                if line.startswith("Model:"):
                    return line.split(":", 1)[1].strip()
    return ""


def device_phrase(kind: str, cores: int | None = None, gpu: str | None = None, zero_gpu: bool = False) -> str:
    """Where the model runs, in the page's one wording (the header's, Compare's): "this machine's
    CPU (2 cores)", "a GPU (NVIDIA H200)", "a GPU (ZeroGPU: attached for each request)", "this
    Mac's GPU (MPS)". `kind` is rest_core.devices.device_type's ("cpu", "cuda", "mps", or a device
    string); `cores` the model's threads (None: rest_core.cpus.available_cpus, what the model
    uses); `gpu` the GPU's name (None: read from the driver)."""
    if zero_gpu:
        return "a GPU (ZeroGPU: attached for each request)"
    if kind == "cpu":
        n = available_cpus() if cores is None else cores
        return f"this machine's CPU ({n} core{'' if n == 1 else 's'})"
    if kind == "cuda":
        name = gpu_model() if gpu is None else gpu
        return f"a GPU ({name})" if name else "a GPU"
    if kind == "mps":
        return "this Mac's GPU (MPS)"
    return f"the device {kind}"


# What speed to expect where, in the header's one sentence after the model and the device: true
# of what Compare then measures on a CPU (a step over many tokens costs more than a one-token
# step, so REST's speedup is below M and can fall below 1; it gains most where the answer repeats
# text) and of a GPU (the speedup approaches M). A promise for no particular question: Compare
# measures it, Why this c? predicts it. The reasons are How REST works' (ONE_FORWARD).
CPU_EXPECT = (
    "On this CPU a many-token step costs more than a one-token one, so the speedup is below M, the tokens per "
    "step, and can fall below 1 (Compare measures it); it is largest where the answer repeats text"
    '<span class="wide-only"> (try <i>Ask the same thing twice</i>)</span>; on a GPU it approaches M.'
)
GPU_EXPECT = (
    "On a GPU a step costs about the same for 1 token or dozens, so the speedup approaches M, the tokens per step."
)

# The method in one plain sentence, the first thing the page says (before any symbol).
INTRO = (
    "REST guesses the next words by copying what followed the same words in a text collection, the "
    "<b>datastore</b>; the model checks all the guesses at once and keeps the ones it would have written itself."
)

# What REST keeps of plain decoding, one wording each: greedy (temperature 0), exactly its text;
# sampling, its distribution (a draft is kept only where it equals the model's own draw, so every
# token follows the model's odds, but two runs differ). The header, the glossary, How REST works,
# the guided example and the temperature's help all say these words.
SAME_TEXT = "exactly plain decoding's text"
SAME_DISTRIBUTION = "the same distribution, not the same text"
SAMPLING_TOO = f"when sampling, {SAME_DISTRIBUTION}"
# What K is, said beside its value wherever a panel shows it (the glossary's entry, the Retrieve
# panel's caption, the step's settings line).
K_MEANS = "the most matches read per lookup"

# The method's three steps, one plain sentence each: the captions of the diagram's three groups
# (assets/how_rest_works.svg: 1. Look up, 2. Verify, 3. Keep), and on a phone, where the
# diagram is too small to read, the steps alone.
STEPS = (
    (
        "1. Look up",
        "the last few tokens are found in a <b>datastore</b> and in the <b>conversation</b>; what followed them "
        "there are <b>drafts</b>.",
    ),
    (
        "2. Verify",
        "the model checks all drafts in <b>one</b> forward pass and accepts those it would have written itself: "
        f"{SAME_TEXT} ({SAMPLING_TOO}).",
    ),
    ("3. Keep", "the accepted drafts, then one token of the model's own (usually)."),
)


# One plain worked example under the three steps, the diagram's own ("…def add(a, b"), before any
# term of the method's is needed: what a draft is and what one step gains.
EXAMPLE_STEP = (
    "For example, an answer so far ends in <code>def add(a, b</code>; a code datastore has that text "
    "followed by <code>):↵    return a + b</code>. Those tokens are the drafts. One forward pass checks "
    "them all. If the model agrees with each, the step writes all of them plus one token of its own; "
    "plain decoding needs one forward per token."
)


def header_html(model: str, device: str, small_model: bool = False, diagram: str = "") -> str:
    """The page's first screen: the title; the method in one sentence, then as one figure,
    `diagram` (the six-box SVG, shown on a laptop) over its three groups' captions (look up,
    verify, keep; a phone shows these alone); then, once a step is shown, in one sentence each
    what runs where and what speed to expect there (it speaks of M and steps, which before the
    figure read as jargon, screens14); a link to How REST works. `model` is the model's name,
    `device` where it runs in words (`device_phrase`); a `small_model` gets the warning that its
    own mistakes are plain decoding's too."""
    expect = CPU_EXPECT if "CPU" in device else GPU_EXPECT
    caveat = (
        f"{model} is small and makes mistakes of its own (it may drop a word): plain decoding makes the same ones."
        if small_model
        else f"REST writes exactly what plain decoding writes with {model}, mistakes included."
    )
    steps = "".join(f"<li><b>{name}:</b> {text}</li>\n" for name, text in STEPS)
    figure = f'<div class="how-diagram">{diagram}</div>\n' if diagram else ""
    return f"""
<div id="header">
<h1>REST: retrieval-based speculative decoding, live</h1>
<p class="intro">{INTRO}</p>
<figure class="how-figure">
{figure}<figcaption><ol class="steps">
{steps}</ol><p class="example-step">{EXAMPLE_STEP}</p></figcaption>
</figure>
<p class="machine">Running <b>{model}</b> on <b>{device}</b>. {expect}</p>
<p class="more"><a href="#how-rest">How REST works →</a> <span class="caveat">{caveat}</span></p>
</div>
"""


EXAMPLES = [
    ["Write a Python function that checks whether a string is a palindrome, with a docstring and two tests."],
    ["Write a Python class Stack with push, pop, peek and is_empty methods."],
    ["What are three tips for staying productive when working from home?"],
    ["Explain the difference between a list and a tuple in Python."],
]

# The step-through's c slider's help: why its range (1..STEP_C_MAX) is not Chat's (1..128).
STEP_C_HELP = f"draft tokens verified per step: {FIXED_MEANS}; at most 64 here, so the figures stay readable"

# The step-through's note: one sentence in sight, its facts in a fold.
STEP_NOTE = (
    "Step mode runs one step per click: watch it look up, verify and keep.\n\n"
    "<details><summary>Settings and timings in step mode</summary>\n\n"
    f"- c, the most draft tokens verified per step, is set beside the message. The budget is fixed: {FIXED_MEANS}.\n"
    "- The datastores and the other settings are those of the Chat view's Settings panel. Each step's header "
    "lists the ones it used.\n"
    "- Timings here are not speed figures: the page renders between steps. Use Send and Compare in Chat for speed."
    "\n\n</details>"
)


# How a trie node's weight is made, the engine's rule (rest_core.drafting.draft.weigh, then
# rest_core.drafting.feeds.Feed.share): each source's weight is spread evenly over its own
# continuations, a node adds up what runs through it, and the step compares nodes by their share
# of the first level's weight. At the default weights (1 each) that is the mean, over the sources
# that found a match, of the fraction of each one's continuations that start with the node. The
# glossary and the Retrieve panel's lines (feeds_view.feed_weight) both say it with these.
WEIGHT_RULE = (
    "the mean, over the sources that found a match, of the fraction of each one's continuations that run "
    "through it; a source that found nothing is left out"
)


def node_share(terms: list[tuple[str, int, int]], weights: list[float] | None = None) -> float:
    """A node's weight by WEIGHT_RULE from (source, continuations through the node, continuations
    the source found) per source; a source that found none is left out. `weights`: the sources'
    weight settings (None: 1 each, the mean)."""
    ws = weights or [1.0] * len(terms)
    kept = [(w, n / k) for w, (_, n, k) in zip(ws, terms) if k]
    total = sum(w for w, _ in kept)
    return sum(w * f for w, f in kept) / total if total else 0.0


def weight_words(terms: list[tuple[str, int, int]]) -> str:
    """The arithmetic of a node's weight at the default weights, as the Retrieve panel shows it:
    "weight 0.83 = mean of code 2/2 = 1.00 and chat 4/6 = 0.67", or one source's fraction
    ("weight 0.29 = 2 of 7 continuations (code)")."""
    kept = [(name, n, k) for name, n, k in terms if k]
    share = node_share(kept)
    if len(kept) == 1:
        name, n, k = kept[0]
        return f"weight {share:.2f} = {n:,} of {k:,} continuations ({name})"
    return f"weight {share:.2f} = mean of " + " and ".join(f"{name} {n:,}/{k:,} = {n / k:.2f}" for name, n, k in kept)


# The glossary's worked example: code found 2 continuations, both through the node; chat found 6,
# 4 through it; the conversation found none.
WEIGHT_EXAMPLE = (("code", 2, 2), ("chat", 4, 6), ("conversation", 0, 0))

_R = RetrievalConfig()  # the defaults the glossary quotes (Settings may change them)

GLOSSARY = f"""
| term | meaning |
|---|---|
| **draft** | Tokens guessed from a source: what followed the last few tokens in a datastore or earlier in the conversation. Up to c of them a step, picked from the trie, go to the model to check ("drafted"; the rest stay "retrieved only"), and it never has to take them. |
| **datastore** | A corpus stored as token ids, searchable by its suffix array: *code* (Python), *chat* (ShareGPT conversations) or one you upload. The datastore *chat* is not this conversation. |
| **suffix array** | Every position of the corpus, sorted by the text that starts there. All occurrences of a token sequence sit side by side, so two binary searches find them. |
| **conversation** | This conversation itself, the prompt and the answer so far, searched like a datastore. An answer that repeats earlier text drafts itself. |
| **several sources** | A token that two or more sources drafted, coloured violet. Hovering it names them, e.g. several sources (chat + code). |
| **n_max, n_min** | The longest and the shortest run of last tokens looked up ({_R.n_max} and {_R.n_min} by default). The longest run that occurs wins. |
| **m** | How many tokens after each occurrence are taken as a continuation ({_R.m} by default). |
| **K** | {K_MEANS[0].upper()}{K_MEANS[1:]} ({_R.max_matches:,} by default); above K, a fair sample of K is read. |
| **trie** | A prefix tree of the continuations: ones that start alike share a branch. Each node is one token; its path from the root is its draft. |
| **weight** | How likely a node's path is: {WEIGHT_RULE}. E.g. code 2 of 2 and chat 4 of 6 run through it, the conversation found none: {weight_words(list(WEIGHT_EXAMPLE))}. |
| **likeliest** | The nodes a step drafts first, up to c of them, a connected subtree. The fixed budget takes those of largest weight (the heaviest); the auto budget those of highest predicted chance of acceptance, from the weight, the sources and their matches, so a lighter node can go first. |
| **c** | c, the most draft tokens verified per step, set in Settings ({PRESETS["cpu"].draft.c} by default on a CPU, {PRESETS["gpu"].draft.c} on a GPU). A step's own count reads "drafted N" (the auto budget picks it). |
| **auto budget** | Picks each step's count, from 0 up to c, from the forward's cost measured on this device: the count that should give the most tokens per millisecond; now and then (at most one step in {PROBE_GAP}) none, to time a plain step afresh. The fixed budget drafts {FIXED_MEANS}. |
| **accepted** | A draft token equal to the token the model writes there. A step keeps its drafts up to the first disagreement. |
| **model's own token** | The token the model writes after a step's accepted drafts, marked by a dotted underline. There is usually one per step: {NO_OWN_TOKEN}. |
| **tree attention mask** | Lets each draft token see the cached context, its ancestors and itself only. So one forward pass checks every branch at once. |
| **KV cache** | What the model computed for every earlier token, kept so that a step computes only its new tokens. The rejected drafts' entries are dropped after each step. |
| **root** | The last token written: row 0 of each step's forward pass. |
| **rows** | The tokens of one verify forward, one row each: the root, then the drafts, depth by depth (within a depth by parent, then token id, not by weight). The tree's node numbers, the mask's rows and the verify table's rows are these. |
| **position id** | Where the model is told a token sits in the text. A draft sits at its root's position plus its depth, so siblings share a position. |
| **lazy logits** | The model's output layer scores only the rows the check reaches, not every drafted row. Step through scores the others too, after the step's clock stops. |
| **M** | Mean tokens written per forward pass; plain decoding writes 1. The speedup is M divided by how much longer a REST step (its forward and the work around it) takes than a plain one-token step. |
| **prefill** | The one forward that puts the prompt, all but its last token, into the cache before the first step; step 1's forward starts from that last token. Every tokens/s on this page leaves the prefill out. |
| **prompt lookup** | transformers' own draft method, compared in *Speed*. It finds the last tokens, up to 2, earlier in the prompt and answer and drafts the 3 that followed, as one chain, with no datastore and no trie. |
| **temperature, top-p, top-k** | Sampling settings: temperature 0 always takes the likeliest token; above 0 the model draws at random among its likeliest tokens: the k likeliest (top-k), and the fewest whose chances add up to p (top-p). |
| **lossless** | A draft is accepted only where it equals the model's own choice: greedy, {SAME_TEXT}; sampling, {SAME_DISTRIBUTION}. A small model's own mistakes are plain decoding's too. |
"""

ONE_FORWARD = f"""
#### Why checking many tokens in one forward beats one forward per token

- Plain decoding runs the whole model once per token.
- REST checks the root and up to c draft tokens in **one** forward pass.
- Each accepted draft saves a forward pass. A step writes its accepted drafts and, usually, one token of the model's own: M on average.
- On a GPU, a forward over dozens of tokens costs about as much as over one. So the speedup approaches M.
- On a CPU, verifying several tokens costs more than one. So the auto budget drafts only where it expects to gain.
- Either way a draft is accepted only where the model would have written it: {SAME_TEXT} ({SAMPLING_TOO}).

*Speed* in Chat measures both; *Why this c?* in Step through shows the cost against c.
"""


# The step-through's step slider (a click on a token of its answer moves it too: assets/app.js)
STEP_GOTO = "Go to step (or click a token of the answer)"

# Why this c?'s second button: Compare (REST at the step-through's settings, then plain
# decoding) on the step-through's own prompt, so the prediction meets a measurement of its prompt
CHECK_LABEL = "Compare it on this prompt"

WHY_C_NOTE = (
    "Measures the forward pass on this device (a few seconds the first time): the same "
    "*measured cost* the auto budget uses. Combined with the acceptance of the answer it names, it predicts the speedup for every c "
    "(a prediction: Compare times whole runs on the wall clock)."
)
