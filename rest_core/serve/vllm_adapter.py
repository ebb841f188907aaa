"""Holds every touch of vLLM's internals: the config read, the runner hook, each row's request.

What the proposer reads from the `VllmConfig`, the hook that hands it the model runner, and each
batch row's request id and vllm_xargs read from that runner.

vLLM 0.32's `custom_class` proposer is built as `RestProposer(vllm_config)` inside
`GPUModelRunner.__init__` (vllm/v1/spec_decode/custom_class_proposer.py; the CPU runner is a
subclass) and then called as `runner.drafter.propose(sampled_token_ids,
input_batch.num_tokens_no_spec, input_batch.token_ids_cpu, slot_mappings=...)` from
`GPUModelRunner.propose_draft_token_ids`; neither call passes the request ids, which the proposer
needs to follow a request when vLLM reorders its batch rows, nor each request's `vllm_xargs`.
Both live on the runner (`input_batch.req_ids`, `requests[id].sampling_params.extra_args`), so
`hook_runner` wraps that one method to hand the runner to its drafter (`attach_runner`) before
each call, and `RunnerView` checks, when it first sees the runner, that it has what is read from
it, raising `VllmMismatch` naming the vLLM version and what is missing. The rest of the proposer
never imports vLLM, so the tests drive it with fakes (and without vLLM installed).
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
from dataclasses import dataclass
from typing import Any

RUNNER_MODULE = "vllm.v1.worker.gpu_model_runner"
RUNNER_CLASS = "GPUModelRunner"
RUNNER_METHOD = "propose_draft_token_ids"  # the runner's method that calls the drafter's propose()


class VllmMismatch(RuntimeError):
    """This vLLM does not look like the one the proposer was written against (0.32)."""


def vllm_version() -> str:
    """The installed vLLM's version, for messages ("not installed" without one)."""
    if importlib.util.find_spec("vllm") is None:
        return "not installed"
    import vllm

    return str(getattr(vllm, "__version__", "unknown"))


def mismatch(what: str) -> VllmMismatch:
    return VllmMismatch(
        f"REST proposer: vLLM {vllm_version()} {what}; the proposer reads vLLM 0.32's model runner "
        "(rest_core/serve/vllm_adapter.py)"
    )


@dataclass(frozen=True)
class VllmSetup:
    """What the proposer reads from vLLM's `VllmConfig`."""

    k: int  # num_speculative_tokens: the longest draft vLLM verifies per request and step
    max_model_len: int
    rest: Any  # additional_config["rest"]: the REST settings, as the launcher wrote them
    device: str  # the device kind ("cpu", "cuda", ...)
    tokenizer: str  # the model's tokenizer, as vLLM was told to load it
    trust_remote_code: bool

    @classmethod
    def read(cls, vllm_config: Any, key: str) -> VllmSetup:
        spec, mc = vllm_config.speculative_config, vllm_config.model_config
        extra = getattr(vllm_config, "additional_config", None) or {}
        dc = getattr(vllm_config, "device_config", None)
        device = getattr(dc, "device_type", None) or str(getattr(dc, "device", "") or "")
        return cls(
            k=int(spec.num_speculative_tokens),
            max_model_len=int(mc.max_model_len),
            rest=extra.get(key) if isinstance(extra, dict) else None,
            device=str(device) or "cpu",
            tokenizer=getattr(mc, "tokenizer", None) or mc.model,
            trust_remote_code=bool(getattr(mc, "trust_remote_code", False)),
        )

    def load_tokenizer(self) -> Any:
        """The model's tokenizer, as vLLM was told to load it."""
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(self.tokenizer, trust_remote_code=self.trust_remote_code)


def hook_runner() -> bool:
    """In a process with vLLM: make the model runner hand itself to its drafter (`attach_runner`)
    before each `propose_draft_token_ids`, once per process. False without vLLM (a test's fake
    runner attaches itself); VllmMismatch if the runner's method is not where it was."""
    if importlib.util.find_spec("vllm") is None:
        return False
    try:
        runner_class = getattr(importlib.import_module(RUNNER_MODULE), RUNNER_CLASS)
    except (ImportError, AttributeError) as exc:
        raise mismatch(f"has no {RUNNER_MODULE}.{RUNNER_CLASS}") from exc
    original = getattr(runner_class, RUNNER_METHOD, None)
    if not callable(original):
        raise mismatch(f"has no {RUNNER_CLASS}.{RUNNER_METHOD}")
    if getattr(original, "_rest_hooked", False):
        return True

    @functools.wraps(original)
    def propose_draft_token_ids(self: Any, *args: Any, **kwargs: Any) -> Any:
        attach = getattr(getattr(self, "drafter", None), "attach_runner", None)
        if attach is not None:
            attach(self)
        return original(self, *args, **kwargs)

    propose_draft_token_ids._rest_hooked = True  # type: ignore[attr-defined]
    setattr(runner_class, RUNNER_METHOD, propose_draft_token_ids)
    return True


class RunnerView:
    """Each batch row's request id and `vllm_xargs`, read from vLLM's model runner."""

    def __init__(self, runner: Any) -> None:
        missing = []
        batch = getattr(runner, "input_batch", None)
        if batch is None:
            missing.append("input_batch")
        elif not hasattr(batch, "req_ids"):
            missing.append("input_batch.req_ids")
        if not isinstance(getattr(runner, "requests", None), dict):
            missing.append("requests (a dict of request states)")
        if missing:
            raise mismatch(f"has a model runner ({type(runner).__name__}) without {', '.join(missing)}")
        self.runner = runner

    def rows(self, rows: int) -> tuple[list[str] | None, list[Any] | None]:
        """(each row's request id, its SamplingParams.extra_args); (None, None) when the batch's
        ids do not match its rows (the proposer then keys requests by row)."""
        ids = list(self.runner.input_batch.req_ids)
        if len(ids) != rows or not all(isinstance(r, str) for r in ids):
            return None, None
        states = self.runner.requests
        extras = []
        for rid in ids:
            params = getattr(states.get(rid), "sampling_params", None)
            extras.append(getattr(params, "extra_args", None))
        return ids, extras
