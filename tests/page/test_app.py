"""The app's Gradio handlers, driven directly (no browser): what each event sends to the page's
components (a dict keyed by component), with a scripted engine for the UI logic and the real engine on a tiny random model.
The session and runtime logic behind them is tested on its own in test_session.py and
test_runtime.py."""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import replace

import gradio
import pytest

import app
import chat_tab
from rest_core.config import PRESETS
from rest_core.knobs import APP_KNOBS
from rest_core.ui.runtime import NO_STORE, Runtime, StoreBuilds
from rest_core.ui.session import Session
from rest_core.ui.settings import ROOT, Settings, parse_args
from tests.app_fixtures import ANSWER, knob_values


def knobs(**over) -> dict:
    """The knobs' values by name, as the handlers take them after (message, session, store)."""
    return knob_values(**over)


def handlers(runtime: Runtime) -> chat_tab.Handlers:
    """The handlers of a page built on `runtime` (`h.ui`: the components their returns are keyed by)."""
    return app.build_app(runtime.settings, runtime, StoreBuilds(runtime.settings)).handlers


@pytest.fixture
def h(scripted):
    """Handlers over a runtime whose every engine replays ANSWER (`h.engine`)."""
    rt, engine = scripted
    out = handlers(rt)
    out.engine = engine
    return out


def run_all(gen) -> list[dict]:
    return list(gen)


def final(outputs: list[dict]) -> dict:
    return outputs[-1]


def answer(h: chat_tab.Handlers, out: dict) -> tuple:
    """A generation's outputs: (chat, stats, trie, inspector, step slider, status line, session, box)."""
    a = h.ui.answer
    return tuple(out.get(c) for c in (a.chat, a.stats, a.trie, a.inspector, a.step, a.status, h.ui.session, a.box))


def banner(h: chat_tab.Handlers, out: dict) -> str:
    """The status line of Send's or Compare's outputs (each under its own control)."""
    a = h.ui.answer
    return out[a.status] if a.status in out else out[a.compare_status]


def test_import_builds_the_page_without_torch_or_a_model():
    code = "import sys, app, gradio; sys.exit(0 if isinstance(app.demo, gradio.Blocks) and 'torch' not in sys.modules else 1)"
    assert subprocess.run([sys.executable, "-c", code], cwd=ROOT).returncode == 0


def test_page_components_follow_the_knobs_and_the_device_preset(tmp_path):
    """One widget per knob, in the knobs' order and range, with the device's preset values:
    --device cuda gets the gpu preset (no CUDA needed to build the page)."""
    for device, preset in (("cpu", PRESETS["cpu"]), ("cuda", PRESETS["gpu"]), ("cuda:1", PRESETS["gpu"])):
        demo = app.create_app(Settings(device=device, datastores=tmp_path))
        by_id = {b.elem_id: b for b in demo.blocks.values() if getattr(b, "elem_id", None)}
        for knob in APP_KNOBS:
            widget = by_id[knob.elem_id]
            assert widget.value == knob.default(preset), (device, knob.name)
            assert widget.label == knob.label
            if knob.maximum is not None:
                assert widget.maximum == knob.maximum, knob.name
    assert PRESETS["cpu"].draft.c != PRESETS["gpu"].draft.c
    handler = next(fn for fn in demo.fns.values() if fn.name == "respond")
    ids = [b.elem_id for b in handler.inputs]
    assert ids[2:] == ["store", *(k.elem_id for k in APP_KNOBS)]  # the handlers take the knobs in order


def test_respond_streams_highlighted_answer_and_keeps_history(h):
    session = Session()
    outs = run_all(h.respond("add two numbers", session, NO_STORE, **knobs()))
    assert all(out[h.ui.session] is session for out in outs)
    chat, stats, fig, inspector, slider, status, session, box = answer(h, final(outs))
    assert 'class="tok d' in chat and 'class="tok m' in chat
    # escaped model output (the byte-level tokenizer makes one span per byte / character)
    assert ">&lt;</span>" in chat and ">&amp;</span>" in chat and ">&quot;</span>" in chat
    assert ">世</span>" in chat and ">界</span>" in chat
    assert session.chat.messages == [
        {"role": "user", "content": "add two numbers"},
        {"role": "assistant", "content": ANSWER},
    ]
    assert not session.chat.active and session.chat.view.text == ANSWER
    assert slider["visible"] is True and slider["maximum"] == len(session.chat.view.events)
    assert "tokens/s" in stats and "generating" not in stats
    assert "Step" in inspector
    assert fig.data  # a plotly figure of the last step


def test_bad_settings_give_a_message_not_a_traceback(h):
    session = Session()
    outs = run_all(h.respond("hi", session, NO_STORE, **knobs(n_min=10, n_max=2)))
    status = banner(h, final(outs))
    assert "Settings:" in status and "n_max" in status
    assert session.chat.turns == []
    outs = run_all(h.respond("   ", session, NO_STORE, **knobs()))
    assert "Type a message" in banner(h, final(outs))


@pytest.mark.parametrize(
    "bad, message",
    [
        (dict(max_matches=10**9), "max_matches must be between 1 and 5000"),  # K is bounded on the server
        (dict(c=129), "c must be between 1 and 128"),
        (dict(temperature=float("nan")), "temperature must be a finite number"),
        (dict(context_weight=float("inf")), "context_weight must be a finite number"),
        (dict(top_k=-1), "top_k must be between 0 and 200"),
        (dict(budget="greedy"), "budget must be one of fixed, auto"),
    ],
)
def test_settings_outside_the_knobs_ranges_are_refused(h, bad, message):
    """Whatever sends them (an API client need not respect the widgets' ranges)."""
    session = Session()
    status = banner(h, final(run_all(h.respond("hi", session, NO_STORE, **knobs(**bad)))))
    assert message in status and "err" in status
    assert h.engine.calls == [] and session.chat.turns == []
    assert message in banner(h, final(run_all(h.compare("hi", session, NO_STORE, **knobs(**bad)))))


def test_top_k_reaches_the_engine(h):
    run_all(h.respond("hi", Session(), NO_STORE, **knobs(temperature=0.7, top_k=7)))
    _, config = h.engine.calls[-1]
    assert config.sampling.top_k == 7 and config.sampling.temperature == 0.7


def test_stop_keeps_the_partial_answer_and_cancels_the_run(h):
    h.engine.step_s = 0.05
    session = Session()
    gen = h.respond("go", session, NO_STORE, **knobs())
    for _ in gen:
        if session.chat.view is not None and session.chat.view.events:
            break
    run = session.chat.run
    out = h.stop(session)
    chat = out[h.ui.answer.chat]
    assert h.ui.answer.box not in out  # Stop leaves the message box as it is
    gen.close()
    assert not session.chat.active and run is not None
    assert run.done.wait(5)
    assert "stopped after" in chat
    assert session.chat.messages[-1]["role"] == "assistant"
    assert len(session.chat.view.text) < len(ANSWER)


def test_context_overflow_is_a_clear_message(h, monkeypatch):
    monkeypatch.setattr(h.engine, "max_positions", 40)
    session = Session()
    outs = run_all(h.respond("x" * 60, session, NO_STORE, **knobs()))
    status = banner(h, final(outs))
    assert "too long" in status and "Clear" in status
    assert session.chat.turns[-1].error and not session.chat.active


def test_answer_is_shortened_to_fit_the_context(h, monkeypatch):
    monkeypatch.setattr(h.engine, "max_positions", 60)
    session = Session()
    outs = run_all(h.respond("hi", session, NO_STORE, **knobs(max_new_tokens=500)))
    _, config = h.engine.calls[-1]
    assert config.max_new_tokens < 60
    assert "answer limited" in final(outs)[h.ui.answer.chat]


def test_replay_shows_any_step(h):
    session = Session()
    run_all(h.respond("go", session, NO_STORE, **knobs()))
    a = h.ui.answer
    out = h.replay(1, session)
    assert set(out) == {a.trie, a.inspector} and "Step 1 of" in out[a.inspector]
    out = h.replay(len(session.chat.view.events), session)
    assert f"Step {len(session.chat.view.events)} of" in out[a.inspector]


def test_clear_resets_everything(h):
    session = Session()
    run_all(h.respond("go", session, NO_STORE, **knobs()))
    out = h.clear(session)
    a = h.ui.answer
    cleared = [
        a.chat,
        a.stats,
        a.trie,
        a.inspector,
        a.step,
        a.status,
        h.ui.session,
        a.box,
        a.compare_out,
        a.compare_status,
        a.speed,
        a.timeline,
        h.ui.store,
        h.ui.corpus.status,
        h.ui.corpus.files,  # its raw uploads are deleted
    ]
    assert set(out) == set(cleared)  # every part of the page that shows the conversation is reset
    assert (
        out[h.ui.session] is session
        and session.chat.turns == []
        and session.chat.messages == []
        and session.chat.view is None
    )
    assert "placeholder" in out[a.chat] and out[a.box] == "" and out[a.speed]["visible"] is False


def test_clear_and_expiry_free_the_events_and_the_saved_kv_cache(tiny_runtime, tmp_path):
    """Clear (and the session state's expiry, the same release) leaves nothing of the
    conversation referenced: not its events, not the engine's saved KV cache of it."""
    import gc
    import weakref

    h = handlers(tiny_runtime)
    engine = tiny_runtime.engine(NO_STORE)
    for free in (h.clear, h.pages.release):
        session = Session()
        run_all(h.respond("abc abc abc", session, NO_STORE, **knobs(max_new_tokens=12)))
        run_all(h.compare("", session, NO_STORE, **knobs(max_new_tokens=12)))
        assert engine._saved is not None
        refs = [weakref.ref(x) for x in (session.chat.view, session.chat.view.events[-1], engine._saved)]
        free(session)
        gc.collect()
        assert [r() for r in refs] == [None, None, None], free.__name__
        assert session.chat.view is None and session.chat.turns == [] and session.chat.prompt_ids is None

    # The page's state expires: Gradio calls the delete callback with the state's value.
    settings = Settings(datastores=tmp_path, session_ttl=90)
    demo = app.create_app(settings, tiny_runtime, StoreBuilds(settings))
    state = next(b for b in demo.blocks.values() if isinstance(b, gradio.State))
    assert state.time_to_live == 90
    session = Session()
    run_all(h.respond("abc", session, NO_STORE, **knobs(max_new_tokens=4)))
    state.delete_callback(session)
    assert session.chat.view is None and session.chat.messages == []


def test_compare_reports_speedup_and_identity(h):
    session = Session()
    run_all(h.respond("go", session, NO_STORE, **knobs()))
    outs = run_all(h.compare("", session, NO_STORE, **knobs()))
    a = h.ui.answer
    html, fig, timeline = (final(outs)[c] for c in (a.compare_out, a.speed, a.timeline))
    assert {y for tr in timeline["value"].data for y in tr.y} == {
        "REST",
        "plain",
    }  # a scripted engine: no prompt lookup lane
    assert re.search(r'id="speedup-value"[^>]*>[0-9.]+×', html)
    assert "identical output" in html
    assert fig["visible"] is True
    assert [t.name for t in fig["value"].data] == ["REST", "plain"]
    methods = [c.method for _, c in h.engine.calls[-2:]]
    assert methods == ["rest", "ar"]


def test_compare_without_any_prompt_asks_for_one(h):
    outs = run_all(h.compare("", Session(), NO_STORE, **knobs()))
    assert "Send a message first" in banner(h, final(outs))


def test_the_page_picks_each_messages_stores_until_the_visitor_chooses(scripted, tmp_path, monkeypatch):
    """Issue 29: the default datastore was chat whatever the prompt. A page (opened by its load
    event) drafts each message from the stores that fit it (store_pick: code and chat for code),
    shows them in the datastore list and says why; a choice in the list, a guided example or a
    built corpus ends that; an API client's store is always its own."""
    for name in ("chat", "code"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "meta.json").write_text("{}")
    rt, _ = scripted
    monkeypatch.setattr(rt, "settings", replace(rt.settings, datastores=tmp_path))
    built = app.build_app(rt.settings, rt, StoreBuilds(rt.settings))
    h, a = built.handlers, built.handlers.ui.answer
    session = Session()
    h.on_load([], session)
    outs = run_all(h.respond("Write a Python function that reverses a list.", session, ["chat"], **knobs()))
    assert session.chat.store == ("code", "chat") and outs[0][h.ui.store]["value"] == ["code", "chat"]
    assert "Drafting from code + chat: the message looks like code" in final(outs)[a.status]
    outs = run_all(h.respond("Tell me about your favourite city.", session, ["code", "chat"], **knobs()))
    assert session.chat.store == ("chat",) and outs[0][h.ui.store]["value"] == ["chat"]
    assert "Drafting from chat: the message reads as conversation" in final(outs)[a.status]
    used = []
    monkeypatch.setattr(
        rt, "resolve", lambda names, *args, resolve=rt.resolve: used.append(names) or resolve(names, *args)
    )
    run_all(h.compare("def f(x): return x", session, ["chat"], **knobs()))  # on the message: its own stores
    run_all(h.compare("", session, ["chat"], **knobs()))  # on the last prompt: the stores its answer used
    assert [tuple(names) for names in used] == [("code", "chat"), ("chat",)]
    h.stores_chosen(session)  # the visitor picked in the list
    outs = run_all(h.respond("def f(): pass", session, ["chat"], **knobs()))
    assert session.chat.store == ("chat",) and all(h.ui.store not in o for o in outs)
    assert "Drafting from" not in final(outs)[a.status]
    api = Session()  # an API client: no page load, its store as given
    run_all(h.respond("def f(): pass", api, ["chat"], **knobs()))
    assert api.chat.store == ("chat",)
    guided = Session()
    h.on_load([], guided)
    built.teaching.example(built.teaching.ui.pick.choices[0][0], guided, **knobs())
    run_all(h.respond("Tell me about your favourite city.", guided, ["code"], **knobs()))
    assert guided.chat.store == ("code",)  # the example's store, kept


def test_refresh_stores_lists_built_stores(tmp_path, monkeypatch):
    (tmp_path / "chat").mkdir()
    (tmp_path / "chat" / "meta.json").write_text("{}")
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "meta.json").write_text("{}")
    (tmp_path / "half-built").mkdir()
    h = handlers(Runtime(Settings(datastores=tmp_path)))
    out = h.on_load([], Session())
    dropdown = out[h.ui.store]
    assert dropdown["choices"] == ["chat", "mine"]
    assert dropdown["value"] == ["chat"]  # the first built store by default
    assert out[h.ui.banner] == "" and out[h.ui.timer]["active"] is False  # no build running
    assert h.refresh_stores([], Session())[h.ui.store]["value"] == []  # a user's choice (none) is kept
    assert h.refresh_stores(["mine", "chat"], Session())[h.ui.store]["value"] == ["mine", "chat"]
    assert h.refresh_stores(["gone", "mine"], Session())[h.ui.store]["value"] == ["mine"]


def test_settings_from_flags_and_env(tmp_path):
    env = {"REST_PORT": "9999", "REST_DEVICE": "cpu"}
    s = parse_args([], env)
    assert s.port == 9999 and s.device == "cpu" and s.model == "embedded"
    s = parse_args(
        ["--port", "7000", "--datastores", str(tmp_path), "--no-build", "--model", "x", "--device", "cuda"], env
    )
    assert s.port == 7000 and s.datastores == tmp_path and not s.build and s.model == "x" and s.device == "cuda"
    assert Runtime(s).preset == PRESETS["gpu"]  # the page's knob defaults follow the flag, not the environment
    with pytest.raises(AttributeError):
        s.device = "cpu"  # frozen: nothing patches the settings after the app is built


def test_the_page_offers_the_stores_built_when_it_is_created(tmp_path):
    """An HTTP API client never runs the page's load event: the dropdown's own choices must
    already hold the built stores."""
    for name in ("mine", "chat"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "meta.json").write_text("{}")
    demo = app.create_app(Settings(datastores=tmp_path))
    store = next(b for b in demo.blocks.values() if getattr(b, "elem_id", None) == "store")
    assert [c[1] for c in store.choices] == ["chat", "mine"] and store.value == ["chat"] and store.multiselect


# --------------------------------------------------------------- the real engine, tiny model


def test_real_engine_tiny_model_respond_and_compare(tiny_runtime):
    h = handlers(tiny_runtime)
    session = Session()
    outs = run_all(h.respond("abc abc abc", session, NO_STORE, **knobs(max_new_tokens=24)))
    chat, stats, fig, inspector, slider, status, session, box = answer(h, final(outs))
    assert 'class="tok' in chat and not status.startswith('<div class="status err')
    assert session.chat.view.totals.new_tokens > 0
    assert session.chat.view.text == tiny_runtime.loaded().tokenizer.decode(
        [t for e in session.chat.view.events for t in e.tokens], skip_special_tokens=True
    )
    html = final(run_all(h.compare("", session, NO_STORE, **knobs(max_new_tokens=24))))[h.ui.answer.compare_out]
    assert "identical output" in html  # greedy REST == greedy plain decoding


def test_model_load_failure_is_a_message(monkeypatch):
    def broken():
        raise OSError("no model at 'nowhere' (offline?)")

    h = handlers(Runtime(Settings(), loader=broken))
    session = Session()
    status = banner(h, final(run_all(h.respond("hi", session, NO_STORE, **knobs()))))
    assert "no model at" in status and 'class="status err"' in status
    assert session.chat.messages == [] and not session.chat.active
    assert "no model at" in banner(h, final(run_all(h.compare("hi", session, NO_STORE, **knobs()))))


def test_real_engine_tiny_model_auto_budget_and_sampling(tiny_runtime):
    h = handlers(tiny_runtime)
    session = Session()
    status = banner(
        h,
        final(
            run_all(
                h.respond(
                    "abc abc", session, NO_STORE, **knobs(max_new_tokens=16, budget="auto", temperature=0.8, top_p=0.9)
                )
            )
        ),
    )
    assert 'class="status err' not in status and session.chat.view.totals.new_tokens > 0
    html = final(run_all(h.compare("", session, NO_STORE, **knobs(max_new_tokens=16, temperature=0.8))))[
        h.ui.answer.compare_out
    ]
    assert "speedup" in html and "identical output" not in html  # no identity claim when sampling
    # The shared engine learned nothing from the answer or the comparison: each starts afresh.
    assert tiny_runtime.engine(NO_STORE).auto_budget.costs.clock == 0


# ------------------------------------------------------------------ the first screen (issue 29)


def _page_order(demo: gradio.Blocks) -> list[str]:
    """The page's top-level blocks' elem_ids, top to bottom (tabs and HTML alike)."""
    order: list[str] = []

    def walk(node: dict) -> None:
        block = demo.blocks.get(node["id"])
        if block is not None and getattr(block, "elem_id", None):
            order.append(block.elem_id)
        for child in node.get("children", []):
            walk(child)

    walk(demo.config["layout"])
    return order


def test_the_first_screen_tells_the_method_before_the_key_and_the_views(tmp_path):
    """Issue 29 ("the idea comes last"): a newcomer met shade bins, "trie", "heaviest" and
    "several sources" before learning what a draft is. The header now tells the method in three
    steps (look up, verify, keep), under the diagram, links to How REST works, and comes before
    the guided examples and the tabs; the colour key is the Chat view's, over the chat (third
    report: it took the first screen's room)."""
    demo = app.create_app(Settings(device="cpu", datastores=tmp_path))
    order = _page_order(demo)
    assert order.index("header-box") < order.index("guided") < order.index("views")
    assert order.index("view-chat") < order.index("legend") < order.index("chat") < order.index("view-step-through")
    header = next(b for b in demo.blocks.values() if getattr(b, "elem_id", None) == "header-box").value
    steps = re.findall(r"<li><b>(\d)\. (\w+ ?\w*):</b>", header)
    assert steps == [("1", "Look up"), ("2", "Verify"), ("3", "Keep")], steps
    text = re.sub(r"<[^>]+>", "", re.sub(r"<svg.*</svg>", "", header, flags=re.S))  # the words, not the diagram's
    assert text.index("drafts") < text.index("one forward pass") < text.index("exactly")  # what a draft is, first
    assert 'href="#how-rest"' in header
    for late in ("trie", "heaviest", "shade", "several sources"):
        assert not re.search(rf"\b{late}\b", text), late


def test_the_header_names_the_model_and_device_and_what_speed_to_expect():
    """Issue 29: the device was never named, and the main demo (a slowdown on a 2-core CPU) read
    against "accepted drafts cost no extra steps". The header names the model and where it runs
    and says in one sentence what speed to expect on a CPU and a GPU (How REST works says why);
    the small model's own mistakes are said to be plain decoding's too."""
    cpu = re.sub(r"<[^>]+>", "", app.header_html(Settings(device="cpu"), cores=2))
    assert "Running SmolLM2-135M-Instruct on this machine's CPU (2 cores)." in cpu
    assert "the speedup is below M, the tokens per step, and can fall below 1 (Compare measures it)" in cpu
    assert "largest where the answer repeats text" in cpu and "on a GPU it approaches M" in cpu
    assert "SmolLM2-135M-Instruct is small and makes mistakes of its own (it may drop a word)" in cpu
    assert "plain decoding makes the same ones" in cpu
    one = re.sub(r"<[^>]+>", "", app.header_html(Settings(device="cpu"), cores=1))
    assert "CPU (1 core)" in one
    gpu = re.sub(r"<[^>]+>", "", app.header_html(Settings(device="cuda"), gpu="NVIDIA H200"))
    assert "on a GPU (NVIDIA H200)." in gpu and "On this CPU" not in gpu and "speedup approaches M" in gpu
    assert "ZeroGPU" in app.header_html(Settings(device="cuda", zero_gpu=True))
    other = re.sub(r"<[^>]+>", "", app.header_html(Settings(model="org/Some-7B", device="cpu"), cores=4))
    assert "Running Some-7B on" in other and "is small" not in other
    assert "REST writes exactly what plain decoding writes with Some-7B" in other
    assert app.model_name("/models/tiny.gguf") == "tiny"


def test_the_header_opens_with_one_plain_sentence_and_a_diagram_without_symbols(tmp_path):
    """Fourth report, complaint 1: the first screen's diagram said n_max, n_min, K, m and c before
    anything defined them. The header opens with one plain sentence; its diagram says the plain
    words (each line's data-plain), while How REST works' copy keeps the symbols the glossary
    under it defines, and says "up to c" (a step may draft fewer)."""
    header = app.header_html(Settings(device="cpu"), cores=2)
    text = re.sub(r"<[^>]+>", "", header)
    assert text.index("REST guesses the next words by copying what followed") < text.index("Running ")
    lines = re.findall(r"<text[^>]*>([^<]*)</text>", app.header_diagram())
    for symbol in ("n_max", "n_min", "K", "m", "c"):
        assert not any(re.search(rf"(?<![\w'])(≤ )?{symbol}\b", line) for line in lines), symbol
    for plain in ("the last few tokens,", "what followed", "each match", "the likeliest", "and the drafts"):
        assert plain in lines, plain
    full = re.findall(r"<text[^>]*>([^<]*)</text>", app.header_diagram(plain=False))
    assert "n_max down to n_min" in full and "up to c likeliest" in full and "up to c drafts" in full
    assert "and c drafted nodes" not in full and "the c likeliest nodes" not in full
    demo = app.create_app(Settings(device="cpu", datastores=tmp_path))
    shown = next(b for b in demo.blocks.values() if getattr(b, "elem_id", None) == "header-box").value
    assert "data-plain" not in shown.split("<svg", 1)[1].split("<!--", 1)[0] and "n_max down to n_min" not in shown


def test_the_settings_show_the_key_knobs_and_fold_the_rest(tmp_path):
    """Fourth report, complaint 6: 13 knobs with their help at once. Datastores, c, the draft
    budget, temperature and max new tokens (and whether to draft from a datastore and from the
    conversation) stay in sight; n_max, n_min, m, K, the weights, top-p and top-k fold under one
    "More settings", closed, each widget keeping its elem_id (the browser tests set c, the budget
    and max new tokens by it)."""
    demo = app.create_app(Settings(device="cpu", datastores=tmp_path))
    more = next(b for b in demo.blocks.values() if getattr(b, "elem_id", None) == "more-settings")
    assert more.open is False
    inside, todo = set(), list(more.children)
    while todo:
        block = todo.pop()
        inside.add(block.elem_id) if block.elem_id else todo.extend(getattr(block, "children", []))
    assert inside == {"datastore-weight", "context-weight", "n-max", "n-min", "m", "max-matches", "top-p", "top-k"}
    ids = {getattr(b, "elem_id", None) for b in demo.blocks.values()}
    assert {k.elem_id for k in APP_KNOBS} <= ids and not {"c", "budget", "temperature", "max-new-tokens"} & inside


def test_body_text_is_dark_enough_to_read():
    """Issue 29: subtitle, shade legend and captions in light grey (#9ca3af on #f9fafb, 2.4:1).
    The theme's subdued text and a knob's help are #4b5563, WCAG AA (>= 4.5:1) on the page's
    background and on white; so is every text colour app.css sets outside the coloured tokens."""

    def luminance(hex_colour: str) -> float:
        rgb = [int(hex_colour.lstrip("#")[i : i + 2], 16) / 255 for i in (0, 2, 4)]
        lin = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in rgb]
        return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]

    def contrast(a: str, b: str) -> float:
        la, lb = sorted((luminance(a), luminance(b)), reverse=True)
        return (la + 0.05) / (lb + 0.05)

    theme = app.THEME
    background = theme.neutral_50  # the page's grey background (the blocks are white)
    for colour in (theme.body_text_color_subdued, theme.block_info_text_color):
        for under in (background, "#ffffff"):
            assert contrast(colour, under) >= 4.5, (colour, under)
    assert contrast("#9ca3af", background) < 4.5  # the grey it replaces
    css = (ROOT / "assets" / "app.css").read_text(encoding="utf-8")
    for selector, body in re.findall(r"([^{}]+)\{([^}]*)\}", css):
        if ".tok" in selector or ".chip" in selector or ".status" in selector or ".same" in selector:
            continue  # text on its own coloured fill
        for colour in re.findall(r"(?<![-\w])color:\s*(#[0-9a-fA-F]{6})", body):
            assert contrast(colour, background) >= 4.5, (selector.strip(), colour)


def test_the_step_throughs_panels_carry_the_headers_stage_names(tmp_path):
    """screens9: the header says 1. Look up, 2. Verify, 3. Keep and the step-through said
    1. Retrieve, 2. Build the trie, 3. Verify, 4. Accept: "2." and "3." meant different things.
    Its panels now carry the header's numbers and names (the two look-up panels 1a and 1b)."""
    import re

    from rest_core.ui.words import STEPS

    demo = app.create_app(Settings(datastores=tmp_path))
    heads = [
        b.value[5:]
        for b in demo.blocks.values()
        if isinstance(getattr(b, "value", None), str) and re.match(r"#### \d", b.value)
    ]
    stages = {name.split(". ")[0]: name.split(". ")[1] for name, _ in STEPS}  # "1" -> "Look up"
    assert len(heads) == 4, heads
    for head in heads:
        number = re.match(r"(\d)", head).group(1)
        assert re.match(rf"{number}[ab]?\. {stages[number]}\b", head), head
    assert [re.match(r"\d", h).group(0) for h in heads] == ["1", "1", "2", "3"]
