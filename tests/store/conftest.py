"""Fixtures of the store tests."""

import pytest

from tests.store.test_datastore import CharTokenizer


@pytest.fixture
def fake_model(monkeypatch):
    """`--model fake` loads the char tokenizer instead of a real model."""
    import rest_core.decode.models

    monkeypatch.setattr(rest_core.decode.models, "load_tokenizer", lambda spec=None: CharTokenizer(300, name="fake"))
    return "fake"
