"""REST speculative decoding, live: a Gradio app over `rest_core`.

Layout, wiring and per-user session state only; rendering lives in rest_core/render.py and
decoding in rest_core/engine.py. The Blocks object `demo` is built at import without loading a
model: the model loads on the first request and is shared by every session.

    python app.py [--model embedded] [--device auto] [--datastores datastores] [--host 127.0.0.1] [--port 7860]

Each flag has an environment variable (REST_MODEL, REST_DEVICE, REST_DATASTORES, REST_HOST or
GRADIO_SERVER_NAME, REST_PORT or GRADIO_SERVER_PORT, REST_BUILD_DATASTORES=0 to skip building).
"""

from __future__ import annotations

import argparse
import logging
import os
import queue
import subprocess
import sys
import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import gradio as gr

from rest_core import render
from rest_core.config import PRESETS, ConfigError, DraftConfig, GenerationConfig, RetrievalConfig, SamplingConfig

ROOT = Path(__file__).resolve().parent
ASSETS = ROOT / "assets"
DEFAULT_STORES = ("chat", "code")  # built at startup when missing (recipes: `make datastores`)
NO_STORE = "none"
FIGURE_EVERY_S = 0.3  # live trie figure refresh (each costs ~10 ms to build + send)
TEXT_EVERY_S = 0.08  # live text refresh
log = logging.getLogger("rest.app")

try:  # ZeroGPU on Hugging Face Spaces: the GPU is attached only inside decorated calls.
    import spaces  # type: ignore[import-not-found]

    gpu = spaces.GPU(duration=120)
    ON_ZERO_GPU = bool(os.environ.get("SPACES_ZERO_GPU"))
except ImportError:  # anywhere else the decorator does nothing

    def gpu(fn: Callable) -> Callable:
        return fn

    ON_ZERO_GPU = False


# ----------------------------------------------------------------------------------------------
# Settings, shared model runtime, datastore builds


@dataclass
class Settings:
    model: str = "embedded"
    device: str = "auto"
    datastores: Path = ROOT / "datastores"
    host: str = "127.0.0.1"
    port: int = 7860
    build: bool = True

    @classmethod
    def from_env(cls) -> "Settings":
        env = os.environ.get
        return cls(
            model=env("REST_MODEL", "embedded"),
            device=env("REST_DEVICE", "auto"),
            datastores=Path(env("REST_DATASTORES", str(ROOT / "datastores"))),
            host=env("REST_HOST", env("GRADIO_SERVER_NAME", "0.0.0.0" if env("SPACE_ID") else "127.0.0.1")),
            port=int(env("REST_PORT", env("GRADIO_SERVER_PORT", "7860"))),
            build=env("REST_BUILD_DATASTORES", "1") not in ("0", "false", "no"),
        )


def is_store(path: Path) -> bool:
    return (path / "meta.json").is_file()


class Runtime:
    """The model, its tokenizer and one engine per datastore, loaded on first use and shared by
    every session. One generation runs at a time (`lock`): the queue's concurrency limit already
    serializes requests; the lock also covers a cancelled run that is finishing its last step."""

    def __init__(self, settings: Settings, loader: Callable[[], Any] | None = None) -> None:
        self.settings = settings
        self._loader = loader
        self._loaded: Any = None
        self._engines: dict[str, Any] = {}
        self._load_lock = threading.Lock()
        self.lock = threading.Lock()

    @property
    def ready(self) -> bool:
        return self._loaded is not None

    def loaded(self):
        with self._load_lock:
            if self._loaded is None:
                if self._loader is not None:
                    self._loaded = self._loader()
                else:
                    from rest_core.models import load_model

                    t0 = time.perf_counter()
                    self._loaded = load_model(self.settings.model, device=self.settings.device)
                    print(f"model {self._loaded.name} loaded on {self._loaded.device} in {time.perf_counter() - t0:.1f} s", flush=True)
            return self._loaded

    def store_names(self) -> list[str]:
        folder = self.settings.datastores
        if not folder.is_dir():
            return []
        names = sorted(p.name for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".") and is_store(p))
        return sorted(names, key=lambda n: (n not in DEFAULT_STORES, DEFAULT_STORES.index(n) if n in DEFAULT_STORES else 0, n))

    def engine(self, store: str):
        from rest_core.engine import Engine

        lm = self.loaded()
        with self._load_lock:
            if store not in self._engines:
                datastore = None
                if store != NO_STORE:
                    from rest_core.datastore import Datastore

                    path = self.settings.datastores / store
                    if not is_store(path):
                        raise ValueError(f"datastore '{store}' is not built (looked in {path})")
                    datastore = Datastore.open(path, lm.tokenizer)
                self._engines[store] = Engine(lm.model, lm.tokenizer, datastore)
            return self._engines[store]

    def context_limit(self) -> int | None:
        config = getattr(self.loaded().model, "config", None)
        return getattr(config, "max_position_embeddings", None)


class StoreBuilds:
    """Builds the default datastores that are missing, one after the other, in a child process
    whose progress bar goes to this terminal; the page polls `message()`."""

    def __init__(self, settings: Settings, extra_args: tuple[str, ...] = ()) -> None:
        self.settings = settings
        self.extra_args = extra_args  # more `datastore build` flags (tests: a small --limit-docs)
        self.state: dict[str, str] = {}  # name -> "waiting" | "building" | "ready" | "failed: ..."
        self.started: dict[str, float] = {}
        self._thread: threading.Thread | None = None

    def missing(self) -> list[str]:
        return [n for n in DEFAULT_STORES if not is_store(self.settings.datastores / n)]

    def start(self) -> None:
        todo = self.missing()
        if not todo:
            return
        for n in todo:
            self.state[n] = "waiting"
        self._thread = threading.Thread(target=self._run, args=(todo,), daemon=True, name="datastore-builds")
        self._thread.start()

    def join(self, timeout: float | None = None) -> None:
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self, names: list[str]) -> None:
        for name in names:
            out = self.settings.datastores / name
            cmd = [sys.executable, "-m", "rest_core", "datastore", "build", "--source", name, "--out", str(out), "--if-missing"]
            if self.settings.model != "embedded":
                cmd += ["--model", self.settings.model]
            cmd += list(self.extra_args)
            print(f"building datastore '{name}' (first start only): {' '.join(cmd[1:])}", flush=True)
            self.state[name] = "building"
            self.started[name] = time.time()
            try:
                done = subprocess.run(cmd, cwd=ROOT, stderr=None, stdout=None)
                self.state[name] = "ready" if done.returncode == 0 and is_store(out) else f"failed (exit {done.returncode}; see the terminal)"
            except OSError as exc:
                self.state[name] = f"failed: {exc}"
            print(f"datastore '{name}': {self.state[name]}", flush=True)

    @property
    def active(self) -> bool:
        return any(s in ("waiting", "building") for s in self.state.values())

    def message(self) -> str:
        parts = []
        for name, s in self.state.items():
            if s == "building":
                parts.append(f"building datastore <b>{name}</b> ({time.time() - self.started[name]:.0f} s so far; progress in the terminal)")
            elif s == "waiting":
                parts.append(f"datastore <b>{name}</b> waits its turn")
            elif s.startswith("failed"):
                parts.append(f"datastore <b>{name}</b> {render.esc(s)}")
        if not parts:
            return ""
        return "First start: " + "; ".join(parts) + ". You can chat meanwhile with the stores that are ready, or with the context source alone."


SETTINGS = Settings.from_env()
RUNTIME = Runtime(SETTINGS)
BUILDS = StoreBuilds(SETTINGS)


# ----------------------------------------------------------------------------------------------
# Session state and a background generation run


class Run:
    """Consumes the engine's step events in a worker thread, so decoding never waits for the page
    to render; the handler drains `events` and can cancel between two steps."""

    def __init__(self, engine: Any, prompt_ids: list[int], config: GenerationConfig) -> None:
        self.events: "queue.Queue[Any]" = queue.Queue()
        self._cancel = threading.Event()
        self.done = threading.Event()
        self._thread = threading.Thread(target=self._work, args=(engine, prompt_ids, config), daemon=True, name="rest-run")
        self._thread.start()

    def _work(self, engine: Any, prompt_ids: list[int], config: GenerationConfig) -> None:
        try:
            with RUNTIME.lock:
                steps = engine.generate(prompt_ids, config)
                try:
                    for ev in steps:
                        self.events.put(ev)
                        if self._cancel.is_set():
                            break
                finally:
                    close = getattr(steps, "close", None)
                    if close:
                        close()
        except Exception as exc:  # noqa: BLE001 - reported to the page as a message
            log.error("generation failed:\n%s", traceback.format_exc())
            self.events.put(exc)
        finally:
            self.done.set()
            self.events.put(None)

    def cancel(self) -> None:
        self._cancel.set()

    def drain(self, timeout: float) -> tuple[list[Any], bool]:
        """Events that arrived (waiting up to `timeout` for the first); True once the run ended."""
        out: list[Any] = []
        ended = False
        try:
            item = self.events.get(timeout=timeout)
            while True:
                if item is None:
                    ended = True
                    break
                out.append(item)
                item = self.events.get_nowait()
        except queue.Empty:
            pass
        return out, ended


@dataclass
class Session:
    """One browser tab's conversation; lives in gr.State."""

    messages: list[dict] = field(default_factory=list)  # chat history for the template
    turns: list[render.Turn] = field(default_factory=list)
    view: render.AnswerView | None = None  # the last answer's events and spans
    prompt_ids: list[int] | None = None  # the last answer's prompt (for Compare)
    store: str = NO_STORE
    active: bool = False
    run: Run | None = None

    def finish_turn(self, note: str) -> None:
        """Close the answer in progress (finished, stopped or failed) and keep it in the history."""
        if not self.active:
            return
        self.active = False
        if self.run is not None:
            self.run.cancel()
            self.run = None
        text = ""
        if self.view is not None:  # None when stopped before the first step
            self.view.finish()
            self.turns[-1].answer_html = self.view.html()
            text = self.view.text
        self.messages.append({"role": "assistant", "content": text})
        if note:
            self.turns[-1].note = note


PLACEHOLDER = "Ask something, or pick an example below. Tokens that REST drafted and the model accepted light up as they stream."


def chat_html(session: Session) -> str:
    return render.conversation_html(session.turns, PLACEHOLDER)


def status_html(message: str, kind: str = "info") -> str:
    return f'<div class="status {kind}">{message}</div>' if message else ""


# ----------------------------------------------------------------------------------------------
# Knobs -> GenerationConfig

KNOB_NAMES = ("store", "n_max", "n_min", "c", "m", "max_matches", "budget", "use_datastore", "use_context", "datastore_weight", "context_weight", "temperature", "top_p", "max_new_tokens")


def make_config(values: dict[str, Any], method: str = "rest") -> tuple[GenerationConfig, str]:
    """Validated settings and the datastore name; raises ConfigError with a readable message."""
    store = values["store"] or NO_STORE
    use_ds = bool(values["use_datastore"]) and store != NO_STORE
    try:
        config = GenerationConfig(
            method=method,
            max_new_tokens=int(values["max_new_tokens"]),
            retrieval=RetrievalConfig(n_min=int(values["n_min"]), n_max=int(values["n_max"]), m=int(values["m"]), max_matches=int(values["max_matches"])),
            draft=DraftConfig(
                c=int(values["c"]),
                budget=values["budget"],
                use_datastore=use_ds,
                use_context=bool(values["use_context"]),
                datastore_weight=float(values["datastore_weight"]),
                context_weight=float(values["context_weight"]),
            ),
            sampling=SamplingConfig(temperature=float(values["temperature"]), top_p=float(values["top_p"])),
        )
    except (TypeError, ValueError) as exc:  # ConfigError is a ValueError; None from an emptied box is a TypeError
        raise ConfigError(str(exc) if isinstance(exc, ConfigError) else f"a setting is empty or not a number ({exc})") from None
    return config, (store if use_ds else NO_STORE)


def knob_dict(values: tuple) -> dict[str, Any]:
    return dict(zip(KNOB_NAMES, values))


def fit_context(prompt_len: int, config: GenerationConfig) -> tuple[GenerationConfig, str]:
    """Shorten max_new_tokens to what the model's context still holds, or refuse clearly."""
    limit = RUNTIME.context_limit()
    if not limit:
        return config, ""
    room = limit - prompt_len - config.draft.c - 1  # the draft tree needs room too
    if room < 8:
        raise ConfigError(
            f"The conversation is too long for the model: {prompt_len} prompt tokens, and the model's context holds {limit}. "
            "Press Clear to start a new conversation."
        )
    if config.max_new_tokens > room:
        from dataclasses import replace

        return replace(config, max_new_tokens=room), f"answer limited to {room} tokens: the model's context holds {limit}"
    return config, ""


# ----------------------------------------------------------------------------------------------
# Handlers (generators yield one update per refresh)


def _trie_for(session: Session, step: int | None):
    lm = RUNTIME.loaded()
    view = session.view
    if view is None or not view.events:
        return render.trie_figure(None, lm.tokenizer), render.inspector_html(None, lm.tokenizer)
    k = len(view.events) - 1 if step is None else max(0, min(int(step) - 1, len(view.events) - 1))
    ev = view.events[k]
    return render.trie_figure(ev, lm.tokenizer), render.inspector_html(ev, lm.tokenizer, n_steps=len(view.events))


def _slider(session: Session, running: bool):
    """The replay slider shows once an answer of two or more steps is complete."""
    n = len(session.view.events) if session.view is not None else 0
    if running or n < 2:
        return gr.update(visible=False)
    return gr.update(visible=True, interactive=True, minimum=1, maximum=n, value=n, step=1)


@gpu
def respond(message: str, session: Session, *knobs: Any) -> Iterator[tuple]:
    """Send: stream the answer step by step into the chat, the stats, the trie and the inspector.

    Yields (chat, stats, trie figure, inspector, step slider, status, session, textbox)."""
    session = session if isinstance(session, Session) else Session()
    session.finish_turn("stopped")
    message = (message or "").strip()
    if not message:
        yield (gr.skip(),) * 5 + (status_html("Type a message first.", "warn"), session, gr.skip())
        return
    try:
        config, store = make_config(knob_dict(knobs))
    except ConfigError as exc:
        yield (gr.skip(),) * 5 + (status_html(f"Settings: {render.esc(str(exc))}", "err"), session, gr.skip())
        return

    session.turns.append(render.Turn(user=message))
    session.messages.append({"role": "user", "content": message})
    session.view = None
    session.active = True
    note = ""
    if not RUNTIME.ready:
        yield (chat_html(session), gr.skip(), gr.skip(), gr.skip(), gr.skip(), status_html("Loading the model (first request only)…"), session, "")
    try:
        engine = RUNTIME.engine(store)
        lm = RUNTIME.loaded()
        prompt_ids = list(engine.encode(session.messages, chat=True))
        config, note = fit_context(len(prompt_ids), config)
    except Exception as exc:  # noqa: BLE001 - a message in the page, the traceback in the terminal
        if not isinstance(exc, (ConfigError, ValueError, FileNotFoundError)):
            log.error("request failed:\n%s", traceback.format_exc())
        log.warning("request refused: %s", exc)
        session.turns[-1].note, session.turns[-1].error = str(exc), True
        session.messages.pop()  # the model never answered it: keep it out of the history
        session.active = False
        yield (chat_html(session), gr.skip(), gr.skip(), gr.skip(), gr.skip(), status_html(render.esc(str(exc)), "err"), session, "")
        return
    session.view = render.AnswerView(lm.tokenizer)
    session.prompt_ids = prompt_ids
    session.store = store
    run = session.run = Run(engine, prompt_ids, config)
    view = session.view
    status = status_html(render.esc(note), "warn") if note else ""
    yield (chat_html(session), render.stats_html([]), gr.skip(), gr.skip(), _slider(session, True), status, session, "")
    last_text = last_fig = 0.0
    try:
        while True:
            events, ended = run.drain(timeout=TEXT_EVERY_S)
            error = next((e for e in events if isinstance(e, Exception)), None)
            for ev in events:
                if not isinstance(ev, Exception):
                    view.add(ev)
            if error is not None:
                session.finish_turn(f"generation failed: {error}")
                session.turns[-1].error = True
                yield (chat_html(session), render.stats_html(view.events), *_trie_for(session, None), _slider(session, False), status_html(render.esc(f"generation failed: {error}"), "err"), session, gr.skip())
                return
            if ended:
                break
            now = time.perf_counter()
            if not events or now - last_text < TEXT_EVERY_S:
                continue
            session.turns[-1].answer_html = view.html()
            fig = ins = gr.skip()
            if now - last_fig >= FIGURE_EVERY_S and view.events:
                fig = render.trie_figure(view.events[-1], lm.tokenizer)
                ins = render.inspector_html(view.events[-1], lm.tokenizer, n_steps=len(view.events))
                last_fig = now
            last_text = now
            yield (chat_html(session), render.stats_html(view.events, running=True), fig, ins, gr.skip(), status, session, gr.skip())
        last = view.events[-1] if view.events else None
        reason = {"eos": "", "length": f"stopped at the limit of {config.max_new_tokens} new tokens"}.get(last.finish_reason if last else None, "")
        session.finish_turn(" · ".join(x for x in (reason, note) if x))
        yield (chat_html(session), render.stats_html(view.events), *_trie_for(session, None), _slider(session, False), status, session, gr.skip())
    finally:
        run.cancel()  # also when the page cancelled this handler (Stop)


def stop(session: Session) -> tuple:
    """Stop: the queued generator is cancelled by Gradio; here the answer so far is kept."""
    session = session if isinstance(session, Session) else Session()
    if session.active:
        n = session.view.totals.new_tokens if session.view is not None and session.view.totals else 0
        session.finish_turn(f"stopped after {n} tokens")
    stats = render.stats_html(session.view.events) if session.view is not None else render.stats_html([])
    if session.view is not None and session.view.events and RUNTIME.ready:
        fig, ins = _trie_for(session, None)
    else:
        fig, ins = gr.skip(), gr.skip()
    return chat_html(session), stats, fig, ins, _slider(session, False), "", session


def clear() -> tuple:
    session = Session()
    tok = RUNTIME.loaded().tokenizer if RUNTIME.ready else None
    fig = render.trie_figure(None, tok) if tok is not None else render._empty_figure("The draft tree of each step appears here.")
    return (
        chat_html(session),
        render.stats_html([]),
        fig,
        render.inspector_html(None, tok),
        gr.update(visible=False),
        "",
        session,
        "",
        "",
        gr.update(value=None, visible=False),
    )


def replay(step: float, session: Session) -> tuple:
    """Step slider (after generation): that step's tree and inspector."""
    if not isinstance(session, Session) or session.view is None or not session.view.events or session.active:
        return gr.skip(), gr.skip()
    return _trie_for(session, int(step))


def _collect(run: Run, progress: Callable[[int], None]) -> list[Any]:
    events: list[Any] = []
    while True:
        got, ended = run.drain(timeout=0.5)
        for ev in got:
            if isinstance(ev, Exception):
                raise RuntimeError(f"generation failed: {ev}")
            events.append(ev)
        if ended:
            return events
        progress(events[-1].totals.new_tokens if events else 0)


@gpu
def compare(message: str, session: Session, *knobs: Any) -> Iterator[tuple]:
    """Compare: REST and plain decoding on the same prompt and settings, back to back, nothing
    rendered in between. Yields (comparison html, speed figure, status)."""
    session = session if isinstance(session, Session) else Session()
    try:
        config, store = make_config(knob_dict(knobs))
    except ConfigError as exc:
        yield gr.skip(), gr.skip(), status_html(f"Settings: {render.esc(str(exc))}", "err")
        return
    if session.active:
        yield gr.skip(), gr.skip(), status_html("Wait for the answer to finish (or Stop it) before comparing.", "warn")
        return
    try:
        if not RUNTIME.ready:
            yield gr.skip(), gr.skip(), status_html("Loading the model (first request only)…")
        engine = RUNTIME.engine(store)
        if session.prompt_ids is not None and not (message or "").strip():
            prompt_ids, what = session.prompt_ids, "the last prompt"
        elif (message or "").strip():
            prompt_ids, what = list(engine.encode([{"role": "user", "content": message.strip()}], chat=True)), "the message in the box"
        elif session.prompt_ids is not None:
            prompt_ids, what = session.prompt_ids, "the last prompt"
        else:
            yield gr.skip(), gr.skip(), status_html("Send a message first, or type one to compare on.", "warn")
            return
        config, note = fit_context(len(prompt_ids), config)
        results = {}
        for method, label in (("rest", "REST"), ("ar", "plain decoding")):
            run = Run(engine, prompt_ids, config.with_method(method))
            try:
                msgs: list[str] = []
                results[method] = _collect(run, lambda n, label=label: msgs.append(f"{label}: {n} tokens"))
            finally:
                run.cancel()
            yield gr.skip(), gr.skip(), status_html(f"Comparing on {what}: {label} done ({results[method][-1].totals.new_tokens} tokens)…")
        cmp = render.compare(results["rest"], results["ar"], greedy=config.sampling.greedy)
        done = f"Compared on {what} with the current settings ({config.max_new_tokens} new tokens max)." + (f" {note}." if note else "")
        yield render.comparison_html(cmp), gr.update(value=render.speed_figure(results["rest"], results["ar"]), visible=True), status_html(render.esc(done))
    except Exception as exc:  # noqa: BLE001 - a message in the page, the traceback in the terminal
        if not isinstance(exc, (ConfigError, ValueError, FileNotFoundError)):
            log.error("compare failed:\n%s", traceback.format_exc())
        log.warning("compare failed: %s", exc)
        yield gr.skip(), gr.skip(), status_html(render.esc(str(exc)), "err")


def refresh_stores(current: str | None, keep_none: bool = True) -> tuple:
    """Timer (while builds run): datastore choices and the build banner; the choice is kept."""
    names = RUNTIME.store_names()
    choices = names + [NO_STORE]
    keep = current in names or (keep_none and current == NO_STORE)
    value = current if keep else (names[0] if names else NO_STORE)
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
    preset = PRESETS["cpu"]
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
                chat = gr.HTML(chat_html(Session()), elem_id="chat")
                with gr.Row(elem_id="send-row"):
                    box = gr.Textbox(placeholder="Message…", show_label=False, lines=1, max_lines=6, scale=5, min_width=160, elem_id="prompt", autofocus=True)
                    send = gr.Button("Send", variant="primary", scale=0, min_width=72, elem_id="send")
                    stop_btn = gr.Button("Stop", variant="stop", scale=0, min_width=64, elem_id="stop")
                    clear_btn = gr.Button("Clear", scale=0, min_width=64, elem_id="clear")
                gr.Examples(EXAMPLES, inputs=[box], label="Examples: code and chat")
                stats = gr.HTML(render.stats_html([]), elem_id="stats")
                with gr.Row(equal_height=False):
                    with gr.Column(scale=3, min_width=300):
                        trie = gr.Plot(render._empty_figure("The draft tree of each step appears here."), label="Draft tree of the step", elem_id="trie")
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
    s = Settings.from_env()
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
    for name, value in vars(settings).items():  # the shared runtime and builds read these
        setattr(SETTINGS, name, value)
    settings.datastores.mkdir(parents=True, exist_ok=True)
    if settings.build:
        BUILDS.start()
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
