"""The one module that touches vLLM (rest_core.serve.vllm_adapter): it fails loudly, naming the
vLLM version and what is missing, when vLLM's model runner no longer looks as the proposer
expects. Driven here with fake runners and a fake `vllm` package; tests/serve/test_vllm.py runs
the good case on the real vLLM."""

from __future__ import annotations

import importlib.machinery
import sys
import types
from types import SimpleNamespace

import pytest

from rest_core.serve import vllm_adapter
from rest_core.serve.vllm_adapter import RunnerView, VllmMismatch, VllmSetup, hook_runner, vllm_version


def fake_vllm(monkeypatch, version: str, runner_class: type) -> None:
    """A `vllm` package of this version whose model runner module holds `runner_class`."""
    package = types.ModuleType("vllm")
    package.__version__ = version
    package.__spec__ = importlib.machinery.ModuleSpec("vllm", None)
    runners = types.ModuleType(vllm_adapter.RUNNER_MODULE)
    runners.GPUModelRunner = runner_class
    monkeypatch.setitem(sys.modules, "vllm", package)
    monkeypatch.setitem(sys.modules, vllm_adapter.RUNNER_MODULE, runners)


def runner(req_ids=("a", "b"), extras=(None, {"rest_answers": "team"})) -> SimpleNamespace:
    states = {r: SimpleNamespace(sampling_params=SimpleNamespace(extra_args=x)) for r, x in zip(req_ids, extras)}
    return SimpleNamespace(input_batch=SimpleNamespace(req_ids=list(req_ids)), requests=states)


def test_rows_are_read_from_the_runner_and_a_batch_that_disagrees_is_not_trusted():
    view = RunnerView(runner())
    assert view.rows(2) == (["a", "b"], [None, {"rest_answers": "team"}])
    assert view.rows(3) == (None, None)  # not one id per row: the proposer keys by row
    assert RunnerView(runner(req_ids=("a", None))).rows(2) == (None, None)  # a row being updated


@pytest.mark.parametrize(
    "broken, missing",
    [
        (SimpleNamespace(requests={}), "input_batch"),
        (SimpleNamespace(input_batch=SimpleNamespace(), requests={}), "input_batch.req_ids"),
        (SimpleNamespace(input_batch=SimpleNamespace(req_ids=[])), "requests"),
    ],
)
def test_a_runner_without_what_is_read_fails_naming_the_vllm_version(broken, missing):
    with pytest.raises(VllmMismatch, match=rf"vLLM {vllm_version()} .*without {missing}"):
        RunnerView(broken)


def test_a_changed_vllm_fails_with_its_version(monkeypatch):
    class Runner:  # a model runner that no longer calls its drafter from propose_draft_token_ids
        pass

    fake_vllm(monkeypatch, "9.9.9", Runner)
    with pytest.raises(VllmMismatch, match=r"vLLM 9\.9\.9 has no GPUModelRunner\.propose_draft_token_ids"):
        hook_runner()
    with pytest.raises(VllmMismatch, match=r"vLLM 9\.9\.9 has a model runner \(SimpleNamespace\) without requests"):
        RunnerView(SimpleNamespace(input_batch=SimpleNamespace(req_ids=[])))


def test_the_hook_hands_the_runner_to_its_drafter_before_each_call(monkeypatch):
    class Runner:
        def __init__(self, drafter) -> None:
            self.drafter, self.input_batch, self.requests = drafter, SimpleNamespace(req_ids=["r"]), {}

        def propose_draft_token_ids(self, *args):
            return self.drafter.propose(*args)

    class Drafter:
        runner = None

        def attach_runner(self, runner) -> None:
            self.runner = runner

        def propose(self, *args):
            return [self.runner is not None, args]

    fake_vllm(monkeypatch, "0.32.0", Runner)
    assert hook_runner() and hook_runner()  # a second proposer in the process wraps nothing again
    assert not hasattr(Runner.propose_draft_token_ids.__wrapped__, "__wrapped__")
    drafter = Drafter()
    live = Runner(drafter)
    assert live.propose_draft_token_ids(1, 2) == [True, (1, 2)] and drafter.runner is live


def test_the_setup_is_read_from_the_vllm_config():
    config = SimpleNamespace(
        speculative_config=SimpleNamespace(num_speculative_tokens=4),
        model_config=SimpleNamespace(model="m", tokenizer=None, max_model_len=512),
        device_config=SimpleNamespace(device_type=""),
        additional_config={"rest": {"method": "context"}},
    )
    setup = VllmSetup.read(config, "rest")
    assert (setup.k, setup.max_model_len, setup.rest, setup.device, setup.tokenizer) == (
        4,
        512,
        {"method": "context"},
        "cpu",
        "m",
    )
