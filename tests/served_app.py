"""The app served on 127.0.0.1 for the HTTP API tests (gradio_client, as the page's "Use via API"
shows), on a scripted runtime whose datastores folder holds a built store 'chat'."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import app
from rest_core.serve.client import free_port
from rest_core.ui.runtime import Runtime, StoreBuilds
from rest_core.ui.settings import Settings
from rest_core.ui.upload_jobs import Uploads


@contextlib.contextmanager
def serve(runtime: Runtime, folder: Path, settings: Settings | None = None) -> Iterator[tuple[Any, app.App]]:
    """(client, app): the app on `runtime` with `settings` (default Settings()) over the datastores
    folder `folder`, which gets a built store 'chat'; closed on exit."""
    import gradio_client

    (folder / "chat").mkdir(parents=True, exist_ok=True)
    (folder / "chat" / "meta.json").write_text("{}")
    settings = replace(settings or Settings(), datastores=folder)
    runtime.settings = settings
    runtime.uploads = Uploads(settings.upload_limits(), publish=settings.publish_uploads)  # with these limits
    built = app.build_app(settings, runtime, StoreBuilds(settings))
    built.demo.launch(server_name="127.0.0.1", server_port=free_port(), prevent_thread_lock=True, quiet=True)
    try:
        yield gradio_client.Client(built.demo.local_url, verbose=False), built
    finally:
        built.demo.close()
