"""Ablations of the paper's Figures 2-5 and Tables 2-3, one function (and one CLI kind) each.

Every ablation runs plain `ar` and a family of engine variants on the same problems, interleaved
per problem (see `loop.run_benchmark`), and writes its own results.json, results.md and
chart.html. Kinds:

- ``c-sweep``: the node budget c (max draft tokens verified per step).
- ``n-max-sweep``: the longest context suffix tried.
- ``datastore-size``: nested random document subsets of the store (1/16 .. 1).
- ``selection``: the trie's top-c nodes vs random whole continuations with the same node budget.
- ``suffix-hist``: histogram of matched suffix lengths per step.

Besides these, `pld_sweep_plan` times transformers' prompt lookup at each
prompt_lookup_num_tokens (the `bench pld-sweep` command, on a training split).

Ablations take a `runners.RunnerFactory` (the model and base settings) and a `loop.Timing`; they
know nothing of the command line.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from rest_core.bench.loop import BenchResult, Timing, measure
from rest_core.bench.metrics import MethodSummary, summarize
from rest_core.bench.report import _plotly_html, machine_info, markdown_table, print_differences
from rest_core.bench.runners import ENGINE_METHODS, Runner, RunnerFactory
from rest_core.bench.suites import Problem
from rest_core.drafting.trie import Trie

KINDS = ("c-sweep", "n-max-sweep", "datastore-size", "selection", "suffix-hist")
DEFAULT_VALUES: dict[str, list[float]] = {
    "c-sweep": [1, 2, 4, 8, 16, 32, 64, 128],
    "n-max-sweep": [1, 2, 3, 4, 6, 8, 12, 16],
    "datastore-size": [1 / 16, 1 / 8, 1 / 4, 1 / 2, 1],
    "selection": [4, 16, 64],
    "suffix-hist": [],
}
PLD_SWEEP_KS = tuple(range(2, 11))


# --------------------------------------------------------------------------------------------
# Random candidate selection (the paper's Table 3 baseline)


def select_random_continuations(trie: Trie, c: int, rng: np.random.Generator) -> np.ndarray:
    """Nodes of randomly drawn whole continuations, until the node budget c is met.

    A retrieved continuation is a root-to-node path; the number of continuations that end at a
    node is its weight minus its children's weights, so drawing end nodes with those weights draws
    retrieved continuations uniformly. Each draw adds the path's nodes not yet chosen, root side
    first; the last draw is cut to fill the budget exactly. Returns sorted node indices: exactly
    min(c, len(trie)) nodes forming a subtree (every chosen node's parent is chosen), like
    `select_top_c`.
    """
    n = len(trie)
    if n == 0 or c <= 0:
        return np.zeros(0, dtype=np.int64)
    if c >= n:
        return np.arange(n, dtype=np.int64)
    parents = np.asarray(trie.parents, dtype=np.int64)
    weights = np.asarray(trie.weights, dtype=np.float64)
    child_weight = np.zeros(n, dtype=np.float64)
    has_parent = parents >= 0
    np.add.at(child_weight, parents[has_parent], weights[has_parent])
    ends = np.clip(weights - child_weight, 0.0, None)
    if ends.sum() <= 0:  # weights without multiplicity: treat leaves as the continuations
        ends = (child_weight == 0).astype(np.float64)
    chosen = np.zeros(n, dtype=bool)
    count = 0
    remaining = ends.copy()
    while count < c and remaining.sum() > 0:
        end = int(rng.choice(n, p=remaining / remaining.sum()))
        remaining[end] = 0.0  # draw without replacement: a repeated continuation adds nothing
        path = []
        node = end
        while node >= 0 and not chosen[node]:
            path.append(node)
            node = int(parents[node])
        for node in reversed(path):  # root side first, so a cut path stays connected
            if count == c:
                break
            chosen[node] = True
            count += 1
    return np.flatnonzero(chosen).astype(np.int64)


# --------------------------------------------------------------------------------------------
# Datastore subsets


def document_subset(datastore: Any, fraction: float, seed: int = 0) -> Any:
    """The same store restricted to a random `fraction` of its documents (nested across fractions).

    Each shard keeps its token array and a suffix array filtered to positions inside the chosen
    documents. Filtering a sorted suffix array keeps it sorted, every continuation stops at its
    document's separator, and queries never contain the separator, so lookups in the filtered
    array return exactly what a store built from those documents alone would. Document ranks
    come from one random permutation, so the 1/8 subset contains the 1/16 subset, and so on.
    Costs a few seconds and n_tokens * 8 bytes of memory per shard, instead of a rebuild.
    """
    from rest_core.store.datastore import Datastore
    from rest_core.store.format import Shard

    if not 0 < fraction <= 1:
        raise ValueError(f"fraction must be in (0, 1], got {fraction}")
    if fraction == 1:
        return datastore
    sep = datastore.separator
    rng = np.random.default_rng(seed)
    shards = []
    kept_tokens = kept_docs = 0
    for shard in datastore.shards:
        tokens = np.asarray(shard.tokens)
        is_sep = tokens == sep
        n_docs = int(is_sep.sum())
        # doc_of[i]: index of the document position i belongs to (its separator belongs to it too).
        doc_of = np.cumsum(is_sep, dtype=np.int32) - is_sep
        keep_doc = rng.permutation(n_docs) < max(1, round(fraction * n_docs))
        keep_pos = keep_doc[doc_of]
        sa = np.asarray(shard.sa)
        sub_sa = sa[keep_pos[sa]]
        shards.append(Shard(tokens=shard.tokens, sa=sub_sa, n_documents=int(keep_doc.sum())))
        kept_tokens += int(keep_pos.sum())
        kept_docs += int(keep_doc.sum())
    meta = dict(datastore.meta, n_tokens=kept_tokens, n_documents=kept_docs, subset_fraction=fraction)
    return Datastore(path=datastore.path, meta=meta, shards=shards)


# --------------------------------------------------------------------------------------------
# Reports


@dataclass
class VariantRow:
    variant: str
    value: float | str | None
    summary: MethodSummary
    extra: dict[str, Any]


def suffix_histogram(result: BenchResult, method: str) -> dict[str, dict[int, int]]:
    """Per source: matched suffix length -> number of steps (0 = nothing matched)."""
    hist: dict[str, Counter[int]] = {}
    for run in result.runs:
        if run.method != method:
            continue
        for source, lens in run.suffix_lens.items():
            hist.setdefault(source, Counter()).update(lens)
    return {s: dict(sorted(c.items())) for s, c in hist.items()}


def histogram_table(hist: dict[str, dict[int, int]]) -> str:
    lines = []
    for source, counts in hist.items():
        total = sum(counts.values())
        mid = sum(v for k, v in counts.items() if 2 <= k <= 9)
        lines.append(f"### {source}: {total} steps, {100 * mid / total:.1f}% with suffix length 2-9\n")
        lines.append("| suffix length | steps | share |\n|---:|---:|---:|")
        for k, v in counts.items():
            lines.append(f"| {k} | {v} | {100 * v / total:.1f}% |")
        lines.append("")
    return "\n".join(lines)


def sweep_table(rows: Sequence[VariantRow], param: str) -> str:
    head = (
        f"| {param} | ms/token (with prefill) | ms/token (decode) | speedup vs ar | speedup (decode) | M "
        "| draft nodes/step | forward ms/step | retrieval ms/token | identical to ar | notes |\n"
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n"
    )
    out = []
    for r in rows:
        s = r.summary
        notes = ", ".join(f"{k}={v}" for k, v in r.extra.items())
        fmt = lambda x, spec=".2f", suf="": "-" if x is None else f"{x:{spec}}{suf}"  # noqa: E731
        out.append(
            f"| {r.value if r.value is not None else r.variant} | {fmt(s.mean_token_ms)} | {fmt(s.mean_token_ms_decode)} "
            f"| {fmt(s.speedup_vs_ar, '.2f', 'x')} | {fmt(s.speedup_vs_ar_decode, '.2f', 'x')} "
            f"| {fmt(s.mean_generated_length)} | {fmt(s.mean_draft_nodes, '.1f')} | {fmt(s.forward_ms_per_step, '.1f')} "
            f"| {fmt(s.retrieval_ms_per_token, '.3f')} "
            f"| {'-' if s.identical_to_ar is None else f'{100 * s.identical_to_ar:.0f}%'} | {notes} |"
        )
    return head + "\n".join(out) + "\n"


def sweep_chart(rows: Sequence[VariantRow], param: str, title: str, log_x: bool = False) -> Any:
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    xs = [r.value for r in rows]
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    fig.add_trace(
        go.Scatter(
            x=xs, y=[r.summary.speedup_vs_ar for r in rows], name="speedup vs ar (with prefill)", mode="lines+markers"
        ),
        secondary_y=False,
    )
    fig.add_trace(
        go.Scatter(
            x=xs, y=[r.summary.speedup_vs_ar_decode for r in rows], name="speedup vs ar (decode)", mode="lines+markers"
        ),
        secondary_y=False,
    )
    fig.add_trace(
        go.Scatter(
            x=xs,
            y=[r.summary.mean_generated_length for r in rows],
            name="M (tokens / step)",
            mode="lines+markers",
            line=dict(dash="dot"),
        ),
        secondary_y=True,
    )
    fig.update_xaxes(title_text=param, type="log" if log_x else "-")
    fig.update_yaxes(title_text="speedup vs ar", secondary_y=False)
    fig.update_yaxes(title_text="M", secondary_y=True)
    fig.update_layout(title=title, template="plotly_white", height=450)
    return fig


def histogram_chart(hist: dict[str, dict[int, int]], title: str) -> Any:
    import plotly.graph_objects as go

    fig = go.Figure()
    for source, counts in hist.items():
        total = sum(counts.values())
        fig.add_trace(go.Bar(x=list(counts), y=[v / total for v in counts.values()], name=source))
    fig.update_layout(
        title=title,
        xaxis_title="matched suffix length (0 = no match)",
        yaxis_title="share of steps",
        yaxis_tickformat=".0%",
        template="plotly_white",
        height=450,
        barmode="group",
    )
    return fig


def write_ablation(
    out_dir: Path,
    *,
    kind: str,
    title: str,
    rows: Sequence[VariantRow],
    result: BenchResult,
    meta: dict[str, Any],
    param: str,
    histogram: dict[str, dict[int, int]] | None = None,
    log_x: bool = False,
) -> list[str]:
    out_dir.mkdir(parents=True, exist_ok=True)
    summaries = summarize(result)
    payload = {
        **meta,
        "kind": kind,
        "machine": machine_info(),
        "rows": [dict(variant=r.variant, value=r.value, extra=r.extra, summary=asdict(r.summary)) for r in rows],
        "methods": {m: asdict(s) for m, s in summaries.items()},
        "histogram": histogram,
        "differences": [asdict(d) for d in result.differences],
        "runs": [{k: v for k, v in asdict(r).items() if k != "token_ids"} for r in result.runs],
    }
    (out_dir / "results.json").write_text(json.dumps(payload, indent=1, default=str))
    md = [f"# {title}", ""]
    md += [f"- {k}: {json.dumps(v) if isinstance(v, (dict, list)) else v}" for k, v in meta.items()]
    md.append("")
    if rows:
        md.append(sweep_table(rows, param))
    if histogram:
        md.append(histogram_table(histogram))
    md.append("All variants:\n")
    md.append(markdown_table(summaries))
    (out_dir / "results.md").write_text("\n".join(md))
    written = [str(out_dir / "results.json"), str(out_dir / "results.md")]
    if histogram:
        written += _plotly_html(histogram_chart(histogram, title), out_dir / "chart.html")
    else:
        written += _plotly_html(sweep_chart(rows, param, title, log_x), out_dir / "chart.html")
    return written


def rows_from(result: BenchResult, variants: Sequence[tuple[str, Any, dict[str, Any]]]) -> list[VariantRow]:
    """One row per (runner name, parameter value, extra notes), in the given order."""
    summaries = summarize(result)
    return [VariantRow(name, value, summaries[name], extra) for name, value, extra in variants if name in summaries]


# --------------------------------------------------------------------------------------------
# Plans: which runners an ablation times, and how its rows are read


@dataclass
class AblationPlan:
    """The runners one ablation times and how to report them.

    `variants` lists (runner name, swept value, notes) in row order; `histogram_of` names the
    runner whose matched suffix lengths are counted (suffix-hist). With `with_ar`, plain `ar`
    runs too: the baseline of the speedups and the reference of the greedy identity check.
    """

    kind: str
    runners: list[Runner]
    variants: list[tuple[str, Any, dict[str, Any]]]
    param: str
    log_x: bool = False
    notes: dict[str, Any] = field(default_factory=dict)
    histogram_of: str | None = None
    with_ar: bool = True


def plan_ablation(
    kind: str, values: Sequence[float], factory: RunnerFactory, method: str, *, seed: int = 0
) -> AblationPlan:
    """The plan of one ablation kind (see the module docstring) varying engine `method`."""
    if method not in ENGINE_METHODS:
        raise ValueError(f"ablations vary an engine method ({', '.join(ENGINE_METHODS)}), not {method!r}")
    builders = {
        "c-sweep": _c_sweep,
        "n-max-sweep": _n_max_sweep,
        "datastore-size": _datastore_size,
        "selection": _selection,
        "suffix-hist": _suffix_hist,
    }
    if kind not in builders:
        raise ValueError(f"unknown ablation kind {kind!r}; choose from {', '.join(KINDS)}")
    return builders[kind](factory, method, list(values), seed)


def _c_sweep(factory: RunnerFactory, method: str, values: list[float], seed: int) -> AblationPlan:
    plan = AblationPlan("c-sweep", [], [], "c (max draft tokens)", log_x=True)
    for v in map(int, values):
        plan.runners.append(factory.engine_runner(method, name=f"c={v}", draft=replace(factory.draft, c=v)))
        plan.variants.append((f"c={v}", v, {}))
    return plan


def _n_max_sweep(factory: RunnerFactory, method: str, values: list[float], seed: int) -> AblationPlan:
    plan = AblationPlan("n-max-sweep", [], [], "n_max")
    for v in map(int, values):
        retrieval = replace(factory.retrieval, n_max=v, n_min=min(factory.retrieval.n_min, v))
        plan.runners.append(factory.engine_runner(method, name=f"n_max={v}", retrieval=retrieval))
        plan.variants.append((f"n_max={v}", v, {}))
    return plan


def _datastore_size(factory: RunnerFactory, method: str, values: list[float], seed: int) -> AblationPlan:
    plan = AblationPlan(
        "datastore-size",
        [],
        [],
        "fraction of datastore documents",
        log_x=True,
        notes={"subset": "nested random document subsets (suffix array filtered, exact)"},
    )
    for f in values:
        store = document_subset(factory.datastore, f, seed=seed)
        name = f"size={f:g}"
        plan.runners.append(factory.engine_runner(method, name=name, datastore=store))
        plan.variants.append((name, f, {"tokens": f"{store.n_tokens:,}", "documents": f"{store.n_documents:,}"}))
    return plan


def _selection(factory: RunnerFactory, method: str, values: list[float], seed: int) -> AblationPlan:
    plan = AblationPlan("selection", [], [], "c (node budget)", log_x=True)
    for v in map(int, values):
        plan.runners.append(factory.engine_runner(method, name=f"top-c c={v}", draft=replace(factory.draft, c=v)))
        plan.variants.append((f"top-c c={v}", v, {"selection": "trie top-c"}))
        plan.runners.append(random_selection_runner(factory, method, v, seed))
        plan.variants.append((f"random c={v}", v, {"selection": "random continuations"}))
    return plan


def _suffix_hist(factory: RunnerFactory, method: str, values: list[float], seed: int) -> AblationPlan:
    return AblationPlan(
        "suffix-hist", [factory.engine_runner(method)], [], "suffix length", histogram_of=method, with_ar=False
    )


def random_selection_runner(factory: RunnerFactory, method: str, c: int, seed: int = 0) -> Runner:
    """The engine with the trie's top-c selection replaced by `select_random_continuations`
    (same node budget, same depth limit, same retrieved continuations)."""
    rng = np.random.default_rng(seed)
    return factory.engine_runner(
        method,
        name=f"random c={c}",
        draft=replace(factory.draft, c=c),
        selector=lambda pool, budget: select_random_continuations(pool, budget, rng),
    )


def pld_sweep_plan(factory: RunnerFactory, ks: Sequence[int]) -> AblationPlan:
    """transformers' prompt lookup at each prompt_lookup_num_tokens k (runners `pld-k<k>`)."""
    if not ks or any(int(k) != k or k < 1 for k in ks):
        raise ValueError(f"prompt_lookup_num_tokens values must be integers >= 1, got {list(ks)}")
    plan = AblationPlan("pld-sweep", [], [], "prompt_lookup_num_tokens")
    for k in map(int, ks):
        plan.runners.append(factory.hf_runner(f"pld-k{k}", k))
        plan.variants.append((f"pld-k{k}", k, {}))
    return plan


def best_pld_k(rows: Sequence[VariantRow]) -> int:
    """The k of the fastest prompt lookup row (wall time per token, prefill included)."""
    pld = [r for r in rows if r.variant.startswith("pld-k")]
    if not pld:
        raise ValueError("no prompt lookup rows to choose from")
    return int(min(pld, key=lambda r: r.summary.mean_token_ms).value)


# --------------------------------------------------------------------------------------------
# Running a plan


@dataclass
class AblationOutcome:
    plan: AblationPlan
    result: BenchResult
    rows: list[VariantRow]
    histogram: dict[str, dict[int, int]] | None


def run_ablation(
    plan: AblationPlan, problems: Sequence[Problem], factory: RunnerFactory, timing: Timing
) -> AblationOutcome:
    """Time the plan's runners (and `ar` if the plan asks for it) interleaved per problem."""
    runners = ([factory.hf_runner("ar")] if plan.with_ar else []) + plan.runners
    result = measure(problems, runners, factory, timing, check_identity=plan.with_ar)
    histogram = suffix_histogram(result, plan.histogram_of) if plan.histogram_of else None
    return AblationOutcome(plan, result, rows_from(result, plan.variants), histogram)


def write_outcome(out_dir: Path, outcome: AblationOutcome, *, title: str, meta: dict[str, Any]) -> list[str]:
    """results.json, results.md and chart.html of a finished ablation; prints its table."""
    plan = outcome.plan
    written = write_ablation(
        out_dir,
        kind=plan.kind,
        title=title,
        rows=outcome.rows,
        result=outcome.result,
        meta={**meta, **plan.notes},
        param=plan.param,
        histogram=outcome.histogram,
        log_x=plan.log_x,
    )
    if outcome.rows:
        print(sweep_table(outcome.rows, plan.param))
    if outcome.histogram:
        print(histogram_table(outcome.histogram))
    print_differences(outcome.result)
    return written
