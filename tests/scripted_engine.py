"""A stand-in for `rest_core.decode.engine.Engine` that replays a fixed answer as REST-like step events.

Real retrieval code builds the tries (continuations are taken from the answer itself, plus some
noise), so the app and the renderer see realistic events without a model. Used by the app's
session and handler tests and for looking at the page quickly; the real engine is covered elsewhere.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Iterator

import numpy as np

from rest_core.config import GenerationConfig
from rest_core.drafting.draft import build_draft
from rest_core.decode.events import SOURCE_CONTEXT, SOURCE_DATASTORE, MatchInfo, StepEvent, StepTimings, Totals
from rest_core.drafting.retrieval import Retrieved


@dataclass
class FakeLoaded:
    model: object
    tokenizer: object
    name: str = "scripted"
    device: str = "cpu"
    dtype: str = "float32"


class _Config:
    max_position_embeddings = 2048


class _Model:
    config = _Config()


class ScriptedEngine:
    def __init__(self, tokenizer, answer: str, step_s: float = 0.0, seed: int = 0) -> None:
        self.tokenizer = tokenizer
        self.max_positions = _Config.max_position_embeddings  # the model's context, as Engine.max_positions
        self.answer_ids = list(tokenizer.encode(answer, add_special_tokens=False))
        self.step_s = step_s
        self.seed = seed
        self.calls: list[tuple[list[int], GenerationConfig]] = []

    def encode(self, prompt, chat: bool = True) -> list[int]:
        if isinstance(prompt, str):
            prompt = [{"role": "user", "content": prompt}]
        text = "".join(f"<{m['role']}>{m['content']}\n" for m in prompt) + "<assistant>"
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def generate(self, prompt_ids: list[int], config: GenerationConfig) -> Iterator[StepEvent]:
        self.calls.append((list(prompt_ids), config))
        rng = np.random.default_rng(self.seed)
        target = self.answer_ids[: config.max_new_tokens]
        pos = 0
        step = 0
        drafts = 0
        t0 = time.perf_counter()
        m = config.retrieval.m
        while pos < len(target):
            if self.step_s:
                time.sleep(self.step_s)
            matches: tuple[MatchInfo, ...] = ()
            trie = draft = None
            draft_idx: tuple[int, ...] = ()
            accepted: tuple[int, ...] = ()
            tokens = [target[pos]]
            sources = [0]
            if config.method == "rest" and pos > 0:
                good = np.array(target[pos : pos + m] + [-1] * max(0, pos + m - len(target)), dtype=np.int64)
                k_good = int(rng.integers(0, 4))
                rows = [good.copy() for _ in range(k_good)]
                for _ in range(int(rng.integers(1, 5))):
                    noisy = good.copy()
                    cut = int(rng.integers(0, m))
                    noisy[cut:] = rng.integers(32, 127, size=m - cut)
                    rows.append(noisy)
                conts = np.stack(rows)
                retrieved = [Retrieved(SOURCE_DATASTORE, 2, (target[pos - 1],), 40, conts[: len(conts) // 2 + 1])]
                if config.draft.use_context:
                    retrieved.append(Retrieved(SOURCE_CONTEXT, 1, (target[pos - 1],), 3, conts[len(conts) // 2 :]))
                built = build_draft(retrieved, config.draft.c)
                trie, draft, draft_idx = built.trie, built.nodes, tuple(int(i) for i in built.idx)
                matches = tuple(_match_info(r) for r in retrieved)
                # walk the draft along the target
                row = 0
                acc = []
                tokens, sources = [], []
                i = pos
                while i < len(target) and draft is not None:
                    child = built.tree.child(row, target[i])
                    if child is None:
                        break
                    row = child
                    acc.append(row - 1)
                    tokens.append(target[i])
                    sources.append(int(draft.sources[row - 1]))
                    i += 1
                if i < len(target):
                    tokens.append(target[i])
                    sources.append(0)
                accepted = tuple(acc)
            pos += len(tokens)
            drafts += sum(1 for s in sources if s)
            step += 1
            finished = pos >= len(target)
            yield StepEvent(
                step=step - 1,
                method=config.method,
                matches=matches,
                trie=trie,
                draft_idx=draft_idx,
                draft=draft,
                accepted=accepted,
                tokens=tuple(tokens),
                token_sources=tuple(sources),
                budget=config.draft.c,
                timings=StepTimings(retrieve_ms=0.1, tree_ms=0.1, forward_ms=1.0, accept_ms=0.1, total_ms=1.3),
                totals=Totals(len(prompt_ids), pos, step, drafts, time.perf_counter() - t0, 5.0, 0.2 * step),
                finished=finished,
                finish_reason=("length" if len(target) < len(self.answer_ids) else "eos") if finished else None,
            )


def _match_info(r: Retrieved) -> MatchInfo:
    sample = tuple(tuple(int(t) for t in row if t >= 0) for row in r.continuations[:3])
    return MatchInfo(r.source_bit, r.suffix_len, r.suffix_tokens, r.occurrences, sample)


def scripted_runtime(tokenizer, answer: str):
    """A `rest_core.ui.runtime.Runtime` whose every engine is one ScriptedEngine replaying `answer`."""
    from rest_core.ui.runtime import Runtime
    from rest_core.ui.settings import Settings

    engine = ScriptedEngine(tokenizer, answer)
    rt = Runtime(Settings(), loader=lambda: FakeLoaded(_Model(), tokenizer))
    rt.engine = lambda store: (rt.loaded(), engine)[1]  # loads like the real one, then replays
    return rt, engine
