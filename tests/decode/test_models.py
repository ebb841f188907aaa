"""Model loading: device / dtype resolution, clear errors, the tiny test models."""

from __future__ import annotations

import pytest
import torch

from rest_core.decode.models import ModelLoadError, load_model, resolve_device, resolve_dtype
from tests.tiny_models import ARCHITECTURES, EOS_ID, tiny_loaded, tiny_tokenizer, torch_threads


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    with torch_threads(1):
        yield


def test_resolve_device_and_dtype():
    assert resolve_device("cpu").type == "cpu"
    assert resolve_device("auto").type in ("cpu", "cuda")
    assert resolve_dtype("auto", torch.device("cpu")) == torch.float32
    assert resolve_dtype("bf16", torch.device("cpu")) == torch.bfloat16
    assert resolve_dtype(torch.float16, torch.device("cpu")) == torch.float16
    for bad in ("tpu", "gpu0", "", "cuda:abc"):
        with pytest.raises(ValueError, match="device"):
            resolve_device(bad)
    with pytest.raises(ValueError, match="dtype"):
        resolve_dtype("float7", torch.device("cpu"))


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-CUDA message")
def test_cuda_without_cuda_is_a_clear_error():
    with pytest.raises(ValueError, match="CUDA is not available"):
        load_model("embedded", device="cuda")


def test_missing_model_names_offline_default(tmp_path):
    with pytest.raises(ModelLoadError, match="offline default is --model embedded"):
        load_model(str(tmp_path / "no-such-model"))
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ModelLoadError, match="embedded"):
        load_model(str(empty))


def test_bad_attention_implementation_rejected_before_loading():
    with pytest.raises(ValueError, match="tree attention mask"):
        load_model("embedded", attn_implementation="flash_attention_2")


def test_tiny_tokenizer_round_trips_text():
    tok = tiny_tokenizer()
    text = "héllo wörld € 🎉\n  x"
    ids = tok(text).input_ids
    assert all(0 <= i < 256 for i in ids)
    assert tok.decode(ids) == text
    assert tok.eos_token_id == EOS_ID
    chat = tok.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True)
    assert chat == "<|user|>hi\n<|assistant|>"


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_tiny_models_generate(arch):
    lm = tiny_loaded(arch)
    assert lm.dtype == torch.float64 and lm.device.type == "cpu"
    assert lm.model.config._attn_implementation == "sdpa"
    out = lm.model.generate(torch.tensor([[1, 2, 3]]), max_new_tokens=5, do_sample=False)
    assert out.shape[1] <= 8


def test_local_folder_and_generate_command(tmp_path, capsys):
    import json

    from rest_core.cli import main

    lm = tiny_loaded("llama")
    folder = tmp_path / "tiny-llama"
    lm.model.save_pretrained(folder)
    lm.tokenizer.save_pretrained(folder)
    loaded = load_model(str(folder), device="cpu")
    assert loaded.dtype == torch.float32 and loaded.model.config._attn_implementation == "sdpa"
    assert loaded.tokenizer("hi").input_ids == lm.tokenizer("hi").input_ids

    args = ["generate", "--prompt", "hello", "--model", str(folder), "--datastore", "none", "--max-new-tokens", "6"]
    assert main(args + ["--json", "--context", "--seed", "1", "--temperature", "0.8"]) == 0
    out = json.loads(capsys.readouterr().out)
    for key in (
        "text",
        "token_ids",
        "steps",
        "new_tokens",
        "mean_generated_length",
        "tokens_per_s",
        "retrieval_ms_per_token",
    ):
        assert key in out
    assert 1 <= out["new_tokens"] == len(out["token_ids"]) <= 6
    assert main(args + ["--chat", "--method", "ar", "--json"]) == 0
    expected = json.loads(capsys.readouterr().out)["text"]
    assert main(args + ["--chat", "--method", "ar"]) == 0
    captured = capsys.readouterr()
    assert "[ar]" in captured.err
    assert captured.out == expected + "\n"  # the streamed pieces add up to the decoded text
    with pytest.raises(SystemExit) as exc:  # max_new_tokens 0: argparse's one-line error (the knob's range)
        main(args[:-1] + ["0"])
    assert exc.value.code == 2
    assert "max_new_tokens" in capsys.readouterr().err
