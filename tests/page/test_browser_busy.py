"""In a real browser: Next step clicked three times while another user's answer holds the model.

The step-through says at once that it waits for the model, and once that answer ends (here:
its user presses Stop) each click takes its step: the page reaches "Step 3", no click lost
without a word. The app, the browser and the helpers are tests/page/test_browser.py's.
"""

from __future__ import annotations

from tests.page.test_browser import app_url, browser, open_page, set_slider, shot  # noqa: F401 - fixtures

STATUS_JS = "(() => { const s = document.querySelector('#teach-status'); return s ? s.innerText : ''; })()"
HEAD_JS = "(() => { const h = document.querySelector('#teach-head'); return h ? h.innerText : ''; })()"


def test_step_clicks_while_another_answer_runs(app_url, browser):  # noqa: F811 - the fixtures
    other, mine = open_page(browser, app_url), open_page(browser, app_url)
    try:
        # Another user's long answer: it holds the model while it streams.
        set_slider(other, "max-new-tokens", 1024)
        other.fill("#prompt textarea", "Write a long, detailed essay about the history of computing.")
        other.click("#send")
        other.wait_for_function(
            "document.querySelectorAll('#chat .msg.bot .tok').length >= 3", timeout=180_000
        )  # it streams: the model is busy

        # This user opens the step-through (a guided example does) and clicks Next step three times.
        mine.click("#guided-pick label:has-text('step by step')")
        mine.wait_for_function(
            "(() => { const t = document.querySelector('#teach-prompt textarea'); return t && t.value; })()",
            timeout=30_000,
        )
        mine.fill("#teach-prompt textarea", "Repeat this sentence: the quick brown fox jumps over the lazy dog.")
        for _ in range(3):
            mine.click("#teach-next")
        mine.wait_for_function(f"{STATUS_JS}.includes('Waiting for the model')", timeout=10_000)
        status = mine.evaluate(STATUS_JS)
        assert "another answer is running" in status, status
        mine.wait_for_function(f"{STATUS_JS}.includes('Taking step 3')", timeout=10_000)
        assert "2 earlier clicks of yours" in mine.evaluate(STATUS_JS)
        assert "Step" not in mine.evaluate(HEAD_JS)  # nothing taken yet: the model is still busy
        shot(mine, "e2e_step_waiting")

        other.click("#stop")  # the other answer ends: the three steps run, one per click
        mine.wait_for_function(f"{HEAD_JS}.includes('Step 3 ·')", timeout=180_000)
        assert "Waiting" not in mine.evaluate(STATUS_JS)
        assert mine.locator("#teach-status .status.err").count() == 0
        shot(mine, "e2e_step_after_waiting")
    except Exception:
        shot(mine, "e2e_step_busy_failed")  # what the page showed when it went wrong
        raise
    finally:
        other.context.close()
        mine.context.close()
