"""Issue 29, second report: the draft tree, the inspector, the attention mask and the
step-through's panels, each said once and from the step's own data.

1. "c" is the most per step: a step's own count is "drafted N (auto budget, at most c = 16)" or
   "drafted N (fixed c = 16)", never "budget c=10" or "(c = 10)".
2. The tree's title sits below the page's label badge.
3. Every label on one side of its node, haloed, over every edge; rejected crosses bold.
4. The inspector's feeds say what they list, of how many drafted branches.
5. No own token: one sentence everywhere; an accepted end of text shown as ⟨end⟩.
6. The mask's key is four swatches, with "…" for the cached positions not drawn.
7. Each step-through panel opens with one plain sentence; the rest is folded.
"""

from __future__ import annotations

import re
from dataclasses import replace
from html import unescape
from pathlib import Path

from rest_core.ui import feeds_view, inspector, phases, step_through, style, tree_key, tree_mask, trie_view, words
from rest_core.ui.stepper import Stepper
from tests.ui.test_feeds_view import step as feeds_step
from tests.ui.test_render import trie_event
from tests.ui.test_tree_reconciled import TOK, eos_step

ROOT = Path(__file__).resolve().parents[2]


def text(html: str) -> str:
    return unescape(re.sub(r"<[^>]+>", "", html))


def auto(ev):
    """The step as the auto budget took it: it chose how many to draft (event.c), and carries
    its predictions; the most it could have drafted is the setting c."""
    n = len(ev.draft)
    return replace(ev, c=n, predicted=(0.5,) * n)


def test_a_steps_own_count_is_never_called_c():
    ev = auto(eos_step())
    head = text(inspector.inspector_html(ev, TOK, n_steps=4, c_max=16))
    assert "drafted 7 (auto budget, at most c = 16)" in head and "c=7" not in head
    assert "drafted 7 (auto budget)" in text(inspector.inspector_html(ev, TOK))  # the most unknown: not said
    title = trie_view.trie_figure(ev, TOK, c_max=16).layout.title.text
    assert "auto budget, at most c = 16" in title and "(c = 7)" not in title
    fixed = eos_step()
    assert "drafted 7 (fixed c = 7)" in text(inspector.inspector_html(fixed, TOK))
    assert "fixed c = 7" in trie_view.trie_figure(fixed, TOK).layout.title.text
    panels = phases.step_panels(fixed, [ord("a")], TOK)
    assert "(c = " not in text(panels.trie_caption) and "fixed c = 7" in text(panels.trie_caption)
    assert "drafted 7 (fixed c = 7)" in text(panels.header)


def test_the_title_clears_the_label_badge():
    layout = trie_view.trie_figure(eos_step(), TOK).layout
    lines = layout.title.text.count("<br>") + 1
    top = (1 - layout.title.y) * layout.height  # px from the figure's top to the title's first line
    assert round(top) >= trie_view.TITLE_TOP >= 56  # the badge is about 40 px tall at a laptop's and a phone's width
    assert layout.margin.t >= top + 18 * lines  # every line above the plot


def test_labels_sit_on_one_side_haloed_over_every_edge_and_crosses_are_bold():
    from dataclasses import replace as rep

    ev = rep(trie_event(), tokens=(ord("A"), ord("D")), token_sources=(1, 0), accepted=(0,))
    fig = trie_view.trie_figure(ev, TOK)
    labelled = [t for t in fig.data if t.mode == "markers+text" and t.name != trie_view.ROW_TRACE and len(t.x)]
    assert labelled and labelled[-1].name == trie_view.WIDE_LABELS
    for t in labelled:
        positions = [t.textposition] if isinstance(t.textposition, str) else list(t.textposition)
        assert all(p.startswith("top ") for p in positions), t.name  # above its node, shifted off an edge at most
        assert t.textfont.shadow and "#fff" in t.textfont.shadow, t.name
    last_line = max(i for i, t in enumerate(fig.data) if t.mode == "lines")
    first_label = min(i for i, t in enumerate(fig.data) if t.mode == "markers+text" and t.name != trie_view.ROW_TRACE)
    assert last_line < first_label  # the star's dashed line too: no line is drawn over a label
    rejected = next(t for t in fig.data if t.name == "drafted, rejected").marker
    assert rejected.line.width >= 2 and rejected.line.color == "#111827" and rejected.opacity is None


def test_the_inspector_says_which_branches_it_lists():
    ev, draft = feeds_step()
    firsts = sum(1 for d in draft.nodes.depths if int(d) == 1)
    listed = feeds_view.feeds_listed(ev)
    es = "es" if firsts != 1 else ""
    assert listed == f"the accepted branch and the 2 heaviest other branches ({firsts} first-level branch{es} drafted)"
    assert f"What fed {listed}" in text(inspector.inspector_html(ev, TOK))
    two = replace(ev, feeds=ev.feeds[:2])
    assert feeds_view.feeds_listed(two).startswith("the accepted branch and the heaviest other branch (")
    assert ", of" not in feeds_view.feeds_listed(
        two
    )  # screens13: "the heaviest other, of 1 drafted first-level branch"
    assert "What fed the drafted branches" not in text(inspector.inspector_html(ev, TOK))


def test_no_own_token_is_one_sentence_and_the_end_of_text_shows():
    ev = eos_step()  # accepts d . EOS: 3 tokens, none of the model's own
    sentence = tree_key.NO_OWN_TOKEN
    assert "length limit" in sentence and "ends the answer" in sentence and "end-of-text" in sentence
    assert sentence not in unescape(tree_key.tree_legend_html())  # the glossary's, once (test_one_wording)
    assert sentence not in text(inspector.inspector_html(ev, TOK))  # the step's own reason instead
    assert "An accepted draft ended the answer, so no token of the model's own." in text(
        inspector.inspector_html(ev, TOK)
    )
    assert tree_key.no_own_reason(ev) in phases.accept_caption(ev, TOK)
    mark = tree_key.END_MARK
    labels = [x for t in trie_view.trie_figure(ev, TOK).data if t.name == "accepted" and t.text for x in t.text]
    assert labels == ["d", "“.”", mark]
    assert re.search(r"accepted: d\.⟨end⟩ then", text(inspector.inspector_html(ev, TOK)))
    acc = phases.accept_html(ev, TOK)
    chips = re.findall(r'<span class="[^"]*">([^<]*)</span>', acc.split('class="tt-acc"')[1])
    assert chips == ["d", ".", mark] and len(chips) == len(ev.tokens)


def test_the_masks_key_is_four_swatches_and_earlier_positions_show():
    ev = eos_step()
    context = list(b"say x y z")
    fig = tree_mask.mask_figure(tree_mask.mask_view(ev, context, TOK))
    heat = fig.data[0]
    assert heat.showscale is False  # no colour bar: four categories, not a scale
    key = [t for t in fig.data[1:] if t.showlegend]
    names = list(tree_mask.MASK_NAMES)
    names[1] += ": positions 0–7"  # every cached position, which the column ticks no longer say
    assert [t.name for t in key] == names
    assert [t.marker.color for t in key] == list(tree_mask.MASK_COLORS)
    assert heat.x[0] == "… (0–3)" and all(v == 1 for v in heat.z[:, 0])  # every row sees the earlier cache


def test_each_panel_opens_with_one_plain_sentence_and_folds_the_rest():
    ev = eos_step()
    p = phases.step_panels(ev, list(b"say x y za"), TOK)
    for phase, html in (("retrieve", p.retrieve), ("trie", p.trie_caption), ("verify", p.verify), ("accept", p.accept)):
        lead = re.match(rf'<p class="tt-lead" data-phase="{phase}">(.*?)</p>', html)
        assert lead, phase
        said = unescape(lead.group(1))
        assert said.endswith(".") and len(re.findall(r"[.!?](\s|$)", said)) == 1, said  # one sentence
        assert len(said) <= 140, said
        rest = html[lead.end() :]
        assert rest.startswith('<details class="tt-more"><summary>'), phase
    assert "The chat holds the conversation's last token 9 times" in text(p.retrieve)
    assert "2 of the 6 drafted tokens agree" not in text(p.verify)
    assert "3 of the 7 drafted tokens are accepted" in text(p.verify)


def test_the_tree_keys_marks_show_and_its_notes_fold():
    key = tree_key.tree_legend_html()
    shown, folded = key.split('<details class="tt-more">')
    for _, name, _, _ in tree_key.TREE_MARKS:
        assert f"<b>{name}</b>" in shown, name
    for note in tree_key.TREE_NOTES:
        assert note in folded and note not in shown


def test_the_feeds_never_call_the_steps_count_c():
    ev, _ = feeds_step()
    u = ev.feeds[1]
    assert feeds_view.feed_status(ev, u) == "not drafted (fixed c = 2)"
    assert feeds_view.feed_status(auto(ev), u) == "not drafted (auto budget)"
    # an auto step that drafted nothing carries no predictions: still never "fixed c = 0"
    nothing = replace(ev, draft=None, c=0, predicted=())
    assert feeds_view.feed_status(nothing, u) == "not drafted (the step drafted nothing)"


def test_the_panels_figures_stay_in_view():
    """Only words fold: the verify table and the conversation's end with its matches underlined
    are figures, shown whatever is folded."""
    p = phases.step_panels(eos_step(), list(b"say x y za"), TOK)

    def outside_folds(html: str) -> str:
        return re.sub(r"<details.*?</details>", "", html, flags=re.S)

    assert '<table class="tt-rows">' in outside_folds(p.verify)
    assert 'class="tt-ctx"' in outside_folds(p.retrieve)


def test_where_the_end_of_text_shows_the_words_say_so():
    """The one sentence says the end-of-text token is not shown (in the answer's text); where a
    view of the step does show it, as ⟨end⟩, that view says so too."""
    ev = eos_step()
    assert tree_key.END_MARK in tree_key.END_SHOWN
    assert tree_key.END_SHOWN.strip() in text(inspector.inspector_html(ev, TOK))
    assert tree_key.END_SHOWN.strip() in phases.accept_caption(ev, TOK)
    assert tree_key.END_MARK in unescape(tree_key.tree_legend_html())
    cut = replace(ev, finish_reason="length")  # the length limit: no end of text to show
    assert tree_key.END_SHOWN.strip() not in text(inspector.inspector_html(cut, TOK))


class ChatTemplateTok:
    """Bytes as characters, plus a chat template's special tokens, which print as nothing."""

    eos_token_id = 2
    names = {0: "<|endoftext|>", 1: "<|im_start|>", 2: "<|im_end|>"}

    def decode(self, ids, skip_special_tokens=False, **kw):
        return "".join(("" if skip_special_tokens else self.names[i]) if i in self.names else chr(i) for i in ids)


def test_a_special_token_is_shown_by_its_name_and_the_retrieve_panel_says_what_they_are():
    """Issue: every special token showed as ∅, and "…dog.∅assistant↵" went unexplained."""
    tok = ChatTemplateTok()
    assert style.token_label(tok, 1) == "⟨im_start⟩" and style.token_label(tok, 0, 16) == "⟨endoftext⟩"
    assert style.token_label(tok, 2) == tree_key.END_MARK == "⟨end⟩"  # the end of a turn, as an accepted one shows
    assert style.token_label(tok, ord("a")) == "a" and not style.is_special(tok, ord("a"))
    ev, _ = feeds_step()
    context = list(b"dog.") + [2, 10, 1] + list(b"assistant\nsay x y z")
    out = text(phases.retrieve_html(ev, context, tok))
    assert "g.⟨end⟩↵⟨im_start⟩assistant↵" in out.replace("·", "")
    assert out.count("the chat template's markers") == 1
    assert "⟨end⟩ and ⟨im_start⟩: the chat template's markers" in out
    plain = text(phases.retrieve_html(ev, list(b"say x y z"), tok))
    assert "chat template" not in plain  # said only where the template shows


def test_the_step_header_counts_tokens_so_far_and_never_a_total_of_steps():
    """Issue: "Step 3 of 3" read as the end of the answer."""
    ev = trie_event()
    head = text(phases.step_header(ev))
    assert head.startswith(f"Step {ev.step + 1} · {ev.totals.new_tokens} tokens so far, {len(ev.tokens)} this step · ")
    assert " of " not in head.split("·")[0]


def test_before_the_first_step_the_step_through_is_one_line():
    """Issue: the empty step-through showed about 900 px of blank panels."""
    view = step_through.step_view(Stepper())
    assert view.header == step_through.EMPTY_HEAD and "Next step" in text(view.header)
    assert not (view.answer or view.retrieve or view.verify or view.accept)
    css = (ROOT / "assets" / "app.css").read_text()
    assert "#teach:has(#teach-head .tt-empty) :is(#teach-answer, #teach-retrieve, #teach-accept, h4)" in css
    assert "#teach:has(#teach-head .tt-empty) .row:has(#teach-trie)" in css


def test_the_settings_line_of_every_step_is_folded_under_its_sources():
    """Round 2 (05, 06): each step repeated a long settings line above its panels; it folds
    under a short summary (its sources and greedy or sampled), the rest one click away."""
    from rest_core.config import GenerationConfig

    st = Stepper()
    st.stores = {"code": None}
    st.config = GenerationConfig()
    out = step_through.settings_used_html(st)
    m = re.fullmatch(r'<details class="tt-settings"><summary>(.*?)</summary>(.*)</details>', out)
    assert m, out
    summary, body = unescape(m.group(1)), unescape(m.group(2))
    assert summary.startswith("Settings used: drafts from code") and "greedy" in summary
    assert len(summary) <= 80 and "K = " in body and "new tokens" in body
    assert f"({words.K_MEANS})" in body  # K says what it is wherever it is shown
    assert len(text(step_through.EMPTY_HEAD)) <= 100  # the line above it says what a step does


def test_the_step_throughs_tree_has_no_blank_band_for_a_badge_it_does_not_draw():
    """Round 2 (06, 12): the step-through's tree (show_label=False) kept Chat's 56 px band for
    the "Draft tree of the step" badge: a blank band between its caption and its title."""
    st = Stepper()
    st.events, st.pos, st.tokenizer, st.prompt_ids = [eos_step()], 0, TOK, [1, 2, ord("a")]
    fig = step_through.step_view(st).trie
    lines = trie_view.TITLE_LINES
    assert fig.layout.margin.t <= step_through.BARE_TOP + 18 * lines + 6 < trie_view.TITLE_TOP + 18 * lines
    top = (1 - fig.layout.title.y) * fig.layout.height
    assert round(top) == step_through.BARE_TOP and fig.layout.margin.t >= top + 18 * lines  # every line shows
    chat = trie_view.trie_figure(eos_step(), TOK)  # Chat's keeps its band under the badge
    assert chat.layout.margin.t >= trie_view.TITLE_TOP
    # the same plot, the figure shorter by the band
    assert chat.layout.height - chat.layout.margin.t == fig.layout.height - fig.layout.margin.t


def test_the_inspector_folds_what_fed_the_draft_under_what_it_matched_and_accepted():
    """screens12: the chat's step panel read "weight 0.33 = mean of code 0/4 = 0.00 and chat 1/1
    = 1.00 …" before its result; a newcomer wants the step in a line. The weights and the
    continuations are folded under a summary; what each source matched and what was accepted
    stay in sight."""
    ev, _ = feeds_step()
    html = inspector.inspector_html(ev, TOK)
    fold = html[html.index('<details class="ins-feeds">') :]
    assert "weight" in fold and "weight" not in html[: html.index('<details class="ins-feeds">')]
    assert "<summary>What fed" in fold and "matched the last" in html and "accepted:" in html


def test_the_retrieve_lead_says_whose_last_tokens_each_source_holds_and_once():
    """Screens14: "The code held its last 4 tokens 1 time" read as the code's own last tokens and
    "1 time" as a slip. A datastore holds the conversation's last tokens; the conversation holds
    its own earlier; one occurrence is "once"."""
    from rest_core.decode.events import MatchInfo
    from rest_core.sources import SOURCE_CONTEXT

    ev, _ = feeds_step()
    code = MatchInfo(source_bit=4, suffix_len=4, suffix_tokens=(1, 2, 3, 4), occurrences=1, sample=(), name="code")
    chat = MatchInfo(source_bit=SOURCE_CONTEXT, suffix_len=1, suffix_tokens=(4,), occurrences=4, sample=())
    lead = phases.retrieve_lead(replace(ev, matches=(code, chat)))
    assert lead.startswith("The code holds the conversation's last 4 tokens once and the conversation holds its own")
    assert "last token 4 times earlier;" in lead and "1 time" not in lead
