""" "Where it came from": the documents behind a step's drafts, each sampled occurrence of a
source's match shown in the text around it (a datastore's document, or the conversation for the
context source), the match and the continuation that followed it marked.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rest_core.decode.events import MatchInfo, StepEvent
from rest_core.sources import SOURCE_CONTEXT
from rest_core.ui.style import Tokenizer, decode_text, esc, plural, shown_name, source_class

PROVENANCE_SHOWN = 3  # occurrences shown per source
PROVENANCE_BEFORE = 40  # corpus tokens shown before a match
PROVENANCE_AFTER = 24  # and after its continuation


def _marked(tokenizer: Tokenizer, window: Sequence[int], at: int, n: int, cont: int, css: str) -> str:
    """Corpus text of `window` with the match (window[at:at + n]) and the continuation that
    followed it (the next `cont` tokens) marked; each part decoded as a whole (multi-byte
    characters split over tokens stay intact)."""
    w = [int(t) for t in window]
    parts = [
        ("prov-before", w[:at]),
        (f"prov-match m-{css}", w[at : at + n]),
        (f"prov-cont {css}", w[at + n : at + n + cont]),
        ("prov-after", w[at + n + cont :]),
    ]
    return "".join(f'<span class="{cls}">{esc(decode_text(tokenizer, ids))}</span>' for cls, ids in parts if ids)


def _occurrence_html(m: MatchInfo, i: int, store: Any, context: Sequence[int], tokenizer: Tokenizer) -> str:
    pos = m.positions[i]
    cont = len(m.sample[i]) if i < len(m.sample) else 0
    css = source_class(m.source_bit)
    if m.source_bit == SOURCE_CONTEXT:
        lo = max(0, pos - PROVENANCE_BEFORE)
        window = list(context[lo : pos + m.suffix_len + cont + PROVENANCE_AFTER])
        where = f"earlier in this conversation, token {pos:,}"
    else:  # a datastore: the document the occurrence sits in
        span = store.document_at(pos)
        window = store.context_around(pos, PROVENANCE_BEFORE, m.suffix_len + cont + PROVENANCE_AFTER)
        lo = max(span.start, pos - PROVENANCE_BEFORE)
        where = f'<span class="prov-doc">{esc(span.name)}</span> · token {pos - span.start:,} of {span.end - span.start:,} in that document'
    text = _marked(tokenizer, window, pos - lo, m.suffix_len, cont, css)
    return f'<li class="prov-occ" data-position="{pos}"><div class="prov-where">{where}</div><div class="prov-text">{text}</div></li>'


def provenance_html(
    event: StepEvent,
    stores: Mapping[str, Any],
    context: Sequence[int],
    tokenizer: Tokenizer,
    shown: int = PROVENANCE_SHOWN,
) -> str:
    """ "Where it came from": for the first few sampled occurrences of each source's match, the
    document (a datastore's; the conversation for the context source) and the text around it,
    the matched suffix and the continuation that followed it marked. `stores`: the engine's
    datastores by source name. A store without a document index says how to rebuild it."""
    blocks = []
    for m in event.matches:
        if not m.suffix_len or not m.positions:
            continue
        head = f'<span class="chip {source_class(m.source_bit)}">{esc(shown_name(m.source_bit, m.source))}</span>'
        store = stores.get(m.source) if m.source_bit != SOURCE_CONTEXT else None
        if m.source_bit != SOURCE_CONTEXT and store is None:
            continue
        if store is not None and store.documents is None:
            blocks.append(
                f'<div class="prov-src">{head} <span class="prov-note">{esc(store.documents_note)}</span></div>'
            )
            continue
        n = min(shown, len(m.positions))
        items = "".join(_occurrence_html(m, i, store, context, tokenizer) for i in range(n))
        of = f"{n} of the {plural(m.occurrences, 'occurrence')}"
        blocks.append(
            f'<div class="prov-src">{head} {of}: the match <span class="prov-match-key m-{source_class(m.source_bit)}">underlined</span>, '
            f'what followed it (the draft) <span class="prov-cont-key {source_class(m.source_bit)}">shaded</span><ul class="prov-list">{items}</ul></div>'
        )
    if not blocks:
        return ""
    return (
        '<details class="prov" id="provenance"><summary>Where it came from: the documents behind the drafts</summary>'
        + "".join(blocks)
        + "</details>"
    )
