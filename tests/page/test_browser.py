"""End to end in a real browser: the app on the embedded default model (with a small chat
datastore built for the test), driven by headless Debian Chromium through Python Playwright.

Skips only when Chromium or Playwright is missing (.ci/run installs Chromium). Screenshots go to
artifacts/ (ignored by git).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

from rest_core.serve.client import free_port
from rest_core.ui.compare_view import SAME_ROW
from rest_core.ui.measures import COMPARE_RATE

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "artifacts"
CHROMIUM = next(
    (
        p
        for p in (
            os.environ.get("CHROMIUM"),
            "/usr/bin/chromium",
            shutil.which("chromium"),
            shutil.which("chromium-browser"),
        )
        if p and os.path.exists(p)
    ),
    None,
)
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-quic",
]

pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="chromium not found (apt-get install chromium; .ci/run does it)"
)


def wait_http(url: str, proc: subprocess.Popen, timeout: float) -> None:
    end = time.time() + timeout
    while time.time() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"the app exited with code {proc.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    raise TimeoutError(f"the app did not answer at {url} within {timeout} s")


@pytest.fixture(scope="module")
def app_url():
    tmp = Path(tempfile.mkdtemp(prefix="rest-e2e-"))
    stores = tmp / "datastores"
    # A small chat store (a few hundred conversations), so the test never builds the 69M-token default.
    subprocess.run(
        [
            sys.executable,
            "-m",
            "rest_core",
            "datastore",
            "build",
            "--source",
            "chat",
            "--out",
            str(stores / "chat"),
            "--limit-docs",
            "300",
            "--quiet",
        ],
        cwd=ROOT,
        check=True,
        timeout=300,
    )
    port = free_port()
    log = open(tmp / "app.log", "w")
    (tmp / "tmp").mkdir()  # the app's temp dir: where its uploads root goes (test_your_corpus looks there)
    proc = subprocess.Popen(
        [
            sys.executable,
            "app.py",
            "--no-build",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--datastores",
            str(stores),
            "--device",
            "cpu",
        ],
        cwd=ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, "TMPDIR": str(tmp / "tmp")},
    )
    try:
        wait_http(f"http://127.0.0.1:{port}/", proc, timeout=180)
        APP_TMP[f"http://127.0.0.1:{port}/"] = tmp / "tmp"
        yield f"http://127.0.0.1:{port}/"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
        text = (tmp / "app.log").read_text(errors="replace")
        assert "Traceback" not in text, text[-3000:]
        shutil.rmtree(tmp, ignore_errors=True)


APP_TMP: dict[str, Path] = {}  # app url -> its temp dir


@pytest.fixture(scope="module")
def browser():
    """One headless Chromium for the module's tests; each page in a context of its own (a user)."""
    from playwright import sync_api  # requirements-dev.txt

    with sync_api.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


def open_page(browser, url: str):
    pg = browser.new_context(viewport={"width": 1366, "height": 800}).new_page()
    pg.goto(url)
    pg.wait_for_selector("#prompt textarea", timeout=60_000)
    return pg


@pytest.fixture(scope="module")
def page(app_url, browser):
    pg = open_page(browser, app_url)
    yield pg
    pg.context.close()


def set_slider(page, elem_id: str, value: int) -> None:
    box = page.locator(f"#{elem_id} input[type=number]")
    box.fill(str(value))
    box.press("Enter")
    box.blur()


def wait_idle(page, timeout_s: float) -> None:
    """Until the answer has finished streaming (the live badge is gone)."""
    page.wait_for_selector("#stats .stat", timeout=timeout_s * 1000)
    page.wait_for_selector("#stats .live", state="detached", timeout=timeout_s * 1000)


def open_view(page, view: str) -> None:
    """Click a view's tab (Chat, Step through, How REST works) and wait until it shows."""
    page.click(f"#views [role=tab][data-tab-id='{view}']")
    page.wait_for_function(
        f"document.querySelector(\"#views [role=tab][data-tab-id='{view}']\").getAttribute('aria-selected') === 'true'",
        timeout=10_000,
    )
    time.sleep(0.3)


def assert_fits(page) -> None:
    """Nothing on the page is wider than the window (no sideways scrolling)."""
    wide = page.evaluate(
        "[document.documentElement.scrollWidth, window.innerWidth,"
        " [...document.querySelectorAll('body *')].filter(e => e.offsetParent !== null"
        " && e.getBoundingClientRect().right > window.innerWidth + 1 && !e.closest('.js-plotly-plot, [role=tablist]'))"
        ".slice(0, 5).map(e => e.tagName + '#' + e.id + '.' + e.className)]"
    )
    assert wide[0] <= wide[1] + 1, wide


def shot(page, name: str, full: bool = True) -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=full)
    return path


def assert_first_view_at_top(page) -> None:
    """The page as loaded: not scrolled (nothing takes focus and pulls the window down), the
    header and the views' tabs inside the window."""
    time.sleep(1.5)  # past Gradio's first render, where a focused box would scroll the window
    assert page.evaluate("window.scrollY") == 0
    height = page.viewport_size["height"]
    for sel in ("#header h1", "#views [role=tablist]"):
        box = page.locator(sel).first.bounding_box()
        assert box is not None and 0 <= box["y"] and box["y"] + box["height"] <= height, (sel, box, height)


def test_first_view_starts_at_the_top(app_url, browser):
    """Laptop and phone: the first view is the page's beginning, the header and the tabs in sight."""
    for size, phone in (({"width": 1366, "height": 900}, False), ({"width": 390, "height": 844}, True)):
        pg = browser.new_context(viewport=size, is_mobile=phone, has_touch=phone).new_page()
        try:
            pg.goto(app_url)
            pg.wait_for_selector("#prompt textarea", timeout=60_000)
            assert_first_view_at_top(pg)
            # Issue 29: the method's three steps and the machine it runs on are on the first screen,
            # and the settings column shows all of itself (no inner scroll box that cuts it).
            steps = pg.locator("#header ol.steps").bounding_box()
            assert steps is not None and steps["y"] + steps["height"] <= size["height"], steps
            assert "Running " in pg.inner_text("#header .machine")
            # Third report: the way in is the first screen's. A laptop shows the diagram above the
            # tabs; a phone, where it is too small to read, the three steps, with room to spare.
            tabs = pg.locator("#views [role=tablist]").bounding_box()
            diagram = pg.locator("#header .how-diagram svg")
            if phone:
                assert not diagram.is_visible() and tabs["y"] + tabs["height"] <= size["height"] - 120, tabs
            else:
                box = diagram.bounding_box()
                assert box is not None and box["height"] > 150 and box["y"] + box["height"] <= tabs["y"], box
                assert pg.evaluate("(k => k.scrollHeight <= k.clientHeight + 1)(document.querySelector('#knobs'))")
            assert pg.locator("#view-chat #legend").count() == 1  # the colour key is the Chat view's
            shot(pg, f"e2e_first_view_{size['width']}", full=False)
        finally:
            pg.context.close()


def assert_in_view(page, selector: str, within_s: float = 5.0) -> None:
    """`selector` inside the window, at once or after the page's own scroll (a frame or two)."""
    height = page.viewport_size["height"]
    end = time.time() + within_s
    while True:
        box = page.locator(selector).first.bounding_box()
        inside = box is not None and 0 <= box["y"] and box["y"] + box["height"] <= height
        if inside or time.time() > end:
            break
        time.sleep(0.1)
    assert inside, (selector, box, height)


def test_a_controls_status_shows_where_it_was_clicked(app_url, browser):
    """Send with an empty box and Compare with nothing to compare: each says why, inside the
    window (under its own control, not in a banner above the view), on a laptop and a phone."""
    for size, phone in (({"width": 1366, "height": 900}, False), ({"width": 390, "height": 844}, True)):
        pg = browser.new_context(viewport=size, is_mobile=phone, has_touch=phone).new_page()
        try:
            pg.goto(app_url)
            pg.wait_for_selector("#prompt textarea", timeout=60_000)
            pg.click("#send")
            pg.wait_for_selector("#chat-status .status", timeout=30_000)
            assert "Type a message first" in pg.inner_text("#chat-status")
            assert_in_view(pg, "#chat-status .status")
            shot(pg, f"e2e_empty_send_{size['width']}", full=False)
            pg.click("#compare")
            pg.wait_for_selector("#compare-status .status", timeout=30_000)
            assert_in_view(pg, "#compare-status .status")
            assert not pg.locator("#status-banner .status").count()  # nothing left above the view
        finally:
            pg.context.close()


def test_stream_highlight_trie_compare_and_stop(page):
    # The default store is chosen on load; a short answer keeps the test quick on a CPU.
    page.wait_for_function(
        "document.querySelector('#store') && document.querySelector('#store').innerText.includes('chat')",
        timeout=30_000,
    )
    set_slider(page, "max-new-tokens", 48)
    # A fixed budget: the CPU default (auto) may draft nothing while the machine is loaded, and this
    # test is about how accepted drafts are shown.
    page.click("#budget label:has-text('fixed')")
    set_slider(page, "c", 4)
    page.fill("#prompt textarea", "Repeat this sentence three times: the quick brown fox jumps over the lazy dog.")
    page.click("#send")
    page.wait_for_function(
        "document.querySelector('#prompt textarea').value === ''", timeout=60_000
    )  # sent: box cleared

    # Streams: tokens appear while the live badge is still there, then the answer completes.
    page.wait_for_selector("#chat .msg.bot .tok", timeout=180_000)
    wait_idle(page, 180)
    n_tokens = page.locator("#chat .msg.bot .tok").count()
    n_drafted = page.locator("#chat .msg.bot .tok.d").count()
    assert n_tokens > 5
    assert n_drafted > 0, "no accepted draft token highlighted in a repetitive answer"
    # a step that accepted no draft writes its token alone: no underline, not even the odd steps'
    # solid one (screens10: a thick grey bar under every other such token). The answer's own steps
    # vary with the auto budget's timings, so the page's stylesheet is asked about each kind.
    styles = page.evaluate(
        """() => ['tok m lone p0', 'tok m lone p1', 'tok m p0', 'tok m p1'].map(cls => {
            const s = document.createElement('span'); s.className = cls; s.textContent = 'x';
            document.querySelector('#chat .msg.bot .answer').appendChild(s);
            const style = getComputedStyle(s).borderBottomStyle; s.remove(); return style; })"""
    )
    assert styles == ["none", "none", "dotted", "solid"], styles
    title = page.locator("#chat .msg.bot .tok.d").first.get_attribute("title")
    assert re.search(r"step \d+ · drafted by (chat|conversation)", title) and "accepted this step" in title

    # The draft tree figure of the last step and the inspector.
    page.wait_for_selector("#trie .js-plotly-plot", timeout=30_000)
    assert "Step" in page.inner_text("#trie")
    assert "Step" in page.inner_text("#inspector")

    # Clicking a drafted token shows its step in the inspector (assets/app.js): the replay slider
    # shows once the answer is complete, and the click must land.
    page.wait_for_selector("#step-slider input[type=number]", state="visible", timeout=30_000)
    n_steps = int(re.search(r"Step \d+ of (\d+)", page.inner_text("#inspector")).group(1))
    steps = page.eval_on_selector_all("#chat .msg.bot .tok.d", "els => els.map(e => Number(e.dataset.step) + 1)")
    pick = next(i for i, s in enumerate(steps) if s < n_steps)  # not the step already shown
    step = steps[pick]
    page.locator("#chat .msg.bot .tok.d").nth(pick).click()
    page.wait_for_function(f"document.querySelector('#inspector').innerText.includes('Step {step} of')", timeout=30_000)
    assert page.input_value("#step-slider input[type=number]") == str(step)
    shot(page, "e2e_laptop_answer")

    # Compare with plain decoding: greedy, identical outputs, and a speedup that is the ratio of
    # the two speeds shown beside it (each rounded to 0.1 token/s).
    page.click("#compare")
    page.wait_for_selector("#speedup-value", timeout=300_000)
    speedup = float(page.inner_text("#speedup-value").rstrip("×"))
    cells = page.eval_on_selector_all(
        "#compare-out tbody tr", "rows => rows.map(r => [...r.children].map(c => c.innerText.trim()))"
    )
    table = {row[0]: row[1:] for row in cells}  # metric -> [REST, plain]
    rest_tps, ar_tps = (float(x) for x in table[COMPARE_RATE])
    low, high = (rest_tps - 0.05) / (ar_tps + 0.05), (rest_tps + 0.05) / (ar_tps - 0.05)
    assert low - 0.005 <= speedup <= high + 0.005, (speedup, rest_tps, ar_tps)
    # The identity claim names the tokens it compared (all of both, or what both wrote before the time limit).
    same = re.fullmatch(r"yes, (\d+) tokens compared", table[SAME_ROW][0])
    assert same, table[SAME_ROW]
    n = same.group(1)
    claim = page.inner_text("#compare-out")
    assert re.search(rf"identical (output ✓ \(all {n} tokens\)|over the first {n} tokens ✓)", claim), claim
    page.wait_for_selector("#speed .js-plotly-plot", timeout=30_000)  # the tokens-over-time figure
    # The timeline: plain decoding, prompt lookup and REST, one block per forward, on one clock.
    page.wait_for_selector("#timeline .js-plotly-plot", timeout=30_000)
    lanes = page.evaluate(
        "[...new Set(document.querySelector('#timeline .js-plotly-plot').data.flatMap(t => t.y))].sort()"
    )
    assert lanes == ["REST", "plain", "prompt lookup k=3"], lanes
    # beside the speedup, why it is what it is: M over this comparison's step ratio (or the load's word)
    assert "Prompt lookup" in page.inner_text("#compare-out") and "REST step" in page.inner_text("#speedup-why")
    shot(page, "e2e_laptop_compare")

    # Stop during a long answer: it halts at once and keeps what was written.
    set_slider(page, "max-new-tokens", 1024)
    page.fill(
        "#prompt textarea", "Write a long, detailed essay about the history of computing, from the abacus to today."
    )
    page.click("#send")
    page.wait_for_function(
        "document.querySelectorAll('#chat .msg.bot').length === 2"
        " && document.querySelectorAll('#chat .msg.bot:last-child .tok').length >= 3",
        timeout=180_000,
    )
    page.click("#stop")
    page.wait_for_selector("#chat .msg.bot:last-child .note", timeout=10_000)
    note = page.inner_text("#chat .msg.bot:last-child .note")
    assert re.search(r"stopped after [1-9]\d* tokens", note), note
    count = page.locator("#chat .msg.bot:last-child .tok").count()
    time.sleep(2)
    assert page.locator("#chat .msg.bot:last-child .tok").count() == count  # nothing streams after Stop
    assert page.locator("#stats .live").count() == 0

    page.set_viewport_size({"width": 390, "height": 844})
    time.sleep(0.5)
    # On a phone the chat and the message box come first, then the settings (before the stats,
    # the trie and the comparison); Send, Stop and Clear get a line of their own; nothing is wider
    # than the screen.
    y = {k: page.locator(f"#{k}").bounding_box()["y"] for k in ("chat", "prompt", "knobs", "stats", "trie")}
    assert y["chat"] < y["prompt"] < y["knobs"] < y["stats"] < y["trie"], y
    assert page.locator("#clear").bounding_box()["width"] >= 60
    assert_fits(page)
    shot(page, "e2e_phone", full=False)
    page.set_viewport_size({"width": 1366, "height": 800})


def test_step_through_three_steps(page):
    """Teaching mode: three REST steps of a real answer, each phase's panel consistent with the
    step (matched suffix in the caption, mask rows x (context + rows), agree marks = accepted)."""
    # How REST works: a view of its own, open, with the glossary in plain sight.
    open_view(page, "how-rest")
    page.wait_for_selector("#how-rest svg", timeout=10_000)
    assert not page.is_visible("#chat")
    assert "one forward per token" in page.inner_text("#one-forward")
    # its diagram is drawn large here: the header's small copy gives way to it while it is open
    page.wait_for_function("document.body.dataset.view === 'how-rest'", timeout=10_000)
    assert not page.is_visible("#header figure.how-figure")
    glossary = page.inner_text("#glossary")
    for term in GLOSSARY_TERMS:
        assert term in glossary, term
    # A guided example (above the views) opens the step-through with its prompt and c set.
    page.click("#guided-pick label:has-text('step by step')")
    page.wait_for_function(
        "(() => { const t = document.querySelector('#teach-prompt textarea'); return t && t.value.includes('argparse'); })()",
        timeout=30_000,
    )
    assert page.get_attribute("#view-step-through-button", "aria-selected") == "true"
    assert not page.is_visible("#how-rest") and page.is_visible("#teach-next")
    assert page.is_visible("#header figure.how-figure")  # back in the header once another view is open
    assert page.evaluate("location.hash") == "#step-through"  # the open view is in the address
    assert page.input_value("#teach-c input[type=number]") == "16"
    assert "In Step through" in page.inner_text("#guided-note")
    open_view(page, "how-rest")  # the note speaks of the step-through: it gives way elsewhere
    page.wait_for_function("document.body.dataset.view === 'how-rest'", timeout=10_000)
    assert not page.is_visible("#guided-note .example-note")
    open_view(page, "step-through")
    page.wait_for_function("document.body.dataset.view === 'step-through'", timeout=10_000)
    assert page.is_visible("#guided-note .example-note")
    page.fill(
        "#teach-prompt textarea", "Repeat this sentence three times: the quick brown fox jumps over the lazy dog."
    )
    opened = 0
    for k in range(1, 4):
        page.click("#teach-next")
        page.wait_for_function(
            f"document.querySelector('#teach-head') && document.querySelector('#teach-head').innerText.includes('Step {k} ·')",
            timeout=180_000,
        )
        page.wait_for_selector("#teach-mask .js-plotly-plot", timeout=30_000)
        retrieve = page.inner_text("#teach-retrieve")
        underlined = page.eval_on_selector_all(
            "#teach-retrieve .tt-tok.m-ds", "els => els.map(e => e.innerText).join('')"
        )
        if underlined:  # the datastore matched: the caption quotes the underlined end of the conversation
            assert underlined in retrieve, (underlined, retrieve)
        rows = page.locator("#teach-verify tbody tr").count()  # root + drafted nodes
        # The heatmap's rows and columns (the figure Plotly drew): rows x (cached context shown + rows).
        shape_js = "(() => { const g = document.querySelector('#teach-mask .js-plotly-plot'); const d = g && g.data && g.data[0]; return d && d.y ? [d.y.length, d.x.length] : null; })()"
        page.wait_for_function(f"(() => {{ const s = {shape_js}; return s && s[0] === {rows}; }})()", timeout=30_000)
        shape = page.evaluate(shape_js)
        # at most 4 cached context columns, and a "…" column for the cached positions before them
        assert shape[0] == rows and 0 <= shape[1] - rows <= 5, (shape, rows)
        accepted = int(re.search(r"accepts (\d+) draft token", page.inner_text("#teach-accept")).group(1))
        assert page.locator("#teach-verify tr.tt-agree").count() == accepted
        if underlined and page.locator("#teach-retrieve details.prov").count():
            # Where it came from: the document and its text, the matched suffix marked in it.
            page.click("#teach-retrieve details.prov summary")
            page.wait_for_selector("#teach-retrieve .prov-occ .prov-doc", state="visible", timeout=10_000)
            doc = page.inner_text("#teach-retrieve .prov-occ .prov-doc >> nth=0")
            match = page.inner_text("#teach-retrieve .prov-occ .prov-match.m-ds >> nth=0")
            assert doc.strip()
            assert match.replace(" ", "").replace("\n", "") == underlined.replace("·", "").replace("↵", "").replace(
                " ", ""
            ), (match, underlined)
            opened += 1
        shot(page, f"e2e_step_{k}")
    assert opened, "no step had a datastore match whose provenance could be opened"
    page.click("#teach-back")
    page.wait_for_function("document.querySelector('#teach-head').innerText.includes('Step 2 ·')", timeout=30_000)
    page.click("#teach-end")
    page.wait_for_function("document.querySelector('#teach-status').innerText.includes('complete')", timeout=300_000)
    # A click on a token of the answer opens its step (the step slider moves to it)
    page.click("#teach-answer .tok[data-step='0'] >> nth=0")
    page.wait_for_function("document.querySelector('#teach-head').innerText.includes('Step 1 ·')", timeout=30_000)
    assert page.input_value("#teach-step input[type=number]") == "1"
    page.click("#why-c button, #why-c .label-wrap")
    page.click("#why-c-btn")
    page.wait_for_selector("#why-c-fig .js-plotly-plot", timeout=120_000)
    caption = page.inner_text("#why-c-cap")
    # the takeaway shows first, the rest in folds: open them to read the teaching sentences
    assert "Predicted:" in caption and "Measured:" in caption and "On a GPU" not in caption
    page.eval_on_selector_all("#why-c-cap details", "els => els.forEach(e => { e.open = true; })")
    caption = page.inner_text("#why-c-cap")
    assert "ms on this device" in caption and "The step-through's answer wrote M =" in caption
    # The teacher's question, answered from the same tries and cost curve.
    assert "Why are the datastore's drafts mostly not verified here?" in caption and "On a GPU" in caption
    # a Compare of this prompt (the chat's, when the test above ran) or where to press for one
    assert "plain decoding on this prompt" in caption or "press “Compare it on this prompt”" in caption
    page.click("#why-c-check")  # the prediction checked on the step-through's own prompt: a new measurement
    page.wait_for_function(
        "(before) => { const t = document.querySelector('#why-c-cap').innerText; "
        "return t !== before && !t.includes('processing') && t.includes('plain decoding on this prompt'); }",
        arg=caption,
        timeout=120_000,
    )
    shot(page, "e2e_why_c")
    page.set_viewport_size({"width": 390, "height": 844})  # a phone: the stepped view fits too
    time.sleep(0.5)
    assert_fits(page)
    shot(page, "e2e_phone_step", full=False)
    page.set_viewport_size({"width": 1366, "height": 800})
    open_view(page, "chat")  # back where the other tests expect the page


GLOSSARY_TERMS = ("suffix array", "KV cache", "rows", "position id", "lazy logits", "prefill", "prompt lookup", "top-p")


def test_deep_links_open_their_view(app_url, browser):
    """#why-c opens Step through (and unfolds it), #glossary How REST works, #compare-box the
    chat; the view a user opens goes into the address."""
    pg = browser.new_context(viewport={"width": 1366, "height": 800}).new_page()
    try:
        pg.goto(app_url + "#why-c")
        pg.wait_for_selector("#why-c-btn", state="visible", timeout=60_000)
        assert pg.get_attribute("#view-step-through-button", "aria-selected") == "true"
        assert not pg.is_visible("#prompt")
        pg.goto(app_url + "#glossary")
        pg.wait_for_selector("#glossary", state="visible", timeout=60_000)
        assert pg.get_attribute("#view-how-rest-button", "aria-selected") == "true"
        pg.evaluate("location.hash = 'compare-box'")  # a link followed within the page
        pg.wait_for_selector("#compare", state="visible", timeout=30_000)
        assert pg.get_attribute("#view-chat-button", "aria-selected") == "true"
        # A tab clicked while a link still waits for its view wins: the link does not click back.
        pg.evaluate("location.hash = 'glossary'")
        pg.click("#view-chat-button")
        pg.wait_for_timeout(1500)
        assert pg.get_attribute("#view-chat-button", "aria-selected") == "true"
        assert pg.evaluate("location.hash") == "#chat"
        pg.click("#view-how-rest-button")
        pg.wait_for_function("location.hash === '#how-rest'", timeout=30_000)  # a tab's click, on a busy runner
        pg.reload()
        pg.wait_for_selector("#how-rest svg", state="visible", timeout=60_000)  # the link survives a reload
    finally:
        pg.context.close()


def test_phone_shows_the_chat_first_and_nothing_overflows(app_url, browser):
    """A phone (390 px): the guided examples and the settings start folded, the message box
    comes before the settings, each view fits the width."""
    pg = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True).new_page()
    try:
        pg.goto(app_url)
        pg.wait_for_selector("#prompt textarea", timeout=60_000)
        pg.wait_for_function(
            "!document.querySelector('#settings-acc .label-wrap').classList.contains('open')"
            " && !document.querySelector('#guided .label-wrap').classList.contains('open')",
            timeout=30_000,
        )
        assert pg.locator("#prompt").bounding_box()["y"] < pg.locator("#knobs").bounding_box()["y"]
        top = pg.evaluate("document.querySelector('#prompt').getBoundingClientRect().top + window.scrollY")
        assert top < 1.5 * 844, top  # the message box early in the second screen at the latest, past the header
        pg.wait_for_selector("#trie .js-plotly-plot", timeout=30_000)
        assert not pg.locator("#trie .modebar").is_visible()  # Plotly's toolbar would cover the figure's label
        for view in ("chat", "step-through", "how-rest"):
            open_view(pg, view)
            assert_fits(pg)
            shot(pg, f"e2e_phone_{view}")
        assert "suffix array" in pg.inner_text("#glossary")  # explanations in text, not hover-only
    finally:
        pg.context.close()


def store_choices(page) -> list[str]:
    """The datastore multi-select's choices as this page sees them (opens and closes its list)."""
    page.click("#store input")
    page.wait_for_selector("#store [role=option]", timeout=10_000)
    names = page.eval_on_selector_all("#store [role=option]", "els => els.map(e => e.getAttribute('aria-label'))")
    page.keyboard.press("Escape")
    return [n for n in names if n]


def test_your_corpus_private_store_highlighted_and_removed(app_url, browser, tmp_path):
    """Upload a folder of Markdown files and a zip, build, generate with the new store (a prompt
    that echoes the uploaded text), and see its drafts highlighted under its name; a second
    browser context never sees it; Clear, then closing the page, remove its folder."""
    sentence = "The lighthouse keeper of Quillport counts seventeen silver gulls every morning before sunrise."
    docs = tmp_path / "notes"
    docs.mkdir()
    (docs / "keeper.md").write_text(f"# Quillport\n\n{sentence}\n\n{sentence}\n")
    (docs / "harbour.md").write_text("# Harbour\n\nBoats leave at noon and return at dusk.\n")
    import zipfile

    with zipfile.ZipFile(docs / "more.zip", "w") as zf:
        zf.writestr("more/gulls.md", f"## Gulls\n\n{sentence} They never miss a day.\n")
        zf.writestr("../escape.md", "never written anywhere")
    uploads = APP_TMP[app_url]

    def store_folders() -> list[Path]:
        return [p for p in uploads.glob("rest-uploads-*/*/store-*") if p.parent.name != "public"]

    pg = open_page(browser, app_url)
    pg.click("#corpus button, #corpus .label-wrap")
    pg.set_input_files(
        "#corpus-files input[type=file]", [str(docs / n) for n in ("keeper.md", "harbour.md", "more.zip")]
    )
    pg.wait_for_function("document.querySelector('#corpus-files').innerText.includes('more')", timeout=30_000)
    pg.fill("#corpus-name textarea, #corpus-name input", "quillport")
    pg.click("#corpus-build")
    pg.wait_for_function("document.querySelector('#corpus-status').innerText.includes('Built')", timeout=300_000)
    summary = pg.inner_text("#corpus-status")
    assert "quillport" in summary and "from 3 file(s)" in summary and "skipped: 1 unsafe path in zip" in summary, (
        summary
    )
    assert len(store_folders()) == 1
    assert not (uploads.parent / "escape.md").exists() and not list(uploads.rglob("escape.md"))
    pg.wait_for_function("document.querySelector('#store').innerText.includes('quillport')", timeout=30_000)  # selected
    assert "quillport" in store_choices(pg)
    assert ">quillport<" in pg.inner_html("#legend")  # its own entry in the colour key
    shot(pg, "e2e_corpus_built")

    # A second user (another browser context) never sees it.
    other = open_page(browser, app_url)
    other.wait_for_function("document.querySelector('#store').innerText.includes('chat')", timeout=30_000)
    assert "quillport" not in store_choices(other) and "quillport" not in other.inner_text("#store")
    other.context.close()

    # Generate with it: an answer that echoes the uploaded sentence is drafted from the store.
    set_slider(pg, "max-new-tokens", 40)
    pg.fill("#prompt textarea", f"Repeat this sentence exactly, twice: {sentence}")
    pg.click("#send")
    pg.wait_for_selector("#chat .msg.bot .tok", timeout=180_000)
    wait_idle(pg, 240)
    titles = pg.eval_on_selector_all("#chat .msg.bot .tok.d", "els => els.map(e => e.getAttribute('title'))")
    mine = [t for t in titles if "drafted by" in t and "quillport" in t]
    assert mine, titles[:10]
    shot(pg, "e2e_corpus_answer")

    # Clear deletes it (folder and choice); a second build, then closing the page, deletes that one.
    pg.click("#clear")
    pg.wait_for_function("!document.querySelector('#store').innerText.includes('quillport')", timeout=30_000)
    deadline = time.time() + 30
    while store_folders() and time.time() < deadline:
        time.sleep(0.5)
    assert store_folders() == []
    pg.fill("#corpus-text textarea", f"{sentence}\n")
    pg.click("#corpus-build")
    pg.wait_for_function("document.querySelector('#corpus-status').innerText.includes('Built')", timeout=300_000)
    assert len(store_folders()) == 1
    pg.context.close()  # the page closes: Gradio's unload frees the session
    deadline = time.time() + 90
    while store_folders() and time.time() < deadline:
        time.sleep(1)
    assert store_folders() == [], (store_folders(), (uploads.parent / "app.log").read_text(errors="replace")[-3000:])
