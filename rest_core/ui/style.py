"""What every view of rest_core.ui shares: the source colours, the tokenizer protocol, user text
made valid, HTML escaping, a draft source's CSS class and name, and token labels.

Class names used in the HTML are styled by assets/app.css.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any, Protocol

from rest_core.decode.events import StepEvent
from rest_core.sources import MODEL, SOURCE_CONTEXT, STYLES, origin

# One colour per draft source (by bit), shared by the highlighting (CSS) and the trie figure;
# a token of several sources takes `origin(mask).color`.
SOURCE_COLORS: dict[int, str] = {bit: color for bit, (_, color) in STYLES.items()}
ACCEPTED_COLOR = "#16a34a"
MODEL_COLOR = MODEL.color
GREY = "#9ca3af"
# The page's default stores, built at startup when missing. They also keep one bit each, so one
# colour and one name in every view, whichever of them a message drafts from
# (`rest_core.sources.stable_bits`): "chat" is blue alone and beside "code".
DEFAULT_STORES = ("chat", "code")
# What every view calls a token that more than one source drafted (violet; the hover names them).
SEVERAL_NAME = "several sources"
# The context source as the page names it: beside a datastore called "chat", a bare "context"
# reads like another corpus, and one term per idea reads best: "conversation" everywhere on the
# page. Only the page's words change; the engine, the JSON keys and the knobs keep "context".
CONTEXT_NAME = "conversation"
# When a step has no token of the model's own, in one sentence every view uses (the colour key,
# the glossary, the header, the tree's key): a step the length limit cuts ends on its drafts, and
# a step whose accepted draft ends the answer ends on an end-of-text token the page does not show.
NO_OWN_TOKEN = (
    "none when the length limit cuts the step, or when an accepted draft ends the answer "
    "(the end-of-text token is not shown)"
)


class Tokenizer(Protocol):
    def decode(self, ids: Sequence[int], skip_special_tokens: bool = ..., **kwargs: Any) -> str: ...


def decode_text(tokenizer: Tokenizer, ids: Sequence[int]) -> str:
    return tokenizer.decode(list(ids), skip_special_tokens=True, clean_up_tokenization_spaces=False)


def clean_text(text: Any) -> str:
    """User text as valid Unicode (None: ""): a lone surrogate, which JSON may carry ("\\ud800")
    but UTF-8 cannot, becomes U+FFFD (the page's JSON encoder and the tokenizers refuse it, so one
    kept in a conversation would break every later update), a surrogate pair its character."""
    text = "" if text is None else text if isinstance(text, str) else str(text)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


def esc(text: str) -> str:
    """HTML-escape model output, quotes included (it also lands inside attributes)."""
    return html.escape(text, quote=True)


def plot_esc(text: str) -> str:
    """Text for a Plotly label, title or tick, escaped once for that medium: Plotly reads its
    own small HTML (<b>, <br>) and only a few entities (&amp; &lt; &gt; and numeric ones), so
    `esc`'s &quot; and &#x27; would show as typed (a drafted `."` read `.&quot;`)."""
    return html.escape(text, quote=False)


def source_class(mask: int) -> str:
    return origin(mask).css


def shown_name(bit: int, name: str) -> str:
    """A source's name as the page shows it: a store's own name, the context as CONTEXT_NAME."""
    return CONTEXT_NAME if int(bit) == SOURCE_CONTEXT else name


def several(mask: int) -> bool:
    """Whether more than one source drafted a token of `mask` (the page's violet)."""
    mask = int(mask)
    return bool(mask & (mask - 1))


def source_label(mask: int, names: dict[int, str] | None = None) -> str:
    """ "code + conversation": the sources of `mask` by name as the page shows them
    (`names`: bit -> name, e.g. an engine's table or a step's matches; else the default names)."""
    return origin(mask, {**(names or {}), SOURCE_CONTEXT: CONTEXT_NAME}).label


def step_source_names(event: StepEvent) -> tuple[tuple[int, str], ...]:
    """(bit, name) of the sources that searched in this step: a store's own name ("code")
    instead of the bit's default ("store 2"), the context as CONTEXT_NAME."""
    return tuple((int(m.source_bit), shown_name(m.source_bit, m.source)) for m in event.matches)


# A special token (the chat template's "<|im_start|>", the end of a turn) prints as nothing: its
# label is its name in a short mark, the end-of-text token's as END_MARK (tree_key's, the same).
END_MARK = "⟨end⟩"


def special_mark(tokenizer: Tokenizer, token_id: int) -> str:
    """A special token's label: "⟨im_start⟩" for "<|im_start|>", END_MARK for the tokenizer's
    end-of-text token; "" for a token that prints as something or has no name."""
    raw = tokenizer.decode([int(token_id)], skip_special_tokens=False)
    if not raw.strip():
        return ""
    if int(token_id) == getattr(tokenizer, "eos_token_id", None):
        return END_MARK
    return f"⟨{raw.strip().strip('<>').strip('|').strip() or raw.strip()}⟩"


def token_text(tokenizer: Tokenizer, token_id: int) -> str:
    """A token's text; a special token, which prints as nothing, by its mark (special_mark)."""
    text = decode_text(tokenizer, [int(token_id)])
    return text or special_mark(tokenizer, token_id)


def is_special(tokenizer: Tokenizer, token_id: int) -> bool:
    return not decode_text(tokenizer, [int(token_id)]) and bool(special_mark(tokenizer, token_id))


def visible(text: str, limit: int = 10) -> str:
    """Make whitespace visible and cut long labels (for tree labels and inspector chips)."""
    shown = text.replace("\n", "↵").replace("\t", "⇥").replace(" ", "·")
    if not shown:
        shown = "∅"
    return shown if len(shown) <= limit else shown[: limit - 1] + "…"


def token_label(tokenizer: Tokenizer, token: int, limit: int = 10) -> str:
    return visible(token_text(tokenizer, int(token)), limit)


def quoted(text: str, limit: int = 60) -> str:
    """“text” on one line, cut at `limit` characters: how a view names the message it describes."""
    text = " ".join(text.split())
    return f"“{text if len(text) <= limit else text[: limit - 1] + '…'}”"


def plural(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def status_html(message: str, kind: str = "info", elem_id: str = "") -> str:
    """A status line (kind: info, warn, err; `elem_id`: the page element's id, if it has one);
    `message` is HTML. "" for no message."""
    if not message:
        return ""
    where = f' id="{elem_id}"' if elem_id else ""
    return f'<div class="status {kind}"{where}>{message}</div>'
