"""The knob schema (rest_core/knobs.py) and the config classes' own checks: one definition of
every setting drives the config, the CLI flags and the app; nothing out of range or non-finite
reaches the engine."""

from __future__ import annotations

import argparse
import dataclasses
import math

import pytest

from rest_core.commands import bench as bench_cmd
from rest_core.commands import generate as generate_cmd
from rest_core.config import PRESETS, ConfigError, DraftConfig, GenerationConfig, RetrievalConfig, SamplingConfig
from rest_core.knobs import APP_KNOBS, KNOBS, MAX_MATCHES, make_config

NAN, INF = float("nan"), float("inf")


@pytest.mark.parametrize(
    "build, field",
    [
        (lambda v: SamplingConfig(temperature=v), "temperature"),
        (lambda v: SamplingConfig(temperature=0.5, top_p=v), "top_p"),
        (lambda v: DraftConfig(datastore_weight=v), "datastore_weight"),
        (lambda v: DraftConfig(context_weight=v), "context_weight"),
        (lambda v: RetrievalConfig(max_matches=v), "max_matches"),
        (lambda v: RetrievalConfig(n_max=v), "n_max"),
        (lambda v: RetrievalConfig(m=v), "m"),
        (lambda v: DraftConfig(c=v), "c"),
        (lambda v: SamplingConfig(top_k=v), "top_k"),
        (lambda v: GenerationConfig(max_new_tokens=v), "max_new_tokens"),
    ],
)
@pytest.mark.parametrize("value", [NAN, INF, -INF])
def test_config_classes_reject_non_finite_numbers(build, field, value):
    with pytest.raises(ConfigError, match=field):
        build(value)


def test_config_classes_reject_non_integers_where_counts_are_meant():
    with pytest.raises(ConfigError, match="c must be a whole number"):
        DraftConfig(c=2.5)
    with pytest.raises(ConfigError, match="seed"):
        SamplingConfig(seed=NAN)
    assert DraftConfig(c=3).c == 3 and SamplingConfig(temperature=1).temperature == 1  # ints are fine as reals


def test_every_knob_maps_to_a_config_field_and_its_defaults_are_in_range():
    names = [k.name for k in KNOBS]
    assert len(names) == len(set(names))
    for preset in PRESETS.values():
        for knob in KNOBS:
            value = knob.default(preset)
            if knob.kind in (int, float) and value is not None:
                assert knob.minimum <= value <= knob.maximum, (knob.name, value)
            if knob.choices:
                assert value in knob.choices
    # every field a user sets is a knob (seed is a command-line knob only); which stores draft
    # (draft.stores) is chosen with the datastores themselves (--datastore, the page's store choice)
    fields = {
        f"{s}.{f.name}"
        for s, cls in (("retrieval", RetrievalConfig), ("draft", DraftConfig), ("sampling", SamplingConfig))
        for f in dataclasses.fields(cls)
    } - {"draft.stores"}
    assert fields == {k.path for k in KNOBS if "." in k.path}
    assert [k.name for k in APP_KNOBS if not k.app] == []


def test_make_config_sets_each_knob_and_keeps_the_base_for_the_rest():
    base = PRESETS["gpu"]
    config = make_config({"top_k": 40, "temperature": 0.7, "max_matches": 100.0, "n_max": 4}, base, method="ar")
    assert config.sampling.top_k == 40 and config.sampling.temperature == 0.7
    assert config.retrieval.max_matches == 100 and isinstance(config.retrieval.max_matches, int)
    assert config.retrieval.n_max == 4 and config.method == "ar"
    assert config.draft == base.draft and config.max_new_tokens == base.max_new_tokens
    assert make_config({}, base) == base


@pytest.mark.parametrize(
    "values, message",
    [
        ({"max_matches": MAX_MATCHES + 1}, f"max_matches must be between 1 and {MAX_MATCHES}, got {MAX_MATCHES + 1}"),
        ({"max_matches": 10**9}, "max_matches must be between"),
        ({"temperature": math.nan}, "temperature must be a finite number"),
        ({"top_p": math.inf}, "top_p must be a finite number"),
        ({"c": 2.5}, "c must be a whole number"),
        ({"m": "many"}, "m must be a number"),
        ({"n_min": None}, "n_min is empty"),
        ({"budget": "lots"}, "budget must be one of fixed, auto"),
        ({"n_min": 9, "n_max": 4}, "n_max"),  # the config classes' own consistency check
        ({"k": 3}, "unknown setting 'k'"),
        ({"use_datastore": "no"}, "use_datastore must be true or false, got 'no'"),  # not True (issue 19)
        ({"use_context": 1}, "use_context must be true or false, got 1"),
        ({"use_context": "false"}, "use_context must be true or false"),
        ({"c": True}, "c must be a number, got True"),
    ],
)
def test_make_config_refuses_with_the_knobs_name(values, message):
    with pytest.raises(ConfigError, match=message):
        make_config(values)


def _parser(add) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser()
    add(p)
    return p


def test_generate_flags_come_from_the_knobs_and_default_to_the_device_preset():
    p = _parser(generate_cmd.add_arguments)
    args = p.parse_args(["--prompt", "x"])
    assert generate_cmd.build_config(args, "cuda") == PRESETS["gpu"]
    assert generate_cmd.build_config(args, "cpu") == PRESETS["cpu"]
    args = p.parse_args(
        [
            "--prompt",
            "x",
            "--top-k",
            "20",
            "--temperature",
            "0.8",
            "--max-matches",
            "300",
            "--no-context",
            "--method",
            "ar",
        ]
    )
    config = generate_cmd.build_config(args, "cpu")
    assert (config.sampling.top_k, config.sampling.temperature, config.retrieval.max_matches) == (20, 0.8, 300)
    assert not config.draft.use_context and config.method == "ar" and config.draft.c == PRESETS["cpu"].draft.c


def test_bench_flags_come_from_the_knobs():
    p = _parser(bench_cmd.add_arguments)
    args = p.parse_args(["--top-k", "5", "--n-max", "1"])
    assert args.top_k == 5 and args.max_new_tokens == 128 and args.seed == 0 and args.c is None  # c: the preset's
    retrieval, draft, sampling = bench_cmd.settings_from_args(args, "cpu")
    assert sampling.top_k == 5
    assert retrieval.n_max == 1 and retrieval.n_min == 1  # a short n_max alone lowers n_min with it
    assert draft.c == PRESETS["cpu"].draft.c and not hasattr(args, "use_context")  # the methods choose the sources


@pytest.mark.parametrize(
    "argv", [["--max-matches", "100000"], ["--temperature", "nan"], ["--c", "0"], ["--top-k", "x"]]
)
def test_cli_flags_out_of_range_exit_2_with_the_knobs_message(argv, capsys):
    for add, base in ((generate_cmd.add_arguments, ["--prompt", "x"]), (bench_cmd.add_arguments, [])):
        with pytest.raises(SystemExit) as exc:
            _parser(add).parse_args(base + argv)
        assert exc.value.code == 2
        err = capsys.readouterr().err
        assert f"argument {argv[0]}" in err and ("must be" in err), err
