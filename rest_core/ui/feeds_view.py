"""The Retrieve panel's "what made the heaviest branches": for a step's heaviest first-level trie
nodes (StepEvent.feeds), whether the step drafted them (at which verify row) and the model took
them, how many of each source's continuations run through them, and the commonest of those
continuations."""

from __future__ import annotations

from rest_core.decode.events import StepEvent
from rest_core.drafting.feeds import Feed
from rest_core.ui import words
from rest_core.ui.style import Tokenizer, decode_text, esc, shown_name, token_label, visible
from rest_core.ui.tree_key import PROBE_SHORT, budget_note


def feed_status(event: StepEvent, feed: Feed) -> str:
    """What the step did with the node: "drafted, accepted", "drafted, rejected" (the model's own
    first token was another), "not drafted (fixed c = …)" / "not drafted (auto budget)" (others
    were), or "not drafted (the step drafted nothing)": an auto step that drafted nothing carries
    no predictions, so its budget cannot be told from the event and is never called "fixed c = 0"."""
    draft = event.draft
    if draft is None or not len(draft.tokens):
        return f"not drafted ({PROBE_SHORT if event.probe else 'the step drafted nothing'})"
    drafted = any(int(t) == feed.token for t, d in zip(draft.tokens, draft.depths) if int(d) == 1)
    if not drafted:
        return f"not drafted ({budget_note(event)})"
    took = bool(event.accepted) and int(draft.tokens[event.accepted[0]]) == feed.token
    return "drafted, accepted" if took else "drafted, rejected"


def feed_row(event: StepEvent, feed: Feed) -> int | None:
    """The verify table's row of the node when the step drafted it (row 0 is the root, drafted
    nodes follow breadth first in the trie's order, not by weight); None when not drafted."""
    draft = event.draft
    if draft is None:
        return None
    for i, (t, d) in enumerate(zip(draft.tokens, draft.depths)):
        if int(d) == 1 and int(t) == feed.token:
            return i + 1
    return None


def feed_counts(event: StepEvent, feed: Feed) -> str:
    """How many continuations run through the node: "41 of 200 continuations" (one source), or
    per source after the total ("43 of 203 continuations: code 41 of 200, conversation 2 of 3")."""
    names = {m.source_bit: shown_name(m.source_bit, m.source) for m in event.matches}
    total = f"{feed.fed:,} of {feed.retrieved:,} continuation{'s' if feed.retrieved != 1 else ''}"
    if len(feed.counts) == 1:
        bit = feed.counts[0][0]
        return f"{total} ({names.get(bit, 'the source')})"
    per = ", ".join(f"{names.get(bit, 'a source')} {n:,} of {k:,}" for bit, n, k in feed.counts)
    return f"{total}: {per}"


def feed_weight(event: StepEvent, feed: Feed) -> str:
    """The node's weight (its share of the trie's first-level weight, what the step drafts by)
    with its arithmetic by the glossary's rule (words.WEIGHT_RULE, words.weight_words): at the
    default weights the mean of the fractions of the sources that found a match ("weight 0.64 =
    mean of code 2/7 = 0.29 and conversation 2/2 = 1.00"), or one source's fraction. Where the
    data do not add up so (weighted sources), the weight and the counts side by side. "" unknown."""
    if feed.share is None:
        return ""
    names = {m.source_bit: shown_name(m.source_bit, m.source) for m in event.matches}
    terms = [(names.get(bit, "a source"), n, k) for bit, n, k in feed.counts if k]
    if terms and abs(words.node_share(terms) - feed.share) < 0.005:
        return words.weight_words(terms)
    return f"weight {feed.share:.2f}; {feed_counts(event, feed)} start with it"


def feed_examples(feed: Feed, tokenizer: Tokenizer) -> list[str]:
    """The commonest continuations through the node as text, "…" where they go on, "×n" when
    several continuations begin alike."""
    out = []
    for e in feed.examples:
        text = visible(decode_text(tokenizer, e.tokens), 40) + ("…" if e.more else "")
        out.append(f"“{text}”" + (f" ×{e.count}" if e.count > 1 else ""))
    return out


def feeds_listed(event: StepEvent) -> str:
    """What the feeds list holds, from the data, and how many first-level branches the step
    drafted: "the accepted branch and the 2 heaviest other branches (5 first-level branches
    drafted)"; "the 2 heaviest branches, none of them drafted" where the step drafted nothing. The
    count stands apart in brackets: "the heaviest other, of 1 drafted first-level branch" read as if
    the undrafted other were one of the drafted (screens13)."""
    draft = event.draft
    firsts = {int(t) for t, d in zip(draft.tokens, draft.depths) if int(d) == 1} if draft is not None else set()
    took = [f for f in event.feeds if feed_status(event, f) == "drafted, accepted"]
    others = len(event.feeds) - len(took)
    parts = ["the accepted branch"] if took else []
    if others:
        other = "other " if took else ""
        parts.append(f"the heaviest {other}branch" if others == 1 else f"the {others} heaviest {other}branches")
    listed = " and ".join(parts) if parts else "no branch"
    of = len(firsts)
    if not of:
        return f"{listed}, {'none of them' if len(event.feeds) > 1 else 'not'} drafted"
    return f"{listed} ({of} first-level branch{'es' if of != 1 else ''} drafted)"


def feeds_list(event: StepEvent, tokenizer: Tokenizer, rows: bool = True) -> str:
    """The feeds as a list, one node a line: its token, what the step did with it, its verify
    row and weight, how many continuations run through it and the commonest of them, ×N when
    several begin alike ("" without feeds). The step-through's Retrieve panel and the chat's
    inspector both show this (`rows`: name the verify table's row, which only Step through shows)."""
    items = []
    for f in event.feeds:
        examples = ", ".join(f"<code>{esc(x)}</code>" for x in feed_examples(f, tokenizer))
        items.append(
            f'<li data-token="{f.token}"><code class="feed-node">{esc(token_label(tokenizer, f.token, 16))}</code> '
            f'<span class="feed-status">{esc(feed_status(event, f))}</span>'
            + (f' · <span class="feed-row">verify row {row}</span>' if rows and (row := feed_row(event, f)) else "")
            + f' · <span class="feed-weight">{esc(feed_weight(event, f) or feed_counts(event, f))}</span>'
            + (f", e.g. {examples}" if examples else "")
            + "</li>"
        )
    return f'<ul class="feeds-list">{"".join(items)}</ul>' if items else ""


def feeds_html(event: StepEvent, tokenizer: Tokenizer) -> str:
    """A list, heaviest node first, of which retrieved continuations fed it; "" without feeds."""
    if not event.feeds:
        return ""
    return (
        f'<div class="feeds" id="feeds"><p class="tt-cap">Which continuations made the heaviest branches: '
        f"{esc(feeds_listed(event))}, heaviest first.</p>{feeds_list(event, tokenizer)}"
        '<details class="tt-more"><summary>How to read this list</summary><p class="tt-cap">Each line is one of '
        "the trie's first tokens. Its weight is what the step drafts by: "
        f"{words.WEIGHT_RULE}. So one of a few continuations counts for more than one of thousands. The verify "
        "table lists the drafted nodes breadth first, so each drafted one here names its row there.</p></details></div>"
    )
