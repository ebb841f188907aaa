"""One source identity: the app, the benchmark and the CLI name and count token origins alike."""

from __future__ import annotations

from types import SimpleNamespace

from rest_core.bench.runs import run_from_events
from rest_core.commands.generate import summary
from rest_core.config import GenerationConfig
from rest_core.decode.engine import collect
from rest_core.decode.events import MatchInfo, StepEvent, StepTimings, Totals
from rest_core.sources import SOURCE_CONTEXT, SOURCE_DATASTORE, count_origins, origin
from rest_core.ui import stats

BOTH = SOURCE_DATASTORE | SOURCE_CONTEXT


def _event(step: int, sources: tuple[int, ...], new: int, finished: bool = False) -> StepEvent:
    return StepEvent(
        step=step,
        method="rest",
        matches=(MatchInfo(SOURCE_CONTEXT, 1, (7,), 2, ()),),
        trie=None,
        draft_idx=(),
        draft=None,
        accepted=(),
        tokens=tuple(range(len(sources))),
        token_sources=sources,
        c=4,
        timings=StepTimings(total_ms=1.0),
        totals=Totals(3, new, step + 1, 0, 0.001 * (step + 1), 1.0, 0.0),
        finished=finished,
        finish_reason="length" if finished else None,
    )


def test_origin_table():
    assert [origin(m).key for m in (0, SOURCE_DATASTORE, SOURCE_CONTEXT, BOTH)] == [
        "model",
        "datastore",
        "context",
        "both",
    ]
    assert origin(BOTH).label == "datastore + context" and origin(SOURCE_CONTEXT).css == "cx"
    assert MatchInfo(SOURCE_CONTEXT, 1, (7,), 2, ()).source == "context"
    assert count_origins([BOTH, 0, BOTH]) == {"model": 1, "datastore": 0, "context": 0, "both": 2}


def test_app_bench_and_cli_count_both_the_same_way():
    events = [_event(0, (SOURCE_DATASTORE, BOTH, 0), 3), _event(1, (SOURCE_CONTEXT, 0), 5, finished=True)]
    want = {"datastore": 1, "context": 1, "both": 1, "model": 2}
    assert stats.source_counts(events) == want
    run = run_from_events(events, problem_id="p", turn=0, method="hybrid", prompt_tokens=3)
    assert run.source_tokens == want
    lm = SimpleNamespace(name="tiny", device="cpu", dtype="float32", load_s=0.0)
    cli = summary(collect(events), lm, GenerationConfig(), None)
    # A token both sources proposed counts once, as "both" (not once per source).
    assert cli["accepted_by_source"] == {k: n for k, n in want.items() if k != "model"}
