"""Compare: REST, plain decoding and transformers' prompt lookup on one visitor's prompt, back to
back with the same settings, nothing rendered in between; then the table, the speed figure and
the timeline. No Gradio here: the action yields `CompareUpdate`s that app.py maps onto its
components."""

from __future__ import annotations

from collections.abc import Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from rest_core.bench.prompt_lookup import LookupRun
from rest_core.config import ConfigError, GenerationConfig
from rest_core.cpus import available_cpus
from rest_core.decode.events import Totals
from rest_core.ui import words
from rest_core.ui.chat import Chat, failure, fit_context, message_too_long, request_config, time_limit_note
from rest_core.ui.compare_view import (
    Comparison,
    Machine,
    comparison_html,
    event_blocks,
    lookup_blocks,
    rerun_note,
    run_source_names,
    speed_figure,
    timeline_figure,
)
from rest_core.ui.compare_view import (
    compare as compare_events,
)
from rest_core.ui.fairness import LONG
from rest_core.ui.measures import ForwardTime, Measured, lookup_rate, plain_forward, ratio, shown
from rest_core.ui.model_calls import ModelJob
from rest_core.ui.runtime import Runtime
from rest_core.ui.style import clean_text, esc, plural, quoted, status_html


@dataclass(frozen=True, kw_only=True)
class CompareUpdate:
    """New contents for Compare's part of the page; None leaves a part as it is."""

    status: str | None = None
    comparison: str | None = None
    speed: Any = None  # plotly Figure
    timeline: Any = None  # plotly Figure: one lane per method, one block per forward
    plain_forward: ForwardTime | None = None  # plain decoding's one-token forward (for Why this c?)
    measured: Measured | None = None  # what Compare measured on its prompt (for Why this c?)


def compare(
    runtime: Runtime,
    chat: Chat,
    message: str,
    store: str | Sequence[str] | None,
    knobs: dict[str, Any],
    private: Mapping[str, Path],
    owner: str,
) -> Iterator[CompareUpdate]:
    """Compare on the message in the box, else on the chat's last prompt (`private`, `owner`: the
    visitor's own stores and key, as for Send); yields status lines, then the comparison."""
    message = clean_text(message)
    try:
        config, store = request_config(store, knobs, runtime.preset)
    except ConfigError as exc:
        yield CompareUpdate(status=status_html(f"Settings: {esc(str(exc))}", "err"))
        return
    refused = _refused(runtime, chat, message)
    if refused:
        yield CompareUpdate(status=refused)
        return
    try:
        if not runtime.ready:
            yield CompareUpdate(status=status_html("Loading the model (first request only)…"))
        stores = runtime.resolve(store, private, owner)
        engine = runtime.engine(stores)
        prompt = _prompt(chat, engine, message)
        if prompt is None:
            yield CompareUpdate(status=status_html("Send a message first, or type one to compare on.", "warn"))
            return
        prompt_ids, what = prompt
        config, note = fit_context(len(prompt_ids), config, engine.max_positions)
        # The three runs together keep to the request's time limit: a third each.
        limit = runtime.settings.max_seconds / 3
        runtime.claim_cache(stores, owner)
        job = ModelJob(stores=stores, prompt_ids=tuple(prompt_ids), config=config, max_seconds=limit, lane=LONG)
        results, lookup, cut = yield from _compared_runs(runtime, job, what)
        live = chat.view.totals if chat.view is not None and prompt_ids is chat.prompt_ids else None
        table, speed, timeline, cmp = _comparison_views(runtime, results, lookup, config, cut, live)
        done = _compared_note(what, config, note, cut, limit, runtime.settings.max_seconds)
        plain = plain_forward(results["ar"])
        del results  # only the figures, the table and plain decoding's forward stay
        yield CompareUpdate(
            status=status_html(esc(done)),
            comparison=table,
            speed=speed,
            timeline=timeline,
            plain_forward=plain,
            measured=measured(cmp, prompt_ids, what),
        )
    except Exception as exc:  # noqa: BLE001 - a message in the page, the traceback in the terminal
        yield CompareUpdate(status=status_html(esc(failure(exc, "compare")), "err"))


def measured(cmp: Comparison, prompt_ids: Sequence[int], what: str = "") -> Measured | None:
    """What Why this c? sets beside its prediction for an answer to `prompt_ids` (`what`: the status
    line's name for the prompt, its quoted words kept); None when the two runs' figures rule each
    other out (the machine's load changed: `load_changed`)."""
    if cmp.load_note():
        return None
    words = what[what.find("“") :] if "“" in what else ""
    return Measured(tuple(prompt_ids), cmp.speedup, cmp.rest.mean_generated_length, cmp.splits[0], words, cmp.splits[1])


def _refused(runtime: Runtime, chat: Chat, message: str) -> str:
    """Why Compare cannot start now (an answer is streaming, the message is too long), or ""."""
    if chat.active:
        return status_html("Wait for the answer to finish (or Stop it) before comparing.", "warn")
    refused = message_too_long(message, runtime.settings.max_message_chars)
    return status_html(esc(refused), "warn") if refused else ""


def _prompt(chat: Chat, engine: Any, message: str) -> tuple[list[int], str] | None:
    """The prompt to compare on and how the status line names it, the message quoted (the status
    labels the table under it, which stays after later answers): the message in the box, else
    the last answer's prompt; None when there is neither."""
    typed = message.strip()
    if chat.prompt_ids is not None and not typed:
        last = next((m["content"] for m in reversed(chat.messages) if m["role"] == "user"), "")
        return chat.prompt_ids, f"the last prompt, {quoted(last)}"
    if typed:
        return list(engine.encode([{"role": "user", "content": typed}], chat=True)), f"the message {quoted(typed)}"
    return None


def lookup_html(lookup: LookupRun | None, ar_events: list, greedy: bool) -> str:
    """One line on the prompt lookup run beside the REST-vs-plain table."""
    if lookup is None:
        return '<p class="pld-line">Prompt lookup could not run on this model.</p>'
    plain = ar_events[-1].totals if ar_events else None
    end = lookup.ends_ms[-1] if lookup.ends_ms else 0.0
    rate, sum_ = lookup_rate(lookup.decode_tokens, len(lookup.token_ids), end)
    speedup = f", {ratio(rate, plain.tokens_per_s):.2f}× plain" if plain and shown(plain.tokens_per_s) else ""
    same = ""
    if greedy and ar_events:
        ar_ids = [t for e in ar_events for t in e.tokens]
        n = min(len(ar_ids), len(lookup.token_ids))
        same = (
            " · same text as plain decoding"
            if list(lookup.token_ids[:n]) == ar_ids[:n]
            else " · text differs from plain decoding"
        )
    return (
        f'<p class="pld-line">Prompt lookup (transformers, k = {lookup.k} draft tokens copied from earlier in the conversation): '
        f"{sum_}{speedup}, M = {lookup.mean_generated_length:.2f} tokens per forward{same}.</p>"
    )


def _compared_runs(
    runtime: Runtime, job: ModelJob, what: str
) -> Generator[CompareUpdate, None, tuple[dict[str, list], LookupRun | None, list[str]]]:
    """REST, plain decoding and prompt lookup in one model call (each for at most
    job.max_seconds), a status line as each ends; returns (each method's events, the prompt
    lookup run or None, the labels of the runs the limit cut short)."""
    results: dict[str, list] = {}
    lookup, cut = None, []
    labels = {"rest": "REST", "ar": "plain decoding"}
    for lane in runtime.calls.compare(job):
        if lane.method == "lookup":
            lookup = lane.lookup
            if lookup is not None and lookup.timed_out:
                cut.append("prompt lookup")
            continue
        results[lane.method] = list(lane.events)
        if lane.cut:
            cut.append(labels[lane.method])
        n = lane.events[-1].totals.new_tokens if lane.events else 0
        yield CompareUpdate(status=status_html(esc(f"Comparing on {what}: {labels[lane.method]} done ({n} tokens)…")))
    return results, lookup, cut


def _comparison_views(
    runtime: Runtime,
    results: dict[str, list],
    lookup: LookupRun | None,
    config: GenerationConfig,
    cut: list[str],
    live: Totals | None = None,
) -> tuple[str, Any, Any, Comparison]:
    """Compare's table (with the prompt lookup line and why the speedup is not M), speed figure
    and timeline. When a run was cut short, "same output" compares the text both wrote. `live`:
    the chat's last answer's totals when Compare ran on its prompt (its tokens/s and steps are
    set beside Compare's)."""
    cmp = compare_events(results["rest"], results["ar"], greedy=config.sampling.greedy)
    if cut and cmp.identical is not None:  # a run cut short: compare the text both wrote
        rest_ids, ar_ids = ([t for e in results[m] for t in e.tokens] for m in ("rest", "ar"))
        n = min(len(rest_ids), len(ar_ids))
        cmp = replace(cmp, identical=rest_ids[:n] == ar_ids[:n])
    speed = speed_figure(results["rest"], results["ar"], lookup)
    lanes = [("plain", event_blocks(results["ar"]))]
    if lookup is not None:
        lanes.append((f"prompt lookup k={lookup.k}", lookup_blocks(lookup.token_ids, lookup.counts, lookup.ends_ms)))
    lanes.append(("REST", event_blocks(results["rest"])))
    timeline = timeline_figure(lanes, runtime.loaded().tokenizer, run_source_names(results["rest"]))
    table = comparison_html(
        cmp,
        machine(runtime),
        lookup=lookup_html(lookup, results["ar"], config.sampling.greedy),
        live=live.tokens_per_s if live is not None else None,
        rerun=rerun_note(cmp, live, config.draft.budget == "auto"),
    )
    return table, speed, timeline, cmp


def machine(runtime: Runtime) -> Machine | None:
    """The model and the device that ran the comparison ("SmolLM2-135M-Instruct", "CPU", "2
    threads"), as the loaded model says; None when it does not say."""
    loaded = runtime.loaded()
    name, device = getattr(loaded, "name", ""), str(getattr(loaded, "device", ""))
    if not name or not device:
        return None
    if getattr(runtime.settings, "zero_gpu", False):  # the model moves to the GPU inside each call
        return Machine(name, "GPU", "ZeroGPU")
    if device.startswith("cuda"):
        try:
            import torch

            return Machine(name, "GPU", torch.cuda.get_device_name(torch.device(device)))
        except Exception:  # noqa: BLE001 - the name is a nicety
            return Machine(name, "GPU")
    if device.startswith("cpu"):  # the header's words (words.device_phrase), from the same count
        cores = available_cpus()
        return Machine(name, "CPU", plural(cores, "core"), where=words.device_phrase("cpu", cores))
    return Machine(name, device.upper())


def _compared_note(
    what: str, config: GenerationConfig, note: str, cut: list[str], limit: float, max_seconds: float
) -> str:
    """The status line once Compare is done: what it compared on, and which runs the limit cut."""
    done = f"Compared on {what} with the current settings ({config.max_new_tokens} new tokens max)." + (
        f" {note}." if note else ""
    )
    if cut:
        runs = " and ".join(cut)
        done += f" {runs[:1].upper() + runs[1:]} {time_limit_note(limit)}: each method may use a third of the {max_seconds:g} s limit."
    return done
