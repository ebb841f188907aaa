"""The knobs: one ordered definition of every setting a user can turn, with its range, label and
the GenerationConfig field it sets. It drives the app's components and the order in which its
handlers take their values, the CLI flags of `generate` and `bench`, and `make_config`.

Adding a knob is one entry in KNOBS (plus the code that uses the field). The ranges here are
also the server's bounds: `make_config` refuses a value outside them whatever sent it (a page, an
HTTP API client, a command line), so a K of 10^9 cannot reach the engine. The config
dataclasses themselves check only what is valid for any caller (finite, positive, consistent).
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

from rest_core.config import ConfigError, GenerationConfig

Widget = Literal["slider", "number", "radio", "checkbox"]

# What the fixed draft budget drafts, in the one wording every help text, the glossary and the
# step-through's note use: c each step, unless the step's trie holds fewer nodes than c.
FIXED_MEANS = "c every step, fewer only when the trie holds fewer"


@dataclass(frozen=True)
class Knob:
    """One setting. `path` is the GenerationConfig field ("draft.c", "max_new_tokens"); the
    default is read from a preset through it. `step` is the widget's increment only."""

    name: str  # key of make_config's values, the CLI flag (--n-max) and the app's elem_id (n-max)
    path: str
    kind: type  # int, float, bool or str (with choices)
    label: str  # the app's label: one line
    help: str = ""  # one more line: the app's info text and the CLI's help
    minimum: float | None = None
    maximum: float | None = None
    step: float | None = None
    choices: tuple[str, ...] = ()
    widget: Widget = "slider"
    flag: str | None = None  # CLI flag when it is not --<name with dashes>
    app: bool = True  # False: a command-line setting only

    @property
    def elem_id(self) -> str:
        return self.name.replace("_", "-")

    @property
    def option(self) -> str:
        return self.flag or "--" + self.elem_id

    def default(self, preset: GenerationConfig) -> Any:
        value: Any = preset
        for part in self.path.split("."):
            value = getattr(value, part)
        return value

    def parse(self, value: Any) -> Any:
        """The value as this knob's type, checked against its range; ConfigError names the knob."""
        if value is None or (isinstance(value, str) and not value.strip()):
            raise ConfigError(f"{self.name} is empty")
        if self.kind is bool:  # a real boolean only: bool("no") is True
            if not isinstance(value, bool):
                raise ConfigError(f"{self.name} must be true or false, got {value!r}")
            return value
        if self.kind is str:
            if value not in self.choices:
                raise ConfigError(f"{self.name} must be one of {', '.join(self.choices)}, got {value!r}")
            return value
        if isinstance(value, bool):  # a number widget never sends one: True is not 1 here
            raise ConfigError(f"{self.name} must be a number, got {value!r}")
        try:
            x = float(value)
        except (TypeError, ValueError, OverflowError):
            raise ConfigError(f"{self.name} must be a number, got {value!r}") from None
        if not math.isfinite(x):
            raise ConfigError(f"{self.name} must be a finite number, got {value!r}")
        if self.kind is int and not x.is_integer():
            raise ConfigError(f"{self.name} must be a whole number, got {value!r}")
        if (self.minimum is not None and x < self.minimum) or (self.maximum is not None and x > self.maximum):
            raise ConfigError(
                f"{self.name} must be between {_num(self.minimum)} and {_num(self.maximum)}, got {_num(x)}"
            )
        return int(x) if self.kind is int else x


def _num(x: float | None) -> str:
    if x is None:
        return "any"
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


# In the app's order (its handlers take the values in this order). Ranges: the widgets' ranges,
# and the server's bounds. K <= 5000 is the paper's default and the largest setting whose per-step
# trie the app can afford to keep for many users.
MAX_MATCHES = 5000

KNOBS: tuple[Knob, ...] = (
    Knob(
        "use_datastore",
        "draft.use_datastore",
        bool,
        "Draft from the datastore",
        widget="checkbox",
        help="look the conversation's last tokens up in the chosen corpus and draft what followed them",
    ),
    Knob(
        "use_context",
        "draft.use_context",
        bool,
        "Draft from the conversation",
        widget="checkbox",
        flag="--context",
        help="also draft from the conversation itself: text that repeats earlier text drafts itself",
    ),
    Knob(
        "datastore_weight",
        "draft.datastore_weight",
        float,
        "datastore weight",
        minimum=0,
        maximum=100,
        step=0.25,
        widget="number",
        help="the datastore's share of a trie node's weight: its weight split evenly over its continuations",
    ),
    Knob(
        "context_weight",
        "draft.context_weight",
        float,
        "conversation weight",
        minimum=0,
        maximum=100,
        step=0.25,
        widget="number",
        help="the conversation's share of a trie node's weight: its weight split evenly over its continuations",
    ),
    Knob(
        "c",
        "draft.c",
        int,
        "c: the most draft tokens verified per step",
        minimum=1,
        maximum=128,
        step=1,
        help=(
            'a step\'s own count, "drafted N", is at most c. A large c pays on a GPU, where verifying dozens of '
            "tokens costs about as much as one; on a CPU each one adds time"
        ),
    ),
    Knob(
        "budget",
        "draft.budget",
        str,
        "draft budget",
        choices=("fixed", "auto"),
        widget="radio",
        help=(
            "auto (the CPU default): each step drafts as many as it expects to pay for, up to c, possibly none, "
            "judged by timings measured on this device, so two runs of one prompt can draft differently; "
            f"fixed: {FIXED_MEANS}"
        ),
    ),
    Knob(
        "n_max",
        "retrieval.n_max",
        int,
        "n_max: longest suffix tried",
        minimum=1,
        maximum=32,
        step=1,
        help="the last n_max tokens are looked up first; longer matches give more specific drafts",
    ),
    Knob(
        "n_min",
        "retrieval.n_min",
        int,
        "n_min: shortest suffix tried",
        minimum=1,
        maximum=16,
        step=1,
        help="no draft when not even the last n_min tokens occur; small values match often but loosely",
    ),
    Knob(
        "m",
        "retrieval.m",
        int,
        "m: continuation length",
        minimum=1,
        maximum=32,
        step=1,
        help="how many tokens after each occurrence are taken: the deepest a draft can reach",
    ),
    Knob(
        "max_matches",
        "retrieval.max_matches",
        int,
        "K: max matches used",
        minimum=1,
        maximum=MAX_MATCHES,
        step=100,
        widget="number",
        help=f"above K occurrences a fair sample of K is used (at most {MAX_MATCHES})",
    ),
    Knob(
        "temperature",
        "sampling.temperature",
        float,
        "temperature (0 = greedy)",
        minimum=0,
        maximum=2,
        step=0.05,
        help="0: always the likeliest token; above 0 the model samples, and REST gives the same distribution, not the same text",
    ),
    Knob(
        "top_p",
        "sampling.top_p",
        float,
        "top-p",
        minimum=0.05,
        maximum=1,
        step=0.05,
        help="sampling only: draw from the smallest set of tokens whose probabilities sum to p",
    ),
    Knob(
        "top_k",
        "sampling.top_k",
        int,
        "top-k (0 = the model's default)",
        minimum=0,
        maximum=200,
        step=1,
        help="sample from the k likeliest tokens; 0 = the model's own default, as generate() (50 when it sets none)",
    ),
    Knob(
        "max_new_tokens",
        "max_new_tokens",
        int,
        "max new tokens",
        minimum=1,
        maximum=1024,
        step=1,
        help="the answer stops after this many tokens (or at the end of text)",
    ),
    Knob(
        "seed",
        "sampling.seed",
        int,
        "seed",
        minimum=0,
        maximum=2**32 - 1,
        widget="number",
        app=False,
        help="for sampling; unset: a different one each run",
    ),
)
BY_NAME: dict[str, Knob] = {k.name: k for k in KNOBS}
APP_KNOBS: tuple[Knob, ...] = tuple(k for k in KNOBS if k.app)


def make_config(
    values: Mapping[str, Any], base: GenerationConfig | None = None, method: str | None = None
) -> GenerationConfig:
    """`base` (default: GenerationConfig()) with the knob `values` set, each checked against its
    range; raises ConfigError with a one-line message naming the knob."""
    base = base or GenerationConfig()
    changes: dict[str, dict[str, Any]] = {"": {}, "retrieval": {}, "draft": {}, "sampling": {}}
    for name, value in values.items():
        if name not in BY_NAME:
            raise ConfigError(f"unknown setting {name!r}")
        section, _, field = BY_NAME[name].path.rpartition(".")
        changes[section][field] = BY_NAME[name].parse(value)
    nested = {section: replace(getattr(base, section), **fields) for section, fields in changes.items() if section}
    top = changes[""] | ({"method": method} if method else {})
    return replace(base, **top, **nested)


def values_in_order(values: Iterable[Any], knobs: tuple[Knob, ...] = APP_KNOBS) -> dict[str, Any]:
    """Positional knob values (an app handler's arguments) -> {name: value}."""
    values = list(values)
    if len(values) != len(knobs):
        raise ConfigError(f"expected {len(knobs)} settings, got {len(values)}")
    return dict(zip((k.name for k in knobs), values))


# ----------------------------------------------------------------------------------------------
# Command-line flags


def add_flags(
    parser: argparse.ArgumentParser | Any,
    exclude: Iterable[str] = (),
    base: GenerationConfig | None = None,
    defaults: Mapping[str, Any] | None = None,
) -> None:
    """One flag per knob (except `exclude`, which the command sets otherwise), parsed and
    range-checked by argparse (a bad value exits 2 with the knob's message). Without `base` a flag
    that is not given stays None (`flag_values` leaves it out: the preset's value applies)."""
    skip, defaults = set(exclude), dict(defaults or {})
    for knob in KNOBS:
        if knob.name in skip:
            continue
        default = defaults.get(knob.name, knob.default(base) if base is not None else None)
        shown = "" if default is None else f" (default {default})"
        if knob.kind is bool:
            parser.add_argument(
                knob.option,
                dest=knob.name,
                action=argparse.BooleanOptionalAction,
                default=default,
                help=(knob.help or knob.label) + shown,
            )
            continue
        parser.add_argument(
            knob.option,
            dest=knob.name,
            type=_arg_type(knob),
            default=default,
            choices=knob.choices or None,
            metavar=None if knob.choices else ("N" if knob.kind is int else "X"),
            help=f"{knob.label}; {knob.help}".rstrip("; ") + _range(knob) + shown,
        )


def _range(knob: Knob) -> str:
    return "" if knob.minimum is None else f" [{_num(knob.minimum)}..{_num(knob.maximum)}]"


def _arg_type(knob: Knob):
    def parse(text: str) -> Any:
        try:
            return knob.parse(text if knob.kind is str else _number(text))
        except ConfigError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    parse.__name__ = knob.kind.__name__  # argparse names the type in its "invalid value" message
    return parse


def _number(text: str) -> Any:
    try:
        return float(text)
    except ValueError:
        return text  # parse() reports it as not a number


def flag_values(args: argparse.Namespace, exclude: Iterable[str] = ()) -> dict[str, Any]:
    """The knob values a command line set (flags left at None are left out)."""
    skip = set(exclude)
    return {
        k.name: getattr(args, k.name) for k in KNOBS if k.name not in skip and getattr(args, k.name, None) is not None
    }
