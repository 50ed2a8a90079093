"""The command line as a user types it: `python -m engine infill --json`, `models --json` and both
benchmarks' --json rows, on tiny random models and a tiny corpus (the fields the issues name)."""

from __future__ import annotations

import json
import random

import pytest

from engine.cli import main
from engine.loading.precision import bf16_available


@pytest.fixture()
def tiny_world(tmp_path, monkeypatch):
    """Tiny AS-ARM and hybrid (same character tokenizer) listed in INFILL_MODEL_DIRS, and a text
    corpus made of the same characters."""
    from tests.engine.samplers.test_hybrid import save_tiny_hybrid
    from tools.tiny_models import make_tiny_models

    make_tiny_models(tmp_path / "models", names=("text-asarm",))
    from engine.inputs.tokenization import Codec

    codec = Codec.load(tmp_path / "models" / "text-asarm")
    save_tiny_hybrid(tmp_path / "models" / "tiny-hybrid", length=64, codec=codec)
    corpus = tmp_path / "data" / "corpora" / "text"
    corpus.mkdir(parents=True)
    rng = random.Random(0)
    words = ["the", "sea", "old", "man", "boat", "and", "a", "dog", "ran", "home"]
    for split in ("train", "valid", "test"):
        rows = [" ".join(rng.choice(words) for _ in range(40)) + "." for _ in range(6)]
        (corpus / f"{split}.jsonl").write_text("".join(json.dumps({"id": str(i), "text": t}) + "\n"
                                                       for i, t in enumerate(rows)))
    monkeypatch.setenv("INFILL_MODEL_DIRS", str(tmp_path / "models"))
    monkeypatch.setenv("INFILL_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.chdir(tmp_path)  # the self-spec bench writes its plot under ./runs
    return tmp_path


def _asarm(world) -> str:
    return str(world / "models" / "text-asarm")  # a path: the bundled text-asarm has the same name


def _json_out(capsys, argv: list[str]) -> dict:
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_infill_json_has_the_named_fields(tiny_world, capsys):
    text = "The old [MASK:6] sat."
    d = _json_out(capsys, ["infill", "--json", "--model", _asarm(tiny_world), "--sampler", "assd-pipelined", "--k", "3",
                           "--seed", "4", text])
    for key in ("text", "spans", "masked_tokens", "calls", "rounds", "seconds", "log_prob", "sampler", "model",
                "seed", "steps"):
        assert key in d, key
    assert d["text"].startswith("The old ") and d["text"].endswith(" sat.") and d["masked_tokens"] == 6
    span = d["spans"][0]
    assert d["text"][span["start"]:span["end"]] == span["text"] and len(span["text"]) == 6
    assert d["sampler"] == "assd-pipelined" and d["seed"] == 4 and d["calls"] <= 6 and d["log_prob"] < 0
    assert d["steps"] and {"kind", "positions", "tokens", "p", "q", "calls"} <= set(d["steps"][0])
    again = _json_out(capsys, ["infill", "--json", "--model", _asarm(tiny_world), "--sampler", "assd-pipelined", "--k", "3",
                               "--seed", "4", text])
    assert again["text"] == d["text"]  # the seed replays the run


def test_infill_bad_input_is_a_message_not_a_traceback(tiny_world, capsys):
    assert main(["infill", "--model", _asarm(tiny_world), "no mask here"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err and "MASK" in err


def test_infill_reads_protein_text_as_the_page_does_and_says_what_changed(tiny_world, capsys):
    """The page's protein reading (a FASTA header, line breaks, spaces, lower case) is the engine's, so
    the CLI takes the same input and writes the page's sentence about what changed on stderr."""
    from tools.tiny_models import make_tiny_models

    make_tiny_models(tiny_world / "protein", names=("protein-asarm",))
    assert main(["infill", "--model", str(tiny_world / "protein" / "protein-asarm"), "--sampler", "sequential-cache",
                 ">sp|P69905|HBA_HUMAN\nmkta [MASK:3]"]) == 0
    out = capsys.readouterr()
    assert out.out.startswith("MKTA") and len(out.out.strip()) == 7
    assert ("note: Read as a protein sequence: dropped 1 FASTA header line, removed 1 line break or space, "
            "upper-cased 4 letters.\n") in out.err


def test_infill_summary_line_agrees_with_its_counts(tiny_world, capsys):
    """"1 token, 1 call, 1 round" (not "1 tokens, 1 calls"), and a hybrid's missing log p said in words."""
    assert main(["infill", "--model", _asarm(tiny_world), "--sampler", "sequential-cache", "The [MASK:1] sat."]) == 0
    err = capsys.readouterr().err
    assert ": 1 token, 1 call, 1 round, 1.00 tokens/call, " in err and "log p = -" in err
    assert main(["infill", "--model", "tiny-hybrid", "--sampler", "mdm", "--steps", "2", "The [MASK:3] sat."]) == 0
    err = capsys.readouterr().err
    assert ": 3 tokens, " in err and "log p = n/a (hybrid model: no exact likelihood)" in err and "None" not in err


def test_infill_says_which_flags_its_sampler_ignores(tiny_world, capsys):
    """--steps means nothing to a cached sequential run: the CLI says so (the page hides such knobs);
    a knob the sampler reads, or one left at its default, is not mentioned."""
    assert main(["infill", "--model", _asarm(tiny_world), "--sampler", "sequential-cache", "--steps", "5",
                 "--temperature", "0.9", "The [MASK:1] sat."]) == 0
    err = capsys.readouterr().err
    assert "note: sequential-cache does not read --steps; ignored" in err, err
    assert main(["infill", "--model", _asarm(tiny_world), "--sampler", "assd-cache", "--k", "3", "The [MASK:2] sat."]) == 0
    assert "does not read" not in capsys.readouterr().err
    assert main(["infill", "--model", "tiny-hybrid", "--sampler", "mdm", "--steps", "2", "The [MASK:3] sat."]) == 0
    assert "does not read" not in capsys.readouterr().err  # mdm reads steps

def test_models_json_lists_the_operator_folders(tiny_world, capsys):
    import os
    from pathlib import Path

    rows = _json_out(capsys, ["models", "--json"])
    assert isinstance(rows, list)
    names = {r["name"]: r for r in rows}
    folder = Path(os.environ["INFILL_MODEL_DIRS"].split(os.pathsep)[0])
    hybrid = names["tiny-hybrid"]  # the operator's folder, listed with its kind and where it lives
    assert hybrid["kind"] == "hybrid" and Path(hybrid["path"]).resolve() == (folder / "tiny-hybrid").resolve()
    assert names["text-asarm"]["kind"] == "asarm"


def test_bench_assd_json_rows(tiny_world, capsys):
    d = _json_out(capsys, ["bench", "assd", "--model", _asarm(tiny_world), "--length", "24", "--samples", "2", "--k", "3",
                           "--json"])
    rows = {r["sampler"]: r for r in d["rows"]}
    assert {"sequential-cache", "sequential", "assd", "assd-cache", "assd-pipelined", "assd-ngram"} <= set(rows)
    assert d["baseline"] == "sequential-cache"
    for r in rows.values():
        assert {"calls_mean", "calls_se", "tokens_per_round", "tokens_per_call", "wall_ratio_vs_sequential_cache",
                "wall_ratio_vs_sequential_cache_median", "cpu_ratio_vs_sequential_cache", "wall_ratio_vs_sequential"} <= set(r)
        assert 0 < r["calls_mean"] <= 23 and r["tokens_per_call"] >= 1.0
        assert r["wall_ratio_vs_sequential_cache_min"] <= r["wall_ratio_vs_sequential_cache_median"] \
            <= r["wall_ratio_vs_sequential_cache_max"]
    assert rows["sequential-cache"]["wall_ratio_vs_sequential_cache"] == pytest.approx(1.0)
    assert rows["sequential"]["wall_ratio_vs_sequential"] == pytest.approx(1.0)
    assert rows["sequential"]["calls_mean"] == rows["sequential-cache"]["calls_mean"]
    assert rows["assd"]["calls_mean"] == rows["assd-cache"]["calls_mean"]  # same random stream, same decisions
    for r in rows.values():  # issue 24: rounds and drafting-network passes on every row
        assert r["rounds"] > 0 and r["tokens_per_round"] == pytest.approx(d["masked_tokens_mean"] * 2 / r["rounds"])
        assert r["drafter_passes"] == 0 and r["drafter_passes_per_round"] == 0  # no drafting network here
        # a round's wall time split into the AS-ARM's calls, the drafter's and the host's shares
        shares = r["asarm_ms_per_round"] + r["drafter_ms_per_round"] + r["host_ms_per_round"]
        assert r["asarm_ms_per_round"] > 0 and shares == pytest.approx(
            1000 * r["seconds_mean"] * d["samples"] / r["rounds"], rel=1e-6)
    assert rows["assd-ngram"]["drafter_ms_per_round"] > 0, "the n-gram's counting is drafting time"
    assert rows["assd-cache"]["drafter_ms_per_round"] == 0, "its drafts come from an AS-ARM call"


def test_bench_self_spec_json_rows_and_plot(tiny_world, capsys):
    d = _json_out(capsys, ["bench", "self-spec", "--model", "tiny-hybrid", "--length", "24", "--samples", "2",
                           "--json"])
    samplers = {r["sampler"] for r in d["rows"]}
    assert samplers == {"mdm", "self-spec"}
    for r in d["rows"]:
        assert {"sampler", "setting", "calls_mean", "calls_best_mean", "quality", "quality_metric", "entropy"} <= set(r)
        assert 0 < r["calls_best_mean"] <= r["calls_mean"]
    html = (tiny_world / d["html"]).read_text()
    assert len(html) > 1_000_000 and 'src="https://cdn.plot.ly' not in html  # plotly.js inlined: works offline


def test_default_sampler_is_the_measured_fastest_speculative_one():
    """CLI, API and app share one default per domain (issue 24 §3): the fastest exact *speculative*
    sampler measured, recorded with the ratio it was measured at (docs/RESULTS.md)."""
    import inspect

    from engine.api import InfillRun
    from engine.cli import build_parser
    from engine.samplers import DEFAULT_SAMPLER, DEFAULT_SAMPLERS, DOMAIN_DEFAULT, SAMPLERS, cost_sentence, default_sampler

    assert set(DEFAULT_SAMPLERS) == {"text", "code", "protein"}
    for domain, choice in DEFAULT_SAMPLERS.items():
        spec = SAMPLERS[choice.sampler]
        assert spec.kind == "asarm" and "k" in spec.reads, "a default that drafts (speculative)"
        assert choice.sampler not in ("sequential", "sequential-cache")
        assert default_sampler(domain) == choice.sampler
        assert f"{choice.ratio:.2f}x" in cost_sentence(domain)
    for domain, choice in DEFAULT_SAMPLERS.items():  # a default slower than the baseline says so
        assert ("does not save time" in cost_sentence(domain)) == (choice.ratio < 1), domain
    import dataclasses

    from engine import samplers

    slow = dataclasses.replace(DEFAULT_SAMPLERS["text"], ratio=0.84)
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(samplers.DEFAULT_SAMPLERS, "text", slow)
        assert "does not save time" in cost_sentence("text") and "1.19x its time" in cost_sentence("text")
    assert DEFAULT_SAMPLER == default_sampler("text")
    assert build_parser().parse_args(["infill", "x [MASK]"]).sampler is None  # resolved by the domain
    assert inspect.signature(InfillRun).parameters["sampler"].default == DOMAIN_DEFAULT


def test_default_sampler_follows_the_domain(tiny_world):
    """A run without a sampler gets its domain's default (the model's domain when no domain is given)."""
    from engine.api import InfillRun
    from engine.samplers import default_sampler

    run = InfillRun("ab[MASK:3]cd", model=_asarm(tiny_world))
    assert run.spec.name == default_sampler(run.lm.domain)


def test_bench_calls_json_rows(tiny_world, capsys):
    d = _json_out(capsys, ["bench", "calls", "--model", _asarm(tiny_world), "--context", "8", "--reps", "4", "--json"])
    shapes = [(r["content_rows"], r["query_rows"]) for r in d["rows"]]
    assert shapes[0] == (1, 1) and (5, 35) in shapes
    assert d["rows"][0]["cost_vs_one_token_call"] == pytest.approx(1.0)
    assert all(r["cpu_ms_q1"] <= r["cpu_ms_median"] <= r["cpu_ms_q3"] for r in d["rows"])


@pytest.mark.skipif(not bf16_available(), reason="no AMX tiles or no oneDNN bfloat16 on this CPU")
def test_bench_calls_times_each_precision_in_its_own_worker(tiny_world, capsys):
    """--precision fp32,bf16: one table per precision asked, each worker saying what its model
    computed in; a bad name stops the command with one line before any worker starts."""
    d = _json_out(capsys, ["bench", "calls", "--model", _asarm(tiny_world), "--context", "8", "--reps", "3",
                           "--precision", "fp32,bf16", "--json"])
    assert list(d["by_precision"]) == ["fp32", "bf16"]
    assert d["precision_used"] == {"fp32": "fp32", "bf16": "bf16"}
    assert d["rows"] == d["by_precision"]["fp32"]
    assert all(len(rows) == len(d["rows"]) for rows in d["by_precision"].values())
    assert main(["bench", "calls", "--model", _asarm(tiny_world), "--precision", "fp32,int8"]) == 2
    assert "Unknown precision 'int8'" in capsys.readouterr().err
