"""assets/app.css: every block closes, and a short conversation is not set at the bottom of a
tall empty box (the page's CSS, read as text: the browser test draws it)."""

from __future__ import annotations

import re
from pathlib import Path

CSS = (Path(__file__).resolve().parents[2] / "assets" / "app.css").read_text(encoding="utf-8")


def _rules() -> str:
    return re.sub(r"/\*.*?\*/", "", CSS, flags=re.S)


def test_every_block_of_the_page_css_closes():
    """A merge dropped the "}" of a phone @media block: every rule after it (Compare's table,
    the conversation box's) applied on a phone only."""
    depth = 0
    for line in _rules().splitlines():
        depth += line.count("{") - line.count("}")
        assert depth >= 0
    assert depth == 0


def test_a_short_conversation_starts_at_the_top_of_its_box():
    """03/04 (laptop): one message and its answer sat at the bottom of a 46vh box, 280 px of
    blank above them. Once it holds messages the box grows with them up to that height, then
    scrolls; the empty box keeps its height for the placeholder."""
    rules = _rules()
    top = re.search(r"(?m)^\.convo:not\(\.empty\)\s*\{([^}]*)\}", rules)
    assert top, "no top-level rule for a conversation with messages"
    body = top.group(1)
    assert re.search(r"height:\s*auto", body) and re.search(r"max-height:\s*46vh", body)
    assert re.search(r"min-height:\s*0", body)
    assert re.search(r"(?m)^\.convo\s*\{[^}]*height:\s*46vh", rules)  # the empty box keeps it


def test_the_header_link_to_how_rest_works_hides_while_it_is_open():
    """Screens12, complaint 4 (08 and 13): "How REST works →" still showed in the header with How
    REST works open. Hidden there the way the header's diagram is (app.js sets body[data-view]);
    the rule's selector is the header's own link."""
    from rest_core.ui import words

    rule = re.search(r'body\[data-view="how-rest"\] #header \.more a\[href="#how-rest"\]\s*\{([^}]*)\}', _rules())
    assert rule and re.search(r"display:\s*none", rule.group(1))
    assert '<p class="more"><a href="#how-rest">How REST works →</a>' in words.header_html("m", "a CPU")


def test_the_step_throughs_blank_marks_are_faint():
    """Screens12, complaint 2: the current step's ↵ and · marks (answer_view.blank_marks) are
    faint and not selected with the text."""
    rule = re.search(r"(?m)^\.answer \.ws-mark\s*\{([^}]*)\}", _rules())
    assert rule and re.search(r"opacity:\s*\.45", rule.group(1)) and "user-select: none" in rule.group(1)


def test_the_step_throughs_message_and_c_stack_on_a_phone():
    """Screens16, 12: at 390 px the step-through's message box sat beside "c in step mode", the
    message squeezed into a column of single words beside the slider's help. On a phone the row
    (teach_tab: elem_id "teach-row") wraps and each of its blocks takes the view's width, over
    Gradio's inline flex-grow and min-width."""
    rules = _rules()
    phone = [m.start() for m in re.finditer(r"@media \(max-width: 640px\)", rules)]
    rule = re.search(r"#teach-row > \* \{([^}]*)\}", rules)
    assert rule and any(start < rule.start() for start in phone)
    inside = rules[max(s for s in phone if s < rule.start()) : rule.start()]
    assert inside.count("{") - inside.count("}") == 1  # in that phone block, not after it
    assert re.search(r"flex: 1 1 100% !important", rule.group(1)) and "min-width: 0 !important" in rule.group(1)
    teach = (Path(__file__).resolve().parents[2] / "teach_tab.py").read_text(encoding="utf-8")
    assert 'gr.Row(elem_id="teach-row")' in teach
