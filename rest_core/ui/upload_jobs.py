"""The app's uploaded datastores: where they live, the background builds that make them and the
server-wide bounds on both. No Gradio here (app.py wires the "Your corpus" panel to it).

A session's stores live in its own folder under this server's uploads root (a fresh folder
`rest-uploads-<pid>-<random>` in `tempfile.gettempdir()`, locked while its process runs and
removed at exit; app.py also exits cleanly on SIGTERM, and at start removes the roots of
instances killed before their exit: `remove_stale_roots`): `<root>/<session key>/store-<n>`. No name from the
upload (file names, zip members, the store name typed in the page) is ever part of a path. With
`publish_uploads` a store goes to `<root>/public/store-<n>` instead, where every session finds it.

Builds run in a worker thread of the server process, not a child process: the tokenizer is
already loaded (a child would load it again, seconds and hundreds of MB on a free 2-vCPU
Space), cancelling is an Event the build checks between batches of ~256k characters, and the
thread runs at a lower CPU priority (Linux: its own nice value) and sleeps a moment between
batches while a generation holds the model, so chat keeps its pace.
"""

from __future__ import annotations

import atexit
import copy
import logging
import os
import re
import shutil
import stat
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from rest_core.cpus import lower_priority
from rest_core.store.build import BuildCancelled
from rest_core.store.files import UPLOAD_LIMITS, ReadLimits
from rest_core.store.format import store_size_estimate
from rest_core.store.tokenizer_id import tokenizer_vocab_size
from rest_core.store.uploads import BuildSummary, UploadProgress, build_from_files

log = logging.getLogger("rest.app")

YIELD_S = 0.02  # pause between two batches while a generation holds the model
# Disk a store takes per byte of its text, to refuse at once what cannot fit: ~6 bytes per token
# (uint16 token + int32 suffix-array entry) at 2.5-4 bytes of text per token with a real
# tokenizer (2.5x was seen on code). The build then accounts the store's real size as it reads.
DISK_FACTOR = 2.5
RESERVED = ("context", "model", "none")  # source and choice names a store may not take
_NAME_OK = re.compile(r"[^A-Za-z0-9._-]+")
# This server's uploads root: <temp dir>/rest-uploads-<pid>-<random>, locked by its process.
ROOT_PREFIX = "rest-uploads-"
LOCK_NAME = ".owner.lock"


class UploadRefused(ValueError):
    """An upload or build the server will not start: the message is for the page, one line."""


@dataclass(frozen=True)
class UploadLimits:
    """What uploads may take (0 = no bound): per upload, per session and for the whole server."""

    max_upload_mb: float = 20.0
    max_stores_per_session: int = 3
    max_concurrent_builds: int = 1
    disk_mb: float = 500.0

    def read_limits(self) -> ReadLimits:
        return replace(UPLOAD_LIMITS, max_bytes=int(self.max_upload_mb * 1e6) if self.max_upload_mb else None)


@dataclass
class UploadJob:
    """One build in the background: `done` is set when it ended; then `summary` or `error`."""

    name: str
    folder: Path  # the store's folder (written by the build; removed if it fails)
    public: bool
    cancel: threading.Event = field(default_factory=threading.Event)
    done: threading.Event = field(default_factory=threading.Event)
    progress: UploadProgress | None = None
    summary: BuildSummary | None = None
    error: str | None = None
    started: float = field(default_factory=time.monotonic)
    thread: threading.Thread | None = None
    paths: tuple[str, ...] = ()  # its raw uploads (deleted once read)
    estimate: int = 0  # bytes its store will take, from what it has read so far

    def stop(self, wait_s: float = 5.0) -> None:
        """Cancel the build and wait (a moment) for it to end and clean up."""
        self.cancel.set()
        if self.thread is not None and self.thread is not threading.current_thread():
            self.thread.join(wait_s)


def folder_size(path: Path, skip_hidden: bool = False) -> int:
    """Bytes of the files under `path` (links not followed; `skip_hidden`: not in folders whose
    name starts with ".", such as a build's temp folder); 0 when it does not exist."""
    total = 0
    for dirpath, dirs, files in os.walk(path):
        if skip_hidden:
            dirs[:] = [d for d in dirs if not d.startswith(".")]
        for f in files:
            try:
                total += os.lstat(os.path.join(dirpath, f)).st_size
            except OSError:
                pass
    return total


def store_name(typed: str | None, taken: Sequence[str], default: str = "my-corpus") -> str:
    """The name a new store is shown under: what the user typed (letters, digits, . _ -, at
    most 40), else `default`, made unique among `taken` with -2, -3, ... Never a path."""
    base = _NAME_OK.sub("-", (typed or "").strip()).strip(".-")[:40] or default
    if base.lower() in RESERVED:
        raise UploadRefused(f"a datastore cannot be named {base!r}: choose another name")
    name, k = base, 2
    while name in taken:
        name, k = f"{base}-{k}", k + 1
    return name


class RawFiles:
    """The raw files of uploads, where the web framework stored them before a build reads them
    (`folder`, its upload folder; `listed`, its live record of this app's uploads there). Their
    bytes count against the uploads disk cap; they are deleted once a build has read them (or
    failed), on Clear and when their session expires. Nothing outside `folder` is ever deleted:
    without a folder, nothing is."""

    def __init__(self, folder: Path | None = None, listed: set[str] | None = None) -> None:
        self.folder = Path(folder).resolve() if folder is not None else None
        self.listed = listed if listed is not None else set()

    def owned(self, path: str | os.PathLike) -> Path | None:
        """`path` resolved, when it is a raw upload this may delete: a file (not a link)
        inside the upload folder; else None."""
        p = Path(path)
        try:
            real = p.resolve(strict=True)
        except (OSError, RuntimeError):
            return None
        if self.folder is None or self.folder not in real.parents or p.is_symlink() or not real.is_file():
            return None
        return real

    def remove(self, paths: Iterable[str | os.PathLike]) -> int:
        """Delete those of `paths` that are raw uploads (`owned`), and the folder each was
        stored in when that is left empty; returns how many files went."""
        gone = 0
        for path in paths:
            real = self.owned(path)
            if real is None:
                continue
            try:
                real.unlink()
            except OSError:
                continue
            gone += 1
            self.listed.discard(str(path))
            self.listed.discard(str(real))
            if real.parent.parent == self.folder:  # the framework's folder for this one upload
                try:
                    real.parent.rmdir()
                except OSError:
                    pass
        return gone

    def size(self, exclude: Iterable[str | os.PathLike] = ()) -> int:
        """Bytes of this app's raw uploads on disk now, but `exclude`."""
        skip = {str(p) for p in exclude}
        total = 0
        for path in list(self.listed):  # a copy: the server adds to it meanwhile
            if path not in skip:
                try:
                    total += os.lstat(path).st_size
                except OSError:  # deleted (read, cleared, expired)
                    pass
        return total


def hold_lock(path: Path) -> Any:
    """An exclusive lock on `path`, held until this process ends (the open file is returned and
    must be kept); None where there is no flock (the folder's pid alone then says who owns it)."""
    try:
        import fcntl
    except ImportError:
        return None
    f = open(path, "w")  # held open for the process's lifetime
    fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return f


def _owner_gone(folder: Path, pid: int) -> bool:
    """Whether the instance that made uploads root `folder` no longer runs: its pid is not
    running (or is not ours to signal: then it counts as running) and nobody holds its lock."""
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
        return False
    except PermissionError:
        return False
    except ProcessLookupError:
        pass
    try:
        import fcntl
    except ImportError:
        return True
    try:
        with open(folder / LOCK_NAME, "rb") as f:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)  # released when closed
    except FileNotFoundError:
        return True
    except OSError:  # held: a live instance (in another pid namespace) owns it
        return False
    return True


def remove_stale_roots(
    parent: Path | None = None, prefix: str = ROOT_PREFIX, before: Callable[[Path], Any] | None = None
) -> list[Path]:
    """Delete the folders that instances of this app left in `parent` (default: the temp dir)
    when they were killed before their exit could: folders named <prefix><pid>-<random> (the
    uploads roots, rest-uploads-; the vLLM backend's, rest-vllm-), owned by this user, whose
    process is gone (_owner_gone); `before(folder)` runs first (stops what still uses it). A
    running instance's folder, a link, a file and any other name are left alone. Returns the
    folders removed."""
    parent = Path(tempfile.gettempdir()) if parent is None else parent
    name = re.compile(re.escape(prefix) + r"(\d+)-[A-Za-z0-9_]+")
    removed = []
    for path in parent.glob(f"{prefix}*"):
        m = name.fullmatch(path.name)
        try:
            st = os.lstat(path)
        except OSError:
            continue
        if m is None or not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
            continue
        if _owner_gone(path, int(m.group(1))):
            if before is not None:
                before(path)
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
            log.info("removed the folder %s of an instance that is gone", path)
    return removed


class Uploads:
    """The server's uploads: the root folder, the build slots and the disk budget."""

    def __init__(self, limits: UploadLimits, publish: bool = False, root: Path | None = None) -> None:
        self.limits = limits
        self.publish = publish
        self._root = root
        self._owner_lock: Any = None  # the root's lock file, open while this process runs
        self.raw = RawFiles()  # the app sets the web framework's upload folder
        self._lock = threading.Lock()
        self._building = 0
        self._running: list[UploadJob] = []  # builds under way (their estimates count as used)

    @property
    def root(self) -> Path:
        """Created on first use, so a server nobody uploads to leaves no folder behind; named
        after this process and locked while it runs (remove_stale_roots), removed at exit."""
        with self._lock:
            if self._root is None:
                self._root = Path(tempfile.mkdtemp(prefix=f"{ROOT_PREFIX}{os.getpid()}-", dir=tempfile.gettempdir()))
                self._owner_lock = hold_lock(self._root / LOCK_NAME)
                atexit.register(shutil.rmtree, self._root, True)
            return self._root

    @property
    def public_dir(self) -> Path:
        return self.root / "public"

    def session_dir(self, key: str) -> Path:
        if not re.fullmatch(r"[0-9a-f]{8,64}", key):  # a session's uuid hex, never anything else
            raise ValueError(f"not a session key: {key!r}")
        return self.root / key

    def remove_session(self, key: str) -> None:
        """Delete a session's stores (its folder); published stores stay."""
        if self._root is None:
            return
        shutil.rmtree(self.session_dir(key), ignore_errors=True)

    @property
    def building(self) -> int:
        return self._building

    def start(
        self,
        key: str,
        name: str,
        paths: Sequence[str],
        names: Sequence[str],
        pasted: str,
        tokenizer: Any,
        busy: Callable[[], bool] = lambda: False,
    ) -> UploadJob:
        """Start building a store from an upload in the background, or refuse (UploadRefused)
        when the server is at its bounds. `busy()`: whether a generation is running now."""
        size = sum(os.path.getsize(p) for p in paths if os.path.isfile(p)) + len(
            (pasted or "").encode("utf-8", "replace")
        )
        max_bytes = self.limits.read_limits().max_bytes
        if max_bytes is not None and size > max_bytes:
            raise UploadRefused(
                f"the upload is {size / 1e6:.1f} MB; this server builds from at most {max_bytes / 1e6:g} MB at once"
            )
        with self._lock:
            if self.limits.max_concurrent_builds and self._building >= self.limits.max_concurrent_builds:
                raise UploadRefused("the server is building other users' corpora right now: try again in a minute")
            if self.limits.disk_mb:
                self._check_disk(DISK_FACTOR * size, self._used(exclude=paths))
            self._building += 1
        job = None
        try:
            parent = self.public_dir if self.publish else self.session_dir(key)
            parent.mkdir(parents=True, exist_ok=True)
            folder = Path(tempfile.mkdtemp(prefix="store-", dir=parent))
            folder.rmdir()  # build_datastore wants a path that does not exist yet
            job = UploadJob(name, folder, self.publish, paths=tuple(paths))
            with self._lock:
                self._running.append(job)
            job.thread = threading.Thread(
                target=self._build,
                args=(job, list(paths), list(names), pasted, tokenizer, busy),
                daemon=True,
                name="upload-build",
            )
            job.thread.start()
        except BaseException:
            self._release_slot(job)
            raise
        return job

    def _release_slot(self, job: UploadJob | None = None) -> None:
        with self._lock:
            self._building -= 1
            if job in self._running:
                self._running.remove(job)

    def _used(self, exclude: Sequence[str] = (), job: UploadJob | None = None) -> int:
        """Disk the uploads take now (call with the lock held): the stores built, the builds
        under way by their estimates (but `job`), the raw uploads not read yet (but `exclude`,
        and those of the builds under way)."""
        running = [j for j in self._running if j is not job]
        raw = [*exclude, *(p for j in self._running for p in j.paths)]
        stores = folder_size(self._root, skip_hidden=True) if self._root is not None else 0
        return stores + sum(j.estimate for j in running) + self.raw.size(exclude=raw)

    def _check_disk(self, needed: float, used: int) -> None:
        """Refuse (UploadRefused) a store of `needed` bytes when `used` are taken already."""
        cap = self.limits.disk_mb * 1e6
        if self.limits.disk_mb and used + needed > cap:
            left = max(0.0, cap - used)
            raise UploadRefused(
                f"the server's space for uploaded corpora is full: this corpus needs about {needed / 1e6:.2f} MB "
                f"on disk and {left / 1e6:.2f} MB of {self.limits.disk_mb:g} MB are left: upload less, or try again later"
            )

    def _account(self, job: UploadJob, p: UploadProgress, separator: int) -> None:
        """A build read more: its store's estimated size; stop it (UploadRefused) at the cap."""
        if p.phase != "reading":
            return
        job.estimate = store_size_estimate(p.tokens, p.documents, separator)
        with self._lock:
            self._check_disk(job.estimate, self._used(job=job))

    def _build(
        self, job: UploadJob, paths: list[str], names: list[str], pasted: str, tokenizer: Any, busy: Callable[[], bool]
    ) -> None:
        lower_priority()
        separator = tokenizer_vocab_size(tokenizer)

        def report(p: UploadProgress) -> None:
            job.progress = p
            self._account(job, p, separator)
            if busy():  # let the generation have the interpreter between two batches
                time.sleep(YIELD_S)

        try:
            job.summary = build_from_files(
                paths,
                job.folder,
                tokenizer,
                names=names,
                pasted=pasted,
                limits=self.limits.read_limits(),
                progress=report,
                cancel=job.cancel,
            )
        except BuildCancelled:
            job.error = "the build was cancelled"
        except Exception as exc:  # noqa: BLE001 - sorted below
            if job.cancel.is_set():  # the session went and its folder with it, mid-batch
                job.error = "the build was cancelled"
            elif isinstance(exc, ValueError):  # refusals: one line for the page
                job.error = str(exc)
            else:  # a message in the page, the traceback in the terminal
                log.error("upload build failed:\n%s", traceback.format_exc())
                job.error = f"the build failed: {exc}"
        finally:
            self.raw.remove(paths)  # read (or failed): the raw upload goes
            if job.error is not None or job.cancel.is_set():
                # Also a build that ended after its session was released: nothing of it stays.
                shutil.rmtree(job.folder, ignore_errors=True)
                if not job.public and job.cancel.is_set():
                    try:
                        job.folder.parent.rmdir()  # the session's folder, when this was all it held
                    except OSError:
                        pass
            self._release_slot(job)
            job.done.set()


def build_tokenizer(tokenizer: Any) -> Any:
    """A copy of the model's tokenizer for builds: a fast tokenizer used from two threads at once
    can fail ("Already borrowed") when one of them changes its truncation or padding."""
    try:
        return copy.deepcopy(tokenizer)
    except Exception:  # noqa: BLE001 - a tokenizer that cannot be copied is shared
        return tokenizer
