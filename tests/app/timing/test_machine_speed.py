"""Speed figures say where they come from: this machine's own measurement when one was made here
(kept with the machine's description), else the catalogue's figure, said to be from the docs'
machine. The benchmark never runs in tests: its command is replaced."""

from __future__ import annotations

import json

import pytest

from app import choices
from app.timing import machine_speed
from engine.samplers import DEFAULT_SAMPLERS


@pytest.fixture()
def cache(tmp_path, monkeypatch):
    path = tmp_path / "speed.json"
    monkeypatch.setenv("INFILL_MACHINE_SPEED_FILE", str(path))
    return path


def _fake_bench(ratio):
    def run(cmd, timeout):
        sampler = cmd[cmd.index("--samplers") + 1].split(",")[1]
        return {"model": "m", "samples": 3, "rows": [
            {"sampler": "sequential-cache"},
            {"sampler": sampler, "wall_ratio_vs_sequential_cache": ratio,
             "wall_ratio_vs_sequential_cache_min": ratio - 0.1, "wall_ratio_vs_sequential_cache_max": ratio + 0.1}]}
    return run


def test_without_a_measurement_the_figure_says_it_is_from_elsewhere(cache):
    """The docs' figure, in the page's one unit (faster / slower), only as "on <machine> (docs...)"."""
    said = choices.sampler_help(DEFAULT_SAMPLERS["text"].sampler, "text")
    c = DEFAULT_SAMPLERS["text"]
    words = f"{c.ratio:.2f}x faster" if c.ratio >= 1 else f"{1 / c.ratio:.2f}x slower"
    machine = c.source.rpartition(", ")[2]  # "bench assd, DATE, MACHINE": the page names the machine
    assert words in said and machine.startswith("2-core") and f"on {machine} (docs: bench assd" in said
    assert "not measured it yet" in said
    assert "the speed of" not in said and "its time" not in said


def test_a_measurement_here_replaces_it_and_names_the_machine(cache, monkeypatch):
    monkeypatch.setattr(machine_speed, "_run_bench", _fake_bench(0.79))
    monkeypatch.setattr(machine_speed, "server_idle", lambda: True)
    said = machine_speed.measure("text")
    assert "1.27x slower (1.12-1.45)" in said and machine_speed.describe_machine() in said
    helped = choices.sampler_help(DEFAULT_SAMPLERS["text"].sampler, "text")
    assert "on this server" in helped and "(docs" not in helped  # one figure: this server's
    assert "not measured it yet" in machine_speed.speed_sentence("code")  # only text was measured
    # a cache file made on another machine is not this machine's figure
    data = json.loads(cache.read_text())
    data["text"]["machine"] = "some other machine"
    cache.write_text(json.dumps(data))
    assert "not measured it yet" in machine_speed.speed_sentence("text")


def test_never_beside_running_work(cache, monkeypatch):
    ran = []
    monkeypatch.setattr(machine_speed, "_run_bench", lambda cmd, t: ran.append(cmd))
    monkeypatch.setattr(machine_speed, "server_idle", lambda: False)
    assert "Not measured" in machine_speed.measure("text") and ran == []
    assert not cache.exists()


def test_the_bench_is_short_and_against_cached_sequential(tmp_path):
    inputs = machine_speed.bench_inputs("protein", tmp_path)
    lines = [json.loads(x) for x in inputs.read_text().splitlines()]
    assert len(lines) == 3 and "[MASK" not in lines[0]["text"] and lines[0]["mask_rate"] == 0.9
    cmd = machine_speed.bench_command("protein", ["assd-pipelined"], inputs)
    assert cmd[1:5] == ["-m", "engine", "bench", "assd"] and cmd[cmd.index("--inputs") + 1] == str(inputs)
    assert cmd[cmd.index("--samplers") + 1] == "sequential-cache,assd-pipelined"


def test_a_measurement_is_found_whatever_thread_count_torch_reports_here(cache, monkeypatch):
    """The server's handler threads read torch's default thread count, not the one the benchmark
    ran with: the saved figure is this machine's all the same, and says the threads it ran with."""
    import torch

    monkeypatch.setattr(machine_speed, "_run_bench", lambda cmd, t: {**_fake_bench(0.79)(cmd, t), "torch_threads": 1})
    monkeypatch.setattr(machine_speed, "server_idle", lambda: True)
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        machine_speed.measure("text")
        torch.set_num_threads(2)  # a fresh process or another handler thread
        said = machine_speed.speed_sentence("text")
    finally:
        torch.set_num_threads(before)
    assert "on this server" in said and "not measured it yet" not in said
    assert "with 1 torch thread," in said and json.loads(cache.read_text())["text"]["threads"] == 1


def test_a_file_saved_before_threads_were_kept_still_reads(cache):
    """An entry whose machine string carried the thread count matches this machine; an unreadable
    one is ignored, never a crash."""
    old = machine_speed.describe_machine().replace(" cores, ", " cores, 3 torch threads, ")
    entry = {"sampler": DEFAULT_SAMPLERS["text"].sampler, "ratio": 1.25, "low": 1.1, "high": 1.4, "inputs": 3,
             "model": "m", "machine": old, "measured": "2026-12-01 10:00 UTC"}
    cache.write_text(json.dumps({"text": entry, "code": {**entry, "ratio": "fast"}, "protein": [1]}))
    said = machine_speed.speed_sentence("text")
    assert "1.25x faster (1.10-1.40)" in said and "with 3 torch threads," in said
    assert "torch threads," not in said.split("(", 2)[1]  # the machine named without them
    for d in ("code", "protein"):
        assert "not measured it yet" in machine_speed.speed_sentence(d)


def test_the_sampler_help_follows_a_measurement_and_a_reload():
    """After Measure this machine the sampler help is redrawn (it was only on a sampler change), and
    both figures are read when a page loads, not when the server built it."""
    from app import create

    demo = create()
    by_id = {c._id: getattr(c, "elem_id", None) for c in demo.blocks.values()}
    fns = list(demo.fns.values())
    measure = next(f for f in fns if f.api_name == "measure_machine")
    after = [f for f in fns if f.trigger_after == measure._id]

    def outputs(f) -> set:
        return {by_id.get(c._id) for c in f.outputs}

    assert any("sampler-help" in outputs(f) for f in after)
    loads = [f for f in fns if any(t[1] == "load" for t in f.targets)]
    assert any("sampler-help" in outputs(f) for f in loads) and any("machine-speed" in outputs(f) for f in loads)
