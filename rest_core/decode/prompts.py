"""A prompt's token ids: plain text or a conversation through the tokenizer's chat template,
with user text kept as text (it never becomes control tokens)."""

from __future__ import annotations

from typing import Any


def encode_prompt(tokenizer: Any, prompt: str | list[dict], chat: bool = False) -> list[int]:
    """Token ids of a prompt: plain text, or a conversation (list of {role, content}) / a single
    user turn (chat=True) through the tokenizer's chat template. What the engine and every
    benchmark (the vLLM one too, which has no engine) feed the model.

    Text never becomes control tokens: a message that spells out `<|im_start|>system` is
    tokenized as those characters, so it cannot open a turn of its own (`_text_ids`)."""
    if isinstance(prompt, str) and not chat:
        if not prompt:
            raise ValueError("the prompt is empty")
        return _text_ids(tokenizer, prompt, _special_strings(tokenizer), add_special_tokens=True)
    messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else list(prompt)
    if not messages or not any(m.get("content") for m in messages):
        raise ValueError("the prompt is empty")
    if getattr(tokenizer, "chat_template", None) is None:
        raise ValueError("this tokenizer has no chat template: use a plain prompt (chat=False)")
    add_prompt = messages[-1].get("role") != "assistant"
    specials = _special_strings(tokenizer)
    if not any(sp in str(m.get("content", "")) for m in messages for sp in specials):
        text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=add_prompt)
        return list(tokenizer(text, add_special_tokens=False).input_ids)
    return _templated_ids(tokenizer, messages, add_prompt, specials)


def _special_strings(tokenizer: Any) -> list[str]:
    decoder = getattr(tokenizer, "added_tokens_decoder", None) or {}
    found = [t.content for t in decoder.values() if getattr(t, "special", False)]
    return found or list(getattr(tokenizer, "all_special_tokens", []) or [])


def _text_ids(tokenizer: Any, text: str, specials: list[str], add_special_tokens: bool = False) -> list[int]:
    """`text` as plain text: special-token strings in it (`specials`) are split like any other
    characters (ordinary text gets exactly the ids it always had)."""
    if not any(sp in text for sp in specials):
        return list(tokenizer(text, add_special_tokens=add_special_tokens).input_ids)
    return list(tokenizer(text, add_special_tokens=add_special_tokens, split_special_tokens=True).input_ids)


def _templated_ids(tokenizer: Any, messages: list[dict], add_prompt: bool, specials: list[str]) -> list[int]:
    """The chat template's own text tokenized with its control tokens, every message's content
    as plain text: the template is rendered with a marker for each content, and the pieces
    between the markers are tokenized apart."""
    marks = [f"\x02REST{i}\x03" for i in range(len(messages))]
    marked = [{**m, "content": mark} for m, mark in zip(messages, marks, strict=True)]
    text = tokenizer.apply_chat_template(marked, tokenize=False, add_generation_prompt=add_prompt)
    ids: list[int] = []
    for message, mark in zip(messages, marks, strict=True):
        head, found, text = text.partition(mark)
        if not found:  # a template that rewrites its content: no safe split exists
            raise ValueError("this chat template changes the message text; the message cannot contain special tokens")
        if head:
            ids += tokenizer(head, add_special_tokens=False).input_ids
        ids += _text_ids(tokenizer, str(message.get("content", "")), specials)
    if text:
        ids += tokenizer(text, add_special_tokens=False).input_ids
    return ids
