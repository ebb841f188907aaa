"""Compare's figures set beside the page's others (score 2): the chat's steps beside a rerun's, a
loss said plainly, the machine in the header's words, and prompt lookup's rate, bar and line from
one source."""

from __future__ import annotations

import re
from dataclasses import replace
from html import unescape
from types import SimpleNamespace

import pytest

from rest_core.bench.prompt_lookup import LookupRun
from rest_core.ui import compare, compare_rows, compare_view, measures
from tests.ui.test_measures import runs, timed
from tests.ui.test_render import event, totals


def test_compare_sets_the_chats_steps_beside_its_rerun_with_the_cause():
    """03 "35 steps", 47% drafted vs 04 "64 / 37", 42%, same prompt, no word why."""
    rest, ar = runs()
    cmp = compare_view.compare(rest, ar, greedy=True)  # REST: 4 tokens in 2 steps
    chat = totals(4, 3, 3, 0.3)
    share = f"{100 * cmp.rest.draft_share:.0f}%"
    note = compare_view.rerun_note(cmp, chat, auto=True)
    assert note == (
        "The chat's answer to this prompt took 3 steps, M = 1.33; this REST rerun took 2, M = 2.00: "
        "the auto budget picks each step's drafts from timings it measures live, and the text is the same."
    )
    assert share  # the drafted shares stay in the table's fold
    html = unescape(compare_view.comparison_html(cmp, rerun=note))
    assert re.search(r'id="rerun-note">(.*?)</p>', html).group(1) == note
    # beside the result (score 7: it sat under the live stats), before the table, not folded
    assert html.index('id="rerun-note"') < html.index("<table") < html.index("<details")
    assert compare_view.rerun_note(cmp, totals(4, 2, 2, 0.3), auto=True) == ""  # the same steps: nothing to say
    assert compare_view.rerun_note(cmp, None, auto=True) == ""  # Compare on another prompt


def slower_runs():
    """REST 4 tokens in 2 steps over 0.3 s; plain 4 in 4 over 0.16 s: speedup 13.3 / 25.0."""
    rest = [
        timed(event(0, [1, 2, 3], (1, 1, 0), elapsed=0.15), 140.0, 150.0),
        timed(event(1, [4], (0,), new=4, elapsed=0.3, finished=True), 140.0, 150.0),
    ]
    return rest, runs()[1]


def test_a_loss_is_the_headline_with_where_rest_wins():
    """01 "drafts only where it expects to gain" vs 04 "speedup 0.81×" with no word of a loss."""
    cmp = compare_view.compare(*slower_runs(), greedy=True)
    assert 0 < cmp.speedup < 1 and not cmp.load_note()
    html = unescape(compare_view.comparison_html(cmp))
    assert f'REST was slower here: <b id="speedup-value">{cmp.speedup:.2f}×</b>' in html
    why = re.search(r'id="speedup-why">(.*?)</p>', html).group(1)
    x = measures.ratio(compare_view.step_ms(cmp.rest), compare_view.step_ms(cmp.ar))
    assert why.startswith(
        f"A REST step took {x:.2f}× as long as a plain one-token step but wrote only M = 2.00 tokens."
    )
    assert why.endswith('the guided example "Ask the same thing twice"): there the conversation drafts it.')
    assert why.count(". ") == 1  # two sentences: the why, then where REST wins
    assert "so the speedup is M / " in html[html.index("<details") :]  # the arithmetic, folded
    rest, ar = runs()
    quick = [replace(e, totals=replace(e.totals, elapsed_s=e.totals.elapsed_s / 4)) for e in rest]
    fast_cmp = compare_view.compare(quick, ar, greedy=True)
    assert fast_cmp.speedup > 1
    fast = unescape(compare_view.comparison_html(fast_cmp))
    assert "REST was slower" not in fast and "Ask the same thing twice" not in fast


def test_the_result_reads_in_one_glance_and_folds_every_other_figure():
    """Newcomer, 04: headline, a paragraph of arithmetic, a 12-row table, three paragraphs. Above
    the fold: the headline, one sentence of why, the four rows a newcomer needs; every other row
    and paragraph folded, each figure printed once."""
    rest, ar = runs()
    cmp = compare_view.compare(rest, ar, greedy=True)
    html = unescape(compare_view.comparison_html(cmp, live=6.8, rerun="The chat's answer took 3 steps."))
    top, fold = html[: html.index("<details")], html[html.index("<details") :]
    rows = compare_view.comparison_rows(cmp)
    shown_rows = re.findall(r"<tr><th>([^<]+)</th><td", top)
    assert shown_rows == list(compare_view.MAIN_ROWS)
    assert re.findall(r"<tr><th>([^<]+)</th><td", fold) == [k for k, _, _ in rows if k not in compare_view.MAIN_ROWS]
    for k, r, a in rows:  # every row once, above or in the fold; one for both runs spans both columns
        cells = (
            f'<td data-label="REST">{r}</td><td data-label="plain">{a}</td>'
            if a
            else f'<td colspan="2" class="both">{r}</td>'
        )
        assert html.count(f"<tr><th>{k}</th>{cells}</tr>") == 1
    assert top.count("<p") == 2  # the why and the rerun note: the live note and the sum are folded
    assert 'id="rerun-note"' in top
    for part in ('id="live-note"', 'id="speedup-sum"'):
        assert part in fold


def test_compare_names_the_machine_in_the_headers_words(monkeypatch):
    """01 "CPU (2 cores)" vs 04 "this CPU (2 threads)"."""
    monkeypatch.setattr(compare, "available_cpus", lambda: 2)
    loaded = SimpleNamespace(name="SmolLM2-135M-Instruct", device="cpu")
    runtime = SimpleNamespace(loaded=lambda: loaded, settings=SimpleNamespace(zero_gpu=False))
    machine = compare.machine(runtime)
    assert machine.words() == "SmolLM2-135M-Instruct on this machine's CPU (2 cores)"
    header = "this machine's CPU (2 cores)"  # app.device_words(settings, cores=2), as tests/page/test_app.py checks
    assert machine.words().endswith(header)


def test_prompt_lookups_rate_bar_and_line_end_together():
    """04: the prompt lookup bar ends ~3.36 s while 64 tokens at 18.7 tok/s make ~3.42 s: the prefill
    wrote the first token off the clock; the line says so, and its bar and its line over time end at
    the seconds it prints."""
    run = LookupRun(tuple(range(64)), (2,) * 31 + (1,), tuple(105.0 * (i + 1) for i in range(32)), 50.0, False, 10)
    assert run.decode_tokens == 63
    html = unescape(compare.lookup_html(run, runs()[1], greedy=False))
    # every token counted as the table counts them (64), the rate over the 63 the clock timed
    assert (
        "64 tokens, the first with its prefill (REST's and plain's prefills write none), off the clock; 63 / 3.36 s = 18.8 tokens/s"
        in html
    )
    rate, _ = measures.lookup_rate(63, 64, 3360.0)
    assert rate == pytest.approx(63 / 3.36)
    blocks = compare_view.lookup_blocks(run.token_ids, run.counts, run.ends_ms)
    assert blocks[-1].start_ms + blocks[-1].ms == pytest.approx(3360.0)
    fig = compare_view.speed_figure(*runs(), run)
    line = next(d for d in fig.data if d.name == "prompt lookup k=10")
    assert line.x[-1] == pytest.approx(3.36) and line.y[-1] == 64 and (line.x[0], line.y[0]) == (0.0, 1)


def test_the_rerun_note_speaks_when_m_differs_and_the_step_row_names_each_column():
    """Score 7, 04/03: "38 steps / 1.68" under the chat beside "37 / 1.73" in Compare; and "time per
    step (mean: forward + retrieval + acceptance)" read as plain's too, which retrieves nothing."""
    rest, ar = runs()
    cmp = compare_view.compare(rest, ar, greedy=True)  # REST: 4 tokens in 2 steps, M = 2.00
    assert compare_view.rerun_note(cmp, totals(3, 2, 2, 0.3), auto=True).startswith(
        "The chat's answer to this prompt took 2 steps, M = 1.50; this REST rerun took 2, M = 2.00:"
    )
    # the step's parts, each its own row under the step: plain decoding has no retrieval or tree
    top = unescape(compare_view.comparison_html(cmp)).split("<details")[0]
    assert f"<th>{compare_view.STEP_ROW}</th>" in top
    assert f'<tr><th>{compare_rows.TREE_ROW}</th><td data-label="REST">' in top
    assert '<td data-label="plain">-</td></tr>' in top


def test_the_phone_table_keeps_its_numbers_on_one_line():
    """Score 7, 11: "64 / 64 = 1.00" wrapped over three lines and "47.1 ms" over two at 390 px. The
    figures never wrap; on a phone the row labels are smaller, so the table fits."""
    from pathlib import Path

    css = Path(__file__).resolve().parents[2].joinpath("assets", "app.css").read_text()
    block = css[css.index("/* why2:") :]
    assert re.search(r"table\.cmp td \{[^}]*white-space: nowrap", block)
    assert re.search(r"table\.cmp td\.both \{[^}]*white-space: normal", block)  # "yes, 64 tokens compared" wraps
    rest, ar = runs()
    html = compare_view.comparison_html(compare_view.compare(rest, ar, greedy=True))
    assert '<td colspan="2" class="both">yes, 4 tokens compared</td>' in html
    assert re.search(r"@media \(max-width: 480px\) \{[^@]*table\.cmp tbody th \{[^}]*font-size", block)


def test_each_figure_of_the_phone_table_names_its_run():
    """Screens16, 11: on a phone each row stacked its label over two bare figures in 11 px type,
    the head ("REST", "plain") far above: a figure did not say whose it was. Each figure's cell
    names its run (data-label, the head's words); at 480 px and under the head hides and each
    figure is led by its run's name, in type a phone reads, a figure too wide beside the name
    going under it whole."""
    from pathlib import Path

    rest, ar = runs()
    html = compare_view.comparison_html(compare_view.compare(rest, ar, greedy=True))
    head = re.search(r"<thead><tr><th></th><th>([^<]+)</th><th>([^<]+)</th></tr></thead>", html)
    assert head and head.groups() == compare_rows.RUNS == ("REST", "plain")
    rows = re.findall(r"<tr><th>[^<]+</th>(<td[^>]*>)[^<]*</td>(?:(<td[^>]*>)[^<]*</td>)?</tr>", html)
    assert rows and all(
        (r, a) == ('<td data-label="REST">', '<td data-label="plain">')
        or (r, a) == ('<td colspan="2" class="both">', "")
        for r, a in rows
    )
    css = Path(__file__).resolve().parents[2].joinpath("assets", "app.css").read_text()
    phone = css[css.index("/* phone: Compare's result") :]
    small = phone[phone.index("@media (max-width: 480px)") :]
    assert re.search(r"table\.cmp thead \{\s*display: none", small)
    assert re.search(r"table\.cmp td\[data-label\]::before \{[^}]*content: attr\(data-label\)", small)
    assert re.search(r"table\.cmp td \{[^}]*flex-wrap: wrap", small)
    size = re.search(r"table\.cmp, table\.cmp tbody \{[^}]*font-size: ([.\d]+)rem", small)
    assert size and float(size.group(1)) >= 0.85  # the figures: 11.5 px before


def test_the_status_line_starts_its_cut_runs_sentence_with_a_capital():
    """Score 7, 04: "… (64 new tokens max). prompt lookup stopped after 20 s": a sentence in lower case."""
    from rest_core.config import GenerationConfig

    note = compare._compared_note("the last prompt", GenerationConfig(), "", ["prompt lookup"], 20.0, 60.0)
    assert ". Prompt lookup " in note and ". prompt lookup" not in note


def test_a_plain_run_slowed_part_way_makes_the_headline_unsure():
    """04 (screens7): plain decoding's first steps took about 270 ms and the rest 40 (the machine
    was busy), and the headline claimed 1.98x on that baseline, while Why this c?'s curve allowed
    about 1.6x. Plain steps do alike work: a mean well above their median says the load changed."""
    rest, ar = runs()
    steady = compare_view.compare(rest, ar, greedy=True)
    assert steady.plain_steps == (40.0, 40.0) and not steady.load_note()
    slowed = [replace(e, timings=replace(e.timings, total_ms=270.0)) if i == 0 else e for i, e in enumerate(ar)]
    cmp = compare_view.compare(rest, slowed, greedy=True)
    assert cmp.load_note() == (
        "measured, but plain decoding's steps ran unevenly (median 40.0 ms, mean 97.5 ms): "
        "the machine's load changed during the runs; rerun Compare"
    )
    html = unescape(compare_view.comparison_html(cmp))
    assert 'class="unsure"' in html and "ran unevenly" in html


def test_prompt_lookups_prefill_tokens_are_counted_and_said():
    """04 (screens7): "64 tokens, some with the prefill" beside the glossary's prefill that writes
    no token: transformers' prompt lookup verifies drafts in its prefill, so it says how many."""
    rate, said = measures.lookup_rate(60, 64, 3210.0)
    assert said == (
        "64 tokens, the first 4 with its prefill, which verifies drafts too (REST's and plain's prefills "
        "write none), off the clock; 60 / 3.21 s = 18.7 tokens/s"
    )
    assert rate == pytest.approx(60 / 3.21)
