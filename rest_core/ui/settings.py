"""The app's settings: where it finds its model and datastores, where it listens and what one user
may take of a shared server; read once from the command line and the environment. No Gradio here.

Each flag has an environment variable: --model REST_MODEL, --device REST_DEVICE, --datastores
REST_DATASTORES, --host REST_HOST (or GRADIO_SERVER_NAME), --port REST_PORT (or
GRADIO_SERVER_PORT), --no-build REST_BUILD_DATASTORES=0, --publish-uploads REST_PUBLISH_UPLOADS=1,
--backend REST_BACKEND, --vllm-url REST_VLLM_URL, --vllm-max-seqs REST_VLLM_MAX_SEQS,
and each limit in LIMITS its --field-name and REST_FIELD_NAME. A flag wins over its variable.
"""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from rest_core.decode.models import DEFAULT_MODEL
from rest_core.ui.upload_jobs import UploadLimits

ROOT = Path(__file__).resolve().parents[2]  # the repository (or Space) root, where app.py is


@dataclass(frozen=True)
class Settings:
    """Where the app finds its model and datastores, and where it listens (read from the flags and
    the environment once: `parse_args`, `settings_from_env`)."""

    model: str = DEFAULT_MODEL
    device: str = "auto"
    datastores: Path = ROOT / "datastores"
    host: str = "127.0.0.1"
    port: int = 7860
    build: bool = True
    zero_gpu: bool = False  # Hugging Face ZeroGPU: CUDA is attached only inside decorated calls
    # Who answers chat messages: "native" (this process's engine, one answer at a time) or "vllm"
    # (a vLLM server with the REST proposer, batching every session's answers: rest_core.ui.vllm_calls).
    backend: str = "native"
    vllm_url: str = ""  # a vLLM server already running on this machine (else the app starts one)
    vllm_max_seqs: int = 16  # answers vLLM batches at once (and the chat queue's concurrency)
    # What one user may take of a shared server (defaults for a public Space; 0 = no limit).
    max_message_chars: int = 8000  # longer messages are refused before they are tokenized
    max_seconds: float = 60.0  # a generation (or a comparison, both runs together) stops after this
    max_jobs: int = 1  # generations a session may have queued or running at once
    client_jobs: int = 2  # jobs one client address may have queued or running, all its sessions together
    trusted_proxies: int = 0  # proxies in front of the app whose X-Forwarded-For entry is believed (a Space: 1)
    session_ttl: float = 1800.0  # seconds a session's state lives after its last update
    # Uploaded corpora ("Your corpus"): private to the session that built them unless published.
    publish_uploads: bool = False  # a classroom: every session sees every uploaded store
    max_upload_mb: float = 20.0  # text one upload may bring (files, zip members and pasted text)
    max_stores_per_session: int = 3
    max_concurrent_builds: int = 1  # all sessions together; a build past it is refused, not queued
    uploads_disk_mb: float = 500.0  # disk all uploaded stores may take together

    def upload_limits(self) -> UploadLimits:
        return UploadLimits(
            self.max_upload_mb, self.max_stores_per_session, self.max_concurrent_builds, self.uploads_disk_mb
        )


# The server's limits: (Settings field, type, metavar, help with {d} for the default). Each is the
# flag --field-name and the environment variable REST_FIELD_NAME; 0 = no limit.
LIMITS: tuple[tuple[str, type, str, str], ...] = (
    ("max_message_chars", int, "N", "refuse longer messages before tokenizing them; 0 = no limit (default {d})"),
    (
        "max_seconds",
        float,
        "S",
        "stop a generation (or a comparison, both runs together) after S seconds on the model, "
        "keeping the answer so far; 0 = no limit (default {d:g})",
    ),
    ("max_jobs", int, "N", "generations one session may have queued or running at once; 0 = no limit (default {d})"),
    (
        "client_jobs",
        int,
        "N",
        "jobs on the model one client address may have queued or running, over all its sessions (a script "
        "opening many sessions cannot fill the queue); 0 = no limit (default {d})",
    ),
    (
        "trusted_proxies",
        int,
        "N",
        "proxies in front of the app (a Hugging Face Space: 1, the default there): a client's address is the "
        "X-Forwarded-For entry the outermost of them wrote; 0 = the connection's own address (default {d})",
    ),
    ("session_ttl", float, "S", "forget a session's conversation S seconds after its last update (default {d:g})"),
    (
        "max_upload_mb",
        float,
        "MB",
        "text one upload may bring (files, zip members, pasted text); 0 = no limit (default {d:g})",
    ),
    ("max_stores_per_session", int, "N", "corpora one session may build; 0 = no limit (default {d})"),
    (
        "max_concurrent_builds",
        int,
        "N",
        "corpus builds running at once, all sessions together; 0 = no limit (default {d})",
    ),
    ("uploads_disk_mb", float, "MB", "disk all uploaded corpora may take together; 0 = no limit (default {d:g})"),
)


def _limit(kind: type, what: str) -> Callable[[str], Any]:
    """Parse a limit (a flag's or an environment variable's text): a finite number >= 0."""

    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{what} must be a {'whole ' if kind is int else ''}number >= 0, got {text!r}"
            ) from None
        if not math.isfinite(value) or value < 0:
            raise argparse.ArgumentTypeError(f"{what} must be a finite number >= 0, got {text!r}")
        return value

    parse.__name__ = kind.__name__
    return parse


BACKENDS = ("native", "vllm")


def _backend(value: str) -> str:
    if value not in BACKENDS:
        raise ValueError(f"REST_BACKEND must be one of {', '.join(BACKENDS)}, got {value!r}")
    return value


def _env_limit(env: Mapping[str, str], name: str, kind: type, default: Any) -> Any:
    if name not in env:
        return default
    try:
        return _limit(kind, name)(env[name])
    except argparse.ArgumentTypeError as exc:
        raise ValueError(str(exc)) from None


def settings_from_env(env: Mapping[str, str] = os.environ, have_spaces: bool = False) -> Settings:
    """Settings from the environment. `have_spaces`: the `spaces` package (ZeroGPU's decorator)
    imported, so SPACES_ZERO_GPU can take effect."""
    get = env.get
    d = Settings()
    return Settings(
        model=get("REST_MODEL", "embedded"),
        device=get("REST_DEVICE", "auto"),
        datastores=Path(get("REST_DATASTORES", str(ROOT / "datastores"))),
        host=get("REST_HOST", get("GRADIO_SERVER_NAME", "0.0.0.0" if get("SPACE_ID") else "127.0.0.1")),
        port=int(get("REST_PORT", get("GRADIO_SERVER_PORT", "7860"))),
        build=get("REST_BUILD_DATASTORES", "1") not in ("0", "false", "no"),
        zero_gpu=have_spaces and bool(get("SPACES_ZERO_GPU")),
        publish_uploads=get("REST_PUBLISH_UPLOADS", "0") not in ("0", "false", "no", ""),
        backend=_backend(get("REST_BACKEND", "native")),
        vllm_url=get("REST_VLLM_URL", ""),
        vllm_max_seqs=_env_limit(env, "REST_VLLM_MAX_SEQS", int, d.vllm_max_seqs),
        **{name: _env_limit(env, f"REST_{name.upper()}", kind, _default(env, name, d)) for name, kind, _, _ in LIMITS},
    )


TTL_MARGIN_S = 30.0  # a request's start-up and rendering beyond its --max-seconds on the model


def check_session_ttl(s: Settings) -> None:
    """ValueError when a visitor's state could expire while its own request runs: Gradio counts
    --session-ttl from the state's last write, the end of the previous request, so a TTL shorter
    than one request (its --max-seconds and a margin) frees a step-through mid-answer and the
    next Run to end starts it again (seen with --session-ttl 60 --max-seconds 60)."""
    if s.session_ttl and s.max_seconds and s.session_ttl < s.max_seconds + TTL_MARGIN_S:
        raise ValueError(
            f"session TTL {s.session_ttl:g} s is shorter than one request may take ({s.max_seconds:g} s on the model "
            f"plus {TTL_MARGIN_S:g} s): a visitor's state would expire while its own request runs; use at least "
            f"{s.max_seconds + TTL_MARGIN_S:g} (or 0: no expiry)"
        )


def _default(env: Mapping[str, str], name: str, d: Settings) -> Any:
    """A limit's default: on a Hugging Face Space (SPACE_ID set) one trusted proxy, its front end."""
    if name == "trusted_proxies" and env.get("SPACE_ID"):
        return 1
    return getattr(d, name)


def _backend_flags(p: argparse.ArgumentParser, s: Settings) -> None:
    """--backend, --vllm-url, --vllm-max-seqs (defaults from `s`)."""
    p.add_argument(
        "--backend",
        choices=BACKENDS,
        default=s.backend,
        help="who answers chat messages: native (this process, one answer at a time) or vllm (a vLLM server "
        "with the REST proposer, batching every visitor's answers; `make serve-env` first) [REST_BACKEND]",
    )
    p.add_argument(
        "--vllm-url",
        default=s.vllm_url,
        metavar="URL",
        help="with --backend vllm: a vLLM server already running on this machine (default: start one) [REST_VLLM_URL]",
    )
    p.add_argument(
        "--vllm-max-seqs",
        type=_limit(int, "--vllm-max-seqs"),
        default=s.vllm_max_seqs,
        metavar="N",
        help=f"with --backend vllm: answers batched at once (default {s.vllm_max_seqs}) [REST_VLLM_MAX_SEQS]",
    )


def parse_args(
    argv: list[str] | None = None, env: Mapping[str, str] = os.environ, have_spaces: bool = False
) -> Settings:
    """Settings from the flags; a flag not given takes its environment variable, then the default."""
    s = settings_from_env(env, have_spaces)
    p = argparse.ArgumentParser(description="REST speculative decoding: the interactive app.")
    p.add_argument(
        "--model",
        default=s.model,
        help="embedded (SmolLM2-135M-Instruct, offline), a local folder, a .gguf file or a hub id [REST_MODEL]",
    )
    p.add_argument("--device", default=s.device, help="auto | cpu | cuda | cuda:N | mps [REST_DEVICE]")
    p.add_argument("--datastores", default=str(s.datastores), help="folder holding the datastores [REST_DATASTORES]")
    p.add_argument("--host", default=s.host, help="address to listen on [REST_HOST]")
    p.add_argument("--port", type=int, default=s.port, help="port [REST_PORT]")
    p.add_argument(
        "--no-build",
        dest="build",
        action="store_false",
        default=s.build,
        help="do not build missing default datastores [REST_BUILD_DATASTORES=0]",
    )
    p.add_argument(
        "--publish-uploads",
        action="store_true",
        default=s.publish_uploads,
        help="show every uploaded corpus to every session (a classroom); off: each stays private to the session that built it [REST_PUBLISH_UPLOADS=1]",
    )
    _backend_flags(p, s)
    for name, kind, metavar, text in LIMITS:
        flag, default = "--" + name.replace("_", "-"), getattr(s, name)
        p.add_argument(
            flag,
            dest=name,
            type=_limit(kind, flag),
            default=default,
            metavar=metavar,
            help=text.format(d=default) + f" [REST_{name.upper()}]",
        )
    a = p.parse_args(argv)
    try:
        check_session_ttl(replace(s, session_ttl=a.session_ttl, max_seconds=a.max_seconds))
    except ValueError as exc:
        p.error(f"--session-ttl: {exc}")
    return replace(
        s,
        model=a.model,
        device=a.device,
        datastores=Path(a.datastores),
        host=a.host,
        port=a.port,
        build=a.build,
        publish_uploads=a.publish_uploads,
        backend=a.backend,
        vllm_url=a.vllm_url,
        vllm_max_seqs=max(1, a.vllm_max_seqs),
        **{name: getattr(a, name) for name, _, _, _ in LIMITS},
    )
