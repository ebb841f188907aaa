"""Teaching mode on real step events of a tiny model: the phase captions and figures
(rest_core.teach), the step-through state (rest_core.stepper) and its page handlers (teach_tab)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rest_core import render, teach
from rest_core.config import DraftConfig, GenerationConfig, RetrievalConfig
from rest_core.datastore import Datastore
from rest_core.engine import Engine, collect
from rest_core.runtime import Runtime, Settings
from rest_core.stepper import Stepper
from rest_core.tree import tree_attention_mask
from tests.app_fixtures import knob_args, knob_values
from tests.tiny_models import VOCAB_SIZE, tiny_loaded, torch_threads

MESSAGE = "count: one two three, one two three"
STORE = "own"
KNOBS = dict(c=16, m=6, n_max=8, max_matches=3, use_context=True, max_new_tokens=40)


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    with torch_threads(1):
        yield


@pytest.fixture(scope="module")
def lm():
    return tiny_loaded("llama")


@pytest.fixture(scope="module")
def runtime(lm):
    """A runtime on the tiny model whose datastore STORE holds the model's own greedy answer to
    MESSAGE (and a piece of it): its drafts are often right, sometimes branch and disagree."""
    rt = Runtime(Settings(), loader=lambda: lm)
    plain = Engine(lm.model, lm.tokenizer)
    prompt = plain.encode([{"role": "user", "content": MESSAGE}], chat=True)
    ref = lm.model.generate(torch.tensor([prompt]), max_new_tokens=48, do_sample=False)[0, len(prompt):].tolist()
    noise = [(t * 7 + 3) % 256 for t in ref]  # the same length of other tokens: disagreeing branches
    store = Datastore.from_token_ids([ref, ref[4:20] + noise[:12], ref[10:30]], vocab_size=VOCAB_SIZE)
    rt._engines[STORE] = Engine(lm.model, lm.tokenizer, store)
    return rt


@pytest.fixture(scope="module")
def run(runtime):
    """(events, contexts, config): a stepped-through answer; contexts[k] = the ids before step k."""
    st = Stepper()
    st.start(runtime, MESSAGE, STORE, knob_values(**KNOBS), 16)
    st.run_to_end()
    contexts = [st.context(k) for k in range(len(st.events))]
    return st.events, contexts, st.config


def test_the_answer_has_drafted_branching_steps(run):
    events, _, _ = run
    assert len(events) >= 3
    assert any(e.accepted_len > 0 for e in events)
    assert any(c.status == "disagree" for e in events for c in teach.row_checks(e)), "no rejected branch to show"


def test_mask_heatmap_is_rows_by_context_plus_rows_and_matches_the_tree_mask(run, lm):
    events, contexts, _ = run
    for e, ctx in zip(events, contexts):
        view = teach.mask_view(e, ctx, lm.tokenizer, n_context=4)
        n = len(e.draft) if e.draft is not None else 0
        assert view.z.shape == (1 + n, 4 + 1 + n)
        assert (view.z[:, :4] == 1).all()  # every row sees the cached context
        tree = view.z[:, 4:] > 0
        expected = tree_attention_mask(e.draft) if n else np.ones((1, 1), bool)
        assert (tree == expected).all()
        assert (np.diag(view.z[:, 4:]) == 3).all()
        root_pos = len(ctx) - 1
        depths = [0] + (e.draft.depths.tolist() if n else [])
        assert view.row_positions == tuple(root_pos + d for d in depths)
        assert view.col_positions[:4] == tuple(range(root_pos - 4, root_pos))
        fig = teach.mask_figure(view)
        assert np.asarray(fig.data[0].z).shape == view.z.shape
        assert len(fig.data[0].y) == 1 + n and len(fig.data[0].x) == 5 + n


def test_agree_marks_are_exactly_the_accepted_nodes(run, lm):
    events, contexts, _ = run
    for e, ctx in zip(events, contexts):
        checks = teach.row_checks(e)
        agree = [c.node for c in checks if c.status == "agree"]
        assert sorted(agree) == sorted(e.accepted)
        assert len(agree) == e.accepted_len
        for c in checks:  # a disagreeing node's parent row was reached, and the model said otherwise
            if c.status == "disagree":
                assert c.model is not None and c.model != c.drafted
        html = teach.verify_html(e, ctx, lm.tokenizer, limit=100)
        assert html.count("✓ agree") == e.accepted_len
        assert html.count("✗ disagree") == sum(c.status == "disagree" for c in checks)


def test_captions_name_the_matched_suffix_and_the_k_cap(run, lm):
    events, contexts, config = run
    capped = False
    for e, ctx in zip(events, contexts):
        cap = teach.retrieve_caption(e, ctx, lm.tokenizer, config.retrieval)
        for m in e.matches:
            if m.suffix_len:
                assert render.visible(lm.tokenizer.decode(list(m.suffix_tokens)), 60) in cap
                assert f"{m.occurrences:,} occurrence" in cap
                assert tuple(ctx[-m.suffix_len:]) == m.suffix_tokens  # the suffix is the end of the context
                capped |= m.occurrences > config.retrieval.max_matches
        html = teach.retrieve_html(e, ctx, lm.tokenizer, config.retrieval)
        for m in e.matches:  # the underlined tokens are the matched suffix
            assert html.count(f"m-{render.source_class(m.source_bit)}") == m.suffix_len
    assert capped, "no step hit K: the cap is untested"
    assert any("caps them" in teach.retrieve_caption(e, c, lm.tokenizer, config.retrieval) for e, c in zip(events, contexts))


def test_accept_caption_and_kept_rows_follow_the_walk(run, lm):
    events, _, _ = run
    assert any(e.token_sources[-1] != 0 for e in events), "no step ends on a drafted token (length limit)"
    for e in events:
        keep, drop = teach.kept_rows(e)
        q = 1 + (len(e.draft) if e.draft is not None else 0)
        assert sorted(keep + drop) == list(range(q))
        # The cache holds every emitted token but the last: the root's row and one per token after it.
        assert len(keep) == len(e.tokens)
        own = e.tokens[-1] if e.token_sources[-1] == 0 else None
        if own is not None:  # the model's own token closes the step: every accepted row's KV stays
            assert keep == [0] + [a + 1 for a in e.accepted]
        cap = teach.accept_caption(e, lm.tokenizer)
        assert f"{len(e.tokens)} token" in cap and f"accepts {e.accepted_len} draft token" in cap


def test_step_panels_render_every_phase(run, lm):
    events, contexts, config = run
    e, ctx = events[1], contexts[1]
    p = teach.step_panels(e, ctx, lm.tokenizer, config.retrieval, n_steps=len(events))
    assert f"Step 2 of {len(events)}" in p.header
    for html, phase in ((p.retrieve, "retrieve"), (p.trie_caption, "trie"), (p.verify, "verify"), (p.accept, "accept")):
        assert f'data-phase="{phase}"' in html
    assert p.trie.data and p.mask.data


def test_stepper_next_back_and_run_to_end_give_plain_greedy_tokens(runtime, lm):
    st = Stepper()
    st.start(runtime, MESSAGE, STORE, knob_values(**KNOBS), 16)
    assert st.events == [] and st.event is None  # lazy: nothing runs before the first Next
    assert st.next() and st.pos == 0
    assert st.next() and st.next() and st.pos == 2 and len(st.events) == 3
    first3 = list(st.events)
    assert st.back() and st.pos == 1 and len(st.events) == 3  # Back takes no step
    assert st.context() == st.prompt_ids + list(first3[0].tokens)
    assert st.next() and st.pos == 2 and st.events == first3  # forward again: the steps already taken
    st.run_to_end()
    assert st.finished and st.pos == len(st.events) - 1 and not st.next()
    assert st.events[:3] == first3
    ref = lm.model.generate(torch.tensor([st.prompt_ids]), max_new_tokens=st.config.max_new_tokens, do_sample=False)
    assert st.token_ids() == ref[0, len(st.prompt_ids):].tolist()  # lossless: plain greedy's tokens
    plain = collect(runtime.engine(STORE).generate(st.prompt_ids, st.config))
    assert st.token_ids() == plain.token_ids
    st.close()
    assert st.events == [] and not st.started


def test_closing_mid_answer_releases_the_generator(runtime):
    st = Stepper()
    st.start(runtime, MESSAGE, STORE, knob_values(**KNOBS), 16)
    st.next()
    steps = st._steps
    st.close()
    assert steps.gi_frame is None  # the generator finished: its cache is released
    with pytest.raises(ValueError, match="Type a message"):
        st.start(runtime, "  ", STORE, knob_values(**KNOBS), 16)


def test_why_c_figure_marks_the_chosen_c_on_the_measured_curve(run, runtime):
    events, _, _ = run
    curve = runtime.engine(STORE).forward_cost(17)
    fig = teach.why_c_figure(curve, events, 16, max_c=16)
    cost, speed, chosen = fig.data
    assert list(cost.x) == list(curve.sizes) and list(cost.y) == list(curve.ms)
    assert list(chosen.x) == [16] and chosen.y[0] == pytest.approx(speed.y[16])
    # At the budget every full-size step used, the expected accepted count is what was accepted.
    full = [e for e in events if e.draft is not None and len(e.draft) == min(16, len(e.trie))]
    assert teach.expected_accepted(full, [16])[0] == pytest.approx(np.mean([e.accepted_len for e in full]))
    assert "16" in teach.why_c_caption(curve, events, 16)


def test_page_handlers_step_back_and_run_to_end(runtime, lm):
    import teach_tab

    h = teach_tab.TeachHandlers(runtime)
    knobs = knob_args(**KNOBS)
    out = h.next(MESSAGE, Stepper(), STORE, 16, *knobs)
    assert len(out) == h.N_OUT
    header, answer, retrieve, trie_cap, trie, verify, mask, accept, status, st = out
    assert "Step 1 of 1" in header and 'data-phase="retrieve"' in retrieve and "err" not in status
    out = h.next(MESSAGE, st, STORE, 16, *knobs)
    assert "Step 2 of 2" in out[0]
    out = h.back(st)
    assert "Step 1 of 2" in out[0]
    out = h.run_to_end(MESSAGE, st, STORE, 16, *knobs)
    assert st.finished and "complete" in out[8]
    text = lm.tokenizer.decode(st.token_ids(), skip_special_tokens=True)
    assert render.highlight_html(st.events, lm.tokenizer) in out[1] and text
    out = h.next("", Stepper(), STORE, 16, *knobs)  # no message: a message, no traceback
    assert "Type a message" in out[8] and 'class="status err' in out[8]
    out = h.restart(st)
    assert out[0] == "" and st.events == []


def test_timeline_has_one_block_per_forward_on_one_clock(run, runtime, lm):
    events, _, config = run
    prompt = run[1][0]
    plain = collect(runtime.engine(STORE).generate(prompt, config.with_method("ar"))).events
    fig = teach.timeline_figure(events, plain, lm.tokenizer)
    for lane, evs in (("REST", events), ("plain", plain)):
        blocks = sorted((b, w) for tr in fig.data for b, w, y in zip(tr.base, tr.x, tr.y) if y == lane)
        assert len(blocks) == len(evs)  # one block per forward pass
        for (b0, w0), (b1, _) in zip(blocks, blocks[1:]):  # back to back, no overlap
            assert b1 == pytest.approx(b0 + w0, abs=1e-6)
        assert blocks[0][0] == pytest.approx(0.0, abs=1e-6)
        assert blocks[-1][0] + blocks[-1][1] == pytest.approx(1000 * evs[-1].totals.elapsed_s)
    drafted = [tr for tr in fig.data if tr.name.startswith("accepted drafts")]
    assert sum(len(tr.x) for tr in drafted) == sum(1 for e in events if e.accepted_len)
