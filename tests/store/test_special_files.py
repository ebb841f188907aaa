"""What a folder or a source may hold besides text files: FIFOs, sockets, devices and links to
nothing are skipped and counted (inside a folder) or refused (as the source), never read."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from rest_core.store.datastore import Datastore

ROOT = Path(__file__).resolve().parents[2]

needs_fifo = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")

# `python -m rest_core` with the char tokenizer for `--model fake`: a real process, so a read
# that blocks is killed by the timeout instead of hanging the test run.
CLI = (
    "import sys\n"
    "import rest_core.decode.models as models\n"
    "from tests.store.test_datastore import CharTokenizer\n"
    "models.load_tokenizer = lambda spec=None: CharTokenizer(300, name='fake')\n"
    "from rest_core.cli import main\n"
    "raise SystemExit(main(sys.argv[1:]))\n"
)


def run_build(source: Path, out: Path, *extra: str, timeout: float = 30) -> subprocess.CompletedProcess:
    args = ["datastore", "build", "--source", str(source), "--out", str(out), "--model", "fake", "--quiet", *extra]
    return subprocess.run([sys.executable, "-c", CLI, *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout)


@needs_fifo
@pytest.mark.parametrize("glob", [[], ["--glob", "*"]], ids=["every-file", "glob"])
def test_cli_build_skips_a_fifo_in_the_folder(tmp_path, glob):
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.txt").write_text("some text")
    os.mkfifo(src / "pipe.txt")  # nobody writes to it: opening it to read would block forever
    out = tmp_path / "ds"
    done = run_build(src, out, *glob)
    assert done.returncode == 0, done.stderr
    assert "skipped: 1 not a regular file" in done.stdout
    ds = Datastore.open(out)
    assert [ds.documents.name(i) for i in range(len(ds.documents))] == ["a.txt"]
    assert ds.meta["read_stats"]["skipped_by_reason"] == {"not a regular file": 1}


@pytest.mark.parametrize("glob", [[], ["--glob", "*"]], ids=["every-file", "glob"])
def test_cli_build_skips_a_dangling_link_in_the_folder(tmp_path, glob, fake_model, capsys):
    from rest_core.cli import main

    src = tmp_path / "src"
    src.mkdir()
    (src / "a.txt").write_text("some text")
    os.symlink(tmp_path / "gone.txt", src / "dangling.txt")  # a link to nothing
    out = tmp_path / "ds"
    args = ["datastore", "build", "--source", str(src), "--out", str(out), "--model", fake_model, "--quiet", *glob]
    assert main(args) == 0, capsys.readouterr().err
    assert "skipped: 1 broken link" in capsys.readouterr().out
    ds = Datastore.open(out)
    assert [ds.documents.name(i) for i in range(len(ds.documents))] == ["a.txt"]
    assert ds.meta["read_stats"]["skipped_by_reason"] == {"broken link": 1}


def special_sources(tmp_path: Path) -> list[Path]:
    """A FIFO nobody writes to and, where there is one, /dev/zero (a device that never ends)."""
    sources = []
    if hasattr(os, "mkfifo"):
        os.mkfifo(tmp_path / "pipe.jsonl")
        sources.append(tmp_path / "pipe.jsonl")
    if Path("/dev/zero").exists():
        sources.append(Path("/dev/zero"))
    if not sources:
        pytest.skip("neither FIFOs nor /dev/zero on this platform")
    return sources


def test_cli_refuses_a_fifo_or_device_as_the_source(tmp_path):
    for source in special_sources(tmp_path):
        out = tmp_path / f"ds-{source.name}"
        done = run_build(source, out)
        assert done.returncode == 2, done.stderr
        assert done.stderr.strip().splitlines()[-1] == f"error: {source}: not a regular file or folder"
        assert not out.exists()


def test_read_files_refuses_a_fifo_or_device(tmp_path):
    from rest_core.store.corpora import CorpusError
    from rest_core.store.files import read_files

    for source in special_sources(tmp_path):
        with pytest.raises(CorpusError, match=f"^{re.escape(source.name)}: not a regular file or folder$"):
            read_files([source])
