"""Teaching mode on real step events of a tiny model: the phase captions and figures
(rest_core.ui.phases, provenance, tree_mask, why_c_view, guided, and Compare's timeline in
compare_view), the step-through state (rest_core.ui.stepper) and its page handlers (app.py)."""

from __future__ import annotations

import inspect
import pickle
import re
from dataclasses import replace
from html import unescape

import gradio as gr
import numpy as np
import pytest
import torch

from rest_core.bench.prompt_lookup import run_prompt_lookup
from rest_core.config import RetrievalConfig
from rest_core.decode.engine import Engine, collect
from rest_core.drafting.context_source import ContextSource
from rest_core.drafting.datastore_source import DatastoreSource
from rest_core.drafting.tree import tree_attention_mask
from rest_core.knobs import make_config
from rest_core.store.datastore import Datastore
from rest_core.ui import (
    answer_view,
    compare_view,
    feeds_view,
    guided,
    phases,
    provenance,
    step_through,
    style,
    tree_mask,
    why_c_view,
    why_c_words,
)
from rest_core.ui.runtime import Runtime
from rest_core.ui.session import Session
from rest_core.ui.settings import Settings
from rest_core.ui.stepper import Stepper
from rest_core.ui.store_pick import pick_for
from rest_core.ui.words import CHECK_LABEL
from tests.app_fixtures import compare_on, knob_values, respond, step_knobs
from tests.tiny_models import VOCAB_SIZE, tiny_loaded, torch_threads

MESSAGE = "count: one two three, one two three"
STORE = "own"
DOC_NAMES = ["answer.txt", "mixed/branch.md", "piece 3"]
KNOBS = dict(c=16, m=6, n_max=8, max_matches=3, use_context=True, max_new_tokens=40)


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    with torch_threads(1):
        yield


@pytest.fixture(scope="module")
def lm():
    return tiny_loaded("llama")


@pytest.fixture(scope="module")
def runtime(lm, tmp_path_factory):
    """A runtime on the tiny model whose datastore STORE holds the model's own greedy answer to
    MESSAGE (and a piece of it): its drafts are often right, sometimes branch and disagree. The
    store is built in memory (with its document index) and its engine placed where the runtime
    finds the store STORE of its datastores folder."""
    folder = tmp_path_factory.mktemp("datastores")
    (folder / STORE).mkdir()
    (folder / STORE / "meta.json").write_text("{}")  # listed as built; the engine below serves it
    rt = Runtime(Settings(datastores=folder), loader=lambda: lm)
    plain = Engine(lm.model, lm.tokenizer)
    prompt = plain.encode([{"role": "user", "content": MESSAGE}], chat=True)
    ref = lm.model.generate(torch.tensor([prompt]), max_new_tokens=48, do_sample=False)[0, len(prompt) :].tolist()
    noise = [(t * 7 + 3) % 256 for t in ref]  # the same length of other tokens: disagreeing branches
    store = Datastore.from_token_ids([ref, ref[4:20] + noise[:12], ref[10:30]], vocab_size=VOCAB_SIZE, names=DOC_NAMES)
    rt._engines[rt.resolve(STORE)] = Engine(lm.model, lm.tokenizer, datastores={STORE: store})
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
    assert any(c.status == "disagree" for e in events for c in phases.row_checks(e)), "no rejected branch to show"


def test_mask_heatmap_is_rows_by_context_plus_rows_and_matches_the_tree_mask(run, lm):
    events, contexts, _ = run
    for e, ctx in zip(events, contexts):
        view = tree_mask.mask_view(e, ctx, lm.tokenizer, n_context=4)
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
        fig = tree_mask.mask_figure(view)
        earlier = int(tree_mask.earlier_column(view) is not None)  # the "…" column of positions not drawn
        assert (np.asarray(fig.data[0].z)[:, earlier:] == view.z).all()
        assert len(fig.data[0].y) == 1 + n and len(fig.data[0].x) == earlier + 5 + n


def test_agree_marks_are_exactly_the_accepted_nodes(run, lm):
    events, contexts, _ = run
    for e, ctx in zip(events, contexts):
        checks = phases.row_checks(e)
        agree = [c.node for c in checks if c.status == "agree"]
        assert sorted(agree) == sorted(e.accepted)
        assert len(agree) == e.accepted_len
        for c in checks:  # a disagreeing node's parent row was reached, and the model said otherwise
            if c.status == "disagree":
                assert c.model is not None and c.model != c.drafted
        html = phases.verify_html(e, ctx, lm.tokenizer, limit=100)
        assert html.count("✓ agree") == e.accepted_len
        assert html.count("✗ disagree") == sum(c.status == "disagree" for c in checks)


def test_captions_name_the_matched_suffix_and_the_k_cap(run, lm):
    events, contexts, config = run
    capped = False
    for e, ctx in zip(events, contexts):
        cap = phases.retrieve_caption(e, ctx, lm.tokenizer, config.retrieval)
        for m in e.matches:
            if m.suffix_len:
                assert style.visible(lm.tokenizer.decode(list(m.suffix_tokens)), 60) in cap
                assert f"{m.occurrences:,} occurrence" in cap
                assert tuple(ctx[-m.suffix_len :]) == m.suffix_tokens  # the suffix is the end of the context
                capped |= m.occurrences > config.retrieval.max_matches
        html = phases.retrieve_html(e, ctx, lm.tokenizer, config.retrieval)
        for m in e.matches:  # the underlined tokens are the matched suffix
            assert html.count(f"m-{style.source_class(m.source_bit)}") == m.suffix_len
    assert capped, "no step hit K: the cap is untested"
    assert any(
        "caps them" in phases.retrieve_caption(e, c, lm.tokenizer, config.retrieval) for e, c in zip(events, contexts)
    )


def test_the_heaviest_branches_say_what_fed_them_as_the_walk_went(run, lm):
    events, contexts, config = run
    said = []
    for e, ctx in zip(events, contexts):
        for f in e.feeds:
            status = feeds_view.feed_status(e, f)
            said.append(status)
            if status == "drafted, accepted":
                assert e.accepted_len and e.tokens[0] == f.token
            elif status == "drafted, rejected":
                assert e.tokens[0] != f.token
            assert f.fed <= f.retrieved <= sum(min(m.occurrences, config.retrieval.max_matches) for m in e.matches)
        if e.feeds:
            assert "heaviest branches" in phases.retrieve_html(e, ctx, lm.tokenizer, config.retrieval)
    assert "drafted, accepted" in said and "drafted, rejected" in said


def test_accept_caption_and_kept_rows_follow_the_walk(run, lm):
    events, _, _ = run
    assert any(e.token_sources[-1] != 0 for e in events), "no step ends on a drafted token (length limit)"
    for e in events:
        keep, drop = phases.kept_rows(e)
        q = 1 + (len(e.draft) if e.draft is not None else 0)
        assert sorted(keep + drop) == list(range(q))
        # The cache holds every emitted token but the last: the root's row and one per token after it.
        assert len(keep) == len(e.tokens)
        own = e.tokens[-1] if e.token_sources[-1] == 0 else None
        if own is not None:  # the model's own token closes the step: every accepted row's KV stays
            assert keep == [0] + [a + 1 for a in e.accepted]
        cap = phases.accept_caption(e, lm.tokenizer)
        assert f"{len(e.tokens)} token" in cap and f"accepts {e.accepted_len} draft token" in cap


def test_step_panels_render_every_phase(run, lm):
    events, contexts, config = run
    e, ctx = events[1], contexts[1]
    p = phases.step_panels(e, ctx, lm.tokenizer, config.retrieval)
    assert (
        "<b>Step 2</b>" in p.header and " of " not in p.header.split("·")[0]
    )  # never "Step 2 of 2": that reads as the end
    assert f"{style.plural(e.totals.new_tokens, 'token')} so far, {len(e.tokens)} this step" in p.header
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
    assert st.token_ids() == ref[0, len(st.prompt_ids) :].tolist()  # lossless: plain greedy's tokens
    plain = collect(runtime.engine(STORE).generate(st.prompt_ids, st.config))
    assert st.token_ids() == plain.token_ids
    st.close()
    assert st.events == [] and not st.started


def test_the_stepper_holds_plain_data_between_clicks(runtime):
    """Nothing of the model stays between clicks (a ZeroGPU Space keeps nothing between its GPU
    calls): no generator, no cache; what the stepper holds pickles, and Clear forgets it."""
    st = Stepper()
    st.start(runtime, MESSAGE, STORE, knob_values(**KNOBS), 16)
    assert st.next() and st.next()
    assert not any(inspect.isgenerator(v) for v in vars(st).values())
    kept = {k: v for k, v in vars(st).items() if k not in ("_calls", "_lock", "clicks_lock", "tokenizer", "stores")}
    copy = pickle.loads(pickle.dumps(kept))
    assert [e.tokens for e in copy["events"]] == [e.tokens for e in st.events] and copy["job"] == st.job
    st.close()
    assert st.events == [] and st.job is None and not st.started
    with pytest.raises(ValueError, match="Type a message"):
        st.start(runtime, "  ", STORE, knob_values(**KNOBS), 16)


def test_nodes_off_the_path_show_the_models_own_token_there(run, lm):
    """A rejected branch's nodes are checked against the model's own token at their parent row
    too: the event carries it for every row, and it is what plain greedy decoding picks there."""
    events, contexts, _ = run
    checked = 0
    for e, ctx in zip(events, contexts):
        assert len(e.row_tokens) == 1 + len(e.draft)
        for c in phases.row_checks(e):
            if c.status != "not reached":
                assert c.model == e.row_tokens[c.parent_row]  # greedy: the walk's token is the argmax
                continue
            path, row = [], c.parent_row  # the draft tokens from the root down to the parent row
            while row > 0:
                path.insert(0, int(e.draft.tokens[row - 1]))
                row = int(e.draft.parents[row - 1]) + 1
            with torch.inference_mode():
                own = int(lm.model(torch.tensor([ctx + path])).logits[0, -1].argmax())
            assert c.model == own
            checked += 1
        html = phases.verify_html(e, ctx, lm.tokenizer, limit=100)
        assert "· not reached" not in html
        # rows never reached have a token only because this view scores every row: it says so
        scored = "for this view only, the step-through asks it (its explain flag) to score every row too"
        assert "lazy logits" in unescape(html) and scored in unescape(html)
        lazy = unescape(phases.verify_html(replace(e, row_tokens=()), ctx, lm.tokenizer, limit=100))
        assert scored not in lazy and "lazy logits" in lazy
    assert checked, "no node off the walk's path to check"


def test_why_c_figure_marks_the_chosen_c_on_the_measured_curve(run, runtime):
    events, _, _ = run
    curve = runtime.engine(STORE).forward_cost(17)
    fig = why_c_view.why_c_figure(curve, events, 16, max_c=16)
    cost, speed, chosen = (
        next(t for t in fig.data if t.name == n) for n in ("measured", "expected speedup", "chosen c")
    )
    sizes = why_c_view.plotted_sizes(curve.sizes)  # one point per size the log axis tells apart
    assert list(cost.x) == sizes and list(cost.y) == [curve.ms[list(curve.sizes).index(n)] for n in sizes]
    assert list(chosen.x) == [16] and chosen.y[0] == pytest.approx(speed.y[16])
    # At the budget every full-size step used, the expected accepted count is what was accepted.
    full = [e for e in events if e.draft is not None and len(e.draft) == min(16, len(e.trie))]
    assert why_c_view.expected_accepted(full, [16])[0] == pytest.approx(np.mean([e.accepted_len for e in full]))
    assert "16" in why_c_words.why_c_caption(curve, events, 16)


def test_why_c_caption_names_its_answer_and_its_m_and_says_when_no_c_pays(run):
    """The caption's M is the stats' M of the answer it names (new tokens / steps of those steps);
    on a cost curve that grows with every token (a CPU) no c beats plain decoding, and it says so."""
    from rest_core.budget.cost_curve import CostCurve

    events, _, _ = run
    t = events[-1].totals
    steep = CostCurve(sizes=(1, 2, 4, 8, 16, 32, 65), ms=(10.0, 20.0, 40.0, 80.0, 160.0, 320.0, 650.0))
    caption = unescape(why_c_words.why_c_caption(steep, events, 16, "The step-through's answer", max_c=64))
    assert caption.count("The step-through's answer") == 1
    assert f"M = {t.new_tokens} tokens / {t.steps} steps = {t.mean_generated_length:.2f} tokens per step" in caption
    assert "every c is slower than plain decoding" in caption and "65.0× one token" in caption
    flat = CostCurve(sizes=(1, 65), ms=(10.0, 10.5))  # a GPU: verifying 65 tokens costs about one
    assert "every c is slower" not in why_c_words.why_c_caption(flat, events, 16, max_c=64)


def teach_handlers(runtime):
    """The step-through's handlers of a page built on `runtime` (`h.ui`: its components)."""
    import app

    return app.build_app(runtime.settings, runtime).teaching


def test_page_handlers_step_back_and_run_to_end(runtime, lm):
    h = teach_handlers(runtime)
    t, session = h.ui, Session()
    knobs = step_knobs(**KNOBS)
    shown = {*t.view_components(), h.chat.session}  # every step handler sets each of its outputs
    out = h.next(MESSAGE, session, STORE, 16, **knobs)
    assert set(out) == shown and out[h.chat.session] is session
    st = session.steps
    assert (
        "<b>Step 1</b>" in out[t.header] and 'data-phase="retrieve"' in out[t.retrieve] and "err" not in out[t.status]
    )
    out = h.next(MESSAGE, session, STORE, 16, **knobs)
    assert "<b>Step 2</b>" in out[t.header]
    out = h.back(session)
    assert set(out) == shown and "<b>Step 1</b>" in out[t.header]
    out = h.run_to_end(MESSAGE, session, STORE, 16, **knobs)
    assert st.finished and "complete" in out[t.status]
    text = lm.tokenizer.decode(st.token_ids(), skip_special_tokens=True)
    assert answer_view.highlight_html(st.events, lm.tokenizer, current=st.event.step) in out[t.answer] and text
    # The step slider (or a click on a token): any step taken, without the model; the step shown: nothing
    steps = len(st.events)
    assert out[t.goto]["visible"] and out[t.goto]["maximum"] == steps and out[t.goto]["value"] == steps
    out = h.goto(2, session)
    assert set(out) == shown and "<b>Step 2</b>" in out[t.header] and out[t.goto]["value"] == 2
    assert len(st.events) == steps and h.goto(2, session) == gr.skip() and h.goto(steps + 1, session) == gr.skip()
    out = h.next("", Session(), STORE, 16, **knobs)  # no message: a message, no traceback
    assert "Type a message" in out[t.status] and 'class="status err' in out[t.status]
    out = h.restart(session)
    assert set(out) == shown and out[t.header] == step_through.EMPTY_HEAD and st.events == []


def test_a_page_that_chose_no_store_steps_through_on_the_messages_pick(runtime):
    """Issue 29: Chat drafts each message from the stores that fit it (store_pick) until the
    visitor chooses; the step-through drafted from whatever the list held. It picks the same way
    now, and says which stores and why above its status, for every step of that answer."""
    h = teach_handlers(runtime)
    knobs = step_knobs(**KNOBS)
    pick = pick_for(MESSAGE, runtime.store_names())
    assert pick.stores == [STORE]  # the only store this server has
    session = Session(stores_auto=True)
    out = h.next(MESSAGE, session, [], 16, **knobs)  # the list holds nothing
    said = unescape(out[h.ui.status])
    assert pick.text in said and 'id="step-store-pick"' in said
    assert {m.source for m in session.steps.events[0].matches} == {STORE, "context"}
    assert pick.text in unescape(h.next(MESSAGE, session, [], 16, **knobs)[h.ui.status])
    assert h.restart(session)[h.ui.status] == ""  # New answer: no answer, no pick to speak of
    chose = Session()  # the visitor chose: no store, so none drafts, and nothing is said
    out = h.next(MESSAGE, chose, [], 16, **knobs)
    assert {m.source for m in chose.steps.events[0].matches} == {"context"} and "Drafting from" not in out[h.ui.status]


def test_clear_and_new_answer_release_the_step_through(runtime):
    """Issue 30: the step-through's state lived beside the visitor's Session, and Clear (as
    expiry and page close) released the Session only: after Clear, Back still showed "Step 1
    of 2". It is the Session's now, so whatever releases the visitor releases its steps."""
    import app

    built = app.build_app(runtime.settings, runtime)
    chat, h = built.handlers, built.teaching
    knobs = step_knobs(**KNOBS)
    for release in (lambda s: chat.clear(s), lambda s: h.restart(s), lambda s: built.handlers.pages.expired(s)):
        session = Session()
        h.next(MESSAGE, session, STORE, 16, **knobs)
        assert "<b>Step 2</b>" in h.next(MESSAGE, session, STORE, 16, **knobs)[h.ui.header]
        release(session)
        assert session.steps.events == [] and not session.steps.started
        assert h.back(session)[h.ui.header] == step_through.EMPTY_HEAD  # nothing left to go back to


def test_why_c_goes_once_the_answer_it_describes_is_no_longer_on_screen(runtime):
    """Issue 29: after a new answer started, Why this c?'s caption still described the old one.
    It names the answer it describes, stays while that answer is shown (more steps, Back), and
    goes once another answer (a new message, New answer, Clear, a chat answer) is the one on screen."""
    import app

    built = app.build_app(runtime.settings, runtime)
    h, chat = built.teaching, built.handlers
    knobs = step_knobs(**KNOBS)
    gone = {h.ui.why_fig: gr.update(value=None, visible=False), h.ui.why_cap: ""}
    session = Session()
    assert h.why_c_current(session) == gr.skip()  # nothing shown yet: nothing to clear
    h.next(MESSAGE, session, STORE, 16, **knobs)
    caption = unescape(h.why_c(session, 16)[h.ui.why_cap])
    assert f"About the step-through's answer to “{MESSAGE}”, over its 1 step so far." in caption
    h.next(MESSAGE, session, STORE, 16, **knobs)
    h.back(session)
    assert h.why_c_current(session) == gr.skip()  # the same answer: the caption stays
    h.next("another message entirely", session, STORE, 16, **knobs)  # a new answer (a guided example's prompt)
    assert h.why_c_current(session) == gone
    assert h.why_c_current(session) == gr.skip()  # cleared once
    for release in (lambda s: h.restart(s), lambda s: chat.clear(s)):
        h.next(MESSAGE, session, STORE, 16, **knobs)
        h.why_c(session, 16)
        release(session)
        assert h.why_c_current(session) == gone
    # With no step-through, it describes the last chat answer: the next chat answer replaces it.
    list(chat.respond(MESSAGE, session, STORE, **knob_values(**KNOBS)))
    assert "About the last chat answer to" in unescape(h.why_c(session, 16)[h.ui.why_cap])
    list(chat.respond("and once more", session, STORE, **knob_values(**KNOBS)))
    assert h.why_c_current(session) == gone


def test_why_c_puts_compares_one_token_forward_beside_its_own(runtime):
    """Issue 29: Compare's plain decoding (313 ms per token) and Why this c?'s one-token forward
    (460 ms) sat on the page with nothing saying what each measured. After a Compare, Why this c?
    names its own measurement and Compare's, both from rest_core.ui.measures; Clear forgets it."""
    import app

    built = app.build_app(runtime.settings, runtime)
    h, chat = built.teaching, built.handlers
    session = Session()
    h.next(MESSAGE, session, STORE, 16, **step_knobs(**KNOBS))
    assert "Compare's plain decoding" not in unescape(h.why_c(session, 16)[h.ui.why_cap])
    list(chat.compare(MESSAGE, session, STORE, **knob_values(**KNOBS)))
    plain = session.plain_forward
    assert plain is not None and plain.runs > 0 and plain.q == 1
    caption = unescape(h.why_c(session, 16)[h.ui.why_cap])
    assert f"{plain.line()}; the first is" in caption and "Why this c?'s measurement" in caption
    chat.clear(session)
    assert session.plain_forward is None


def test_compare_it_on_this_prompt_sets_a_measurement_of_the_step_throughs_prompt_beside_the_prediction(runtime):
    """Issue 29: Why this c? predicted a speedup for the step-through's answer, and the only
    measurement beside it was Compare's of another prompt. “Compare it on this prompt” runs REST at
    the answer's settings and plain decoding on its prompt; the Measured line then quotes it."""
    import app

    built = app.build_app(runtime.settings, runtime)
    h = built.teaching
    session = Session()
    refused = unescape(h.why_c_check(session, 16)[h.ui.why_cap])
    assert "Step through an answer first" in refused  # nothing to compare on yet, and no crash
    h.next(MESSAGE, session, STORE, 16, **step_knobs(**KNOBS))
    before = unescape(h.why_c(session, 16)[h.ui.why_cap])
    assert f"Compare has not run on this prompt: press “{CHECK_LABEL}” to measure it" in before
    caption = unescape(h.why_c_check(session, 16)[h.ui.why_cap])
    m = session.measured
    assert m is not None and list(m.prompt_ids) == session.steps.prompt_ids
    assert f"Compare measured {m.speedup:.2f}× plain decoding on this prompt" in caption
    assert len(session.steps.events) == 1  # the step-through's own answer is untouched


def test_compare_it_on_this_prompt_says_so_when_the_model_call_fails(runtime, monkeypatch):
    """A failing model call is a message in Why this c?, not an error the page cannot place."""
    import app

    built = app.build_app(runtime.settings, runtime)
    h = built.teaching
    session = Session()
    h.next(MESSAGE, session, STORE, 16, **step_knobs(**KNOBS))

    def broken(job):
        raise RuntimeError("out of memory")

    monkeypatch.setattr(runtime.calls, "steps", broken)
    caption = unescape(h.why_c_check(session, 16)[h.ui.why_cap])
    assert "could not compare on this prompt: out of memory" in caption and session.measured is None


def test_the_step_through_keeps_compact_steps_up_to_its_bound(runtime):
    """Issue 30: the step-through kept every full event (a K = 5000 step's whole trie) without a
    bound. It keeps compact events, as Send does, and at most `max_steps` per answer, then says
    so instead of taking more."""
    h = teach_handlers(runtime)
    t, session = h.ui, Session(steps=Stepper(max_steps=3))
    knobs = step_knobs(**KNOBS)
    out = h.run_to_end(MESSAGE, session, STORE, 16, **knobs)
    st = session.steps
    assert len(st.events) == 3 and not st.finished and "<b>Step 3</b>" in out[t.header]
    assert "keeps 3 steps of one answer" in out[t.status] and "New answer" in out[t.status]
    with_trie = [e for e in st.events if e.trie is not None and len(e.trie)]
    assert with_trie and all(e.trie_nodes is not None for e in with_trie)  # compact: the part the panels draw
    out = h.next(MESSAGE, session, STORE, 16, **knobs)  # at the bound: no step is taken
    assert len(st.events) == 3 and "keeps 3 steps" in out[t.status]
    assert "<b>Step 2</b>" in h.back(session)[t.header]  # the steps kept still show
    h.restart(session)
    assert "<b>Step 1</b>" in h.next(MESSAGE, session, STORE, 16, **knobs)[t.header]  # a new answer starts afresh


def _lane_blocks(fig, lane: str) -> list[tuple[float, float]]:
    return sorted((b, w) for tr in fig.data for b, w, y in zip(tr.base, tr.x, tr.y) if y == lane)


def test_prompt_lookup_clock_ticks_once_per_forward(runtime, lm):
    """The stopping-criterion clock of transformers' assisted generation is called once per
    forward pass, so each timeline block is one forward; and prompt lookup stays lossless."""
    prompt = runtime.engine(STORE).encode([{"role": "user", "content": MESSAGE}], chat=True)
    calls = []
    hook = lm.model.register_forward_hook(lambda *a: calls.append(1))
    try:
        run = run_prompt_lookup(lm.model, prompt, max_new_tokens=40, stop_ids=runtime.engine(STORE).stop_ids, k=3)
    finally:
        hook.remove()
    assert len(calls) == 1 + len(run.counts)  # prefill + one per decode block
    assert max(run.counts) > 1  # some forwards accepted prompt lookup drafts
    ref = lm.model.generate(torch.tensor([prompt]), max_new_tokens=40, do_sample=False)[0, len(prompt) :].tolist()
    assert list(run.token_ids) == ref[: len(run.token_ids)] and len(run.token_ids) == len(ref)
    blocks = compare_view.lookup_blocks(run.token_ids, run.counts, run.ends_ms)
    assert [t for b in blocks for t in b.tokens] == list(run.token_ids[len(run.token_ids) - run.decode_tokens :])
    assert [b.sources for b in blocks] == [compare_view.LOOKUP if n > 1 else 0 for n in run.counts]


def test_compare_timeline_has_three_lanes_one_block_per_forward(runtime, lm):
    session = Session()
    updates = list(compare_on(session, runtime, MESSAGE, STORE, knob_values(**KNOBS)))
    last = updates[-1]
    assert last.timeline is not None, last.status
    fig = last.timeline
    lanes = list(fig.layout.yaxis.categoryarray)
    assert lanes == ["REST", "prompt lookup k=3", "plain"]  # top to bottom: REST, prompt lookup, plain
    plain = collect(
        runtime.engine(STORE).generate(
            st_prompt(runtime), make_config(knob_values(**KNOBS), runtime.preset).with_method("ar")
        )
    )
    for lane in lanes:
        blocks = _lane_blocks(fig, lane)
        assert blocks and blocks[0][0] == pytest.approx(0.0, abs=1e-6)
        for (b0, w0), (b1, _) in zip(blocks, blocks[1:]):  # back to back on one clock, no overlap
            assert b1 == pytest.approx(b0 + w0, abs=1e-6)
    assert len(_lane_blocks(fig, "plain")) == len(plain.events)  # one block per forward pass
    assert "Prompt lookup" in last.comparison and "same text as plain decoding" in last.comparison
    # The speedup is explained as M over the measured step-time ratio, from these runs' numbers.
    why = re.search(r"speedup is M / [0-9.]+ = ([0-9.]+) / ([0-9.]+) = ([0-9.]+)×", unescape(last.comparison))
    assert why
    # The shown M and ratio are rounded to 2 decimals; the speedup must lie within what they allow.
    m, ratio, shown = (float(why.group(i)) for i in (1, 2, 3))
    assert (m - 0.005) / (ratio + 0.005) - 0.005 <= shown <= (m + 0.005) / (ratio - 0.005) + 0.005
    assert "prefill" in last.comparison
    names = {tr.name for tr in fig.data}
    assert "accepted drafts: prompt lookup" in names and any(
        n.startswith("accepted drafts: ") and "lookup" not in n for n in names
    )


def test_compares_status_names_the_prompt_its_table_is_about(runtime):
    """Issue 29: Compare's table stays under later answers, so its status line names what it
    compared, quoted (and escaped: it is the visitor's text)."""
    session = Session()
    typed = "<b>count</b>: " + MESSAGE
    done = list(compare_on(session, runtime, typed, STORE, knob_values(**{**KNOBS, "max_new_tokens": 8})))
    assert all("<b>count" not in u.status for u in done if u.status)
    assert f"Compared on the message “{typed}”" in unescape(done[-1].status)
    list(respond(session, runtime, MESSAGE, STORE, knob_values(**{**KNOBS, "max_new_tokens": 8})))
    done = list(compare_on(session, runtime, "", STORE, knob_values(**{**KNOBS, "max_new_tokens": 8})))
    assert f"Compared on the last prompt, “{MESSAGE}”" in unescape(done[-1].status)


def st_prompt(runtime) -> list[int]:
    return runtime.engine(STORE).encode([{"role": "user", "content": MESSAGE}], chat=True)


def test_timeline_blocks_follow_the_events(run, runtime, lm):
    events, _, config = run
    plain = collect(runtime.engine(STORE).generate(run[1][0], config.with_method("ar"))).events
    fig = compare_view.timeline_figure(
        [("plain", compare_view.event_blocks(plain)), ("REST", compare_view.event_blocks(events))], lm.tokenizer
    )
    for lane, evs in (("REST", events), ("plain", plain)):
        blocks = _lane_blocks(fig, lane)
        assert len(blocks) == len(evs)  # one block per forward pass
        assert blocks[-1][0] + blocks[-1][1] == pytest.approx(1000 * evs[-1].totals.elapsed_s)
    drafted = [tr for tr in fig.data if tr.name.startswith("accepted drafts")]
    assert sum(len(tr.x) for tr in drafted) == sum(1 for e in events if e.accepted_len)


# --- where it came from ----------------------------------------------------------------------


def _prov_items(html: str) -> list[dict[str, str]]:
    """Each listed occurrence of a provenance panel: its position, document and marked parts."""
    items = []
    for li in re.findall(r'<li class="prov-occ"(.*?)</li>', html, re.S):
        parts = {
            cls.split()[0]: unescape(text)
            for cls, text in re.findall(r'<span class="(prov-[a-z]+[^"]*)">(.*?)</span>', li, re.S)
        }
        parts["position"] = re.search(r'data-position="(\d+)"', li).group(1)
        items.append(parts)
    return items


def test_provenance_names_the_document_and_marks_the_match_and_continuation(run, runtime, lm):
    events, contexts, _ = run
    store = runtime.engine(STORE).datastore
    shown = 0
    assert runtime.engine(STORE).datastores == {STORE: store}
    for e, ctx in zip(events, contexts):
        m = next((m for m in e.matches if m.source == STORE and m.suffix_len), None)
        if m is None:
            continue
        html = provenance.provenance_html(replace(e, matches=(m,)), {STORE: store}, ctx, lm.tokenizer)
        items = _prov_items(html)
        assert len(items) == min(3, len(m.sample), m.occurrences)
        for i, item in enumerate(items):
            pos = m.positions[i]
            assert int(item["position"]) == pos
            span = store.document_at(pos)
            assert item["prov-doc"] == span.name and span.name in DOC_NAMES
            # The corpus really holds the match there, and the continuation is the drafted sample.
            assert store._read(pos, pos + m.suffix_len).tolist() == list(m.suffix_tokens)
            assert item["prov-match"] == lm.tokenizer.decode(
                list(m.suffix_tokens), skip_special_tokens=True, clean_up_tokenization_spaces=False
            )
            if m.sample[i]:
                assert store._read(pos + m.suffix_len, pos + m.suffix_len + len(m.sample[i])).tolist() == list(
                    m.sample[i]
                )
                assert item["prov-cont"] == lm.tokenizer.decode(
                    list(m.sample[i]), skip_special_tokens=True, clean_up_tokenization_spaces=False
                )
            shown += 1
    assert shown >= 3


def test_provenance_of_a_store_without_document_index_says_how_to_rebuild(run, runtime, lm):
    events, contexts, _ = run
    store = runtime.engine(STORE).datastore
    old = Datastore(path=None, meta={**store.meta, "source_spec": "chat"}, shards=store.shards, documents=None)
    e, ctx = next((e, c) for e, c in zip(events, contexts) if any(m.positions for m in e.matches if m.source == STORE))
    html = provenance.provenance_html(e, {STORE: old}, ctx, lm.tokenizer)
    assert "no document index" in html and "--force" in html
    assert 'class="prov-doc"' not in html  # no datastore occurrence listed (the context's still are)


def test_occurrence_positions_over_several_shards_point_at_the_match():
    docs = [[1, 2, 3, 4, 5], [7, 1, 2, 3, 9], [1, 2, 3, 6, 6, 6], [8, 8, 1, 2, 3, 4]]
    store = Datastore.from_token_ids(docs, vocab_size=20, shard_tokens=8, names=list("abcd"))
    assert len(store.shards) > 1
    src = DatastoreSource(store, RetrievalConfig(n_min=1, n_max=3, m=3, max_matches=10))
    src.reset([0, 1, 2, 3])
    r = src.retrieve()
    assert r.suffix_len == 3 and len(r.positions) == r.occurrences == 4
    for pos, row in zip(r.positions, r.continuations.tolist()):
        assert store._read(pos, pos + 3).tolist() == [1, 2, 3]
        follow = store._read(pos + 3, pos + 6).tolist()
        assert [t for t in row if t >= 0] == [t for t in follow[: len([t for t in row if t >= 0])]]
    assert sorted(store.document_at(p).name for p in r.positions) == list("abcd")
    ctx = ContextSource(RetrievalConfig(n_min=1, n_max=3, m=2))
    ctx.reset([5, 1, 2, 9, 1, 2, 7, 1, 2])
    got = ctx.retrieve()
    assert got.positions == (4, 1)  # where each earlier "1 2" starts, most recent first


# --- guided examples and knob help -------------------------------------------------------------


def test_guided_examples_set_prompt_store_mode_and_knobs(runtime):
    import teach_tab
    from rest_core.knobs import APP_KNOBS

    h = teach_handlers(runtime)
    t, page = h.ui, h.chat
    knobs = knob_values(**KNOBS)
    for ex in guided.GUIDED_EXAMPLES:
        out = h.example(ex.title, **knobs)
        values = {k.name: out[page.knobs[k.name]] for k in APP_KNOBS}  # every knob is set
        for name, value in ex.knobs:
            assert values[name] == value, (ex.title, name)
        untouched = {k.name for k in APP_KNOBS} - {name for name, _ in ex.knobs}
        assert all(values[k] == knob_values(**KNOBS)[k] for k in untouched)
        store, note = out[page.store], out[t.note]
        if ex.mode == "step":  # the Step through view opens
            assert out[t.msg] == ex.prompt and out[t.c] == dict(ex.knobs)["c"]
            assert out[t.views]["selected"] == teach_tab.STEP_VIEW
            assert page.box not in out  # the chat's message box is left as it is
        else:  # Send and Compare are in the Chat view
            assert out[page.box] == ex.prompt and t.msg not in out
            assert out[t.views]["selected"] == teach_tab.CHAT_VIEW
        # Only STORE is built in this runtime: a store it lacks falls back, and the note says so.
        assert store in ([STORE], [])  # the datastores multi-select's value
        assert store == ([] if ex.store == "none" else [ex.store]) or f"the {ex.store} store is not built" in note
    titles = " ".join(e.title for e in guided.GUIDED_EXAMPLES)
    for lesson in ("code store", "step", "knows nothing", "twice", "temperature 0.8"):
        assert lesson in titles
    assert dict(guided.GUIDED_EXAMPLES[-1].knobs)["temperature"] == 0.8


def test_the_page_is_three_views_and_every_section_has_a_deep_link(tmp_path):
    """Chat, Step through and How REST works are tabs; each section's id opens its view
    (app.js reads App.links from the page's head)."""
    import app
    import teach_tab

    built = app.build_app(Settings(datastores=tmp_path))
    views = built.teaching.ui.views
    assert [(v.id, v.label) for v in views.children] == [
        (teach_tab.CHAT_VIEW, "Chat"),
        (teach_tab.STEP_VIEW, "Step through"),
        (teach_tab.HOW_VIEW, "How REST works"),
    ]
    links = built.links
    for section, view in (
        ("chat", "chat"),
        ("prompt", "chat"),
        ("knobs", "chat"),
        ("compare-box", "chat"),
        ("teach", "step-through"),
        ("why-c", "step-through"),
        ("teach-trie", "step-through"),
        ("how-rest", "how-rest"),
        ("glossary", "how-rest"),
        ("step-through", "step-through"),
    ):
        assert links[section] == view, section
    assert "guided" not in links  # above the views: always in sight
    assert '"why-c": "step-through"' in app.head_html(links)


def test_every_knob_says_what_it_does_on_the_page(tmp_path):
    import app
    from rest_core.knobs import APP_KNOBS

    demo = app.create_app(Settings(datastores=tmp_path))
    infos = {c.elem_id: getattr(c, "info", None) for c in demo.blocks.values() if getattr(c, "elem_id", None)}
    for k in APP_KNOBS:
        assert k.help and infos.get(k.elem_id) == k.help, k.name
