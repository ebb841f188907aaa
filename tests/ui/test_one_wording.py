"""Round-2 report (issue 29), wording and density: each idea said fully once, in one wording,
and the step-through's verify table short. Each test names the complaint it answers."""

from __future__ import annotations

import re
from html import unescape

import app
from rest_core.config import RetrievalConfig
from rest_core.ui import answer_view, guided, phases, tree_key, words
from rest_core.ui.settings import ROOT, Settings
from rest_core.ui.style import NO_OWN_TOKEN
from tests.ui.test_tree_reconciled import TOK, eos_step

SVG = (ROOT / "assets" / "how_rest_works.svg").read_text(encoding="utf-8")


def plain(html: str) -> str:
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", html)).split())


def page_texts(tmp_path) -> list[str]:
    """Every string a block of the built page shows before any answer (HTML, Markdown, labels)."""
    demo = app.create_app(Settings(device="cpu", datastores=tmp_path))
    out = []
    for block in demo.blocks.values():
        for attr in ("value", "label", "info"):
            value = getattr(block, attr, None)
            if isinstance(value, str):
                out.append(plain(value))
        for choice in getattr(block, "choices", None) or []:
            out.extend(str(c) for c in (choice if isinstance(choice, tuple) else (choice,)))
    return out


def test_when_a_step_has_no_own_token_is_said_fully_once(tmp_path):
    """Complaint 1: the sentence appeared 4 times (the header's step 3, the colour key, the tree's
    key, the step panels). The glossary says it; elsewhere a step's own token is "usually" there."""
    texts = page_texts(tmp_path)
    assert sum(t.lower().count(NO_OWN_TOKEN.lower()) for t in texts) == 1
    glossary = plain(words.GLOSSARY)
    assert NO_OWN_TOKEN in glossary
    header = plain(words.header_html("m", "this machine's CPU (2 cores)"))
    assert "one token of the model's own (usually)" in header
    assert "drafts (usually: see How REST works)" in plain(answer_view.legend_html())
    assert "one per step (usually)" in plain(tree_key.TREE_LEGEND)


def test_a_step_without_its_own_token_says_its_own_reason():
    """Complaint 1: the Accept panel repeated the general sentence after its own reason."""
    ev = eos_step()
    caption = phases.accept_caption(ev, TOK)
    assert NO_OWN_TOKEN[1:] not in caption and tree_key.NO_OWN_TOKEN[1:] not in caption
    assert "an accepted draft ended the answer, so no token of the model's own" in caption


def test_the_verify_table_folds_the_rows_under_a_rejected_token():
    """Complaint 2: many "not used" rows. The table shows the rows the walk reached; the rows under
    a rejected token sit in a fold that counts them, with the tree's and the mask's numbers."""
    ev = eos_step()
    html = phases.verify_html(ev, [1, 2, ord("a")], TOK)
    shown, folded = html.split('<details class="tt-unused-rows">')
    assert phases.NOT_USED not in plain(shown)
    assert "<summary>1 row under a rejected token, not used</summary>" in folded
    assert re.search(r"4 \(parent 2\)\s+q", plain(folded))
    assert re.search(r"3 \(parent 1\)\s+\.", plain(shown))  # the reached rows keep their numbers


def test_the_verify_tables_root_row_and_model_column_read_plainly():
    """Complaint 2: the root row read "start", the model's column "model's token at the parent row"."""
    table = plain(phases.verify_html(eos_step(), [1, 2, ord("a")], TOK))
    assert "last written root" in table and "start root" not in table
    assert phases.MODEL_COLUMN == "model's choice here" and phases.MODEL_COLUMN in table
    assert "model's token at the parent row" not in table


def test_k_says_what_it_is_wherever_its_value_shows():
    """Complaint 3: "K = 5,000" stood unexplained in a panel."""
    cap = phases.retrieve_caption(eos_step(), [1, 2, ord("a")], TOK, RetrievalConfig(n_min=1, n_max=3))
    assert f"K = 5,000, {words.K_MEANS}" in cap
    assert words.K_MEANS == "the most matches read per lookup"
    assert words.K_MEANS in words.GLOSSARY.split("**K**")[1].split("\n")[0].lower()


def test_the_tree_keys_title_says_what_the_numbers_are():
    """Complaint 4: the tree's node numbers were explained only inside the folded key."""
    summary = plain(tree_key.TREE_LEGEND.split("</summary>")[0])
    assert "the number inside a drafted node is its row in the mask and the verify table" in summary


def test_sampling_is_said_as_the_same_distribution_not_the_same_text(tmp_path):
    """Complaint 5a: "Sampling at temperature 0.8: still exact" read as the same text."""
    assert words.SAME_DISTRIBUTION == "the same distribution, not the same text"
    texts = page_texts(tmp_path)
    assert not any("still exact" in t for t in texts)
    said = [t for t in texts if "distribution" in t]
    assert len(said) >= 4 and all(t.count("distribution") == t.count(words.SAME_DISTRIBUTION) for t in said), said
    sampling = next(e for e in guided.GUIDED_EXAMPLES if dict(e.knobs).get("temperature", 0) > 0)
    assert words.SAME_DISTRIBUTION in sampling.title + sampling.watch
    header = plain(words.header_html("m", "a GPU"))
    for text in (header, plain(words.GLOSSARY), words.ONE_FORWARD):
        assert words.SAME_DISTRIBUTION in text, text[:80]


def test_the_diagram_says_usually_and_one_word_for_the_heaviest():
    """Complaints 5b and 5c: the diagram's "+ 1 token of its own" had no exception, and it said
    "heaviest branches" where How REST works said "heaviest nodes"."""
    lines = re.findall(r"<text[^>]*>([^<]*)</text>", app.header_diagram())
    full = re.findall(r"<text[^>]*>([^<]*)</text>", app.header_diagram(plain=False))
    for shown in (lines, full):
        at = shown.index("+ 1 token of its own")
        assert shown[at + 1] == "(usually)"
        assert not any("branches" in line for line in shown)
        assert shown[shown.index("nodes go to verify") - 1] in ("the likeliest", "up to c likeliest")


def test_what_goes_to_verify_is_the_likeliest_everywhere():
    """Screens12, complaint 1: the diagram said "the heaviest nodes go to verify" while the
    glossary's "heaviest" said the auto budget (the CPU default) ranks by predicted acceptance, so a
    lighter node can go first. One word holds for both budgets: "likeliest", which the glossary
    defines per budget (fixed: largest weight; auto: predicted chance), "weight" still defined."""
    for svg in (app.header_diagram(), app.header_diagram(plain=False), SVG):
        assert "likeliest" in svg and "heaviest" not in svg
    rows = {row.split(" | ")[0].strip("| *"): row for row in words.GLOSSARY.splitlines() if row.startswith("| **")}
    assert "heaviest" not in rows and "weight" in rows
    likeliest = rows["likeliest"]
    assert "fixed budget takes those of largest weight" in likeliest
    assert "auto budget those of highest predicted chance of acceptance" in likeliest
    ev = eos_step()
    assert "likeliest" in phases.trie_lead(ev) and "heaviest" not in phases.trie_lead(ev)
    assert "likeliest" in phases.trie_caption(ev) and "heaviest" not in phases.trie_caption(ev)


def test_the_diagrams_loop_caption_fits_a_phones_box():
    """Complaint 6: on a phone the swiping box cut the caption under the loop arrow."""
    loop = re.findall(r'<text x="12" y="\d+"[^>]*>([^<]*)</text>', SVG)
    assert len(loop) == 2 and loop[0].startswith("↺")
    assert all(len(line) <= 48 for line in loop), loop


def test_the_trie_panels_sentence_does_not_repeat_the_steps_budget():
    """Complaint 1: "fixed c = 16" stood in the step's header, the trie panel's sentence and the
    figure's title; the header and the panel's fold keep it."""
    ev = eos_step()
    assert "fixed c" not in phases.trie_lead(ev) and phases.trie_lead(ev).endswith("are drafted.")
    assert "fixed c = 7" in phases.trie_caption(ev) and "fixed c = 7" in phases.step_header(ev)


def test_the_glossarys_prefill_leaves_out_the_prompts_last_token_as_the_engine_does():
    """Screens13: the glossary said the prefill runs "over the whole prompt" while step 1's verify
    table starts at the prompt's last token. The engine prefills all but the last token
    (tests/decode/test_engine.py counts the forward's tokens); the glossary says so."""
    from rest_core.ui import words

    row = next(line for line in words.GLOSSARY.splitlines() if line.startswith("| **prefill**"))
    assert "whole prompt" not in row and "all but its last token" in row and "step 1" in row
