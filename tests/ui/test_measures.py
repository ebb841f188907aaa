"""Figures that measure the same thing agree (issue 29): Compare showed plain decoding's ms per token
(313 ms) beside Why this c?'s one-token forward (460 ms) with nothing saying what either was. Each
figure now names what it measures from its own data, and the two one-token forwards are shown
side by side with both definitions, from one module (rest_core.ui.measures)."""

from __future__ import annotations

import re
from dataclasses import replace
from html import unescape

import pytest

from rest_core.budget.cost_curve import CostCurve
from rest_core.decode.events import StepTimings
from rest_core.ui import compare_rows, compare_view, measures, why_c_view, why_c_words
from tests.ui.test_render import event
from tests.ui.test_source_share import _step

CURVE = CostCurve((1, 2, 4, 8, 16, 32, 64, 65), (40.0, 40.5, 52.0, 55.0, 56.0, 80.0, 130.0, 140.0), 256, 2)


def timed(ev, forward_ms: float, total_ms: float):
    return replace(ev, timings=StepTimings(forward_ms=forward_ms, total_ms=total_ms))


def runs():
    """A REST run (2 steps, 4 tokens) and a plain one (4 one-token steps, forwards 30, 31, 50, 32 ms)
    after a 5-token prompt."""
    rest = [
        timed(event(0, [1, 2, 3], (1, 1, 0), elapsed=0.1), 70.0, 100.0),
        timed(event(1, [4], (0,), new=4, elapsed=0.2, finished=True), 60.0, 100.0),
    ]
    ar = [
        timed(event(i, [i + 1], (0,), method="ar", new=i + 1, elapsed=0.04 * (i + 1), finished=i == 3), ms, 40.0)
        for i, ms in enumerate((30.0, 31.0, 50.0, 32.0))
    ]
    return rest, ar


def test_plain_decodings_forward_is_the_mean_of_its_one_token_forwards_over_the_caches_it_had():
    _, ar = runs()
    f = measures.plain_forward(ar)
    assert f.ms == pytest.approx(35.75) and (f.q, f.runs, f.stat) == (1, 4, "mean")
    assert f.cache == (4, 7)  # the prompt's 5 tokens but the root, then one more per step
    assert f.what() == "one forward of 1 token over caches of 4–7 tokens, the mean of 4 runs"
    assert measures.plain_forward([e for e in runs()[0]]) is None  # no plain step


def test_compares_rows_say_what_they_measure_and_its_note_takes_the_forward_from_the_same_place():
    rest, ar = runs()
    cmp = compare_view.compare(rest, ar, greedy=True)
    rows = {k: (r, a) for k, r, a in compare_view.comparison_rows(cmp)}
    assert rows["per token (wall clock, whole steps, prefill excluded)"] == ("50.0 ms", "40.0 ms")
    plain = measures.plain_forward(ar)
    assert rows[compare_rows.FORWARD_ROW] == ("65.0 ms", f"{plain.ms:.1f} ms")
    note = unescape(compare_view.comparison_html(cmp))
    assert measures.PER_TOKEN in note
    assert f"Plain decoding: 40.0 ms per token against its forward's {plain.line()}" in note


def text(html: str) -> str:
    """A caption's words, tags dropped."""
    return unescape(re.sub(r"<[^>]+>", " ", html))


def test_why_this_c_names_its_one_token_forward_and_puts_compares_beside_it():
    events = [_step(100), _step(100)]
    alone = text(why_c_words.why_c_caption(CURVE, events, 2, max_c=64))
    measured = measures.curve_forward(CURVE)
    assert measured.what() == "one forward of 1 token over a cache of 256 tokens, the fastest of 2 runs"
    assert f"Verifying 1 token costs {measured.ms:.1f} ms on this device" in alone
    assert f"{measured.ms:.1f} ms: {measured.what()}" in alone
    assert "Compare's plain decoding" not in alone
    plain = measures.plain_forward(runs()[1])
    both = text(why_c_words.why_c_caption(CURVE, events, 2, max_c=64, compared=plain))
    assert (
        f"One forward of 1 token: {measured.line()}; {plain.line()}; the first is 40.0 / 35.8 = {40.0 / 35.8:.2f}× the second"
        in both
    )
    # a curve not measured by measure_cost_curve (a preset) does not claim how it was measured
    preset = measures.curve_forward(CostCurve((1, 64), (10.0, 12.0)))
    assert preset.what() == "one forward of 1 token, measured in a way not recorded"


def test_the_measured_curve_records_how_it_was_measured():
    from rest_core.decode.cost import measure_cost_curve
    from tests.tiny_models import tiny_loaded, torch_threads

    with torch_threads(1):
        curve = measure_cost_curve(tiny_loaded("llama").model, 4, context_len=32, reps=3)
    assert (curve.cache_len, curve.reps) == (32, 3)


def steady(forwards: list[float], totals: list[float], method: str = "rest", tokens: int = 2):
    """Steps as the engine times them: each step's `total_ms` is its forward and more, and the
    decode clock (`elapsed_s`) is their sum."""
    out, clock = [], 0.0
    for i, (fwd, tot) in enumerate(zip(forwards, totals)):
        clock += tot / 1000
        ids = list(range(tokens * i + 1, tokens * i + 1 + tokens))
        sources = (1,) * (tokens - 1) + (0,)
        ev = event(i, ids, sources, method=method, new=tokens * (i + 1), elapsed=clock, finished=i == len(forwards) - 1)
        out.append(timed(ev, fwd, tot))
    return out


def test_compares_step_never_reads_shorter_than_its_forward():
    """Issue: "REST step took 699.5 ms" beside "one forward (median) 703.5 ms". A step is its forward
    and more; with one statistic (the mean) for both rows the step can never read shorter, even when
    one fast step pulls the mean under the median (forwards 10, 100, 100 ms)."""
    rest = steady([10.0, 100.0, 100.0], [20.0, 110.0, 110.0])
    ar = steady([50.0] * 6, [55.0] * 6, method="ar", tokens=1)
    cmp = compare_view.compare(rest, ar, greedy=False)
    rows = {k: (r, a) for k, r, a in compare_view.comparison_rows(cmp)}
    step = float(rows[compare_view.STEP_ROW][0].split()[0])
    forward = float(rows[compare_rows.FORWARD_ROW][0].split()[0])
    assert (step, forward) == (80.0, 70.0)
    assert "took 80.0 / 55.0 = 1.45× a plain one-token step" in compare_view.speedup_why(cmp)


def test_compares_headline_does_not_claim_a_speedup_above_m():
    """Issue: "speedup 3.03×" beside M = 1.90, while the page says the speedup is always below M.
    Timed under different loads, the headline says so instead of claiming the speedup."""
    rest = steady([60.0, 60.0], [65.0, 65.0])  # M = 2, 65 ms a step
    slow_plain = steady([190.0] * 4, [195.0] * 4, method="ar", tokens=1)  # the machine got busier
    cmp = compare_view.compare(rest, slow_plain, greedy=False)
    # the table's 30.8 / 5.1 tokens/s, as printed (6.0 before rounding)
    assert cmp.speedup == pytest.approx(30.8 / 5.1) and cmp.rest.mean_generated_length == 2.0
    head = re.sub(r"<[^>]+>", "", unescape(compare_view.comparison_html(cmp)).split("<table")[0])
    assert (
        "speedup 6.04× measured, but above M = 2.00: the machine's load changed between the two runs; rerun Compare"
        in head
    )
    why = compare_view.speedup_why(cmp)
    assert "so the speedup is" not in why and "which cannot be" in why and "rerun Compare" in why
    # a believable pair claims its speedup and explains it as M over the step ratio
    plain = steady([30.0] * 4, [32.0] * 4, method="ar", tokens=1)
    fair = compare_view.compare(rest, plain, greedy=False)
    assert fair.speedup < 2.0 and "load changed" not in compare_view.comparison_html(fair)
    # 0.98 only before rounding 2.03
    assert "so the speedup is M / 2.03 = 2.00 / 2.03 = 0.99×" in compare_view.speedup_why(fair)


def _claims(text: str) -> list[tuple[float, str, float, float]]:
    """Every "a / b = r", "a − b = r" and "a × b = r" the text prints, as (a, op, b, r)."""
    found = re.findall(r"(\d+\.\d+) ([/−×]) (\d+\.\d+) = (\d+\.\d+)", text)
    return [(float(a), op, float(b), float(r)) for a, op, b, r in found]


def _reproduces(text: str) -> None:
    claims = _claims(text)
    assert claims, text
    for a, op, b, r in claims:
        exact = a / b if op == "/" else a - b if op == "−" else a * b
        places = len(str(r).split(".")[1])
        assert abs(exact - r) <= 0.5 * 10**-places + 1e-9, (a, op, b, r, text)


def test_every_ratio_compare_prints_reproduces_from_the_figures_it_prints():
    """Issue: "(1.33× as long …) so the speedup is 2.19 / 1.33 = 1.64×" beside a table of 55.2 and
    41.3 ms (1.34), and "retrieval adds 0.7 ms" where step minus forward read 1.1 ms. Each ratio is
    of the printed figures, each difference the table's rows', and the headline that of its tokens/s."""
    rest = steady([54.06, 54.14, 54.1], [55.16, 55.24, 55.2], tokens=3)
    ar = steady([40.2] * 9, [41.26] * 9, method="ar", tokens=1)
    cmp = compare_view.compare(rest, ar, greedy=False)
    why = compare_view.speedup_why(cmp) + " " + " ".join(compare_view.speedup_details(cmp))
    _reproduces(why)
    assert "55.2 / 41.3 = 1.34× a plain one-token step" in why
    rows = {k: (r, a) for k, r, a in compare_view.comparison_rows(cmp)}
    step, forward = (
        rows[compare_view.STEP_ROW][0],
        rows[compare_rows.FORWARD_ROW][0],
    )
    assert f"{step.split()[0]} − {forward.split()[0]} = 1.1 ms" in why
    per_token = rows["retrieval per token"][0].split()[0]  # retrieval per step: the printed row × M
    assert re.search(rf"{per_token} × 3\.00 = \d+\.\d ms a step", why)
    tps = [float(x) for x in rows[compare_view.COMPARE_RATE]]
    assert f"{cmp.speedup:.2f}" == f"{tps[0] / tps[1]:.2f}"
    # where M over the rounded step ratio and the headline part by rounding, the sentence names both
    slower = compare_view.compare(
        steady([54.06, 54.14, 54.1], [55.16, 55.24, 55.27], tokens=3),
        steady([40.2] * 9, [41.2] * 9, method="ar", tokens=1),
        greedy=False,
    )
    why = compare_view.speedup_why(slower)
    _reproduces(why + " " + " ".join(compare_view.speedup_details(slower)))
    assert "3.00 / 1.34 = 2.24×, the headline's 2.23× but for rounding" in why
    assert "54.3 / 24.3 = 2.23×" in " ".join(compare_view.speedup_details(slower))


def test_compare_names_the_machine_and_puts_the_why_beside_the_speedup():
    """Issue: Compare showed 0.63× right after the header promised speed, the device never named and
    the why far below. The headline's next line names the model and the device, and says the
    speedup is M over the step ratio of this comparison, and that on a GPU the ratio is about 1."""
    rest, ar = runs()
    cmp = compare_view.compare(rest, ar, greedy=True)
    html = compare_view.comparison_html(cmp, compare_view.Machine("SmolLM2-135M-Instruct", "CPU", "2 threads"))
    short = unescape(re.search(r'<p class="speedup-why" id="speedup-why">(.*?)</p>', html).group(1))
    assert short.startswith("SmolLM2-135M-Instruct on this CPU (2 threads): a REST step")
    why = unescape(re.search(r'<p class="live-note" id="speedup-sum">(.*?)</p>', html).group(1))  # folded
    assert why.startswith("SmolLM2-135M-Instruct on this CPU (2 threads): a REST step")
    step_r, step_a = compare_view.step_ms(cmp.rest), compare_view.step_ms(cmp.ar)  # the table's step row
    x = round(step_r / step_a, 2)
    assert f"took {x:.2f}× as long as a plain one-token step" in short
    assert f"{step_r:.1f} / {step_a:.1f} = {x:.2f}× a plain one-token step" in why
    assert f"so the speedup is M / {x:.2f} = 2.00 / {x:.2f} = {cmp.speedup:.2f}×" in why
    assert "on a GPU that factor is about 1, so the speedup approaches M = 2.00." in why
    assert html.index('id="speedup-value"') < html.index('id="speedup-why"') < html.index("<table")
    gpu = compare_view.speedup_why(cmp, compare_view.Machine("m", "GPU", "NVIDIA H200"))
    assert "on a GPU that factor" not in gpu and "the closer the speedup comes to M" in gpu
    # the arithmetic behind the table is folded away, one idea a bullet
    fold = html[html.index("<details") :]
    assert fold.count("<li>") >= 4 and "how they follow from each other" in fold


def test_both_tokens_per_s_labels_say_what_they_measure_from_one_wording():
    """Newcomer, 03 vs 04: the stats' 8.4 tokens/s and Compare's REST 17.5 read as a contradiction.
    Each figure's own label names what it measures, both from measures' wording, and they differ."""
    from rest_core.ui import stats

    assert measures.LIVE in measures.LIVE_RATE and measures.NOTHING_DRAWN in measures.COMPARE_RATE
    assert "nothing drawn" in measures.COMPARE_RATE and measures.LIVE_RATE != measures.COMPARE_RATE
    rest, ar = runs()
    done, live = stats.stats_html(rest), stats.stats_html(rest, running=True)
    assert f'<div class="k">{measures.LIVE_RATE}</div>' in unescape(done)
    assert f'<div class="k">{measures.LIVE_RATE_SO_FAR}</div>' in unescape(live)
    assert measures.LIVE_RATE_SO_FAR.startswith("tokens/s so far") and measures.LIVE in measures.LIVE_RATE_SO_FAR
    cmp = compare_view.compare(rest, ar, greedy=True)
    html = unescape(compare_view.comparison_html(cmp))
    table = html[: html.index("<details")]
    assert f'<tr><th>{measures.COMPARE_RATE}</th><td data-label="REST">{cmp.rest.tokens_per_s:.1f}</td>' in table
    assert "tokens/s" not in table.replace(measures.COMPARE_RATE, "")  # no other, unlabelled, rate


def test_compare_says_why_the_live_stats_tokens_per_s_differ():
    """Issue: live stats 6.8 tokens/s beside Compare's REST 13.9 for the same prompt. Compare names
    the live figure and the reason in one sentence (only when it ran on the chat's last prompt)."""
    rest, ar = runs()
    cmp = compare_view.compare(rest, ar, greedy=True)
    html = unescape(compare_view.comparison_html(cmp, live=6.8))
    note = re.search(r'<p class="live-note" id="live-note">(.*?)</p>', html).group(1)
    assert note.startswith(
        f"The chat's answer to this prompt ran at 6.8 {measures.LIVE_RATE}, Compare's REST at 20.0 {measures.COMPARE_RATE}:"
    )
    assert note.count(". ") == 0 and note.endswith(".")
    assert "warm-up" in note and "back to back" in note
    assert 'id="live-note"' not in compare_view.comparison_html(cmp)  # Compare on a typed message: no live figure
    assert compare_view.live_note(cmp, 20.04) == ""  # the same figure as printed: nothing to explain
    # a live answer faster than Compare's REST (the machine's load changed): no warm-up to blame
    faster = compare_view.live_note(cmp, 25.0)
    assert (
        faster.startswith(f"The chat's answer to this prompt ran at 25.0 {measures.LIVE_RATE}")
        and "warm-up" not in faster
    )
    assert "load of the moment" in faster and faster.count(". ") == 0


def test_every_ratio_why_this_c_prints_reproduces_and_its_speedup_names_the_acceptance_it_uses():
    """Issue: "109.1 ms (1.62× as long)" over 67.1 ms (1.63), and "your c = 16 expects 1.00×" beside
    M = 1.67 with no word of the acceptance at c = 16 it used."""
    curve = CostCurve(
        (1, 2, 4, 8, 16, 17, 32, 64, 65), (67.06, 67.5, 70.0, 80.0, 100.0, 109.14, 150.0, 220.0, 230.0), 256, 2
    )
    events = [_step(100), _step(100)]
    caption = text(why_c_words.why_c_caption(curve, events, 16, max_c=64))
    assert "verifying 1 + 16 = 17 tokens costs 109.1 ms, 1.63× as long" in caption
    assert "109.1 / 67.1 = 1.63" in caption
    for a, op, b, r in _claims(caption):
        assert op == "/" and abs(a / b - r) <= 0.005 + 1e-9
    value, words = why_c_view.chosen_speedup(curve, events, 16)
    acc, one, overhead, verify = (
        float(x) for x in re.match(r"\(1 \+ ([\d.]+)\) × ([\d.]+) / \(([\d.]+) \+ ([\d.]+)\)", words).groups()
    )
    assert f"{(1 + acc) * one / (overhead + verify):.2f}" == f"{value:.2f}"
    assert (
        words in caption and f"{acc:.2f}: the accepted drafts per step this answer's tries predict at c = 16" in caption
    )


def test_why_this_c_shows_the_cost_ratio_once_and_source_share_does_not_repeat_it():
    """Issue: "108.9 / 48.5 = 2.25× as long" in the caption and "one forward of 1 + 16 tokens costs
    2.24× one of a single token" below it: one computation (of the printed figures), shown once."""
    from rest_core.ui import source_share

    curve = CostCurve(
        (1, 2, 4, 8, 16, 17, 32, 64, 65), (48.5, 60.0, 80.0, 90.0, 100.0, 108.94, 150.0, 220.0, 224.0), 256, 2
    )
    events = [_step(100), _step(100)]
    caption = text(why_c_words.why_c_caption(curve, events, 16, max_c=64))
    share = text(source_share.source_share_html(events, curve, 16))
    assert "1 + 16 = 17 tokens costs 108.9 ms, 2.25× as long" in caption and "108.9 / 48.5 = 2.25" in caption
    both = caption + share
    assert "2.24" not in both and both.count("2.25×") == 1
    assert "1 + 16 tokens" not in share and "224.0 / 48.5 = 4.62× one token's" in share


def test_why_this_c_says_what_m_is_made_of():
    """Issue: "accepted 1.75 draft tokens per step: M = 10/4 = 2.50" then "(1.75 … not M − 1)" while
    M − 1 = 1.5. M is split into accepted drafts and the model's own tokens, and where a step ended
    the text before the model's own token the caption says so, so the figures follow."""
    from tests.ui.test_render import event

    steps = [
        event(0, [1, 2, 3], (1, 1, 0), new=3),
        event(1, [4, 5], (1, 0), new=5),
        event(2, [6, 7, 8], (1, 1, 0), new=8),
        event(3, [9, 10], (1, 1), new=10, finished=True),  # accepted drafts ran to the end of the text
    ]
    words = text(why_c_words.why_c_caption(CURVE, steps, 16, max_c=64, answer="The step-through's answer"))
    assert (
        "The step-through's answer wrote M = 10 tokens / 4 steps = 2.50 tokens per step: 7 accepted draft tokens, "
        "1.75 a step, and 3 tokens of the model's own." in words
    )
    assert "M is below 1 + 1.75 because the last step ended the text before the model's own token." in words
    assert 10 == 7 + 3 and 10 / 4 == 2.5 and 7 / 4 == 1.75
    full = [event(0, [1, 2, 3], (1, 1, 0), new=3), event(1, [4, 5], (1, 0), new=5, finished=True)]
    words = text(why_c_words.why_c_caption(CURVE, full, 16, max_c=64))
    assert (
        "M = 5 tokens / 2 steps = 2.50" in words
        and "M = 1 + 1.50: every step here added one token of the model's own." in words
    )
    assert "not M − 1" not in words


def test_compares_prefill_row_says_it_is_apart_and_why_it_can_read_0():
    """Issue: the prefill row read 0 ms while the text said prefill is excluded, with no word of why."""
    rest, ar = runs()
    rows = {k: (r, a) for k, r, a in compare_view.comparison_rows(compare_view.compare(rest, ar, greedy=False))}
    label = next(k for k in rows if k.startswith("prefill"))
    assert "in no row above" in label
    assert compare_view.prefill_cell(0.2) == "0 ms (the prompt was cached)"
    assert compare_view.prefill_cell(120.4) == "120 ms"
    assert rows[label] == tuple(compare_view.prefill_cell(e[-1].totals.prefill_ms) for e in (rest, ar))
