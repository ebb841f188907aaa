"""Tiny random causal LMs and a byte-level tokenizer, built in memory (no download).

Use them anywhere a test needs a real transformers model without the cost of SmolLM2:

    from tests.tiny_models import tiny_loaded
    lm = tiny_loaded("llama")          # a rest_core.decode.models.LoadedModel
    engine = Engine(lm.model, lm.tokenizer)

The models default to float64 so that greedy argmax never flips on a near-tie between two
code paths (tree-masked forward vs plain forward); pass dtype=torch.float32 for speed tests.
Random weights give near-uniform next-token distributions, so `peaked=True` (the default)
scales the output layer up (Llama, Qwen2): greedy text then repeats itself in part, like a
small real model, and drafts from its own output are often right. The tiny Llama emits EOS on
some prompts (useful for EOS tests); the tiny Qwen2 and GPT-2 rarely do.
"""

from __future__ import annotations

import contextlib

import torch

from rest_core.decode.models import LoadedModel

# Attention limited to WINDOW tokens, declared each way transformers reads it: gemma3 through
# `layer_types` (alternating sliding and full layers); mistral, phi3 and starcoder2 through
# `sliding_window` alone (every layer slides, no `layer_types`); qwen2_sliding through
# `use_sliding_window` + `max_window_layers` (the layers from max_window_layers on slide);
# llama4 through `attention_chunk_size` (chunked layers, then a full one).
WINDOWED_ARCHITECTURES = ("gemma3", "mistral", "phi3", "starcoder2", "qwen2_sliding", "llama4")
ARCHITECTURES = ("llama", "qwen2", "gpt2") + WINDOWED_ARCHITECTURES
WINDOW = 8

N_BYTES = 256
EOS_ID = 256  # "<|endoftext|>"
PAD_ID = 257
VOCAB_SIZE = 258

CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


def tiny_tokenizer():
    """Byte-level tokenizer: ids 0..255 are bytes, 256 is EOS, 257 is PAD; round-trips any text."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    alphabet = pre_tokenizers.ByteLevel.alphabet()  # 256 printable stand-ins for the bytes
    byte_to_unicode = _bytes_to_unicode()
    vocab = {byte_to_unicode[b]: b for b in range(N_BYTES)}
    assert set(vocab) == set(alphabet)
    vocab["<|endoftext|>"] = EOS_ID
    vocab["<|pad|>"] = PAD_ID
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|endoftext|>", pad_token="<|pad|>", chat_template=CHAT_TEMPLATE
    )
    return fast


def tiny_model(
    arch: str = "llama",
    *,
    seed: int = 0,
    dtype: torch.dtype = torch.float64,
    peaked: bool = True,
    hidden: int = 64,
    layers: int = 2,
    max_positions: int = 512,
):
    """A tiny random decoder-only LM over the tiny tokenizer's vocabulary, in eval mode."""
    from transformers import (
        Gemma3ForCausalLM,
        Gemma3TextConfig,
        GPT2Config,
        GPT2LMHeadModel,
        Llama4ForCausalLM,
        Llama4TextConfig,
        LlamaConfig,
        LlamaForCausalLM,
        MistralConfig,
        MistralForCausalLM,
        Phi3Config,
        Phi3ForCausalLM,
        Qwen2Config,
        Qwen2ForCausalLM,
        Starcoder2Config,
        Starcoder2ForCausalLM,
    )

    common = dict(vocab_size=VOCAB_SIZE, bos_token_id=EOS_ID, eos_token_id=EOS_ID, pad_token_id=PAD_ID)
    if arch == "llama":
        config = LlamaConfig(
            hidden_size=hidden,
            intermediate_size=2 * hidden,
            num_hidden_layers=layers,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=max_positions,
            tie_word_embeddings=False,
            **common,
        )
        cls = LlamaForCausalLM
    elif arch == "qwen2":
        config = Qwen2Config(
            hidden_size=hidden,
            intermediate_size=2 * hidden,
            num_hidden_layers=layers,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=max_positions,
            tie_word_embeddings=False,
            use_sliding_window=False,
            **common,
        )
        cls = Qwen2ForCausalLM
    elif arch == "qwen2_sliding":
        # Layers 1.. slide, layer 0 attends to everything (Qwen2's max_window_layers rule).
        config = Qwen2Config(
            hidden_size=hidden,
            intermediate_size=2 * hidden,
            num_hidden_layers=layers + 1,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=max_positions,
            tie_word_embeddings=False,
            use_sliding_window=True,
            sliding_window=WINDOW,
            max_window_layers=1,
            **common,
        )
        cls = Qwen2ForCausalLM
    elif arch in ("mistral", "phi3", "starcoder2"):
        shared = dict(
            hidden_size=hidden,
            intermediate_size=2 * hidden,
            num_hidden_layers=layers,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=max_positions,
            sliding_window=WINDOW,
            tie_word_embeddings=False,
            **common,
        )
        if arch == "phi3":
            config, cls = Phi3Config(original_max_position_embeddings=max_positions, **shared), Phi3ForCausalLM
        elif arch == "starcoder2":
            config, cls = Starcoder2Config(**shared), Starcoder2ForCausalLM
        else:
            config, cls = MistralConfig(**shared), MistralForCausalLM
    elif arch == "llama4":
        config = Llama4TextConfig(
            hidden_size=hidden,
            intermediate_size=2 * hidden,
            intermediate_size_mlp=2 * hidden,
            num_hidden_layers=2 * layers,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=hidden // 4,
            attention_chunk_size=WINDOW,
            num_local_experts=2,
            max_position_embeddings=max_positions,
            tie_word_embeddings=False,
            **common,
        )
        cls = Llama4ForCausalLM
    elif arch == "gpt2":
        # A wider init than GPT-2's default, else a tiny random GPT-2 repeats one token forever.
        config = GPT2Config(
            n_embd=hidden, n_layer=layers, n_head=4, n_positions=max_positions, initializer_range=0.3, **common
        )
        cls = GPT2LMHeadModel
    elif arch == "gemma3":
        # Alternating sliding-window (8 tokens) and full layers, like Gemma 3: exercises the
        # per-layer-type masks once a sequence is longer than the window.
        config = Gemma3TextConfig(
            hidden_size=hidden,
            intermediate_size=2 * hidden,
            num_hidden_layers=2 * layers,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=hidden // 4,
            sliding_window=WINDOW,
            layer_types=["sliding_attention", "full_attention"] * layers,
            max_position_embeddings=max_positions,
            tie_word_embeddings=False,
            **common,
        )
        cls = Gemma3ForCausalLM
    else:
        raise ValueError(f"unknown tiny architecture {arch!r}; choose from {ARCHITECTURES}")
    config._attn_implementation = "sdpa"
    gen = torch.random.fork_rng()
    with gen:
        torch.manual_seed(seed)
        model = cls(config)
    model = model.to(dtype).eval()
    model.requires_grad_(False)
    if peaked and not model.config.tie_word_embeddings:  # (GPT-2 ties: its wide init suffices)
        model.get_output_embeddings().weight.mul_(8.0)
    model.generation_config.eos_token_id = EOS_ID
    model.generation_config.pad_token_id = PAD_ID
    return model


def tiny_loaded(arch: str = "llama", **kwargs) -> LoadedModel:
    """`tiny_model` + `tiny_tokenizer` wrapped like `rest_core.decode.models.load_model` returns them."""
    model = tiny_model(arch, **kwargs)
    return LoadedModel(
        model=model,
        tokenizer=tiny_tokenizer(),
        name=f"tiny-{arch}",
        device=model.get_input_embeddings().weight.device,
        dtype=next(model.parameters()).dtype,
    )


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable character table (the ByteLevel alphabet)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


@contextlib.contextmanager
def torch_threads(n: int = 1):
    """Run with n torch threads. Tiny models are fastest on one thread, and on a loaded shared
    machine several threads spin-wait on each other (measured here: a 30x64 @ 64x192 float64
    matmul took 50 us on 1 thread, 1.6 ms on 2 while other jobs ran)."""
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)
