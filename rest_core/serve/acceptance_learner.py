"""Relearns how likely a drafted token is to be accepted, from what every chain had accepted.

A recalibrated copy of the prior acceptance model per set of sources, updated once per step."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from rest_core.budget.acceptance import AcceptanceModel, NodeFeatures
from rest_core.budget.auto import AutoBudget
from rest_core.budget.chain import ChainDraft
from rest_core.drafting.source import Retrieved


class AcceptanceLearner:
    """The acceptance models (the auto budget's; its cost part is not used: a batch's cost is
    `StepCost`), and this step's outcomes not yet learned."""

    def __init__(self) -> None:
        self.budget = AutoBudget(None, AcceptanceModel.load())
        self._queued: dict[int, tuple[AcceptanceModel, list, list]] = {}  # this step's outcomes, per model

    def model_for(self, retrieved: Sequence[Retrieved]) -> AcceptanceModel | None:
        """The model that scores what these sources found (None when nothing was retrieved)."""
        return self.budget.model_for(retrieved) if retrieved else None

    def outcome(self, model: AcceptanceModel | None, chain: ChainDraft, accepted: int) -> None:
        """`chain`, scored by `model`, had its first `accepted` tokens accepted: what the model
        learns is its tokens up to the first rejected one."""
        if chain.features is None or model is None:
            return
        observed = min(accepted + 1, len(chain))  # accepted ones, and the first rejected one
        queue = self._queued.setdefault(id(model), (model, [], []))
        queue[1].append(chain.features.take(np.arange(observed)))
        queue[2].append(np.arange(observed) < accepted)

    def learn(self) -> None:
        """One update per acceptance model from every request's outcome this step."""
        for model, feats, outcomes in self._queued.values():
            model.learn(NodeFeatures.concat(feats), np.concatenate(outcomes))
        self._queued.clear()
