"""What the app's and the session's tests share: the scripted answer and the page's settings."""

from __future__ import annotations

from typing import Any

from rest_core.config import PRESETS
from rest_core.knobs import APP_KNOBS

ANSWER = 'def add(a, b):\n    return a + b  # <ok> & "done" 世界\n\nprint(add(1, 2))\n'

# The page's settings in the tests: the CPU preset's, with a bigger tree and both sources on.
KNOB_DEFAULTS: dict[str, Any] = {k.name: k.default(PRESETS["cpu"]) for k in APP_KNOBS} | dict(
    c=8, m=6, use_context=True, max_new_tokens=200
)


def knob_values(**over: Any) -> dict[str, Any]:
    """Knob name -> value, as Chat.respond takes them."""
    unknown = set(over) - set(KNOB_DEFAULTS)
    assert not unknown, f"not knobs: {unknown}"
    return {**KNOB_DEFAULTS, **over}


def step_knobs(**over: Any) -> dict[str, Any]:
    """Knob name -> value as the step-through's handlers take them: every knob but c (the
    step-through has a c of its own)."""
    return {name: value for name, value in knob_values(**over).items() if name != "c"}


def knob_args(**over: Any) -> list[Any]:
    """The knob values in the order the HTTP API takes them (after the message and the store)."""
    values = knob_values(**over)
    return [values[k.name] for k in APP_KNOBS]


def respond(session: Any, runtime: Any, message: str, store: Any, knobs: dict[str, Any]) -> Any:
    """Send on a visitor's chat (rest_core.ui.chat.Chat.respond), drafting from its own stores too."""
    return session.chat.respond(runtime, message, store, knobs, session.corpora.uploads, session.key)


def compare_on(session: Any, runtime: Any, message: str, store: Any, knobs: dict[str, Any]) -> Any:
    """Compare on a visitor's chat (rest_core.ui.compare.compare)."""
    from rest_core.ui.compare import compare

    return compare(runtime, session.chat, message, store, knobs, session.corpora.uploads, session.key)
