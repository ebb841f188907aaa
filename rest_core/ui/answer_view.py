"""The answer as the chat shows it: token ids -> text pieces (`IncrementalDecoder`), the
highlighted spans of an answer (`AnswerView`, `highlight_html`), the colour key (`legend_html`)
and the conversation (`conversation_html`).

Pure functions and small accumulator classes over `StepEvent`s and a tokenizer; no Gradio here.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from rest_core.decode.events import StepEvent, Totals
from rest_core.sources import SourceTable
from rest_core.ui.style import (
    CONTEXT_NAME,
    DEFAULT_STORES,
    SEVERAL_NAME,
    Tokenizer,
    decode_text,
    esc,
    shown_name,
    source_class,
    source_label,
    step_source_names,
)

# ----------------------------------------------------------------------------------------------
# Incremental detokenization


class IncrementalDecoder:
    """Turns a stream of token ids into text pieces, one per token, that concatenate to the
    decoded text exactly.

    Decoding token by token is wrong for byte-level vocabularies: one character (an emoji, a CJK
    character) can span several tokens, and a token can end inside a character. So each new token
    decodes a short window of recent ids and takes the growth of that text; while the window ends
    inside a character (the decoded text ends with U+FFFD) the token yields None and its bytes are
    carried into the next token's piece.
    """

    MAX_PENDING = 4  # a UTF-8 character is at most 4 bytes: never wait for more tokens than that

    def __init__(self, tokenizer: Tokenizer) -> None:
        self.tokenizer = tokenizer
        self.ids: list[int] = []
        self._prefix = 0  # start of the decode window (kept one token back for word-start spaces)
        self._read = 0  # ids before this index have been emitted as text

    def push(self, token_id: int) -> str | None:
        """Add one token; return the text it completes, or None if it ends inside a character."""
        self.ids.append(int(token_id))
        prefix_text = decode_text(self.tokenizer, self.ids[self._prefix : self._read])
        full_text = decode_text(self.tokenizer, self.ids[self._prefix :])
        pending = len(self.ids) - self._read
        if full_text.endswith("\ufffd") and pending < self.MAX_PENDING:
            return None
        return self._emit(prefix_text, full_text)

    def flush(self) -> str:
        """Text of tokens still waiting for the rest of a character (at the end of an answer)."""
        if self._read == len(self.ids):
            return ""
        prefix_text = decode_text(self.tokenizer, self.ids[self._prefix : self._read])
        return self._emit(prefix_text, decode_text(self.tokenizer, self.ids[self._prefix :]))

    def _emit(self, prefix_text: str, full_text: str) -> str:
        # The window's text extends the prefix's text; its growth is this token's piece.
        piece = full_text[len(prefix_text) :]
        self._prefix = self._read
        self._read = len(self.ids)
        return piece


# ----------------------------------------------------------------------------------------------
# Highlighted answer


_LEADING_BLANKS = re.compile(r"[ \t]*\n\s*|[ \t]{2,}")  # a line break with its indentation, or 2+ spaces


def run_level(accepted_len: int) -> int:
    """Shade strength for a step that accepted this many draft tokens: 1..4."""
    if accepted_len <= 1:
        return 1
    if accepted_len <= 3:
        return 2
    if accepted_len <= 7:
        return 3
    return 4


def shade_class(source: int, accepted_len: int, step: int) -> str:
    """The CSS classes of one token of a step: its source's hue, shaded by the step's accepted
    run (`run_level`), or the model's own; the step's parity. Every view that shades a step's
    tokens (the answer, the step-through's Accept panel, the inspector) uses this one."""
    if source:
        return f"tok d {source_class(source)} r{run_level(accepted_len)} p{step % 2}"
    # the underline marks the model's token after accepted drafts; a step that accepted none
    # wrote only that one token, so nothing needs telling apart (class "lone": no underline)
    return f"tok m{' lone' if not accepted_len else ''} p{step % 2}"


@dataclass(frozen=True)
class Span:
    """One highlighted piece of the answer: the text of one token, or of a few tokens when a
    character straddles token boundaries (then the first token's attributes are shown)."""

    text: str
    token_ids: tuple[int, ...]
    step: int
    source: int  # bitmask of the sources that drafted it; 0 = the model's own token
    accepted_len: int  # draft tokens accepted in this step
    suffix_lens: tuple[tuple[str, int], ...]  # (source name, matched suffix length) per source
    names: tuple[tuple[int, str], ...] = ()  # (bit, name) of the step's sources: stores by their names

    def title(self) -> str:
        parts = [f"step {self.step + 1}"]
        if self.source:
            parts.append(f"drafted by {source_label(self.source, dict(self.names))}")
        else:
            parts.append("model's own token")
        if self.suffix_lens:
            parts.append(
                "matched suffix "
                + ", ".join(f"{n} ({name})" if len(self.suffix_lens) > 1 else str(n) for name, n in self.suffix_lens)
            )
        parts.append(f"{self.accepted_len} draft token{'s' if self.accepted_len != 1 else ''} accepted this step")
        if len(self.token_ids) > 1:
            parts.append(f"{len(self.token_ids)} tokens form this character")
        return " · ".join(parts)

    def html(self, marked: bool = False) -> str:
        """`marked`: the step-through's current step, whose blanks show (`blank_marks`)."""
        cls = shade_class(self.source, self.accepted_len, self.step)
        attrs = f'data-step="{self.step}" title="{esc(self.title())}"'
        shown = (lambda s: blank_marks(s, dots=not self.text.strip())) if marked else esc
        # Indentation and line breaks are not words: a run of them gets a thin line in the
        # token's colour, not the block of colour a word gets (class "ws").
        lead = _LEADING_BLANKS.match(self.text)
        if lead is None:
            return f'<span class="{cls}" {attrs}>{shown(self.text)}</span>'
        blank, rest = lead.group(0), self.text[lead.end() :]
        out = f'<span class="{cls} ws" {attrs}>{shown(blank)}</span>'
        return out + (f'<span class="{cls}" {attrs}>{shown(rest)}</span>' if rest else "")


NEWLINE_MARK = '<span class="ws-mark" aria-hidden="true">↵</span>'
SPACE_MARK = '<span class="ws-mark" aria-hidden="true">·</span>'


def blank_marks(text: str, dots: bool) -> str:
    """`text` as HTML with its line breaks shown: a faint ↵ before each; with `dots` (a piece that
    is all blanks, which would show nothing), each space a faint ·, as the tree's labels write them."""
    out = esc(text)
    if dots:
        out = out.replace(" ", SPACE_MARK)
    return out.replace("\n", NEWLINE_MARK + "\n")


class AnswerView:
    """Accumulates one answer's step events into highlighted spans (cheap to extend per step)."""

    def __init__(self, tokenizer: Tokenizer) -> None:
        self.tokenizer = tokenizer
        self.events: list[StepEvent] = []
        self.spans: list[Span] = []
        self._decoder = IncrementalDecoder(tokenizer)
        self._html: list[str] = []
        self._waiting: list[tuple[int, int, StepEvent]] = []  # tokens inside an unfinished character

    def add(self, event: StepEvent) -> None:
        self.events.append(event)
        for token, src in zip(event.tokens, event.token_sources):
            self._waiting.append((token, src, event))
            piece = self._decoder.push(token)
            if piece is not None:
                self._add_span(piece)
        if event.finished:
            self.finish()

    def finish(self) -> None:
        """Flush tokens that were waiting for the rest of a character."""
        if self._waiting:
            self._add_span(self._decoder.flush())

    def _add_span(self, text: str) -> None:
        waiting, self._waiting = self._waiting, []
        if not text:  # special tokens (EOS) decode to nothing
            return
        _, src, event = waiting[0]
        span = Span(
            text=text,
            token_ids=tuple(t for t, _, _ in waiting),
            step=event.step,
            source=src,
            accepted_len=event.accepted_len,
            suffix_lens=tuple((shown_name(m.source_bit, m.source), m.suffix_len) for m in event.matches),
            names=step_source_names(event),
        )
        self.spans.append(span)
        self._html.append(span.html())

    @property
    def text(self) -> str:
        return "".join(s.text for s in self.spans)

    @property
    def totals(self) -> Totals | None:
        return self.events[-1].totals if self.events else None

    def html(self) -> str:
        return "".join(self._html)


def highlight_html(events: Sequence[StepEvent], tokenizer: Tokenizer, current: int | None = None) -> str:
    """Highlighted HTML of a whole answer (see AnswerView for the incremental form). `current`:
    the step-through's step, whose blanks show (a step that wrote only line breaks changes the
    answer visibly); the chat passes none."""
    view = AnswerView(tokenizer)
    for e in events:
        view.add(e)
    view.finish()
    if current is None:
        return view.html()
    return "".join(s.html(marked=s.step == current) for s in view.spans)


# What the dotted underline is, in the key's words; when a step has none is the glossary's to say
# (NO_OWN_TOKEN, said fully once on the page), so the key says "usually" and points there.
MODEL_TOKEN_NOTE = (
    "a dotted underline marks the model's own token after a step's accepted drafts (usually: see How REST works); "
    "plain text: a step that accepted no draft, its token alone"
)
# Every other step is a little greyer than its neighbour, in the same hue: two steps side by side
# stay apart without a colour the key does not show.
PARITY_NOTE = "every other step is a little greyer, so two steps side by side stay apart"


def legend_html(stores: Sequence[str] = DEFAULT_STORES) -> str:
    """The colour key, short: one entry per datastore drafting (`stores`, in the engine's order,
    each in its own colour), the conversation, several sources together and the model; what the
    shade and the dotted underline say; the shade scale of every source folded below."""

    def sample(cls: str, text: str, title: str) -> str:
        return f'<span class="{cls}" title="{esc(title)}">{esc(text)}</span>'

    levels = ((1, "1"), (2, "2-3"), (3, "4-7"), (4, "8+"))
    table = SourceTable.for_stores(list(stores), DEFAULT_STORES)

    def shades(css: str, name: str) -> str:  # each source's hue darkens the same way
        return (
            f'<span class="shade-row">{esc(name)} '
            + "".join(
                sample(f"tok d {css} r{k} p0", label, f"{name}: {label} draft tokens accepted in one step")
                for k, label in levels
            )
            + "</span>"
        )

    names = ", ".join([*(s.name for s in table.stores), CONTEXT_NAME])
    return (
        '<div class="legend">'
        + '<span class="legend-item legend-head">Colour key:</span>'
        + "".join(
            sample(f"tok d {s.css} r1 p0", s.name, f"draft tokens retrieved from the datastore {s.name}")
            for s in table.stores
        )
        + sample("tok d cx r1 p0", CONTEXT_NAME, "draft tokens found earlier in this conversation")
        + sample(
            "tok d both r1 p0",
            SEVERAL_NAME,
            f"draft tokens proposed by two or more of: {names}; hover a token to see which",
        )
        + sample("tok m p0", "model", "the model's own token")
        + '<span class="legend-item">darker: more draft tokens accepted in that step</span>'
        + f'<span class="legend-item">{MODEL_TOKEN_NOTE}</span>'
        + '<details class="legend-more"><summary>Shades by source, line breaks, clicking a token</summary>'
        + '<span class="legend-item">shade = draft tokens accepted in that step: '
        + "".join(shades(st.css, st.name) for st in table.stores)
        + shades("cx", CONTEXT_NAME)
        + shades("both", SEVERAL_NAME)
        + "</span>"
        + f'<span class="legend-item">{PARITY_NOTE}</span>'
        + '<span class="legend-item">drafted indentation and line breaks get a thin line, not a block; '
        "click (or tap) a token to see its step in the inspector; hovering shows a summary</span>" + "</details></div>"
    )


# ----------------------------------------------------------------------------------------------
# Conversation


@dataclass
class Turn:
    """One exchange as shown in the chat: the user's text and the (possibly partial) answer."""

    user: str
    answer_html: str = ""
    note: str = ""  # e.g. "stopped", an error message, the finish reason
    error: bool = False


def conversation_html(turns: Sequence[Turn], placeholder: str = "") -> str:
    if not turns:
        return f'<div class="convo empty"><div class="placeholder">{esc(placeholder)}</div></div>'
    parts = []
    for t in turns:
        parts.append(f'<div class="msg user"><div class="bubble">{esc(t.user)}</div></div>')
        note = f'<div class="note{" err" if t.error else ""}">{esc(t.note)}</div>' if t.note else ""
        body = f'<div class="answer">{t.answer_html}</div>' if t.answer_html else ""
        if not body and not note:
            body = '<div class="answer thinking">…</div>'
        parts.append(f'<div class="msg bot"><div class="bubble">{body}{note}</div></div>')
    # column-reverse keeps the newest message in view while streaming, without any script.
    return '<div class="convo"><div class="convo-inner">' + "".join(parts) + "</div></div>"
