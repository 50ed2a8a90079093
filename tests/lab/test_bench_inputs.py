"""`bench assd|self-spec --inputs FILE.jsonl`: a user's own inputs, every row per input plus the
summary over the file, bad lines reported by number while the rest run; and the same command
sharded over two processes (torchrun, gloo on the CPU) prints the same rows as one process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from engine.cli import main
from lab import bench
from lab.machine import describe
from tests.engine.test_cli import tiny_world  # noqa: F401 - the fixture: tiny AS-ARM + hybrid + corpus

ROOT = Path(__file__).resolve().parents[2]
LINES = [
    '{"text": "The old [MASK:5] sat by the sea."}',
    '{"text": "broken',
    '{"text": "The man and the dog ran home to the boat.", "mask_rate": 0.4}',
    "",
    '{"text": "nothing masked here"}',
    '{"text": "A dog [MASK:3] home.", "mask_rate": 0.3}',
    '["a list"]',
    '{"text": "The dog and the [MASK:12] ran home."}',
    '{"text": "A man and a dog ran to the sea and the boat.", "mask_rate": 0.8}',
]
GOOD = [1, 3, 8, 9]


@pytest.fixture()
def inputs_file(tmp_path):
    f = tmp_path / "inputs.jsonl"
    f.write_text("\n".join(LINES) + "\n")
    return f


def _bench(capsys, argv):
    assert main(argv) == 0
    out = capsys.readouterr()
    return json.loads(out.out), out.err


def test_bench_assd_inputs_rows_per_input_and_summary(tiny_world, inputs_file, capsys):  # noqa: F811
    model = str(tiny_world / "models" / "text-asarm")
    d, err = _bench(capsys, ["bench", "assd", "--model", model, "--inputs", str(inputs_file), "--k", "3",
                             "--samplers", "sequential-cache,assd", "--json"])
    assert [p["line"] for p in d["per_input"]] == GOOD and d["samples"] == 4
    for n in (2, 5, 6, 7):  # reported by line number, on stderr and in the JSON
        assert f"{inputs_file}:{n}:" in err and any(s.startswith(f"{inputs_file}:{n}:") for s in d["skipped"])
    assert "not JSON" in err and "Nothing is masked" in err and "not both" in err
    assert d["per_input"][0]["masked_tokens"] == 5 and d["per_input"][2]["masked_tokens"] == 12
    summary = {r["sampler"]: r for r in d["rows"]}
    for s in ("sequential-cache", "assd"):
        one = [next(r for r in p["rows"] if r["sampler"] == s) for p in d["per_input"]]
        assert set(one[0]) == set(summary[s]), "a per-input row has every field of a summary row"
        assert summary[s]["calls_mean"] == pytest.approx(sum(r["calls_mean"] for r in one) / 4)
        tokens = sum(p["masked_tokens"] for p in d["per_input"])
        assert summary[s]["tokens_per_call"] == pytest.approx(tokens / sum(r["calls_mean"] for r in one))
    assert all(r["calls_mean"] == p["masked_tokens"] for p in d["per_input"] for r in p["rows"]
               if r["sampler"] == "sequential-cache")  # one call per token: the inputs are the ones asked for
    first = d["per_input"][0]["fills"]
    assert set(first) == {"sequential-cache", "assd"} and all(len(f) == 1 for f in first.values())
    # every figure names its machine and the load around its run (docs/RESULTS.md quotes both)
    assert d["machine"] == describe() and set(d["load_average"]) == {"before", "after"}
    assert all(v is None or v >= 0 for v in d["load_average"].values())


def test_bench_self_spec_inputs(tiny_world, inputs_file, capsys):  # noqa: F811
    d, err = _bench(capsys, ["bench", "self-spec", "--model", "tiny-hybrid", "--inputs", str(inputs_file),
                             "--mdm-steps", "4", "--self-spec", "0.2,1", "--json"])
    assert [p["line"] for p in d["per_input"]] == GOOD and f"{inputs_file}:2:" in err
    settings = [(r["setting"], r["quality_metric"]) for r in d["rows"]]
    for p in d["per_input"]:
        assert [(r["setting"], r["quality_metric"]) for r in p["rows"]] == settings
    mdm = [next(r for r in p["rows"] if r["setting"] == "T=4") for p in d["per_input"]]
    assert d["rows"][0]["calls_mean"] == pytest.approx(sum(r["calls_mean"] for r in mdm) / 4)


def test_an_inputs_file_with_nothing_usable_is_one_line(tiny_world, tmp_path, capsys):  # noqa: F811
    f = tmp_path / "bad.jsonl"
    f.write_text("nope\n")
    assert main(["bench", "assd", "--model", str(tiny_world / "models" / "text-asarm"), "--inputs", str(f)]) == 2
    assert capsys.readouterr().err.strip().endswith("no usable input (1 line(s) left out)")


def _env(world) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "INFILL_MODEL_DIRS": str(world / "models"),
           "INFILL_DATA_DIR": str(world / "data"), "INFILL_DEVICE": "cpu", "OMP_NUM_THREADS": "1"}
    for k in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(k, None)
    return env


def test_two_processes_print_the_same_rows_as_one(tiny_world, inputs_file):  # noqa: F811
    args = ["-m", "engine", "bench", "assd", "--model", str(tiny_world / "models" / "text-asarm"), "--inputs",
            str(inputs_file), "--k", "3", "--samplers", "sequential-cache,assd-pipelined", "--json"]
    runs = {}
    for n, pre in ((1, []), (2, ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"])):
        p = subprocess.run([sys.executable, *pre, *args], cwd=tiny_world, env=_env(tiny_world), capture_output=True,
                           text=True, timeout=180)
        assert p.returncode == 0, p.stderr[-3000:]
        runs[n] = json.loads(p.stdout)  # one JSON document: only the main process prints
    assert (runs[1]["processes"], runs[2]["processes"]) == (1, 2)

    def counts(d):
        keep = ("sampler", "calls_mean", "calls_se", "tokens_per_round", "tokens_per_call")
        return ([{k: r[k] for k in keep} for r in d["rows"]],
                [(p["line"], p["masked_tokens"], [{k: r[k] for k in keep} for r in p["rows"]], p["fills"])
                 for p in d["per_input"]],
                d["skipped"], d["samples"])

    assert counts(runs[2]) == counts(runs[1])


PROBE = """
import json
from lab import shard
got = shard.shard_map(lambda i, x: (x * 10, shard.world()[0]), list(range(5)))
if shard.is_main():
    print(json.dumps(got))
"""


def test_each_process_takes_its_share_and_the_main_one_gets_all_in_order(tmp_path):
    script = tmp_path / "probe.py"
    script.write_text(PROBE)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    p = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                        str(script)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)
    assert p.returncode == 0, p.stderr[-3000:]
    got = json.loads(p.stdout)
    assert [v for v, _ in got] == [0, 10, 20, 30, 40], "results in input order"
    assert [r for _, r in got] == [0, 0, 0, 1, 1], "contiguous shares: 3 inputs on rank 0, 2 on rank 1"


def test_mask_rate_lines_mask_the_same_positions_in_every_process(tiny_world, inputs_file):  # noqa: F811
    from engine.inputs.tokenization import Codec
    from lab.workloads import read_inputs

    codec = Codec.load(tiny_world / "models" / "text-asarm")
    a, b = (read_inputs(inputs_file, codec, 128, seed=0) for _ in range(2))
    assert [mi.masked for mi in a.inputs] == [mi.masked for mi in b.inputs], "seeded by --seed + line number"
    other = read_inputs(inputs_file, codec, 128, seed=5)
    assert other.inputs[1].masked != a.inputs[1].masked and other.inputs[0].masked == a.inputs[0].masked
    assert len(a.inputs[1].masked) == round(0.4 * len(a.inputs[1].tokens))


def test_bench_assd_measures_two_settings_of_one_sampler_side_by_side(tiny_world, inputs_file, capsys):  # noqa: F811
    """`--samplers assd-ngram:confidence=0,assd-ngram`: one sampler with a knob of its own beside its
    default, each its own row; the knob reaches the run (confidence 0 drafts every round; 1 never
    drafts, so every round is one call and one token)."""
    model = str(tiny_world / "models" / "text-asarm")
    d, _ = _bench(capsys, ["bench", "assd", "--model", model, "--inputs", str(inputs_file), "--k", "3", "--json",
                           "--samplers", "sequential-cache,assd-ngram:confidence=0,assd-ngram:confidence=1"])
    rows = {r["sampler"]: r for r in d["rows"]}
    assert set(rows) == {"sequential-cache", "assd-ngram:confidence=0", "assd-ngram:confidence=1"}
    never = rows["assd-ngram:confidence=1"]
    assert never["tokens_per_call"] == 1.0 and never["calls_mean"] == rows["sequential-cache"]["calls_mean"]
    assert rows["assd-ngram:confidence=0"]["calls_mean"] < never["calls_mean"]


def test_bench_assd_runs_a_sampler_in_another_precision_beside_the_run(tiny_world, inputs_file, capsys,  # noqa: F811
                                                                        monkeypatch):
    """`sequential-cache@fp32` in a bf16 run: its own row, on the model loaded in float32 (the run's
    other samplers on the bf16 one), its calls left out of the cost curve that prices the others."""
    from engine.loading import precision

    if not precision.bf16_available():
        pytest.skip("no AMX tiles or no oneDNN bfloat16 on this CPU")
    monkeypatch.setenv("INFILL_PRECISION", "bf16")
    model = str(tiny_world / "models" / "text-asarm")
    seen = []
    real = bench.drain
    monkeypatch.setattr(bench, "drain", lambda lm, *a, **kw: seen.append(lm.precision) or real(lm, *a, **kw))
    d, _ = _bench(capsys, ["bench", "assd", "--model", model, "--inputs", str(inputs_file), "--k", "3", "--json",
                           "--samplers", "sequential-cache,sequential-cache@fp32,assd-ngram"])
    rows = {r["sampler"]: r for r in d["rows"]}
    assert set(rows) == {"sequential-cache", "sequential-cache@fp32", "assd-ngram"} and d["precision"] == "bf16"
    assert set(seen[:3]) == {"bf16", "fp32"} and seen.count("fp32") == len(seen) // 3
    # one token a call either way (the same input and seed; the two models' fills may differ)
    assert rows["sequential-cache@fp32"]["tokens_per_call"] == 1.0 == rows["sequential-cache"]["tokens_per_call"]
    assert bench.observed_costs([{"a": {"rows": [2], "call_seconds": [0.001]},
                                  "a@fp32": {"rows": [2], "call_seconds": [0.009]}}]) == {2: 1.0}


@pytest.mark.parametrize("entry,says", [("assd-ngram:confidance=0", "unknown argument(s) confidance"),
                                        ("sequential-cache@fp16", "precision 'fp16' in sequential-cache@fp16"),
                                        ("assd-ngram:confidence=2", "outside the allowed range"),
                                        ("assd-ngram:confidence", "is not KNOB=VALUE"),
                                        ("assd-ngrm", "unknown sampler 'assd-ngrm'")])
def test_bench_assd_refuses_a_bad_sampler_setting_before_it_runs(tiny_world, capsys, entry, says):  # noqa: F811
    model = str(tiny_world / "models" / "text-asarm")
    with pytest.raises(SystemExit) as e:
        main(["bench", "assd", "--model", model, "--samplers", f"sequential-cache,{entry}"])
    assert e.value.code == 2 and says in capsys.readouterr().err
