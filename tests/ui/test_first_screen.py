"""Issue 29 ("one page, one story"): the page's frame and first screen, its words, its colour key
and the stats under the chat. Each test names the complaint it answers."""

from __future__ import annotations

import html
import re
import xml.etree.ElementTree as ET

from rest_core.config import PRESETS
from rest_core.decode.events import MatchInfo
from rest_core.knobs import KNOBS
from rest_core.sources import SOURCE_CONTEXT, SourceTable
from rest_core.ui import answer_view, stats, words
from rest_core.ui.settings import ROOT
from rest_core.ui.style import CONTEXT_NAME, DEFAULT_STORES, NO_OWN_TOKEN, SEVERAL_NAME
from tests.ui.test_render import event

CSS = (ROOT / "assets" / "app.css").read_text(encoding="utf-8")


def rule(selector: str) -> str:
    """The declarations of the first rule whose selector list is exactly `selector`."""
    found = re.search(rf"(?:^|\}})\s*{re.escape(selector)}\s*\{{([^}}]*)\}}", CSS, re.M)
    assert found, selector
    return found.group(1)


# ------------------------------------------------------------------ the colour key


def test_the_key_is_true_about_the_models_own_token():
    """Complaint 6: "a dotted underline marks the model's own token, one at the end of every step",
    but a step the length limit cuts has none (step 50: "then the model's own: none")."""
    key = html.unescape(answer_view.legend_html())
    assert answer_view.MODEL_TOKEN_NOTE in key
    assert "one at the end of every step" not in key and "every step" not in answer_view.MODEL_TOKEN_NOTE
    assert "(usually" in answer_view.MODEL_TOKEN_NOTE  # when none: the glossary, once (test_one_wording)
    assert "length limit" in words.GLOSSARY.split("**model's own token**")[1].split("\n")[0]


def test_alternate_steps_keep_their_hue_and_the_key_says_so():
    """Complaint 7: "1]" and "dog." wore a lavender-blue (#BBB0EF) no key entry shows: every other
    step's shade was hue-rotated (violet 266 -> 252, blue). Now it is only a little greyer (less
    saturated), in its own source's hue, and the key says so."""
    p1 = rule(".tok.d.p1")
    assert "filter" not in p1 and "hue" not in p1 and "--h" not in p1
    assert "--s:" in p1
    assert answer_view.PARITY_NOTE in answer_view.legend_html()


def test_the_key_is_short_and_folds_the_shade_scale():
    """Complaint 1: the key's shade bins came before the method. The chips and two short notes
    stay in sight; each source's shade scale (1, 2-3, 4-7, 8+) sits in a fold."""
    key = answer_view.legend_html(["code", "chat"])
    shown, folded = key.split('<details class="legend-more">')
    assert "r2 p0" not in shown and "r4 p0" not in shown
    for css in ("ds", "cx", "both"):
        assert f'class="tok d {css} r4 p0"' in folded
    assert f">{CONTEXT_NAME}<" in shown and f">{SEVERAL_NAME}<" in shown and ">model<" in shown


# ------------------------------------------------------------------ the stats


def _steps():
    table = SourceTable.for_stores(["code", "chat"], DEFAULT_STORES)
    code, chat = table.bit("code"), table.bit("chat")
    matches = (
        MatchInfo(code, 2, (5, 6), 3, (), name="code"),
        MatchInfo(chat, 2, (5, 6), 3, (), name="chat"),
        MatchInfo(SOURCE_CONTEXT, 2, (5, 6), 1, (), name="context"),
    )
    return [
        event(0, [1, 2, 3], (code, code | chat, 0), matches=matches),
        event(1, [4, 5, 6], (chat, SOURCE_CONTEXT, 0), new=6, matches=matches),
        event(2, [7, 8], (code, 0), new=8, matches=matches),
    ]


def test_the_stats_say_where_the_tokens_came_from_in_one_sentence():
    """Complaint 5: the card read "datastore 23% / of its 64 tokens, drafted by". One sentence now,
    in the colour key's groups (each store, the conversation, several sources by name, the
    model), every token once, the shares adding up to 100%."""
    steps = _steps()
    sentence = stats.origin_sentence(steps)
    # counts, which add up and read equal where they are (screens8: "40%" and "41%" were both 26
    # of 64), and one percentage: the drafted 62.5% as Compare's "tokens from drafts" rounds it
    assert sentence == (
        "Of the 8 tokens, 5 (62%) were drafted: 2 by the datastore code, 1 by the datastore chat, 1 by the "
        f"conversation and 1 by {SEVERAL_NAME} (chat + code); 3 are the model's own."
    )
    assert 2 + 1 + 1 + 1 + 3 == 8 and int(f"{100 * 5 / 8:.0f}") == 62
    out = html.unescape(stats.stats_html(steps))
    assert sentence in out and "of its" not in out and 'drafted by"' not in out


def test_the_live_tokens_per_second_reads_as_live_and_says_what_it_counts():
    """Complaint 5 (and 02 vs 03: "6.8 mid-stream and 6.8 at the end: reads as never updated"):
    while the answer streams the figure is "tokens/s so far"; the card says what it counts and
    why Speed's figure is the one to compare."""
    steps = _steps()
    live = stats.stats_html(steps, running=True)
    assert f'<div class="k">{stats.LIVE_RATE_SO_FAR}</div>' in live and stats.LIVE_RATE_SO_FAR.startswith(
        "tokens/s so far"
    )
    done = stats.stats_html(steps)
    assert f'<div class="k">{stats.LIVE_RATE}</div>' in done
    note = html.unescape(done)
    assert stats.TIMING_NOTE in note and "prefill" in stats.TIMING_NOTE and "Compare" in stats.TIMING_NOTE


def test_the_stats_lead_with_m_and_grey_the_live_rate_pointing_to_compare():
    """Screens13, complaint 1: the live tokens/s was the big first number under the chat, and it
    read below Compare's plain figure (it is measured while the page draws). M, which does not
    depend on the machine's load, leads; the live rate comes last and greyed, and the note sends
    the reader to Compare for the speedup."""
    out = stats.stats_html(_steps())
    cells = re.findall(r'<div class="stat([^"]*)"><div class="v">[^<]*</div><div class="k">([^<]*)</div>', out)
    assert [k for _, k in cells] == ["tokens / step (M)", "steps", "tokens", stats.LIVE_RATE]
    assert "lead" in cells[0][0].split() and "live-rate" in cells[-1][0].split()
    assert "greyed tokens/s" in stats.TIMING_NOTE and "press Compare" in stats.TIMING_NOTE


def test_an_auto_budget_answers_stats_say_why_a_rerun_can_draft_differently():
    """Screens12, complaint 6: the phone and the laptop showed one prompt with different draft
    counts, nothing saying why. Under an auto-budget answer the stats' note says, in one short
    sentence, that its counts follow this machine's timings; a fixed budget's answer says nothing."""
    from dataclasses import replace

    fixed = html.unescape(stats.stats_html(_steps()))
    assert stats.AUTO_NOTE not in fixed
    auto = [replace(e, predicted=(0.5,) * sum(1 for s in e.token_sources if s)) for e in _steps()]
    note = html.unescape(stats.stats_html(auto)).split('class="stats-note">')[1]
    assert note.startswith(stats.TIMING_NOTE) and stats.AUTO_NOTE in note
    assert stats.AUTO_NOTE.count(". ") == 0 and len(stats.AUTO_NOTE) <= 120
    assert "timings measured on this machine" in stats.AUTO_NOTE and "draft differently" in stats.AUTO_NOTE


def test_the_stats_say_why_compares_rerun_counts_other_steps():
    """Second report: the same prompt showed 35 steps under the chat and "64 / 37" in Compare, and no
    view said why. Score 7: the note sat under the live stats, away from Compare's figure; it is one
    sentence beside Compare's result, only when the two differ (tests/ui/test_compare_reconciled.py)."""
    out = html.unescape(stats.stats_html(_steps()))
    assert "auto budget" not in out and not hasattr(stats, "RERUN_NOTE")


# ------------------------------------------------------------------ the settings, the words


def test_the_settings_column_shows_every_help_text_in_full():
    """Complaint 8: the Settings panel was cut mid-sentence ("large pays on a GPU (flat"): on a
    laptop it scrolled in a box of its own, 100vh tall, which a page's screenshot clips."""
    knobs = re.findall(r"#knobs\s*\{([^}]*)\}", CSS)
    assert knobs and not any("max-height" in k or "overflow-y: auto" in k for k in knobs)


def test_a_sliders_label_has_the_columns_width():
    """Second report (02, 03): "c: the most draft tokens verified per step" was squeezed into three
    lines beside its number box, and the help texts ran long and narrow, so the settings column
    ran far below the answer column. A slider's label and help take a line of their own, full
    width; the number box follows the track on the line below."""
    assert "display: contents" in rule("#knobs .wrap > .head")
    assert "flex: 1 1 100%" in rule("#knobs .wrap > .head > label")
    track = rule("#knobs .wrap > .slider_input_container")
    box = rule("#knobs .wrap > .head > .tab-like-container")
    assert "order: 1" in track and "order: 2" in box


def test_c_is_the_most_verified_per_step_everywhere():
    """Complaint 8 and the terms: the glossary said "on a CPU every extra token costs time, so a
    small c wins" while the CPU default is the auto budget up to c = 16. c is introduced as "c, the
    most draft tokens verified per step"; the knob's help, the budget's and the glossary say the
    auto budget picks per step, possibly none."""
    c = next(k for k in KNOBS if k.name == "c")
    budget = next(k for k in KNOBS if k.name == "budget")
    assert c.label == "c: the most draft tokens verified per step"
    assert "possibly none" in budget.help and "auto" in budget.help  # the budget's help, not c's (screens12)
    entry = words.GLOSSARY.split("| **c** |")[1].split("\n")[0]
    assert entry.strip().startswith("c, the most draft tokens verified per step")
    assert "small c wins" not in words.GLOSSARY and "auto budget" in entry
    assert "c, the most draft tokens verified per step" in words.STEP_NOTE


def test_one_term_per_idea_in_the_words():
    """Complaint 10: "conversation" vs "context", a glossary without "draft" or "several sources".
    The page's words say "conversation" for the conversation as a source, and the glossary lists
    each term the first screen uses."""
    key = html.unescape(answer_view.legend_html())
    header = words.header_html("SmolLM2-135M-Instruct", "this machine's CPU (2 cores)", True)
    for text in (key, header, words.STEP_NOTE, words.ONE_FORWARD):
        assert "(context)" not in text and "context source" not in text
    terms = re.findall(r"^\| \*\*([^*]+)\*\* \|", words.GLOSSARY, re.M)
    for term in ("draft", "datastore", "conversation", "several sources", "c", "auto budget", "accepted", "M"):
        assert term in terms, term
    for name in (k.label for k in KNOBS if k.name in ("use_context", "context_weight")):
        assert "context" not in name


def test_the_speed_reasoning_is_one_idea_per_bullet():
    """Scorer's point 4: walls of text. Why one forward over many tokens pays is a list, one idea
    each, and says the same as the header: the auto budget drafts only where it expects to gain."""
    bullets = [line for line in words.ONE_FORWARD.splitlines() if line.startswith("- ")]
    assert len(bullets) >= 5
    assert "drafts only where it expects to gain" in words.ONE_FORWARD


def test_one_sentence_says_when_a_step_has_no_own_token():
    """Second report: the colour key and the glossary said only "none in a step the length limit
    cuts"; the tree key added "none when a draft ends the answer", and step 7's "3 tokens this
    step" showed only "dog." (the end-of-text token is invisible). One sentence, everywhere."""
    assert NO_OWN_TOKEN == (
        "none when the length limit cuts the step, or when an accepted draft ends the answer "
        "(the end-of-text token is not shown)"
    )
    # Round-2 report: said 4 times, it is now the glossary's alone; the key and the header say
    # "usually" (tests/ui/test_one_wording.py counts it on the built page).
    entry = words.GLOSSARY.split("**model's own token**")[1].split("\n")[0]
    assert NO_OWN_TOKEN in entry and "none in a step the length limit cuts" not in entry


def test_the_header_expects_what_compare_measures_on_a_cpu():
    """Second report: the header said speedups on a CPU "are small" while Compare measured 0.81x
    and 0.69x. Fourth report: it then promised "about as fast as plain decoding, or slower, on a
    new question" as a fact, while Why this c? can predict 1.5x on one. It says why the speedup is
    below M on a CPU and can fall below 1, that Compare measures it for the visitor's prompt, where
    REST gains most, and names the guided example that shows it; a GPU's header keeps to the GPU."""
    cpu = re.sub(r"<[^>]+>", "", words.header_html("m", words.device_phrase("cpu", 2)))
    assert "speedups here are small" not in cpu and "or slower, on a new question" not in cpu
    assert "a many-token step costs more than a one-token one" in cpu
    assert "the speedup is below M" in cpu and "can fall below 1 (Compare measures it)" in cpu
    assert "largest where the answer repeats text" in cpu and "Ask the same thing twice" in cpu
    assert "on a GPU it approaches M" in cpu
    gpu = re.sub(r"<[^>]+>", "", words.header_html("m", words.device_phrase("cuda", gpu="NVIDIA H200")))
    assert "On this CPU" not in gpu and "the speedup approaches M" in gpu


def test_the_c_and_budget_helps_each_say_their_own_thing_once():
    """Screens12, complaints 5 and 6: the draft budget's help repeated c's (auto up to c, possibly
    none; fixed: c every step), and nothing said why two runs of one prompt drafted differently.
    c's help: its count and large against small c; the budget's: auto (the CPU default) against
    fixed, and that auto's timings can make two runs draft differently."""
    from rest_core.knobs import FIXED_MEANS

    budget = next(k for k in KNOBS if k.name == "budget")
    c = next(k for k in KNOBS if k.name == "c")
    assert '"drafted N"' in c.help and "large c" in c.help.lower() and "GPU" in c.help
    assert "auto" not in c.help and FIXED_MEANS not in c.help and "possibly none" not in c.help
    assert budget.help.startswith("auto (the CPU default)") and FIXED_MEANS in budget.help
    assert "possibly none" in budget.help and "two runs of one prompt can draft differently" in budget.help
    assert "GPU" not in budget.help
    assert PRESETS["cpu"].draft.budget == "auto"


def test_fixed_means_one_thing_everywhere():
    """Fourth report, complaint 3: "fixed: always c" (the budget's help), "the fixed budget always
    drafts c" (glossary), "It verifies a fixed c" (step-through) while steps under fixed c = 16
    drafted 5 or 8 (the trie held fewer nodes). One wording, knobs.FIXED_MEANS, in each."""
    from rest_core.knobs import FIXED_MEANS

    assert FIXED_MEANS == "c every step, fewer only when the trie holds fewer"
    budget = next(k for k in KNOBS if k.name == "budget")
    c = next(k for k in KNOBS if k.name == "c")
    auto = words.GLOSSARY.split("| **auto budget** |")[1].split("\n")[0]
    for text in (budget.help, auto, words.STEP_NOTE, words.STEP_C_HELP):  # c's help leaves it to the budget's
        assert FIXED_MEANS in text, text
    for text in (budget.help, c.help, words.GLOSSARY, words.STEP_NOTE, words.ONE_FORWARD):
        assert "always c" not in text and "always drafts c" not in text and "a fixed c" not in text
    likeliest = words.GLOSSARY.split("| **likeliest** |")[1].split("\n")[0]
    assert "up to c of them" in likeliest and "The c likeliest" not in likeliest


def test_the_step_through_says_why_its_c_stops_at_64_and_its_note_is_short():
    """Fourth report, complaints 4 and 5: Chat's c runs 1-128, the step-through's 1-64 with no
    reason given; and the step-through's note was a wall. Its slider says why; the note is one
    sentence in sight, its facts (settings from Chat's panel, timings not speed figures, Compare
    for speed, c beside the message) folded."""
    from rest_core.ui.stepper import STEP_C_MAX

    assert f"at most {STEP_C_MAX} here, so the figures stay readable" in words.STEP_C_HELP
    shown, folded = words.STEP_NOTE.split("<details>")
    assert len(re.findall(r"[.!?](\s|$)", shown.strip())) == 1 and len(shown) < 100
    for fact in ("Chat view's Settings panel", "not speed figures", "Compare", "c, the most draft tokens verified"):
        assert fact in folded, fact


def test_one_function_names_the_device():
    """Second report: the header said "CPU (2 cores)", Compare "this CPU (2 threads)". One function
    names the device; the header uses it."""
    assert words.device_phrase("cpu", 2) == "this machine's CPU (2 cores)"
    assert words.device_phrase("cpu", 1) == "this machine's CPU (1 core)"
    assert words.device_phrase("cuda", gpu="NVIDIA H200") == "a GPU (NVIDIA H200)"
    assert words.device_phrase("cuda", zero_gpu=True).startswith("a GPU (ZeroGPU")
    assert "on <b>this machine's CPU (2 cores)</b>" in words.header_html("m", words.device_phrase("cpu", 2))


def test_the_glossary_is_one_or_two_plain_sentences_an_entry():
    """Second report: "walls of dense jargon". Every glossary entry is one or two sentences, with
    no nested brackets; c is Settings' maximum and "drafted N" a step's own count, in one line."""
    rows = re.findall(r"^\| \*\*([^*]+)\*\* \| (.*) \|$", words.GLOSSARY, re.M)
    assert len(rows) >= 25
    for term, meaning in rows:
        sentences = [x for x in re.split(r"(?<=[.!?])\s+(?=[A-Z])", meaning.strip()) if x]
        assert len(sentences) <= 2, (term, sentences)
        assert len(meaning) <= 330, (term, len(meaning))
        assert not re.search(r"\([^)]*\(", meaning), term
    c = dict(rows)["c"]
    assert "Settings" in c and '"drafted N"' in c
    assert '"drafted N"' in next(k for k in KNOBS if k.name == "c").help  # the knob says it too


# ------------------------------------------------------------------ How REST works' diagram


def diagram_lines(svg):
    """(box, text line, font size) for every line of text in the diagram's boxed steps."""
    ns = "{http://www.w3.org/2000/svg}"
    base = float(svg.get("font-size"))
    for group in svg.findall(f"{ns}g"):
        box = group.find(f"{ns}rect")
        if box is None or "translate" not in (group.get("transform") or ""):
            continue
        for line in group.findall(f"{ns}text"):
            yield box, line, float(line.get("font-size", base))


def test_the_diagrams_text_fits_its_boxes_and_its_steps_are_the_headers():
    """Complaint 9: "n = n_max", "≤ K matches, m tokens after", "over root + c nodes" and "same
    text, fewer steps" ran out of their boxes. Every line's width (and its bottom), estimated generously (0.58 em a
    character, 0.66 bold, 0.62 monospace; DejaVu Sans measures 0.53 and 0.60), stays inside its
    box; the boxes sit under the header's three steps."""
    import app

    for svg in (ET.parse(ROOT / "assets" / "how_rest_works.svg").getroot(), ET.fromstring(app.header_diagram())):
        fits_its_boxes(svg)


def fits_its_boxes(svg) -> None:
    """Every line of the diagram `svg` inside its box; its groups are the header's three steps."""
    ns = "{http://www.w3.org/2000/svg}"
    checked = 0
    for box, line, size in diagram_lines(svg):
        text = "".join(line.itertext())
        em = 0.62 if "monospace" in (line.get("font-family") or "") else 0.66 if line.get("font-weight") else 0.58
        assert len(text) * em * size <= float(box.get("width")) - 8, (text, len(text) * em * size, box.get("width"))
        bottom = float(line.get("y")) + float(line.get("dy", 0))
        assert bottom + 0.25 * size <= float(box.get("height")), (text, bottom)  # descenders inside
        checked += 1
    assert checked >= 25 and len({id(box) for box, _, _ in diagram_lines(svg)}) == 6
    labels = [" ".join(t.itertext()) for t in svg.iter(f"{ns}text")]
    assert ["1. Look up", "2. Verify", "3. Keep"] == [t for t in labels if re.match(r"\d\. ", t)]


def test_the_diagram_on_a_phone_scrolls_with_a_cue_and_its_caption_in_view():
    """Complaint 9 (13, phone): the diagram was cut after "weighted trie", the caption at "extend t",
    with no cue. On a phone the box scrolls sideways under a cue; the caption starts at the
    diagram's left edge, in two short lines that fit the first 390 pixels."""
    phone = next(block for block in CSS.split("@media (max-width: 640px)")[1:] if ".how-svg::before" in block)
    assert "swipe sideways" in phone.lower()
    svg = ET.parse(ROOT / "assets" / "how_rest_works.svg").getroot()
    ns = "{http://www.w3.org/2000/svg}"
    scale = 326 / float(re.search(r"min-width: (\d+)px", phone.split(".how-svg svg {")[1]).group(1))
    caption = [t for t in svg.findall(f"{ns}text") if "conversation" in "".join(t.itertext())]
    assert caption
    for line in svg.findall(f"{ns}text"):
        if float(line.get("y")) > 200:  # under the boxes and the loop-back arrow
            text = "".join(line.itertext())
            right = float(line.get("x")) + len(text) * 0.58 * float(svg.get("font-size"))
            assert line.get("text-anchor") in (None, "start") and right * (1 / scale) ** -1 <= 326, text


# ------------------------------------------------------------------ the first screen (third report)


def css_blocks(selector: str) -> list[str]:
    """The declarations of every rule (media blocks included) whose selector list is `selector`."""
    return re.findall(rf"(?:^|[}}{{])\s*{re.escape(selector)}\s*\{{([^}}]*)\}}", CSS, re.M)


def test_the_header_carries_the_diagram_over_its_three_steps():
    """Third report, complaint 1: the explanation sat in the third tab. The header is one figure:
    the six-box diagram, whose three groups' labels are the three steps' names, over those steps'
    sentences (its captions); its ids are its own, so the How REST works view's copy keeps its
    arrowheads. A phone hides the diagram and keeps the steps."""
    import app

    header = app.header_html(app.Settings(device="cpu"), cores=2)
    figure = header.split('<figure class="how-figure">')[1].split("</figure>")[0]
    diagram, caption = figure.split("<figcaption>")
    svg = ET.fromstring(re.search(r"<svg.*</svg>", diagram, re.S).group(0))
    ns = "{http://www.w3.org/2000/svg}"
    groups = [t.text for t in svg.iter(f"{ns}text") if re.match(r"\d\. ", t.text or "")]
    assert groups == [name for name, _ in words.STEPS] == ["1. Look up", "2. Verify", "3. Keep"]
    captions = re.findall(r"<li><b>(\d\. [\w ]+):</b> (.*?)</li>", caption)
    assert captions == list(words.STEPS)
    assert 'id="how-' not in header and "url(#how-" not in header and 'id="header-how-arrow"' in header
    phone = "".join(CSS.split("@media (max-width: 640px)")[1:])
    assert "#header .how-diagram { display: none; }" in phone


def test_the_intro_is_two_short_sentences():
    """Third report, complaint 1: the header's paragraph was too long (four sentences on a CPU).
    The model and the device, then what speed to expect there: two sentences, on a CPU and a GPU."""
    for device in (words.device_phrase("cpu", 2), words.device_phrase("cuda", gpu="NVIDIA H200")):
        intro = re.search(r'<p class="machine">(.*?)</p>', words.header_html("m", device), re.S).group(1)
        text = re.sub(r"<[^>]+>", "", intro)
        assert len(re.findall(r"[.!?](?:\s|$)", text)) == 2 and len(text) <= 300, text


def test_the_machines_sentence_follows_the_figure_that_shows_a_step():
    """Screens14, complaint 1: "M, the tokens per step", a step's cost and "can fall below 1" came
    before the reader knew what a step is. The header says the method in a sentence, shows it as
    the figure with its three steps, and only then what runs where and what speed to expect."""
    header = words.header_html("m", words.device_phrase("cpu", 2), diagram="<svg></svg>")
    order = [header.index(mark) for mark in ('class="intro"', 'class="how-figure"', 'class="steps"', 'class="machine"')]
    assert order == sorted(order)


def test_the_colour_key_is_the_chat_views():
    """Third report, complaint 2: the colour key took the first screen's room above the tabs. It
    is drawn in the Chat view, over the chat, from the same legend_html."""
    import app

    demo = app.create_app(app.Settings(device="cpu"))
    path: dict[str, list[str]] = {}

    def walk(node, above):
        block = demo.blocks.get(node["id"])
        name = getattr(block, "elem_id", None)
        if name:
            path[name] = above
        for child in node.get("children", []):
            walk(child, [*above, name] if name else above)

    walk(demo.config["layout"], [])
    assert "view-chat" in path["legend"] and "header-box" not in path["legend"]
    legend = next(b for b in demo.blocks.values() if getattr(b, "elem_id", None) == "legend")
    assert legend.value == answer_view.legend_html()
    order = list(path)
    assert order.index("legend") < order.index("chat")


def test_the_generating_mark_reads_at_aa_contrast():
    """Third report, complaint 3: "generating…" was a pale green (#15803d, faded to 35% by its
    pulse). Its last rule gives a green of at least 4.5:1 on white, and the words do not fade."""
    live = css_blocks(".stats .live")[-1]
    colour = re.search(r"(?<![-\w])color:\s*(#[0-9a-fA-F]{6})", live).group(1)

    def luminance(hex_colour: str) -> float:
        rgb = [int(hex_colour.lstrip("#")[i : i + 2], 16) / 255 for i in (0, 2, 4)]
        lin = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in rgb]
        return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]

    assert (1.05) / (luminance(colour) + 0.05) >= 4.5, colour
    assert "animation: none" in live  # the pulse is a dot's (::before), not the words'


def test_the_step_buttons_sit_two_by_two_on_a_phone():
    """Third report, complaint 4: on a phone "Next step", "Back", "Run to end" and "New answer"
    wrapped their labels. There they sit in a 2 x 2 grid, each label on one line."""
    phone = "".join(CSS.split("@media (max-width: 640px)")[1:])
    grid = re.search(r"\.row:has\(> #teach-next\) \{([^}]*)\}", phone).group(1)
    assert "display: grid" in grid and "grid-template-columns: 1fr 1fr" in grid
    assert "white-space: nowrap" in re.search(r"\.row:has\(> #teach-next\) > button \{([^}]*)\}", phone).group(1)


def test_the_header_shows_one_worked_step_with_the_diagrams_own_example():
    """screens9: the first view named trie, mask and c before one plain example. Under the three
    steps, one step worked through, with the diagram's own "def add(a, b"."""
    from pathlib import Path

    head = words.header_html("SmolLM2-135M-Instruct", "this machine's CPU (2 cores)")
    assert f'<p class="example-step">{words.EXAMPLE_STEP}</p>' in head
    assert head.index("3. Keep") < head.index("example-step")
    svg = (Path(__file__).resolve().parents[2] / "assets" / "how_rest_works.svg").read_text()
    assert "def add(a, b" in svg and "def add(a, b" in words.EXAMPLE_STEP
