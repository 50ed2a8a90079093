"""`python -m engine report --quick` on tiny random models and a synthetic corpus: the report is
produced and well-formed (sections, table columns, numeric cells, figures, provenance). Its numbers
are not checked: the models are random."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest
import torch

from engine.inputs.tokenization import Codec, train_bpe
from engine.models.asarm import AsArmConfig, AsArmModel
from engine.models.hybrid import HybridConfig, HybridModel
from engine.models.ptp import PtpConfig, PtpHead
from lab import report
from lab.bench_selfspec import calls_to_reach
from lab.data import sha256_file
from lab.report import measure, plan, render

WORDS = "the a cat dog sat ran on mat big red fox and saw it".split()
WINDOW = 64  # tokens the tiny models take; the quick plan's 512-token point must be skipped
NUM = re.compile(r"^-?\d+\.\d+ ± (\d+\.\d+|n/a)$")
HEADINGS = [
    "# Results",
    "## Headlines",
    "## 1. Exact samplers against sequential decoding",
    "## 2. Acceptance explained",
    "## 3. Self-speculative sampling against MDM",
    "## 4. HumanEval single-line infilling",
    "## 5. Scaling",
    "## 6. Provenance",
]
EXACT_COLUMNS = ["sampler", "inputs", "judge NLL", "entropy (bits)", "calls", "tokens/round", "tokens/call",
                 "wall ratio vs cached sequential", "wall ratio vs uncached sequential", "p (judge NLL)", "p (entropy)",
                 "flag"]


def _corpus(domain: str, rng: random.Random, n: int) -> list[str]:
    if domain == "code":
        return [f"def f{i}(x):\n    return x + {rng.randint(0, 9)}\n" for i in range(n)]
    return [" ".join(rng.choice(WORDS) for _ in range(40)) + "." for _ in range(n)]


def _write_data(root: Path) -> list[str]:
    rng = random.Random(0)
    texts = []
    for domain in ("text", "code"):
        folder = root / "corpora" / domain
        folder.mkdir(parents=True)
        for split, n in (("train", 30), ("valid", 4), ("test", 12)):
            docs = _corpus(domain, rng, n)
            texts += docs
            (folder / f"{split}.jsonl").write_text("".join(json.dumps({"text": d}) + "\n" for d in docs))
    he = root / "corpora" / "humaneval"
    he.mkdir(parents=True)
    tasks = [{"task_id": f"T/{i}", "problem_id": "T", "line_index": 0, "entry_point": "add",
              "prefix": "def add(a, b):\n", "middle": f"    return a + b + {i} - {i}\n", "suffix": "",
              "test": "def check(f):\n    assert f(1, 2) == 3\n"} for i in range(4)]
    (he / "single_line.jsonl").write_text("".join(json.dumps(t) + "\n" for t in tasks))
    return texts


def _save(model, codec: Codec, folder: Path) -> None:
    model.save_pretrained(folder)
    codec.hf.save_pretrained(folder)


def _write_models(root: Path, codec: Codec) -> None:
    torch.manual_seed(0)
    ids = {"vocab_size": codec.vocab_size, "hidden_size": 16, "num_heads": 2, "intermediate_size": 32,
           "max_positions": WINDOW + 1, "bos_token_id": codec.bos_id, "pad_token_id": codec.pad_id,
           "mask_token_id": codec.mask_id, "special_token_ids": codec.special_ids}
    for domain in ("text", "code"):
        _save(AsArmModel(AsArmConfig(num_layers=2, domain=domain, **ids)), codec, root / f"{domain}-asarm")
        _save(HybridModel(HybridConfig(num_layers=2, causal_layers=1, domain=domain, **ids)), codec,
              root / f"{domain}-hybrid")
        _save(PtpHead(PtpConfig(num_layers=1, domain=domain, teacher=f"{domain}-asarm", **ids)), codec,
              root / f"{domain}-ptp")
    # the judge is an AS-ARM whose config says "judge" (no code judge: that path is tested too). Written through
    # AsArmConfig because constructing JudgeConfig(...) directly does not run AsArmConfig.__init__ under
    # transformers 5; loading it back through the registry does.
    judge = root / "text-judge"
    _save(AsArmModel(AsArmConfig(num_layers=1, domain="text", **ids)), codec, judge)
    cfg = json.loads((judge / "config.json").read_text())
    (judge / "config.json").write_text(json.dumps({**cfg, "model_type": "judge", "architectures": ["JudgeModel"]}))


def _tables(md: str) -> list[tuple[list[str], list[list[str]]]]:
    out, block = [], []
    for line in md.splitlines() + [""]:
        if line.startswith("|"):
            block.append([c.strip() for c in line.strip().strip("|").split("|")])
        elif block:
            out.append((block[0], block[2:]))
            block = []
    return out


@pytest.fixture
def tiny_world(tmp_path, monkeypatch):
    from lab import bench_selfspec, metrics

    texts = _write_data(tmp_path / "data")
    codec = Codec(train_bpe(texts, vocab_size=300))
    _write_models(tmp_path / "models", codec)
    monkeypatch.setenv("INFILL_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("INFILL_MODEL_DIRS", str(tmp_path / "models"))
    for cached in (bench_selfspec.train_words, metrics.train_words):
        cached.cache_clear()
    yield tmp_path
    for cached in (bench_selfspec.train_words, metrics.train_words):  # don't leak the synthetic vocabulary
        cached.cache_clear()


@pytest.mark.timeout(600)
def test_quick_report_is_well_formed(tiny_world):
    out = tiny_world / "docs" / "RESULTS.md"
    models = tiny_world / "models"
    argv = ["--quick", "--domains", "text,code", "--models-dir", str(models), "--out", str(out)]
    assert report.cli(argv) == 0
    md = out.read_text()

    # the regenerating command at the top, every section, no failed section
    assert "Regenerate with: `python -m engine report --quick" in "\n".join(md.splitlines()[:4])
    positions = [md.find(h + "\n") for h in HEADINGS]
    assert all(p >= 0 for p in positions) and positions == sorted(positions), positions
    assert plan.ERROR_MARK not in md

    tables = _tables(md)
    # 1. one exact-sampler table per domain, every sampler present, numeric mean ± SE cells
    exact = [rows for head, rows in tables if head == EXACT_COLUMNS]
    assert len(exact) == 2
    for i, rows in enumerate(exact):
        assert [r[0] for r in rows] == plan.EXACT
        for r in rows:
            assert int(r[1]) == 2
            for cell in r[3:9]:
                assert NUM.match(cell), (r[0], cell)
            judge = r[2]
            assert NUM.match(judge) if i == 0 else judge == "n/a"  # text has a judge, code has none
            if r[0] != "sequential":
                assert r[11] in ("ok", "**differs (judge NLL)**", "**differs (entropy)**",
                                 "**differs (judge NLL, entropy)**")
    # 2. acceptance: measured against predicted by position in round
    acc = [rows for head, rows in tables if head[:5] == ["sampler", "position in round", "tested drafts",
                                                         "measured rate", "predicted rate"]]
    assert len(acc) == 2 and all(acc)
    assert any(r[0] == "assd" and NUM.match(r[3]) and NUM.match(r[4]) for r in acc[0])
    # 3. self-spec against MDM, with the matched-quality ratio column
    ss = [rows for head, rows in tables if head[:4] == ["sampler", "setting", "calls (best case)", "calls (raw)"]]
    assert len(ss) == 2
    for rows in ss:
        assert {r[0] for r in rows} == {"mdm", "self-spec"}
        assert all(re.match(r"^\d+\.\d+$", r[2]) and re.match(r"^\d+\.\d+$", r[3]) for r in rows)
        assert all(float(r[2]) <= float(r[3]) for r in rows)  # the best case never costs more
        assert all(r[2] == r[3] for r in rows if r[0] == "self-spec")
        assert all(r[-1] for r in rows if r[0] == "self-spec")
    # 4. HumanEval: a row per code sampler with a pass@1 and calls
    he = [rows for head, rows in tables if head[:4] == ["sampler", "tasks", "pass@1", "calls per task"]]
    assert len(he) == 1 and [r[0] for r in he[0]] == plan.EXACT
    assert all(int(r[1]) == 3 and NUM.match(r[2]) and re.match(r"^\d+\.\d+$", r[3]) for r in he[0])
    # 5. scaling: calls and seconds per length / mask rate; 512 exceeds the tiny window and says so
    sc = [(head, rows) for head, rows in tables if head[0] == "sampler" and head[-1] == "slope"]
    assert len(sc) == 8  # (calls, seconds) x (length, mask rate) x 2 domains
    assert sc[0][0] == ["sampler", "L=16", "L=32", "L=64", "slope"]
    assert sc[2][0] == ["sampler", "rate=0.25", "rate=0.5", "rate=0.95", "slope"]
    for _head, rows in sc:
        for r in rows:
            if r[0] != "masked tokens":
                assert all(NUM.match(c) for c in r[1:-1]), r
    assert f"length 512 skipped: exceeds the models' {WINDOW}-token window" in md
    assert "grow" in md.split("## 5. Scaling")[1]

    # figures: every one referenced exists (PNG, or HTML where static export is unavailable)
    links = re.findall(r"\]\((figures/[^)]+)\)", md)
    names = {Path(p).stem for p in links}
    assert {"acceptance-text", "self-spec-text", "scaling-text", "scaling-code"} <= names
    for rel in links:
        f = out.parent / rel
        assert f.is_file() and f.stat().st_size > 0, rel

    # 6. provenance: models with their weight hashes, seeds, machine, date
    prov = md.split("## 6. Provenance")[1]
    for name in ("text-asarm", "text-hybrid", "text-judge", "code-asarm", "code-hybrid"):
        digest = sha256_file(models / name / "model.safetensors")
        assert digest in prov and name in prov
    assert "code-judge" in prov  # listed among the models not used
    for line in ("- Date: ", "- Machine: ", "- Seeds: ", "- Runtime: "):
        assert line in prov
    assert "CPU model" in prov and "torch threads" in prov and "cores" in prov
    # every table section names its models with a hash
    assert md.count("_Models: ") >= 7


def test_calls_to_reach_interpolates_the_mdm_curve():
    curve = [(2.0, 0.5), (4.0, 0.7), (8.0, 0.9)]
    calls, kind = calls_to_reach(curve, 0.8, lower_better=False)
    assert kind == "exact" and calls == pytest.approx(6.0)
    assert calls_to_reach(curve, 0.4, lower_better=False) == (2.0, "upper")
    assert calls_to_reach(curve, 0.95, lower_better=False) == (8.0, "lower")
    nll = [(2.0, 3.0), (4.0, 2.0)]
    calls, kind = calls_to_reach(nll, 2.5, lower_better=True)
    assert kind == "exact" and calls == pytest.approx(3.0)


def test_figures_fall_back_to_html_when_static_export_fails(tmp_path, monkeypatch):
    import plotly.graph_objects as go
    import plotly.io as pio

    def broken(*args, **kwargs):
        raise RuntimeError("no Chromium here")

    monkeypatch.setattr(pio, "write_images", broken)
    paths, how = render.export_figures({"f": go.Figure(go.Scatter(x=[1, 2], y=[3, 4]))}, tmp_path)
    assert paths["f"].suffix == ".html" and paths["f"].is_file()
    assert "HTML" in how and "no Chromium here" in how


def test_worker_processes_measure_the_same_runs(tiny_asarm, monkeypatch):
    """--workers shares inputs among processes; the records (seeded runs) are the ones one process makes."""
    from pathlib import Path

    from tests.support.tiny import masked_input

    info = measure.ModelInfo(name="tiny", kind="asarm", domain="text", path=Path(tiny_asarm.path), sha256="", max_tokens=6,
                             lm=tiny_asarm)
    arms = [measure.Arm(label=s, sampler=s, model=info) for s in ("sequential", "assd-pipelined")]
    inputs = {"tiny": [masked_input(tiny_asarm.codec, {i: "b"}, 6) for i in range(3)]}
    got = {}
    for workers in (1, 2):
        monkeypatch.setattr(measure, "WORKERS", workers)
        notes: list[str] = []
        recs = measure.measure(inputs, arms, seed=5, k=3, notes=notes, warmup=False)
        assert notes == []
        got[workers] = {a: [(r.index, r.calls, r.generated, r.events) for r in rs] for a, rs in recs.items()}
    # decisions exactly; probabilities to float rounding (a worker process may split a matmul over
    # another number of threads, which changes the last bit of a float64 sum)
    decisions = {w: {a: [(i, c, g, [e[:2] for e in ev]) for i, c, g, ev in rs] for a, rs in d.items()}
                 for w, d in got.items()}
    assert decisions[1] == decisions[2] and all(len(v) == 3 for v in got[1].values())
    for a in got[1]:
        for one, two in zip(got[1][a], got[2][a], strict=True):
            assert [e[2] for e in one[3]] == pytest.approx([e[2] for e in two[3]], rel=1e-12, abs=1e-15)
