"""The page's default datastores follow the message: code and chat for code, chat for the rest."""

from __future__ import annotations

import pytest

from rest_core.ui.store_pick import default_stores, looks_like_code


@pytest.mark.parametrize(
    "message",
    [
        "def fib(n):\n    return n",
        "Write a Python function that reverses a list.",
        "Why does my loop never end?\n```\nwhile True: pass\n```",
        "How do I parse JSON in JavaScript?",
        "x = compute(a, b);",
    ],
)
def test_code_questions_draft_from_both_stores(message):
    assert looks_like_code(message)
    assert default_stores(message, ["chat", "code"]) == ["code", "chat"]


@pytest.mark.parametrize(
    "message",
    ["What is 2+2?", "Tell me about your favourite city.", "How do I make a good cup of coffee?", "Write a haiku."],
)
def test_other_questions_draft_from_chat_alone(message):
    assert not looks_like_code(message)
    assert default_stores(message, ["chat", "code"]) == ["chat"]


def test_only_stores_the_server_has():
    assert default_stores("def f(): pass", ["chat"]) == ["chat"]
    assert default_stores("hello", ["mine"]) == ["mine"]
    assert default_stores("hello", []) == []


def test_the_pick_says_which_stores_and_why():
    from rest_core.ui.store_pick import pick_for

    code = pick_for("def f(): pass", ["chat", "code"])
    assert code.stores == ["code", "chat"] and "Drafting from code + chat: the message looks like code" in code.note
    assert "reads as conversation" in pick_for("Write a haiku.", ["chat", "code"]).note
    assert "first datastore this server has" in pick_for("hello", ["mine"]).note
    assert "Drafting from the conversation alone: no datastore is built" in pick_for("hello", []).note
    assert "&lt;b&gt;" in pick_for("hello", ["<b>"]).note  # a store's name is escaped


def test_no_source_colour_looks_like_accepted_green():
    """A second datastore was emerald beside the accepted tokens' green (issue 29)."""
    import colorsys

    from rest_core.sources import STYLES
    from rest_core.ui.style import ACCEPTED_COLOR

    def hue(color: str) -> float:
        r, g, b = (int(color[i : i + 2], 16) / 255 for i in (1, 3, 5))
        return 360 * colorsys.rgb_to_hsv(r, g, b)[0]

    green = hue(ACCEPTED_COLOR)
    for _, color in STYLES.values():
        assert min(abs(hue(color) - green), 360 - abs(hue(color) - green)) > 40, color
