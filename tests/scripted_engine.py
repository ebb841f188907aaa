"""An engine for the app's tests that answers every prompt with one fixed answer: the real
`rest_core.decode.engine.Engine` on a scripted model.

The model is a tiny Llama whose logits are replaced: at every position it predicts the answer's
next token (EOS after the last), so greedy decoding and sampling both replay the answer. All the
rest is the engine's own: retrieval from a datastore of the answer and noisy copies of it (the
trie branches, drafts are partly right), the draft tree, the verify forward, the acceptance walk,
the KV cache, the timings and the step events. The app's, the session's and the renderer's
tests therefore see the events the engine yields, and follow it when they change.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace

import numpy as np
import torch

from rest_core.config import GenerationConfig
from rest_core.decode.engine import Engine
from rest_core.decode.events import StepEvent
from rest_core.decode.models import LoadedModel
from rest_core.store.datastore import Datastore
from tests.tiny_models import EOS_ID, VOCAB_SIZE, tiny_model

NOISY_COPIES = 4  # noisy copies of the answer in the datastore, beside the answer itself
NOISE = 0.25  # the share of a copy's tokens replaced by random printable bytes


@dataclass
class Script:
    """What the scripted model replays: the answer, from the end of the current prompt."""

    answer_ids: list[int]
    prompt_len: int = 0

    def next_tokens(self, positions: torch.Tensor) -> torch.Tensor:
        """(q,) the token that follows each position: the answer's, EOS once it is done."""
        targets = torch.tensor([*self.answer_ids, EOS_ID])
        return targets[(positions + 1 - self.prompt_len).clamp(0, len(self.answer_ids))]


def scripted_model(script: Script):
    """A tiny Llama (its KV cache and forward signature are real) whose logits pick
    `script.next_tokens` at every row: 0 for that token, -1e4 for every other."""
    model = tiny_model("llama", hidden=16, layers=1, dtype=torch.float32, max_positions=2048)
    inner = model.forward

    @functools.wraps(inner)  # the engine reads the forward's parameters (cache keyword, logits_to_keep)
    def forward(input_ids: torch.Tensor, position_ids: torch.Tensor | None = None, **kwargs):
        cache = kwargs.get("cache", kwargs.get("past_key_values"))
        past = cache.get_seq_length() if cache is not None else 0
        out = inner(input_ids=input_ids, position_ids=position_ids, **kwargs)
        q = input_ids.shape[1]
        positions = position_ids[0].cpu() if position_ids is not None else torch.arange(past, past + q)
        logits = torch.full((q, VOCAB_SIZE), -1e4)
        logits[torch.arange(q), script.next_tokens(positions)] = 0.0
        out.logits = logits[q - out.logits.shape[1] :].unsqueeze(0).to(out.logits.dtype)  # (1, kept rows, V)
        return out

    model.forward = forward
    return model


def answer_store(answer_ids: list[int], seed: int = 0) -> Datastore:
    """The answer and NOISY_COPIES copies of it with a share NOISE of their tokens replaced."""
    rng = np.random.default_rng(seed)
    docs = [list(answer_ids)]
    for _ in range(NOISY_COPIES):
        noisy = np.array(answer_ids, dtype=np.int64)
        hit = rng.random(len(noisy)) < NOISE
        noisy[hit] = rng.integers(32, 127, size=int(hit.sum()))
        docs.append(noisy.tolist())
    return Datastore.from_token_ids(docs, vocab_size=VOCAB_SIZE)


class ScriptedEngine:
    """What the app asks of an engine (encode, generate, max_positions, datastores, forget_cache,
    forward_cost), answering with `answer` through a real Engine (`self.engine`). `calls` records
    each generation's prompt and config as the app sent them. The engine's one datastore holds the answer, and it
    drafts from it whichever stores the page picked. step_s: a pause after each step, so a test
    can stop an answer midway."""

    def __init__(self, tokenizer, answer: str, step_s: float = 0.0, seed: int = 0) -> None:
        self.tokenizer = tokenizer
        self.answer_ids = list(tokenizer.encode(answer, add_special_tokens=False))
        self.step_s = step_s
        self.calls: list[tuple[list[int], GenerationConfig]] = []
        self.script = Script(self.answer_ids)
        self.engine = Engine(scripted_model(self.script), tokenizer, answer_store(self.answer_ids, seed))
        self.max_positions = self.engine.max_positions  # the model's context, as Engine.max_positions
        self.datastores = self.engine.datastores  # the step-through's "where it came from"

    def encode(self, prompt, chat: bool = True) -> list[int]:
        if isinstance(prompt, str):
            prompt = [{"role": "user", "content": prompt}]
        text = "".join(f"<{m['role']}>{m['content']}\n" for m in prompt) + "<assistant>"
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def generate(self, prompt_ids: list[int], config: GenerationConfig, **kwargs) -> Iterator[StepEvent]:
        self.calls.append((list(prompt_ids), config))
        draft = replace(config.draft, use_datastore=True, stores=None)  # the answer's store, whatever was picked
        events = self.engine.generate(prompt_ids, replace(config, draft=draft), **kwargs)
        return self._replay(list(prompt_ids), events)

    def _replay(self, prompt_ids: list[int], events: Iterator[StepEvent]) -> Iterator[StepEvent]:
        self.script.prompt_len = self.answer_start(prompt_ids)
        for event in events:
            if self.step_s:
                time.sleep(self.step_s)
            yield event

    def answer_start(self, prompt_ids: list[int]) -> int:
        """Where the answer starts: after the prompt's last assistant marker, so that a prompt
        holding the answer so far (the step-through goes on that way) gets the rest of it."""
        marker = list(self.tokenizer.encode("<assistant>", add_special_tokens=False))
        for i in range(len(prompt_ids) - len(marker), -1, -1):
            if prompt_ids[i : i + len(marker)] == marker:
                return i + len(marker)
        return len(prompt_ids)

    def forget_cache(self) -> None:
        self.engine.forget_cache()

    def forward_cost(self, *args, **kwargs):
        """Why this c?'s measured cost curve: the real engine's, on the scripted model."""
        return self.engine.forward_cost(*args, **kwargs)


def scripted_runtime(tokenizer, answer: str):
    """A `rest_core.ui.runtime.Runtime` whose every engine is one ScriptedEngine replaying `answer`."""
    from rest_core.ui.runtime import Runtime
    from rest_core.ui.settings import Settings

    engine = ScriptedEngine(tokenizer, answer)
    model = engine.engine.model
    loaded = LoadedModel(model, tokenizer, name="scripted", device=torch.device("cpu"), dtype=torch.float32)
    rt = Runtime(Settings(), loader=lambda: loaded)
    rt.engine = lambda store: (rt.loaded(), engine)[1]  # loads like the real one, then replays
    return rt, engine
