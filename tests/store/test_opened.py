"""Shared open datastores (rest_core.store.opened): one per folder and vocabulary, each checked
against the tokenizer when first opened."""

from __future__ import annotations

import pytest

from rest_core.store.build import build_datastore
from rest_core.store.format import DatastoreError
from rest_core.store.opened import OpenStores, as_datastore
from tests.store.test_datastore import CharTokenizer


@pytest.fixture
def folders(tmp_path):
    tok = CharTokenizer(300)
    uploads = tmp_path / "uploads" / "session-1"
    for folder in (tmp_path / "code", uploads / "mine"):
        build_datastore(["def add(a, b):\n    return a + b\n"], tok, folder, verbose=False)
    return tmp_path / "code", uploads


def test_a_folder_is_opened_once_per_vocabulary_and_checked(folders):
    code, _ = folders
    stores = OpenStores()
    first = stores.open(code, CharTokenizer(300))
    assert stores.open(str(code), CharTokenizer(300)) is first  # another tokenizer object, the same ids
    assert stores.open(code / ".." / "code", CharTokenizer(300)) is first  # the same folder
    assert stores.open(code) is not first and len(stores) == 2  # unchecked: opened apart
    with pytest.raises(DatastoreError, match="rebuild the datastore"):
        stores.open(code, CharTokenizer(300, salt="x"))


def test_forget_under_drops_only_the_stores_inside_a_folder(folders):
    code, uploads = folders
    stores = OpenStores()
    tok = CharTokenizer(300)
    public, mine = stores.open(code, tok), stores.open(uploads / "mine", tok)
    stores.forget_under(uploads)
    assert len(stores) == 1 and stores.open(code, tok) is public
    assert stores.open(uploads / "mine", tok) is not mine  # opened again


def test_as_datastore_opens_folders_and_passes_open_stores_through(folders):
    code, _ = folders
    opened = as_datastore(code, CharTokenizer(300))
    assert opened.n_tokens > 0 and as_datastore(opened) is opened
    with pytest.raises(DatastoreError, match="rebuild the datastore"):
        as_datastore(str(code), CharTokenizer(300, salt="x"))
