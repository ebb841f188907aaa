"""The live statistics under the chat: tokens/s, M, steps and where the tokens came from."""

from __future__ import annotations

from collections.abc import Sequence

from rest_core.decode.events import StepEvent
from rest_core.sources import count_origins
from rest_core.ui.style import esc


def source_counts(events: Sequence[StepEvent]) -> dict[str, int]:
    """Emitted tokens by origin: 'datastore', 'context', 'both', 'model'."""
    return count_origins(s for e in events for s in e.token_sources)


def stats_html(events: Sequence[StepEvent], running: bool = False) -> str:
    if not events:
        return '<div class="stats muted">Stats appear here while the answer streams.</div>'
    t = events[-1].totals
    c = source_counts(events)
    n = max(t.new_tokens, 1)
    items = [
        ("tokens/s", f"{t.tokens_per_s:.1f}"),
        ("tokens / step (M)", f"{t.mean_generated_length:.2f}"),
        ("steps", f"{t.steps}"),
        ("tokens", f"{t.new_tokens}"),
        ("from drafts", f"{100 * t.draft_share:.0f}%"),
    ]
    if events[-1].method == "rest":
        shown = {"datastore": "datastore", "context": "conversation", "both": "both"}  # the context is the conversation
        shares = ", ".join(f"{shown[k]} {100 * c[k] / n:.0f}%" for k in shown if c[k])
        items.append((f"of its {n} tokens, drafted by", shares or "none"))  # every token, the model's own too
    state = '<span class="live">generating…</span>' if running else ""
    cells = "".join(
        f'<div class="stat{" small" if len(v) > 12 else ""}"><div class="v">{esc(v)}</div><div class="k">{esc(k)}</div></div>'
        for k, v in items
    )
    return f'<div class="stats">{cells}{state}</div>'
