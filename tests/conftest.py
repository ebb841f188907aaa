import sys
from pathlib import Path

import pytest

# Tests import the package from the repository root without installing it.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


@pytest.fixture
def scripted():
    """(runtime, engine): a Runtime whose every engine is one ScriptedEngine replaying ANSWER."""
    from tests.app_fixtures import ANSWER
    from tests.scripted_engine import scripted_runtime
    from tests.tiny_models import tiny_tokenizer

    return scripted_runtime(tiny_tokenizer(), ANSWER)


@pytest.fixture
def tiny_runtime():
    """A Runtime on a tiny random Llama (real engine, no download)."""
    from rest_core.ui.runtime import Runtime
    from rest_core.ui.settings import Settings
    from tests.tiny_models import tiny_loaded

    return Runtime(Settings(), loader=lambda: tiny_loaded("llama"))
