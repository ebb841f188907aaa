"""The step-through's sentences read as English and say what happened (issue 29's newcomer)."""

from __future__ import annotations

from rest_core.config import RetrievalConfig
from rest_core.decode.events import MatchInfo
from rest_core.sources import SOURCE_DATASTORE
from rest_core.ui import phases
from tests.tiny_models import tiny_tokenizer
from tests.ui.test_render import event


def test_a_source_that_matched_nothing_is_said_plainly():
    miss = MatchInfo(SOURCE_DATASTORE, 0, (), 0, (), name="chat")
    e = event(0, [5], (0,), matches=[miss])
    cap = phases.retrieve_caption(e, [1, 2, 3], tiny_tokenizer(), RetrievalConfig(n_min=1, n_max=3))
    assert "The chat does not contain the conversation's last 1 token (the shortest ending it looks up)" in cap
    assert "no suffix" not in cap
    assert "does not contain the end of the conversation" in phases.retrieve_caption(e, [1, 2, 3], tiny_tokenizer())
