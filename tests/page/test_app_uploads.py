"""The page's "Your corpus" panel and the multi-store choice, driven through the app's handlers:
an upload built in the background with the model's (tiny) tokenizer, private to its session,
deleted when the session is released, bounded, every refusal a message; several chosen stores
reaching the engine, each named in the highlighting."""

from __future__ import annotations

import html
import tempfile
import time
import zipfile
from dataclasses import replace
from pathlib import Path

import app
import chat_tab
from rest_core.ui import answer_view, trie_view
from rest_core.ui.runtime import Runtime, StoreBuilds, StoreSet
from rest_core.ui.session import Session
from rest_core.ui.settings import Settings, parse_args, settings_from_env
from tests.app_fixtures import knob_values

NOTES = "Retrieval drafts tokens from a suffix array. " * 40


def handlers(runtime: Runtime) -> chat_tab.Handlers:
    """The handlers of a page built on `runtime` (`h.ui`: the components their returns are keyed by)."""
    return app.build_app(runtime.settings, runtime, StoreBuilds(runtime.settings)).handlers


def tiny(tmp_path: Path, **settings) -> Runtime:
    from tests.tiny_models import tiny_loaded

    stores = tmp_path / "datastores"
    stores.mkdir(exist_ok=True)
    return Runtime(Settings(datastores=stores, **settings), loader=lambda: tiny_loaded("llama"))


def markdown_folder(tmp_path: Path) -> list[str]:
    folder = tmp_path / "upload"
    folder.mkdir(exist_ok=True)
    (folder / "intro.md").write_text("# Intro\n\n" + NOTES)
    (folder / "usage.md").write_text("# Usage\n\nCall `build` then `search`.\n")
    with zipfile.ZipFile(folder / "more.zip", "w") as zf:
        zf.writestr("docs/faq.md", "## FAQ\n\nWhy REST? " + NOTES)
    return [str(folder / n) for n in ("intro.md", "usage.md", "more.zip")]


def build(
    h: chat_tab.Handlers, session: Session, files=None, pasted: str = "", name: str = "", current=None
) -> list[dict]:
    return list(h.build_corpus(files, pasted, name, session, current if current is not None else []))


def status_of(h: chat_tab.Handlers, outs: list[dict]) -> str:
    """The corpus status line of the build's last update."""
    return html.unescape(outs[-1][h.ui.corpus.status])


def banner(h: chat_tab.Handlers, out: dict) -> str:
    return out[h.ui.answer.status]


# ------------------------------------------------------------------ build, privacy, release


def test_an_upload_builds_a_private_store_that_release_deletes(tmp_path):
    rt = tiny(tmp_path)
    h = handlers(rt)
    mine, other = Session(), Session()
    last = build(h, mine, markdown_folder(tmp_path), pasted="pasted notes", name="my notes", current=["chat"])[-1]
    status, choice, files = last[h.ui.corpus.status], last[h.ui.store], last[h.ui.corpus.files]
    assert "Built <b>my-notes</b>" in status and "private" in status, status
    assert "4 documents" in status and "from 3 file(s)" in status  # two .md, one zip member, the pasted text
    assert choice["choices"] == ["my-notes"] and choice["value"] == ["my-notes"]  # chat is not built here
    assert files["value"] is None
    folder = mine.corpora.uploads["my-notes"]
    # Its own folder in the server's uploads root, inside the temp dir; no name from the upload.
    assert Path(tempfile.gettempdir()) in folder.parents and folder.parent.name == mine.key
    assert folder.name.startswith("store-") and (folder / "meta.json").is_file()

    # Another session never sees it: not among its choices, and asking for it by name is refused.
    assert "my-notes" not in h.on_load([], other)[h.ui.store]["choices"]
    assert "my-notes" not in h.refresh_stores(["my-notes"], other)[h.ui.store]["choices"]
    asking = Session()  # by name, as an API client does (a page picks among its own choices)
    out = list(h.respond("hello", asking, ["my-notes"], **knob_values(max_new_tokens=4)))[-1]
    assert "is not built" in banner(h, out) and asking.chat.turns[-1].error

    # This session drafts from it: an engine of its own, whose source is named as chosen.
    out = list(h.respond("Why REST? Retrieval drafts tokens", mine, ["my-notes"], **knob_values(max_new_tokens=8)))[-1]
    assert 'class="status err' not in banner(h, out)
    engines = {k: e for k, e in rt._engines.items() if isinstance(k, StoreSet) and k.names}
    ((key, engine),) = engines.items()
    assert key.owner == mine.key and [s.name for s in engine.source_table.stores] == ["my-notes"]

    # Clear (the same release as expiry and a closed page) deletes the folder and the engine.
    assert "my-notes" not in h.clear(mine, ["my-notes"])[h.ui.store]["choices"]
    assert not folder.exists() and not folder.parent.exists() and mine.corpora.uploads == {}
    assert not [k for k in rt._engines if isinstance(k, StoreSet) and k.owner == mine.key]
    assert "my-notes" not in h.on_load([], mine)[h.ui.store]["choices"]


def test_a_closed_page_cancels_its_build_and_leaves_nothing(tmp_path):
    """Release while the build runs: it stops between batches and nothing stays on disk."""
    rt = tiny(tmp_path, max_upload_mb=50)
    h = handlers(rt)
    session = Session()
    big = tmp_path / "big.txt"
    big.write_text("".join(f"line {i} of a long corpus, with words {i * 7 % 1000}.\n" for i in range(200_000)))
    job = session.corpora.start_upload(rt, session.key, [str(big)], ["big.txt"], "")
    while job.progress is None and not job.done.is_set():
        job.done.wait(0.01)
    h.pages.release(session)  # waits a moment for the build; a busy machine may need longer
    assert job.done.wait(120) and job.error == "the build was cancelled"
    assert not job.folder.exists() and not rt.uploads.session_dir(session.key).exists()
    assert rt.uploads.building == 0  # its build slot is free again


def test_idle_sessions_lose_their_uploads_busy_ones_keep_them(tmp_path):
    """The sweep (a thread, and every build's start) releases the sessions that uploaded and
    have been idle past the session TTL; one with an answer streaming or a build is not idle."""
    rt = tiny(tmp_path, session_ttl=5)
    h = handlers(rt)
    session = Session()
    assert "Built" in status_of(h, build(h, session, pasted=NOTES, name="notes"))
    folder, now = session.corpora.uploads["notes"], time.monotonic()
    assert h.pages.sweep(now + 4) == [] and folder.is_dir()
    session.chat.active = True  # an answer streams
    assert h.pages.sweep(now + 60) == [] and folder.is_dir()
    session.chat.active = False
    assert h.pages.sweep(now + 60) == [session] and not folder.exists() and session.corpora.uploads == {}
    assert h.pages.sweep(now + 120) == []  # released once


# ------------------------------------------------------------------ refusals: messages, never tracebacks


def test_refusals_are_messages_in_the_page(tmp_path):
    rt = tiny(tmp_path, max_upload_mb=0.01)
    h = handlers(rt)
    session = Session()
    oversize = tmp_path / "big.md"
    oversize.write_text("x" * 20_000)
    evil = tmp_path / "evil.zip"
    with zipfile.ZipFile(evil, "w") as zf:
        zf.writestr("../escaped.md", "zip slip")
        zf.writestr("/etc/absolute.md", "absolute")
    binary = tmp_path / "model.bin"
    binary.write_bytes(b"\0\1\2\3" * 100)
    cases = [
        (dict(files=[str(oversize)]), "at most 0.01 MB"),
        (dict(files=[str(evil)]), "no usable text in the upload (skipped: 2 unsafe path in zip)"),
        (dict(files=[str(binary)]), "no usable text in the upload (skipped: 1 binary file)"),
        (dict(files=[], pasted="  "), "nothing to build from"),
        (dict(files=None, pasted="", name=""), "nothing to build from"),
        (dict(pasted="fine text", name="context"), "cannot be named 'context'"),
    ]
    for kwargs, message in cases:
        status = status_of(h, build(h, session, **kwargs))
        assert message in status and 'class="status warn"' in status, (kwargs, status)
        assert "Traceback" not in status
    assert session.corpora.uploads == {} and not (tmp_path / "escaped.md").exists()
    assert rt.uploads.building == 0
    root = rt.uploads.root
    assert not any(p.name.startswith("store-") for p in root.rglob("*")), list(
        root.rglob("*")
    )  # failed builds leave nothing


def test_per_session_count_concurrent_builds_and_disk_are_bounded(tmp_path):
    rt = tiny(tmp_path, max_stores_per_session=1, uploads_disk_mb=1)
    h = handlers(rt)
    session = Session()
    assert "Built" in status_of(h, build(h, session, pasted="first corpus " * 20))
    assert "most one session may build" in status_of(h, build(h, session, pasted="second"))

    other = Session()
    rt.uploads._building = rt.uploads.limits.max_concurrent_builds  # another user's build holds the slot
    assert "building other users' corpora" in status_of(h, build(h, other, pasted="text"))
    rt.uploads._building = 0
    assert "space for uploaded corpora is full" in status_of(h, build(h, other, pasted="y" * 600_000))
    assert other.corpora.uploads == {}


def test_the_disk_cap_holds_for_what_stores_really_take(tmp_path):
    """A store takes several times its text on disk (a token and a suffix-array entry per token:
    6 bytes per byte with this byte-level tokenizer), and the cap overshot (2.05 MB on a 2 MB
    cap): the build accounts the store's size as it reads and stops at the cap, with a message."""
    from rest_core.ui.upload_jobs import folder_size

    rt = tiny(tmp_path, uploads_disk_mb=0.5)
    h = handlers(rt)
    session = Session()
    text = "".join(f"line {i}: retrieval drafts tokens.\n" for i in range(1_600))  # ~50 KB
    assert "Built" in status_of(h, build(h, session, pasted=text, name="first"))
    first = folder_size(rt.uploads.root)
    assert 250_000 < first < 400_000  # ~6x its text
    status = status_of(h, build(h, session, pasted=text, name="second"))
    assert "space for uploaded corpora is full" in status and "MB" in status, status
    assert folder_size(rt.uploads.root) == first and list(session.corpora.uploads) == ["first"]  # nothing of it stays
    assert "Built" in status_of(h, build(h, session, pasted=text[:5_000], name="small"))  # what fits still builds
    assert folder_size(rt.uploads.root) <= 500_000


def test_published_uploads_are_everyones(tmp_path):
    rt = tiny(tmp_path, publish_uploads=True)
    h = handlers(rt)
    author, student = Session(), Session()
    status = status_of(h, build(h, author, pasted=NOTES, name="lesson"))
    assert "published" in status and author.corpora.uploads == {}
    assert "lesson" in h.on_load([], student)[h.ui.store]["choices"]
    out = list(h.respond("hi", student, ["lesson"], **knob_values(max_new_tokens=4)))[-1]
    assert 'class="status err' not in banner(h, out)
    h.pages.release(author)  # published stores outlive their author's session
    assert "lesson" in rt.store_names()


def test_settings_flags_for_uploads(tmp_path):
    s = parse_args([], {})
    assert (
        s.publish_uploads,
        s.max_upload_mb,
        s.max_stores_per_session,
        s.max_concurrent_builds,
        s.uploads_disk_mb,
    ) == (False, 20, 3, 1, 500)
    s = parse_args(
        [
            "--publish-uploads",
            "--max-upload-mb",
            "5",
            "--max-stores-per-session",
            "2",
            "--max-concurrent-builds",
            "3",
            "--uploads-disk-mb",
            "100",
        ],
        {},
    )
    assert (
        s.publish_uploads,
        s.max_upload_mb,
        s.max_stores_per_session,
        s.max_concurrent_builds,
        s.uploads_disk_mb,
    ) == (True, 5, 2, 3, 100)
    s = settings_from_env({"REST_PUBLISH_UPLOADS": "1", "REST_MAX_UPLOAD_MB": "7"})
    assert s.publish_uploads and s.max_upload_mb == 7


# ------------------------------------------------------------------ several stores at once


def test_the_multi_select_reaches_the_engine_config(scripted, tmp_path):
    rt, engine = scripted
    for name in ("chat", "code"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "meta.json").write_text("{}")
    rt.settings = Settings(datastores=tmp_path)
    h = handlers(rt)
    list(h.respond("add two numbers", Session(), ["code", "chat"], **knob_values()))
    _, config = engine.calls[-1]
    assert config.draft.use_datastore and config.draft.stores == (("code", 1.0), ("chat", 1.0))
    list(h.respond("again", Session(), [], **knob_values()))
    assert not engine.calls[-1][1].draft.use_datastore


def test_two_real_stores_draft_as_two_named_sources(tmp_path):
    from rest_core.store.uploads import build_from_files

    rt = tiny(tmp_path)
    tok = rt.loaded().tokenizer
    for name, text in (("code", "def add(a, b): return a + b\n" * 30), ("chat", NOTES)):
        build_from_files([], rt.settings.datastores / name, tok, pasted=text)
    engine = rt.engine(["code", "chat"])
    # the default stores keep their bits (so colours) whichever of them drafts: chat 1, code 4
    assert [(s.name, s.bit) for s in engine.source_table.stores] == [("code", 4), ("chat", 1)]
    assert rt.engine(["code", "chat"]) is engine and rt.engine(["chat"]) is not engine  # one per set
    assert rt.engine(["chat"]).source_table.bit("chat") == 1 and rt.engine(["code"]).source_table.bit("code") == 4
    h = handlers(rt)
    session = Session()
    out = list(h.respond("def add(a, b): return a + b", session, ["code", "chat"], **knob_values(max_new_tokens=12)))[
        -1
    ]
    assert 'class="status err' not in banner(h, out)
    assert {m.source for e in session.chat.view.events for m in e.matches} >= {"code", "chat"}
    html = list(h.compare("", session, ["code", "chat"], **knob_values(max_new_tokens=12)))[-1][h.ui.answer.compare_out]
    assert "identical output" in html  # greedy with two stores == plain greedy


def test_hover_titles_legend_and_trie_name_the_stores(scripted):
    """A token drafted by the second store: its colour class (s2) and its store's name, not
    the default "store 2", in the answer's hover title, the trie's hover and the legend."""
    rt, engine = scripted
    from rest_core.config import GenerationConfig

    events = list(engine.generate(engine.encode("hi"), GenerationConfig(max_new_tokens=60)))

    def second_store(ev):
        matches = tuple(replace(m, source_bit=4, name="my notes") if m.source_bit == 1 else m for m in ev.matches)
        sources = tuple((s & ~1) | 4 if s & 1 else s for s in ev.token_sources)
        return replace(ev, matches=matches, token_sources=sources)

    view = answer_view.AnswerView(engine.tokenizer)
    for ev in map(second_store, events):
        view.add(ev)
    mine = [s for s in view.spans if s.source == 4]
    assert mine, "no token of the second store in the scripted answer"
    assert "drafted by my notes" in mine[0].title() and "store 2" not in view.html()
    assert 'class="tok d s2 ' in mine[0].html()
    ev = next(e for e in events if e.trie is not None and (e.trie.sources == 1).any())
    ev = replace(ev, matches=tuple(replace(m, name="code") if m.source_bit == 1 else m for m in ev.matches))
    hover = " ".join(t for tr in trie_view.trie_figure(ev, engine.tokenizer).data for t in (tr.hovertext or ()))
    assert "source: code" in hover and "source: datastore" not in hover
    legend = answer_view.legend_html(("code", "my notes"))
    # code keeps its page-wide colour (s2, as beside chat); the visitor's store the next free one
    assert 'class="tok d s2 r1 p0" title="draft tokens retrieved from the datastore code">code<' in legend
    assert 'class="tok d s3 r1 p0" title="draft tokens retrieved from the datastore my notes">my notes<' in legend
    assert h_legend_is_per_choice(rt)


def h_legend_is_per_choice(rt: Runtime) -> bool:
    h = handlers(rt)
    return (
        ">code<" in h.legend(["code", "chat"])
        and ">chat<" in h.legend(["code", "chat"])
        and ">code<" not in h.legend([])
    )


def test_the_answer_keeps_streaming_while_a_corpus_builds(tmp_path):
    """Chat goes on while a build runs: the build is a thread of its own, not in the model's
    queue; a generation started meanwhile completes."""
    rt = tiny(tmp_path, max_upload_mb=50)
    h = handlers(rt)
    session = Session()
    big = tmp_path / "big.txt"
    big.write_text("".join(f"row {i}: {i * 13 % 997} apples\n" for i in range(150_000)))
    job = session.corpora.start_upload(rt, session.key, [str(big)], ["big.txt"], "")
    out = list(h.respond("abc", session, [], **knob_values(max_new_tokens=6)))[-1]
    assert 'class="status err' not in banner(h, out) and session.chat.view.totals.new_tokens > 0
    h.pages.release(session)
    assert job.done.wait(120) and job.error == "the build was cancelled"
    assert not rt.uploads.session_dir(session.key).exists()
