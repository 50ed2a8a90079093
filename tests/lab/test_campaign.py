"""The GPU campaign (lab/campaign.py) as a CPU dry run: every step on tiny models and data,
in a subprocess whose imports of the app, the store, gradio, sqlalchemy and plotly fail (as on the
GPU machine), one step made to fail on purpose; then what it would bring back: at most 8 files of
at most 16 MiB, 64 MiB in all, the models among them unpackable. Plus the travel packing."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from lab import campaign_pack as pack
from lab.campaign_plan import DRY_SIZES, GPU_JOBS, TRAVEL, Travel, gpu_budget
from tests.support.tiny import cpu_data_env

ROOT = Path(__file__).resolve().parents[2]
BLOCKED = ("app", "storage", "gradio", "sqlalchemy", "plotly")
WORDS = ("the dog cat sat ran under over table house river old man woman sea walked looked morning "
         "afternoon garden quietly slept small green light").split()

SITECUSTOMIZE = f"""
import sys
BLOCKED = {BLOCKED!r}
class _Block:
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in BLOCKED:
            raise ImportError('blocked on the GPU machine: ' + name)
        return None
sys.meta_path.insert(0, _Block())
"""


def text_corpus(root: Path) -> None:
    rng = random.Random(0)
    out = root / "corpora" / "text"
    out.mkdir(parents=True, exist_ok=True)
    for split, n in (("train", 300), ("valid", 40), ("test", 40)):
        rows = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 20))).capitalize() + "." for _ in range(n)]
        (out / f"{split}.jsonl").write_text("".join(json.dumps({"id": str(i), "text": t}) + "\n"
                                                    for i, t in enumerate(rows)))


@pytest.fixture(scope="module")
def bundled(tmp_path_factory):
    """A tiny 'bundled' text AS-ARM and one-pass PTP head (the real tokenizer), and a tiny corpus."""
    from lab import train

    tmp = tmp_path_factory.mktemp("campaign")
    text_corpus(tmp / "data")
    with cpu_data_env(tmp / "data"):
        small = ["--hidden", "16", "--layers", "2", "--heads", "2", "--ffn", "32", "--seq-len", "32", "--batch", "2",
                 "--threads", "1", "--steps", "2", "--minutes", "5", "--quiet"]
        assert train.cli(["--kind", "asarm", "--domain", "text", "--out", str(tmp / "models" / "text-asarm"),
                          *small]) == 0
        assert train.cli(["--kind", "ptp", "--domain", "text", "--teacher", str(tmp / "models" / "text-asarm"),
                          "--out", str(tmp / "models" / "text-ptp1"), "--ptp-mode", "onepass", "--k", "3",
                          *small[2:]]) == 0
    return tmp


def blocked_env(tmp: Path) -> dict:
    block = tmp / "block"
    block.mkdir(exist_ok=True)
    (block / "sitecustomize.py").write_text(SITECUSTOMIZE)
    env = {k: v for k, v in os.environ.items() if k not in ("INFILL_DATA_DIR", "OUT")}
    return {**env, "PYTHONPATH": os.pathsep.join([str(block), str(ROOT)]), "INFILL_DEVICE": "cpu"}


def test_the_dry_run_runs_every_step_and_brings_back_what_fits(bundled):
    """About 40 s of CPU (eleven short processes); the generous budget is only an upper bound, for
    a machine shared with other work (each step's cap is a share of it)."""
    env = blocked_env(bundled)
    probe = subprocess.run([sys.executable, "-c", "import gradio"], env=env, capture_output=True, text=True)
    assert probe.returncode != 0 and "blocked on the GPU machine" in probe.stderr  # the blocker is live
    out = bundled / "OUT"
    r = subprocess.run([sys.executable, "-m", "lab.campaign", "run", "--dry-run", "--out", str(out),
                        "--work", str(bundled / "work"), "--models-dir", str(bundled / "models"),
                        "--data-dir", str(bundled / "data"), "--travel", str(bundled / "no-travel"),
                        "--domains", "text", "--seconds", "2400", "--fail", "bench-calls-xlnet"],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=2400)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert r.stdout.splitlines()[0].startswith("versions: python")
    for name in ("torch", "transformers", "accelerate", "numpy", "scipy"):
        assert f" {name} " in r.stdout.splitlines()[0]
    rows = {row["step"]: row for row in map(json.loads, (out / "campaign.jsonl").read_text().splitlines())}
    assert list(rows)[0] == "versions"
    bad = rows["bench-calls-xlnet"]  # the injected failure is logged ...
    assert bad["ok"] is False and "injected failure" in bad["error"]
    for step in ("bench-assd-text", "bench-calls-text", "train-text-asarm", "train-text-ptp1",  # ... the rest ran
                 "eval-text-asarm", "eval-text-ptp1", "eval-text-ptp1-bundled", "fills-text-asarm-new",
                 "fills-text-asarm-bundled", "bench-assd-text-new", "done"):
        assert rows[step]["ok"] is True, rows[step]
    plan, asarm_job, head_job = rows["train-plan"], rows["train-text-asarm"], rows["train-text-ptp1"]
    first = dict(plan["jobs"])  # the shares fixed in advance: what each job is first given
    probe, size = rows["probe-text-asarm"], rows["size-text-asarm"]  # tokens/s measured, then the size picked
    assert probe["ok"] and size["ok"] and tuple(size["size"]) in DRY_SIZES and size["probe"]["tokens_per_s"] > 0
    assert [r["size"] for r in size["rows"]] == [list(s) for s in DRY_SIZES]
    assert asarm_job["given_s"] == pytest.approx(first["text-asarm"] - probe["seconds"], abs=2)  # the probe's time
    assert asarm_job["used_s"] <= asarm_job["seconds"] + 0.1 and asarm_job["passed_on_s"] > 0  # 3 steps: seconds left
    assert asarm_job["given_s"] == pytest.approx(asarm_job["used_s"] + asarm_job["passed_on_s"], abs=0.2)
    assert head_job["given_s"] == pytest.approx(first["text-ptp1"] + asarm_job["passed_on_s"], abs=1)  # handed on
    assert head_job["passed_on_s"] > 0 and rows["train-end"]["passed_on_s"] == pytest.approx(head_job["passed_on_s"], abs=0.1)
    curve = head_job["curve"]  # the PTP job's held-out acceptance curve: a point a step, the start's first
    assert [tok for tok, _ in curve][0] == 0 and len(curve) == 4 and all(0 < acc <= 1 for _, acc in curve)
    assert head_job["stopped_flat"] is None  # three steps never reach the rule's minimum of points
    head_state = rows["return-text-ptp1"]["train_state"]
    assert [p["acceptance"] for p in head_state["acceptance_curve"]["points"]] == [acc for _, acc in curve]
    assert head_state["acceptance_curve"]["stop_when_flat"]["window"] == 3
    samplers = {x["sampler"] for x in rows["bench-assd-text"]["result"]["rows"]}
    assert {"sequential-cache", "assd-pipelined", "assd-ptp"} <= samplers
    asarm = rows["return-text-asarm"]["train_state"]
    assert asarm["tokens_per_second"] > 0 and asarm["batch"] == size["probe"]["batch"]  # the probe's batch
    assert asarm.get("init", "").endswith("text-asarm") == (tuple(size["size"]) == DRY_SIZES[0])  # same size: continued
    back = rows["done"]["result"]
    files = sorted(p for p in out.iterdir())
    assert back["ok"] and len(files) <= 8 and all(p.is_file() and p.stat().st_size <= 16 << 20 for p in files)
    assert sum(p.stat().st_size for p in files) <= 64 << 20
    assert {"campaign.jsonl", "logs.tar.xz", "text-asarm.tar.xz", "text-ptp1.tar.xz"} <= {p.name for p in files}
    got = pack.extract_tar_xz(pack.join_parts(out / "text-asarm.tar.xz"), bundled / "back")
    assert got == ["text-asarm"] and (bundled / "back" / "text-asarm" / "model.safetensors").is_file()
    import tarfile

    with tarfile.open(out / "logs.tar.xz") as tar:
        names = tar.getnames()
    assert "logs/bench-calls-xlnet.log" in names and "train_state/text-asarm.json" in names


def test_return_parts_are_at_most_16_mib_and_join_back(tmp_path):
    data = os.urandom(40 << 10)
    paths = pack.write_parts(data, tmp_path, "m.tar.xz", part_mib=16 / 1024)  # 16 KiB parts
    assert [p.name for p in paths] == ["m.tar.xz.0", "m.tar.xz.1", "m.tar.xz.2"]
    assert all(p.stat().st_size <= 16 << 10 for p in paths)
    assert pack.join_parts(paths[0]) == data
    one = pack.write_parts(b"abc", tmp_path / "x", "s.tar.xz")
    assert [p.name for p in one] == ["s.tar.xz"] and pack.join_parts(one[0]) == b"abc"


def three_text_shards(data: Path) -> Path:
    """data/tokens/text with a valid shard and two train shards of 200,000 random tokens each."""
    arrays = data / "tokens" / "text"
    arrays.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for name in ("valid-000", "train-000", "train-001"):
        np.save(arrays / f"{name}.npy", rng.integers(4, 4096, 200_000, dtype=np.uint16))
    (arrays / "manifest.json").write_text(json.dumps({"shards": [{"file": f"{n}.npy"} for n in
                                                                 ("valid-000", "train-000", "train-001")]}))
    return arrays


def test_pack_carries_ranked_items_within_the_limit_and_unpacks(tmp_path, bundled):
    data = tmp_path / "data"
    arrays = three_text_shards(data)
    text_corpus(data)  # its test split travels beside the arrays (engine eval reads it)
    one_shard = len(pack.xz_bytes((arrays / "train-000.npy").read_bytes()))
    plan = (Travel("model", "text-asarm"), Travel("tokens", "text", cap_mib=2.2 * one_shard / (1 << 20)),
            Travel("model", "text-ptp1"), Travel("model", "code-asarm"))
    tree = pack.tree_bytes(ROOT)
    limit = (tree + 3.5 * one_shard + (2 << 20)) / (1 << 20)  # room for the tokens, not for everything
    m = pack.pack_travel(ROOT, bundled / "models", data, tmp_path / "travel", plan, limit_mib=limit, margin_mib=0)
    items = {i["name"]: i for i in m["items"]}
    assert items["text"]["shards"] == ["valid-000.npy", "train-000.npy"]  # the cap leaves train-001 behind
    assert items["text"]["tokens"] == {"train": 200_000, "valid": 200_000}
    assert items["code-asarm"]["skipped"] == "not here"
    assert m["tree_bytes"] + m["travel_bytes"] <= limit * (1 << 20)
    carried = json.loads((tmp_path / "travel" / "tokens" / "text" / "manifest.json").read_text())
    assert [s["file"] for s in carried["shards"]] == ["valid-000.npy", "train-000.npy"]
    done = pack.unpack_travel(tmp_path / "travel", tmp_path / "gpu" / "models", tmp_path / "gpu" / "data")
    assert "model text-asarm" in done and "tokens text" in done
    back = np.load(tmp_path / "gpu" / "data" / "tokens" / "text" / "train-000.npy")
    assert np.array_equal(back, np.load(arrays / "train-000.npy"))
    assert (tmp_path / "gpu" / "models" / "text-asarm" / "config.json").is_file()
    test_split = tmp_path / "gpu" / "data" / "corpora" / "text" / "test.jsonl"
    assert test_split.read_text() == (data / "corpora" / "text" / "test.jsonl").read_text()


def test_the_gpu_plan_is_fixed_in_advance():
    assert abs(sum(j.share for j in GPU_JOBS) - 1.0) < 1e-9
    assert GPU_JOBS[0].name == "text-asarm" and TRAVEL[0].name == "text-asarm"
    b = gpu_budget(plan="full")
    assert b.total_s <= 570 and b.train_s() > 0.6 * b.total_s


def test_the_text_plan_trains_at_least_390_s_of_a_command_within_its_limit():
    """The default plan's seconds add up: caps equal budgets, the command within its limit, gradient
    steps >= 390 s at the costs a rehearsal measured (generous ones here: 12 s unpack, 25 s job start,
    8 s a save); fails when a cap or the plan grows past the limit."""
    from lab.campaign_plan import CAMPAIGN_S, COMMAND_S, TEXT_JOBS, text_timeline

    b = gpu_budget()
    assert b.total_s == CAMPAIGN_S <= COMMAND_S <= 570
    assert b.speed_s == b.step_cap_s["bench-assd"] + b.step_cap_s["bench-calls"] <= 90  # budget = caps
    assert b.eval_s == 0 and [j.name for j in TEXT_JOBS] == ["text-asarm"] and TEXT_JOBS[0].auto_size
    t = text_timeline(b, unpack_s=12, job_start_s=25, save_s=8, pack_s=6)
    assert t["gradient_steps_s"] >= 390 and t["command_s"] <= t["command_limit_s"]
    assert t["device_total_s"] <= t["device_budget_s"]


def test_the_size_is_the_largest_that_sees_20_tokens_a_parameter():
    from lab.campaign_plan import TEXT_SIZES, asarm_params, choose_text_size

    assert asarm_params(TEXT_SIZES[0]) == 10_012_480  # the bundled text AS-ARM's count (train_state.json)
    big = TEXT_SIZES[-1]
    assert choose_text_size(1.0e6, big, 400)["size"] == big  # 400M tokens >= 20 x 17.3M
    assert choose_text_size(0.7e6, big, 400)["size"] == TEXT_SIZES[1]  # 280M: 13.8M is the largest that fits
    assert choose_text_size(0.1e6, big, 400)["size"] == TEXT_SIZES[0]  # nothing fits: the smallest


def test_unused_seconds_are_handed_on_in_proportion_to_the_shares_left():
    from lab.campaign_plan import Job, share_of_pool

    jobs = (
        Job(name="a", kind="asarm", domain="text", share=0.5),
        Job(name="b", kind="ptp", domain="text", share=0.3),
        Job(name="c", kind="hybrid", domain="text", share=0.2),
    )
    assert share_of_pool(10.0, jobs, 1) == pytest.approx(6.0)  # b's 0.3 of the 0.5 still to run
    assert share_of_pool(4.0, jobs, 2) == 4.0 and share_of_pool(0.0, jobs, 0) == 0.0  # the last job: all


def test_a_gpu_ptp_job_measures_about_ten_points_and_stops_when_flat():
    from lab.campaign_plan import ptp_curve_args

    assert ptp_curve_args(100.0) == ["--curve-every", "10.0s", "--stop-when-flat", "3", "0.003", "--stop-min-points", "6"]
    assert ptp_curve_args(12.0)[:2] == ["--curve-every", "2.0s"]  # never more often than every 2 s
    assert ptp_curve_args(12.0, dry_run=True)[:2] == ["--curve-every", "1"]


def test_make_gpu_campaign_is_a_thin_wrapper_without_the_venv():
    """The GPU machine has no network: the target must not build the venv (pip) first."""
    r = subprocess.run(["make", "--no-print-directory", "-n", "gpu-campaign"], cwd=ROOT, capture_output=True, text=True,
                       env={**os.environ, "OUT": "/tmp/o"})
    assert r.returncode == 0 and r.stdout.strip().splitlines() == [
        'python3 -m lab.campaign run --out "${OUT:-runs/campaign-out}"']
    pack_cmd = subprocess.run(["make", "--no-print-directory", "-n", "gpu-campaign-pack"], cwd=ROOT,
                              capture_output=True, text=True).stdout
    assert "lab.campaign pack --out data/travel" in pack_cmd


def test_text_size_bundled_continues_the_bundled_text_asarm():
    from lab.campaign_plan import SIZE_CHOICE, with_text_size

    jobs = {j.name: j for j in with_text_size(GPU_JOBS, "bundled")}
    assert jobs["text-asarm"].size == SIZE_CHOICE["bundled"] and jobs["text-asarm"].init == "text-asarm"
    assert jobs["text-ptp1"].extra[-2:] == ("--heads", str(SIZE_CHOICE["bundled"][2]))
    assert {j.name: j for j in GPU_JOBS}["text-asarm"].size == SIZE_CHOICE["chosen"]


def test_token_shards_travel_without_their_indexes_and_a_first_shard_too_large_is_cut_to_fit(tmp_path):
    """What travels of a domain's arrays: the shards themselves (the loader reads a shard without its
    index whole), and where the first train shard does not fit the room left, its first documents,
    cut at a document end, rather than nothing (a code campaign once carried 60K 'tokens' of indexes)."""
    import io
    import lzma

    import numpy as np

    from lab.campaign_pack import pack_tokens
    from lab.campaign_plan import Travel

    arrays = tmp_path / "data" / "tokens" / "code"
    arrays.mkdir(parents=True)
    rng = np.random.default_rng(0)
    valid = rng.integers(0, 4096, 20_000).astype(np.uint16)
    train = rng.integers(0, 4096, 400_000).astype(np.uint16)  # random ids: about 1.5 bytes each after xz
    ends = np.arange(1_000, 400_001, 1_000)
    np.save(arrays / "valid-000.npy", valid)
    np.save(arrays / "train-000.npy", train)
    np.save(arrays / "train-000.docs.npy", np.stack([ends, ends * 3], 1).astype(np.int64))
    (arrays / "manifest.json").write_text(json.dumps({"splits": {
        "valid": {"shards": [{"file": "valid-000.npy"}]},
        "train": {"shards": [{"file": "train-000.npy", "index": "train-000.docs.npy"}]}}}))
    out = tmp_path / "travel"
    res = pack_tokens(Travel("tokens", "code", 0.25), tmp_path / "data", out, 10 * 2**20)
    carried = sorted(p.name for p in (out / "tokens" / "code").iterdir())
    assert carried == ["manifest.json", "train-000.npy.xz", "valid-000.npy.xz"], carried
    assert res["bytes"] <= 0.25 * 2**20
    got = np.load(io.BytesIO(lzma.decompress((out / "tokens" / "code" / "train-000.npy.xz").read_bytes())))
    assert 0 < got.size < train.size and got.size in set(ends.tolist())  # a prefix ending at a document end
    assert np.array_equal(got, train[: got.size])
    assert res["tokens"] == {"train": int(got.size), "valid": valid.size}


def test_a_pack_too_big_is_refused_in_one_line(tmp_path, bundled, capsys):
    """The tree alone over the limit: nothing fits, and the pack says so in one line, exit 2."""
    from lab import campaign

    code = campaign.cli(["pack", "--out", str(tmp_path / "travel"), "--models-dir", str(bundled / "models"),
                         "--data-dir", str(bundled / "data"), "--limit-mib", "1"])
    refused = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("pack refused")]
    assert code == 2 and len(refused) == 1 and "exceeds 0 MiB" in refused[0]
    assert campaign.cli(["pack", "--out", str(tmp_path / "ok"), "--models-dir", str(bundled / "models"),
                         "--data-dir", str(bundled / "data")]) == 0  # the real limit: the tiny pack goes


def test_check_refuses_without_the_sparse_checkout_and_over_the_limit(tmp_path):
    """`campaign check` measures the tree as it stands: the sparse checkout must leave the models out,
    and tree + travel must fit 63 MiB."""
    repo = tmp_path / "repo"
    (repo / "assets" / "models" / "m").mkdir(parents=True)
    (repo / "assets" / "models" / "m" / "w.bin").write_bytes(b"w" * 1000)
    (repo / "code.py").write_text("x = 1\n")
    git = ["git", "-c", "user.email=t@t", "-c", "user.name=t"]
    for cmd in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "c"]):
        subprocess.run([*git, *cmd], cwd=repo, check=True)
    travel = repo / "data" / "travel"
    travel.mkdir(parents=True)
    (repo / ".git" / "info" / "exclude").write_text("/data/\n")
    assert "sparse checkout is not set" in pack.check_travel(repo, travel)
    subprocess.run(["git", "sparse-checkout", "set", "--no-cone", "/*", *[f"!/{d}" for d in pack.LEFT_BEHIND]],
                   cwd=repo, check=True)
    assert not (repo / "assets" / "models").exists() and pack.check_travel(repo, travel) is None
    (travel / "tokens.xz").write_bytes(os.urandom(2 << 20))
    assert pack.check_travel(repo, travel, limit_mib=1.5).startswith("tree ")  # 2 MiB of travel: too much
    assert pack.check_travel(repo, travel, limit_mib=3) is None


def test_the_ptp_plan_trains_the_text_head_alone_continued_against_the_bundled_teacher(bundled, tmp_path):
    """`--plan ptp` (a loan spent on better drafts): no GPU speed table, every second but the packing
    to the one head; its command continues the bundled head (--init) with its teacher's attention heads,
    at a fixed batch, with the held-out curve and no stop rule (no later job would get the seconds)."""
    import argparse

    from lab.campaign import Campaign
    from lab.campaign_plan import CAMPAIGN_S, ptp_curve_args, ptp_jobs

    PTP_JOBS = ptp_jobs("text")

    b = gpu_budget(plan="ptp")
    assert b.speed_s == 0 and b.eval_s == 0 and b.train_s() >= CAMPAIGN_S - 10
    assert [(j.name, j.kind, j.share, j.init, j.teacher) for j in PTP_JOBS] == [
        ("text-ptp1", "ptp", 1.0, "text-ptp1", "text-asarm")]
    assert ptp_curve_args(500.0, stop=False) == ["--curve-every", "50.0s"]
    assert [(j.name, j.teacher, j.init) for j in ptp_jobs("code")] == [("code-ptp", "code-asarm", "code-ptp")]
    a = argparse.Namespace(out=str(tmp_path / "out"), work=str(tmp_path / "work"), models_dir=str(bundled / "models"),
                           data_dir=str(bundled / "data"), dry_run=False, seconds=CAMPAIGN_S, plan="ptp",
                           ptp_domain="text", fail=None, device="cpu")
    args = Campaign(a).job_args(PTP_JOBS[0])
    assert args[args.index("--teacher") + 1] == str(bundled / "models" / "text-asarm")
    assert args[args.index("--init") + 1] == str(bundled / "models" / "text-ptp1")
    assert args[args.index("--heads") + 1] == "2"  # the tiny teacher's, read off its config
    assert PTP_JOBS[0].batch and PTP_JOBS[0].overhead_s


def test_a_ptp_job_continues_the_bundled_head_at_its_own_rank(bundled, tmp_path):
    """A warm start keeps the low-rank term of the head it continues: the bundled code head has rank
    64, the plan's flags say 128, and a rank-128 head would have dropped the term (sizes differ) and
    started it afresh; the last --prev-rank, which the command line takes, is the bundled head's."""
    import argparse
    import json
    import shutil

    from lab.campaign import Campaign
    from lab.campaign_plan import CAMPAIGN_S, PTP_ONEPASS, ptp_jobs

    models = tmp_path / "models"
    shutil.copytree(bundled / "models", models)
    cfg_path = models / "text-ptp1" / "config.json"
    cfg = json.loads(cfg_path.read_text())
    a = argparse.Namespace(out=str(tmp_path / "out"), work=str(tmp_path / "work"), models_dir=str(models),
                           data_dir=str(bundled / "data"), dry_run=False, seconds=CAMPAIGN_S, plan="ptp",
                           ptp_domain="text", fail=None, device="cpu")
    job = ptp_jobs("text")[0]
    assert PTP_ONEPASS[PTP_ONEPASS.index("--prev-rank") + 1] == "128"

    def last_rank(args):
        return args[len(args) - 1 - args[::-1].index("--prev-rank") + 1]

    assert not cfg.get("prev_rank") and last_rank(Campaign(a).job_args(job)) == "128"  # no term: the plan's
    cfg_path.write_text(json.dumps({**cfg, "prev_rank": 64}))
    args = Campaign(a).job_args(job)
    assert "--init" in args and last_rank(args) == "64"


def test_the_ptp_plan_carries_the_head_before_the_tokens(tmp_path, bundled):
    """The head the plan continues must travel: the tokens take the room left after both models."""
    from lab.campaign_plan import ptp_travel

    PTP_TRAVEL = ptp_travel("text")
    assert [t.name for t in ptp_travel("code")] == ["code-asarm", "code-ptp", "code"]

    data = tmp_path / "data"
    arrays = three_text_shards(data)
    one_shard = len(pack.xz_bytes((arrays / "train-000.npy").read_bytes()))
    whole = pack.pack_travel(ROOT, bundled / "models", data, tmp_path / "all", PTP_TRAVEL, limit_mib=1e6, margin_mib=0)
    models = sum(i["bytes"] for i in whole["items"] if i["what"] == "model")  # as packed (compressed)
    limit = (pack.tree_bytes(ROOT) + models + 2.5 * one_shard) / (1 << 20)  # room for two of the three shards
    m = pack.pack_travel(ROOT, bundled / "models", data, tmp_path / "travel", PTP_TRAVEL, limit_mib=limit, margin_mib=0)
    items = {i["name"]: i for i in m["items"]}
    assert [i["name"] for i in m["items"]] == ["text-asarm", "text-ptp1", "text"]
    assert "skipped" not in items["text-ptp1"] and items["text"]["shards"][:1] == ["valid-000.npy"]
    assert len(items["text"]["shards"]) < 3  # the tokens, last, are the ones cut
