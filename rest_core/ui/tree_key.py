"""The draft tree's key: what the acceptance walk did with each drafted node (`draft_states`),
the marks that show it (`TREE_MARKS`), the words for a step's end and budget, and the page's key."""

from __future__ import annotations

from rest_core.decode.events import StepEvent
from rest_core.ui.style import NO_OWN_TOKEN as OWN_TOKEN_NONE
from rest_core.ui.style import esc

# What the acceptance walk did with each drafted node: the one source of the tree's marks, the
# verify table's last column and the key (TREE_MARKS), so the three cannot disagree.
ACCEPTED, REJECTED, OFF_PATH, UNCHECKED = "accepted", "rejected", "off the path", "not checked"


def draft_states(event: StepEvent) -> tuple[str, ...]:
    """Per node of `event.draft`, in its order: ACCEPTED (on the accepted path); REJECTED (the walk
    reached its parent row and the model chose another token there); OFF_PATH (an ancestor was
    rejected, so the walk never reached its parent row: its row is computed, not used); UNCHECKED (its parent was accepted, or
    is the root, but the walk stopped there first: the answer ended on an end-of-text token or
    at its length limit, so no token was chosen at that row)."""
    draft = event.draft
    if draft is None or not len(draft):
        return ()
    accepted = set(int(a) for a in event.accepted)
    path_rows = [0] + [int(a) + 1 for a in event.accepted]
    chosen = set(path_rows[: len(event.tokens)])  # rows where the walk chose a token: one per token emitted
    out: list[str] = []
    for i in range(len(draft)):
        p = int(draft.parents[i])
        if i in accepted:
            out.append(ACCEPTED)
        elif p + 1 in chosen:
            out.append(REJECTED)
        elif p < 0 or p in accepted or out[p] == UNCHECKED:
            out.append(UNCHECKED)
        else:
            out.append(OFF_PATH)
    return tuple(out)


# When a step writes no token of its own, in general: the glossary says it, once on the page; a
# view of one step says that step's own reason instead (`no_own_reason`).
NO_OWN_TOKEN = OWN_TOKEN_NONE[0].upper() + OWN_TOKEN_NONE[1:] + "."  # the sentence, as a sentence
END_MARK = "⟨end⟩"  # an accepted end-of-text token, which prints as nothing, where a view shows it
END_SHOWN = f" The answer's text does not show it; the step's views mark it {END_MARK}."


def end_token(event: StepEvent) -> int | None:
    """The end-of-text token a draft of this step wrote (the step's last token, drafted, and the
    answer ended on it); None otherwise. Views show it as END_MARK so "3 tokens" shows 3."""
    if event.finish_reason == "eos" and event.tokens and event.token_sources and event.token_sources[-1]:
        return int(event.tokens[-1])
    return None


def no_own_reason(event: StepEvent) -> str:
    """Why this step wrote no token of the model's own, in a few words ("" when it wrote one): an
    accepted draft ended the answer (its end-of-text token), or the length limit cut the step."""
    if any(not s for s in event.token_sources) or not event.tokens:
        return ""
    if end_token(event) is not None:
        return "an accepted draft ended the answer, so no token of the model's own"
    return "the length limit cut the step, so no token of the model's own"


PROBE_SHORT = "the auto budget timed a plain step"  # a probe, where a line has little room
PROBE_WHY = "the auto budget drafted nothing to time a plain step, the cost it weighs every draft against"
NO_GAIN_WHY = "the auto budget expected no draft to repay its cost"


def budget_words(event: StepEvent, c_max: int | None = None) -> str:
    """How many tokens the step drafted and under which budget, never as a bare "c = …" (c is the
    most per step): "drafted 10 (auto budget, at most c = 16)" or "drafted 16 (fixed c = 16)".
    An auto-budget step carries its predictions (`event.predicted`); a fixed one none. A probe
    says so: "drafted 0 (the auto budget timed a plain step)"."""
    drafted = len(event.draft) if event.draft is not None else 0
    if not drafted and event.probe:
        return f"drafted 0 ({PROBE_SHORT})"
    return f"drafted {drafted} ({budget_note(event, c_max)})"


def undrafted_reason(event: StepEvent) -> str:
    """Why a step whose trie had nodes drafted none of them ("" where it drafted some, or where
    nothing was retrieved): the auto budget timed a plain step (its probe), or expected no draft
    to repay its cost (a fixed c drafts whenever the trie has a node)."""
    if event.draft is not None and len(event.draft):
        return ""
    if event.probe:
        return PROBE_WHY
    had_trie = event.trie_nodes or (event.trie is not None and len(event.trie))
    return NO_GAIN_WHY if had_trie else ""


def budget_note(event: StepEvent, c_max: int | None = None) -> str:
    """The step's budget in words: "auto budget, at most c = 16" ("auto budget" where the most is
    not known) or "fixed c = 16". A step is the auto budget's when it carries predictions, or
    when the caller names the most (`c_max`: only for an auto budget), so a step where the auto
    budget drafted nothing never reads "fixed c = 0"."""
    if event.predicted or c_max:
        return "auto budget" + (f", at most c = {c_max}" if c_max else "")
    return f"fixed c = {event.c}"


# The marks of the draft tree, in the order its key lists them: (symbol, name, look, meaning).
# The figure's own short key (the marks it draws, by name: `key_name`) and the page's key
# (`tree_legend_html`) are both built from these, so the two say the same words; a node's mark
# follows its `draft_states`.
TREE_MARKS: tuple[tuple[str, str, str, str], ...] = (
    ("■", "root", "dark square", "The last token written; the step starts here."),
    ("◯", "accepted", "green ring", "Drafted, and the model chose the same token."),
    ("◉", "rejected", "dark ring, on its source's colour", "Drafted; the model chose another token in its place."),
    (
        "◌",
        OFF_PATH,
        "faded grey",
        "Drafted under a rejected token: the one forward computed its row too, but the walk never "
        "reaches it, so it is not used.",
    ),
    ("◎", UNCHECKED, "hollow, coloured ring", "Drafted; the answer ended before the walk reached it."),
    ("○", "retrieved only", "hollow, grey, unlabelled", "In the trie, not drafted this step; hover shows its token."),
    (
        "★",
        "model's own token",
        "star",
        "Written after the accepted drafts, on a dashed line, in a row of its own: one per step (usually).",
    ),
)
# What a mark means, in a few words: the page's key (the fold under the figure) gives them with its
# look and the longer meaning.
KEY_SHORT = {
    "root": "the last token written",
    ACCEPTED: "the model agreed",
    REJECTED: "the model chose another (fill: its source)",
    OFF_PATH: "under a rejected token, so not used",
    UNCHECKED: "the answer ended first",
    "retrieved only": "in the trie, not drafted",
    "model's own token": "the model's next token",
}
MARK_OF_STATE = {ACCEPTED: ACCEPTED, REJECTED: REJECTED, OFF_PATH: OFF_PATH, UNCHECKED: UNCHECKED}


# A mark's words in the figure's short key: its name, and a gloss where the name alone says little;
# the fold under the figure (`TREE_LEGEND`) gives each its look and meaning at length.
KEY_WORDS = {"root": "root: last token"}


def key_name(name: str) -> str:
    """A mark's entry in the figure's key: its name (the fold under the figure says what it means)."""
    return KEY_WORDS.get(name, name)


TREE_NOTES = (
    "Each circle is one token of the <b>trie</b>: the retrieved continuations merged, shared beginnings sharing a "
    "branch. Deeper tokens sit further right.",
    "A circle's size grows with its <b>weight</b> (a drafted one is at least big enough for its number): each "
    "source's weight is split evenly over its continuations and summed over those through the circle; a circle "
    "several sources reach adds each one's share.",
    "A <b>filled</b> circle is drafted: the step drafts its <b>likeliest</b> nodes, as many as its budget picks "
    "(the title says how many; c, the most draft tokens verified per step, caps them), and verifies them in one "
    "forward.",
    "A circle's fill is the source that retrieved it, named in the figure's key; violet: several sources.",
    "Siblings are drawn in their rows' order, so the numbers read downwards in each column; hollow siblings "
    "follow the drafted ones, the heaviest first.",
    "<b>+N more</b>: a crowded level's lighter siblings, folded into one node so that labels stay readable; "
    "hover lists them with their states.",
    "Labels: ⟨im_start⟩ a special token by its name (⟨end⟩ ends a turn), · a space, ↵ a newline.",
)


def _legend_items() -> list[str]:
    return [
        f'<li><span class="mark">{sym}</span> <b>{name}</b>, {look}: {KEY_SHORT[name]}. {esc(meaning)}</li>'
        for sym, name, look, meaning in TREE_MARKS
    ]


# The figure's key names the marks it draws; this fold, under it, says every mark at length.
TREE_LEGEND = (
    '<details class="tree-key"><summary><b>Reading the draft tree</b>: the number inside a drafted node is its '
    "row in the mask and the verify table; each column reads downwards</summary><ul>"
    + "".join(_legend_items())
    + '</ul><details class="tt-more"><summary>Sizes, fills and labels</summary><ul>'
    + "".join(f"<li>{note}</li>" for note in TREE_NOTES)
    + "</ul></details></details>"
)


def tree_legend_html() -> str:
    """What every mark of `trie_figure` means, one per line, folded under the figure (its key names
    the marks a step draws; TREE_MARKS gives both the same names)."""
    return f'<div class="tree-legend" style="color:#1f2937">{TREE_LEGEND}</div>'
