"""Training tokens/s of this checkout's `engine train` against another commit's, interleaved in one run.

Why: a throughput change is only believed when old and new run side by side on the same machine,
same model, same data and settings, alternating (machine load drifts; the shared CPU here is noisy).
The old trainer is `git show REF:lab/train.py` (`engine/lab/train.py` before the lab left engine/),
imported as a temporary module beside this one (it uses this checkout's models and data code). Tokens/s
is timed the same way for both: from the first training-loss call to the last (data loading, the probe
and saves excluded), batch x seq_len tokens a step.

    python -m tools.train_ab --ref main --rounds 2 --steps 12 --threads 2   (CPU; --device cuda on a GPU)
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MOVED = {"domains": "inputs.domains", "tokenization": "inputs.tokenization", "device": "loading.device",
         "threads": "loading.threads"}


def tiny_text_corpus(root: Path) -> None:
    """A text corpus from the repository's own docs and docstrings (no network, ~1 MB)."""
    docs = [p.read_text(errors="ignore") for p in sorted((ROOT / "docs").rglob("*.md"))]
    docs += [p.read_text(errors="ignore") for p in sorted((ROOT / "engine").rglob("*.py"))]
    out = root / "corpora" / "text"
    out.mkdir(parents=True, exist_ok=True)
    cut = max(1, len(docs) // 10)
    for split, rows in (("train", docs[cut:]), ("valid", docs[:cut]), ("test", docs[:cut])):
        (out / f"{split}.jsonl").write_text("".join(json.dumps({"id": str(i), "text": t}) + "\n"
                                                    for i, t in enumerate(rows)))


def old_trainer(ref: str):
    """The trainer module of `ref`, importable beside this checkout's (removed at exit)."""
    for old_path in ("lab/train.py", "engine/lab/train.py"):  # the lab was engine/lab before issue 45
        got = subprocess.run(["git", "show", f"{ref}:{old_path}"], cwd=ROOT, capture_output=True, text=True)
        if got.returncode == 0:
            break
    else:
        raise SystemExit(f"train_ab: {ref} has neither lab/train.py nor engine/lab/train.py")
    src = got.stdout
    for before, after in MOVED.items():  # the tree was regrouped since: point old imports at the new homes
        src = src.replace(f"from ..{before} import", f"from ..{after} import")
    # the module is imported as lab._train_ref_ab: an engine/lab trainer's `from ..x` reached the engine
    src = src.replace("from .. import", "from engine import").replace("from ..", "from engine.")
    path = ROOT / "lab" / "_train_ref_ab.py"
    path.write_text(src)
    try:
        return importlib.import_module("lab._train_ref_ab")
    finally:
        path.unlink()


def timed_run(cli, argv: list[str], tokens_per_step: int) -> dict:
    """One training run; tokens/s from the loss-call timestamps (the first step excluded)."""
    from engine.models.asarm import AsArmModel

    stamps: list[float] = []
    real = AsArmModel.training_loss

    def spy(self, ids, progress, gen):
        if self.training and ids.shape[0] * (ids.shape[1] - 1) == tokens_per_step:  # not the probe, not valid
            stamps.append(time.perf_counter())
        return real(self, ids, progress, gen)

    AsArmModel.training_loss = spy
    try:
        assert cli(argv) == 0
    finally:
        AsArmModel.training_loss = real
    steps = len(stamps) - 1
    return {"steps_timed": steps, "tokens_per_s": steps * tokens_per_step / max(stamps[-1] - stamps[0], 1e-9)}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ref", default="main")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--size", default="320,6,5,1280", help="hidden,layers,heads,ffn (default: the text AS-ARM's)")
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="train-ab-"))
    tiny_text_corpus(tmp / "data")
    os.environ["INFILL_DATA_DIR"] = str(tmp / "data")
    from lab import train as new

    old = old_trainer(a.ref)
    h, layers, heads, ffn = a.size.split(",")
    seq = 256
    common = ["--kind", "asarm", "--domain", "text", "--hidden", h, "--layers", layers, "--heads", heads,
              "--ffn", ffn, "--seq-len", str(seq), "--batch", str(a.batch), "--threads", str(a.threads),
              "--steps", str(a.steps), "--minutes", "60", "--save-minutes", "100", "--device", a.device, "--quiet"]
    rows = []
    for r in range(a.rounds):
        for name, mod in (("old", old), ("new", new)):
            res = timed_run(mod.cli, common + ["--out", str(tmp / f"{name}{r}")], a.batch * seq)
            rows.append({"round": r, "trainer": name, **res})
            print(json.dumps(rows[-1]), flush=True)
    mean = {n: sum(x["tokens_per_s"] for x in rows if x["trainer"] == n) / a.rounds for n in ("old", "new")}
    print(json.dumps({"ref": a.ref, "device": a.device, "threads": a.threads, "batch": a.batch, "size": a.size,
                      "mean_tokens_per_s": mean, "new_over_old": mean["new"] / mean["old"],
                      "load": os.getloadavg()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
