"""The step inspector: what one step matched in each source, drafted and accepted, and its timings."""

from __future__ import annotations

from collections import Counter

from rest_core.decode.events import StepEvent
from rest_core.ui.answer_view import shade_class
from rest_core.ui.feeds_view import feeds_list, feeds_listed
from rest_core.ui.measures import LIVE_SLOWER, step_split
from rest_core.ui.style import Tokenizer, decode_text, esc, shown_name, source_class, visible
from rest_core.ui.tree_key import END_MARK, END_SHOWN, budget_words, end_token, no_own_reason


def sample_list(samples: list[str], limit: int) -> str:
    """The sampled continuations of a source, alike ones once with ×N, commonest first."""
    counts = Counter(samples)
    return "".join(
        f"<li><code>{esc(text)}</code>{f' ×{n}' if n > 1 else ''}</li>" for text, n in counts.most_common(limit)
    )


def inspector_html(
    event: StepEvent | None,
    tokenizer: Tokenizer,
    n_steps: int | None = None,
    samples: int = 4,
    c_max: int | None = None,
) -> str:
    """What one step matched, drafted and accepted. `c_max`: the most an auto budget may draft
    per step (unknown: not said); the step's own count is never called c (`budget_words`)."""
    if event is None:
        return '<div class="inspector muted">Pick a step to see what was matched, drafted and accepted.</div>'
    dec = lambda ids: decode_text(tokenizer, ids)  # noqa: E731
    own = [t for t, s in zip(event.tokens, event.token_sources) if not s]
    of = f" of {n_steps}" if n_steps else ""
    head = (
        f'<div class="ins-head"><b>Step {event.step + 1}{of}</b> · {"REST" if event.method == "rest" else "plain decoding"}'
        f" · {budget_words(event, c_max)} · accepted {event.accepted_len}</div>"
    )
    rows = source_rows(event, tokenizer, samples)
    end = end_token(event)  # an accepted end-of-text token prints as nothing: shown as END_MARK
    acc = "".join(
        f'<span class="{shade_class(s, event.accepted_len, event.step)}">'
        f"{END_MARK if end is not None and i == len(event.tokens) - 1 else esc(visible(dec([t]), 20))}</span>"
        for i, (t, s) in enumerate(zip(event.tokens, event.token_sources))
        if s
    )
    own_html = "".join(
        f'<span class="{shade_class(0, event.accepted_len, event.step)}">{esc(visible(dec([t]), 20))}</span>'
        for t in own
    )
    # every part to 0.1 ms and the step their printed sum (a reader adding them gets the step),
    # with how it was measured: the chat's steps run while the page streams and draws
    timing = f"{step_split(event).line()} ({LIVE_SLOWER})"
    return (
        '<div class="inspector">'
        + head
        + "".join(rows)
        + f'<div class="ins-acc">accepted: {acc or "<i>none</i>"} then the model\'s own: {own_html or "<i>none</i>"}</div>'
        + ("" if own_html else f'<div class="ins-note">{esc(own_note(event, end))}</div>')
        + f'<div class="ins-time">{timing}</div>'
        + "</div>"
    )


def own_note(event: StepEvent, end: int | None) -> str:
    """Why this step wrote no token of the model's own, as a sentence (the general rule is the
    glossary's, said once on the page), and where an end-of-text token shows."""
    reason = no_own_reason(event)
    return reason[0].upper() + reason[1:] + "." + (END_SHOWN if end is not None else "")


def read_count(event: StepEvent, bit: int) -> int | None:
    """How many continuations the source `bit` read this step (its weights' denominator), from
    the step's feeds; None when they do not say."""
    for feed in event.feeds:
        for source, _, read in feed.counts:
            if source == bit:
                return read
    return None


def sampled_note(event: StepEvent, bit: int, occurrences: int) -> str:
    """ ", a fair sample of 5,000 read" where the source read fewer continuations than its
    match occurs (K caps them), so the weights' "/5,000" meets the count it samples."""
    read = read_count(event, bit)
    return f", a fair sample of <b>{read:,}</b> read" if read is not None and read < occurrences else ""


def source_rows(event: StepEvent, tokenizer: Tokenizer, samples: int) -> list[str]:
    """The inspector's lines on what each source matched, and on what fed the draft."""
    dec = lambda ids: decode_text(tokenizer, ids)  # noqa: E731
    rows = []
    for m in event.matches:
        if m.suffix_len:
            # With the step's feeds (below) those say which continuations fed the drafted nodes;
            # without them, the source's first few continuations, alike ones counted once.
            conts = "" if event.feeds else sample_list([visible(dec(c), 60) for c in m.sample], samples)
            rows.append(
                f'<div class="ins-src"><span class="chip {source_class(m.source_bit)}">{esc(shown_name(m.source_bit, m.source))}</span> '
                f"matched the last <b>{m.suffix_len}</b> token{'s' if m.suffix_len != 1 else ''} "
                f"<code>{esc(visible(dec(m.suffix_tokens), 60))}</code> · <b>{m.occurrences:,}</b> occurrence{'s' if m.occurrences != 1 else ''}"
                + sampled_note(event, m.source_bit, m.occurrences)
                + (f'<ul class="conts">{conts}</ul>' if conts else "")
                + "</div>"
            )
        else:
            rows.append(
                f'<div class="ins-src"><span class="chip {source_class(m.source_bit)}">{esc(shown_name(m.source_bit, m.source))}</span> no match</div>'
            )
    if event.feeds:
        # folded: the weights' arithmetic and the continuations are the detail under the step's
        # result (what each source matched, above, and what was accepted, below)
        rows.append(
            f'<details class="ins-feeds"><summary>What fed {esc(feeds_listed(event))}: weights and '
            f"continuations</summary>With how many continuations begin alike:{feeds_list(event, tokenizer, rows=False)}"
            "</details>"
        )
    if not event.matches and event.draft is not None:  # a vLLM step: the chain it verified, not the search
        rows.append('<div class="ins-src muted">vLLM verified one chain (its matches are not recorded)</div>')
    elif not event.matches:
        rows.append('<div class="ins-src muted">no draft source (plain decoding)</div>')
    return rows
