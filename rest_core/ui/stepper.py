"""Step-through mode: one user's answer advanced one REST step per click. No Gradio here.

The engine's generator is lazy, so "Next step" pulls exactly one more forward from it; the
generator (and the KV cache it owns) is held between clicks and closed on Clear, on a new
prompt or at the end. Each pull takes the runtime's lock, so a user stepping slowly never
blocks others between clicks. "Back" only moves through the steps already taken.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from rest_core.config import GenerationConfig
from rest_core.decode.events import StepEvent
from rest_core.knobs import BY_NAME
from rest_core.ui.runtime import Runtime
from rest_core.ui.session import request_config
from rest_core.ui.style import clean_text

STEP_C_MAX = 64  # step mode lets the tree grow: speed is not the point here
# The step-through's c: the c knob's checks (a finite whole number), its range 1..STEP_C_MAX.
STEP_C = replace(BY_NAME["c"], maximum=STEP_C_MAX)


def step_c(value: Any) -> int:
    """The step-through's c as the page (or an API client) sent it, checked against STEP_C;
    ConfigError with a one-line message naming c (NaN, inf, a string, 65, 2.5, True)."""
    return STEP_C.parse(value)


class Stepper:
    """The step-through state of one browser tab (the app keeps it in gr.State; a plain class,
    not a dataclass, since Gradio serializes dataclass state values field by field)."""

    def __init__(self) -> None:
        self.events: list[StepEvent] = []
        self.prompt_ids: list[int] = []
        self.config: GenerationConfig | None = None
        self.pos = -1  # the step shown, 0-based; -1 = none yet
        self.message = ""  # the message being answered
        self.tokenizer: Any = None
        self.stores: dict[str, Any] = {}  # the engine's datastores by name ("where it came from")
        self._steps: Iterator[StepEvent] | None = None
        self._lock = threading.Lock()  # one move at a time
        self._model_lock: Any = None  # the runtime's: one forward of the shared model at a time

    def __deepcopy__(self, memo: dict) -> Stepper:  # gr.State copies its initial value per tab
        return Stepper()

    # -- lifecycle --

    def start(
        self,
        runtime: Runtime,
        message: str,
        store: Any,
        knobs: dict[str, Any],
        c: int,
        private: Mapping[str, Path] | None = None,
        owner: str = "",
    ) -> None:
        """A new answer to `message` (one user turn) with the page's settings, a fixed budget c
        (step mode shows the tree the user asked for, not the auto budget's choice) and the
        datastores `store` (names; `private`: the page's own uploads, name -> folder, of the
        session `owner`). Nothing runs yet: the first `next()` prefills and takes step 1.
        Raises ConfigError / ValueError with a one-line message for bad input."""
        self.close()
        message = clean_text(message).strip()
        if not message:
            raise ValueError("Type a message to step through.")
        config, names = request_config(store, {**knobs, "c": int(c), "budget": "fixed"}, runtime.preset)
        engine = runtime.engine(runtime.resolve(names, private, owner))
        self.prompt_ids = list(engine.encode([{"role": "user", "content": message}], chat=True))
        if engine.max_positions:
            room = engine.max_positions - len(self.prompt_ids) - config.draft.c - 1
            if room < 8:
                raise ValueError(f"the message is too long for the model's context ({engine.max_positions} tokens)")
            config = replace(config, max_new_tokens=min(config.max_new_tokens, room))
        self.config, self.message = config, message
        self.stores = dict(engine.datastores)
        self.tokenizer = runtime.loaded().tokenizer
        self._model_lock = runtime.lock
        self._steps = engine.generate(self.prompt_ids, config)

    def close(self) -> None:
        """Forget the answer; the held generator ends (its cache is released)."""
        steps, self._steps = self._steps, None
        if steps is not None:
            close = getattr(steps, "close", None)
            if close:
                close()
        self.events, self.prompt_ids, self.pos, self.config, self.message = [], [], -1, None, ""
        self.stores = {}

    # -- moving --

    @property
    def finished(self) -> bool:
        return bool(self.events) and self.events[-1].finished

    @property
    def started(self) -> bool:
        return self._steps is not None or bool(self.events)

    def _pull(self) -> bool:
        """One more step from the engine; False when there is none."""
        if self._steps is None or self.finished:
            return False
        with self._model_lock:
            ev = next(self._steps, None)
        if ev is None:
            self._steps = None
            return False
        self.events.append(ev)
        if ev.finished:
            self._steps = None  # ran to its end: the generator has closed itself
        return True

    def next(self) -> bool:
        """Show the next step, taking it from the engine if needed; False at the end."""
        with self._lock:
            if self.pos + 1 < len(self.events) or self._pull():
                self.pos += 1
                return True
            return False

    def back(self) -> bool:
        with self._lock:
            if self.pos > 0:
                self.pos -= 1
                return True
            return False

    def run_to_end(self, max_seconds: float = 0.0) -> bool:
        """Take every remaining step and show the last; with `max_seconds` (> 0) stop taking
        steps once that long has passed. True when the limit stopped it before the end."""
        deadline = time.monotonic() + max_seconds if max_seconds > 0 else None
        with self._lock:
            cut = False
            while self._pull():
                if deadline is not None and time.monotonic() > deadline and not self.finished:
                    cut = True
                    break
            self.pos = len(self.events) - 1
            return cut

    # -- what is shown --

    @property
    def event(self) -> StepEvent | None:
        return self.events[self.pos] if 0 <= self.pos < len(self.events) else None

    def context(self, pos: int | None = None) -> list[int]:
        """Token ids before step `pos` (default: the step shown): the prompt and every token
        emitted before it; the last one is that step's root."""
        pos = self.pos if pos is None else pos
        return self.prompt_ids + [t for e in self.events[:pos] for t in e.tokens]

    def token_ids(self) -> list[int]:
        """Every token emitted by the steps taken so far."""
        return [t for e in self.events for t in e.tokens]
