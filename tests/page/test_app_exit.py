"""The app as a process: stopped with SIGTERM it removes its uploads folder (private uploads
never stay on disk), and at start it removes the folders of instances that are gone (killed
with SIGKILL), never a running instance's nor anything it did not create. A tiny model saved to
disk answers (no download); 127.0.0.1 only."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.served_app import free_port

gradio_client = pytest.importorskip("gradio_client")
ROOT = Path(__file__).resolve().parents[2]


def saved_tiny_model(folder: Path) -> Path:
    from tests.tiny_models import tiny_model, tiny_tokenizer

    tiny_model("llama").save_pretrained(folder)
    tiny_tokenizer().save_pretrained(folder)
    return folder


def dead_pid() -> int:
    """The pid of a process that has exited (and been reaped)."""
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return int(done.stdout)


def start_app(tmp: Path, model: Path | str, port: int) -> subprocess.Popen:
    env = {**os.environ, "TMPDIR": str(tmp), "GRADIO_TEMP_DIR": str(tmp / "gradio")}
    cmd = [sys.executable, "app.py", "--no-build", "--model", str(model), "--device", "cpu", "--port", str(port)]
    cmd += ["--datastores", str(tmp / "datastores")]
    return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def end_app(proc: subprocess.Popen) -> None:
    """Kill the app if a failed assertion left it running."""
    if proc.poll() is None:
        proc.kill()
        proc.wait()


def connect(url: str, proc: subprocess.Popen, timeout: float = 180):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        assert proc.poll() is None, proc.stdout.read()
        try:
            return gradio_client.Client(url, verbose=False)
        except Exception:  # noqa: BLE001 - not up yet
            time.sleep(0.5)
    raise TimeoutError(f"the app did not answer at {url}")


def test_sigterm_removes_the_uploads_folder_and_start_removes_stale_ones(tmp_path):
    model = saved_tiny_model(tmp_path / "model")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    stale = tmp / f"rest-uploads-{dead_pid()}-k1ll3d"  # an instance killed with SIGKILL
    running = tmp / f"rest-uploads-{os.getpid()}-al1ve"  # a running instance's (this test's pid)
    others = [tmp / "rest-uploads-mine", tmp / "rest-uploads-12-x.y", tmp / "notes"]  # not the app's naming
    for folder in (stale, running, *others):
        (folder / "store-1").mkdir(parents=True)
    a_file = tmp / f"rest-uploads-{dead_pid()}-f1le"  # named as the app names them, but a file
    a_file.write_text("not a folder")
    port = free_port()
    proc = start_app(tmp, model, port)
    try:
        client = connect(f"http://127.0.0.1:{port}/", proc)
        assert not stale.exists() and running.is_dir() and all(p.is_dir() for p in others) and a_file.is_file()
        status = client.predict(None, "notes about retrieval " * 40, "notes", [], api_name="/build_corpus")[0]
        assert "Built <b>notes</b>" in status, status
        (mine,) = tmp.glob(f"rest-uploads-{proc.pid}-*")
        assert any(mine.rglob("meta.json"))  # the private store is on disk
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
    finally:
        end_app(proc)
    log = proc.stdout.read()
    assert not mine.exists(), log[-3000:]
    assert "Traceback" not in log, log[-3000:]
    assert running.is_dir() and all(p.is_dir() for p in others) and a_file.is_file()


def test_sigterm_mid_answer_exits_cleanly(tmp_path):
    """SIGTERM while the model is writing an answer: the app ends the answer's step and exits 0.
    Before, the worker thread was still inside torch when the interpreter finalized and the
    process aborted ("terminate called without an active exception", exit code -6). The real
    embedded model: a tiny one answers 1,024 tokens before the signal could land."""
    from tests.app_fixtures import knob_values

    tmp = tmp_path / "tmp"
    (tmp / "datastores").mkdir(parents=True)
    port = free_port()
    proc = start_app(tmp, "embedded", port)
    try:
        client = connect(f"http://127.0.0.1:{port}/", proc)
        values = knob_values(max_new_tokens=1024).values()
        job = client.submit("Write a long essay about the history of computing.", [], *values, api_name="/respond")
        end = time.monotonic() + 120
        while len(job.outputs()) < 3 and time.monotonic() < end:  # a few streamed updates: it is decoding
            time.sleep(0.2)
        assert len(job.outputs()) >= 3 and not job.done()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
    finally:
        end_app(proc)
    log = proc.stdout.read()
    assert "terminate called" not in log and "Traceback" not in log, log[-3000:]
