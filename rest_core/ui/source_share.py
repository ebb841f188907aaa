"""What a teacher asks first: why, on this device, the datastore's drafts are mostly not verified,
and what would change on a GPU. Answered from the session itself: where its accepted draft
tokens came from, which sources the c heaviest trie nodes belong to (what a step verifies) at
the session's c and at c = 64, and the measured forward cost of both sizes.

The heaviest nodes per step are in every compact event (`tree_layout.HEAVIEST_KEPT`), so this
reads the same tries as Why this c? and weighs nodes the same way (a node's weight over the
root's stands for the chance the model's path runs through it, scaled to what was accepted).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rest_core.budget.cost_curve import CostCurve
from rest_core.decode.events import StepEvent
from rest_core.sources import count_origins, kind_of
from rest_core.ui.measures import divided
from rest_core.ui.style import SEVERAL_NAME, esc, plural
from rest_core.ui.why_c_view import answer_scale, heaviest_shares

GPU_C = 64  # what a GPU affords per step: verifying 64 tokens costs about as much as one there
KINDS = ("context", "datastore", "both")
# "both": drafted by the conversation and a datastore together, the page's violet; tokens several
# datastores drafted without the conversation count under "datastore"
LABELS = {
    "context": "the conversation",
    "datastore": "the datastore",
    "both": f"{SEVERAL_NAME} (conversation + datastore)",
}


def accepted_drafts(events: Sequence[StepEvent]) -> dict[str, int]:
    """The answer's accepted draft tokens per kind (context, datastore, both): drafted tokens only,
    not the model's own (the chat stats' "by source" shares are of every token instead)."""
    counts = count_origins(s for e in events if e.method == "rest" for s in e.token_sources if s)
    return {k: counts[k] for k in KINDS}


def accepted_shares(events: Sequence[StepEvent]) -> dict[str, float]:
    """Share of the answer's accepted draft tokens per kind (context, datastore, both)."""
    counts = accepted_drafts(events)
    total = sum(counts.values())
    return {k: counts[k] / total for k in KINDS} if total else {}


def verified_by_kind(events: Sequence[StepEvent], c: int) -> tuple[dict[str, float], dict[str, float]]:
    """Per REST step: how many of the c heaviest nodes each kind drafted, and the expected
    accepted tokens they carry (their weight shares, scaled as Why this c?'s chart scales them:
    why_c_view.expected_accepted is their sum). Empty before any step with a trie."""
    nodes = dict.fromkeys(KINDS, 0.0)
    weight = dict.fromkeys(KINDS, 0.0)
    tries = 0
    for e, order, shares in heaviest_shares(events, c):
        tries += 1
        for i, share in zip(order, shares):
            kind = kind_of(int(e.trie.sources[i]))
            if kind in nodes:
                nodes[kind] += 1
                weight[kind] += float(share)
    if not tries:
        return {}, {}
    steps = sum(1 for e in events if e.method == "rest")
    scale = answer_scale(events)
    return {k: v / steps for k, v in nodes.items()}, {k: scale * v / steps for k, v in weight.items()}


def verified_drafts(events: Sequence[StepEvent]) -> tuple[dict[str, int], int]:
    """What the REST steps verified, from the events themselves: each kind's draft nodes in all
    (context, datastore, both), and the REST steps they spread over (the per-step denominator)."""
    counts = dict.fromkeys(KINDS, 0)
    steps = 0
    for e in events:
        if e.method != "rest":
            continue
        steps += 1
        for source in e.draft.sources if e.draft is not None else ():
            kind = kind_of(int(source))
            if kind in counts:
                counts[kind] += 1
    return counts, steps


def verified_line(events: Sequence[StepEvent], chosen_c: int) -> str:
    """ "Each step verifies at most c = 16 … Over the 21 steps they verified 307 draft tokens in all,
    accepted or not: 42 verified from the conversation, …; 14.6 verified per step.": the kinds add
    up to the total, which is verified_counts's. "verified" on each count, so the conversation's
    42 verified never reads as the answer's accepted draft tokens beside it."""
    counts, steps = verified_drafts(events)
    total = sum(counts.values())
    parts = ", ".join(f"{counts[k]} verified from {LABELS[k]}" for k in KINDS if counts[k]) or "none"
    return (
        f"Each step verifies at most c = {chosen_c} of the merged trie's likeliest drafts. Over the "
        f"{plural(steps, 'step')} they verified {plural(total, 'draft token')} in all, accepted or not: {parts}; "
        f"{total / steps if steps else 0:.1f} verified per step."
    )


def source_share_html(events: Sequence[StepEvent], curve: CostCurve, chosen_c: int, answer: str = "This answer") -> str:
    """The answer, as bullets folded under the teacher's question (`question`; "" before any REST
    step); `answer` names whose steps `events` are, as the page names it ("The step-through's answer"). The cost of 1 + c tokens is
    Why this c?'s caption's, not repeated here; this names the GPU's c's cost only."""
    shares = accepted_shares(events)
    here_nodes, here_acc = verified_by_kind(events, chosen_c)
    verified_kinds, steps = verified_drafts(events)
    gpu_nodes, gpu_acc = verified_by_kind(events, GPU_C)
    if not here_nodes:
        return ""
    came = ", ".join(f"{LABELS[k]} {100 * shares[k]:.0f}%" for k in KINDS if shares.get(k)) or "none yet"
    drafts = sum(accepted_drafts(events).values())
    whose = answer.replace("The ", "the ", 1).replace("This ", "this ", 1)
    points = [
        f"Of the {drafts} accepted draft tokens in {whose}: {came}. Drafted tokens only; the stats under the chat "
        "count every token of the last chat answer, the model's own included.",
        verified_line(events, chosen_c),
        _why_kinds(verified_kinds),
        f"On this device a forward of 1 + {GPU_C} tokens takes "
        f"{divided(float(curve(1 + GPU_C)), float(curve(1)))}× one token's.",
        f"On a GPU verifying {GPU_C} tokens costs about as much as one, so c = {GPU_C} pays: the up to {GPU_C} "
        f"heaviest drafts per step (fewer where the trie held fewer), over the same {plural(steps, 'step')}, are "
        f"{sum(gpu_nodes.values()):.1f} a step: {_kinds(gpu_nodes)}.",
        f"With c = {GPU_C} the datastore's expected accepted drafts per step rise from "
        f"{here_acc['datastore'] + here_acc['both']:.2f} to {gpu_acc['datastore'] + gpu_acc['both']:.2f}, the "
        f"conversation's from {here_acc['context']:.2f} to {gpu_acc['context']:.2f}, weighed as in the chart above.",
    ]
    items = "".join(f"<li>{esc(x)}</li>" for x in points)
    # folded under its question, as Why this c?'s other folds: only the caption's takeaway shows at first
    summary = f"<summary><b>{esc(question(verified_kinds))}</b></summary>"
    return f'<details class="why-source">{summary}<ul>{items}</ul></details>'


def _datastore_share(nodes: Mapping[str, float]) -> float:
    """The datastore's share (alone or with the conversation) of the nodes a step verified."""
    total = sum(nodes.values())
    return (nodes["datastore"] + nodes["both"]) / total if total else 0.0


def question(here_nodes: Mapping[str, float]) -> str:
    """The paragraph's heading, asked of what the session's steps verified: why the datastore's
    guesses mostly miss the cut where they do, what a GPU adds where they make it."""
    if _datastore_share(here_nodes) < 0.5:
        return "Why are the datastore's drafts mostly not verified here?"
    return "Where do the verified drafts come from here, and what would a bigger c add?"


def _why_kinds(nodes: Mapping[str, float]) -> str:
    """Why the verified guesses split as they do (the sentence's end)."""
    if _datastore_share(nodes) < 0.5:
        return (
            "Text the conversation already holds is one strong continuation; the datastore's weight is spread over "
            "up to K continuations, so its drafts are lighter and rarely make the cut."
        )
    return "The datastore's continuations weigh at least as much as what the conversation offers this answer."


def _kinds(nodes: dict[str, float]) -> str:
    """ "6.0 from the conversation, 7.2 from the datastore": the kinds that drafted any."""
    return ", ".join(f"{nodes[k]:.1f} from {LABELS[k]}" for k in KINDS if f"{nodes[k]:.1f}" != "0.0") or "none"
