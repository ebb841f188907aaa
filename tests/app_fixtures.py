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
    """Knob name -> value, as Session.respond takes them."""
    unknown = set(over) - set(KNOB_DEFAULTS)
    assert not unknown, f"not knobs: {unknown}"
    return {**KNOB_DEFAULTS, **over}


def knob_args(**over: Any) -> list[Any]:
    """The knob values in the order the app's handlers take them."""
    values = knob_values(**over)
    return [values[k.name] for k in APP_KNOBS]
