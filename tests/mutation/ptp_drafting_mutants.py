"""Hand-written mutants of assd-ptp's drafting (engine/samplers/ptp.py: `draft_round`,
`draft_round_onepass`). mutmut 3 does not mutate decorated functions, and both carry
`@torch.no_grad()`, so `make mutation` never touches the rows the head drafts from; these mutants
do, and tests/test_ptp_rules.py's rule tests (the exactness G-tests left out, for speed) must fail
on every one.

    python tests/mutation/ptp_drafting_mutants.py        # all of them
    python tests/mutation/ptp_drafting_mutants.py D3 O2  # some

Each mutant runs in a scratch copy of the sources (a temporary folder), so the working tree is never
touched. Prints CAUGHT or MISSED per mutant with the first assertion line; exit status 1 when one
is missed.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FILE = "engine/samplers/ptp.py"
TEST = "tests/test_ptp_rules.py"

#: (name, original text, mutated text)
MUTANTS = [
    ('D1 draft: model positions p + 2',
     "    pos = torch.tensor([[p + 1 for p in positions]], device=dev)\n    hid = states",
     "    pos = torch.tensor([[p + 2 for p in positions]], device=dev)\n    hid = states"),
    ("D2 draft: states not cast to the head's dtype",
     "    hid = states[None, :m].to(head.in_proj.weight.dtype)",
     "    hid = states[None, :m]"),
    ('D3 draft: window pass not counted',
     "device=dev), cache)\n        if passes is not None:\n            passes[0] += 1",
     'device=dev), cache)'),
    ('D4 draft: window ids and positions swapped',
     "head.start(torch.tensor([window[0]], device=dev), torch.tensor([window[1]], device=dev), cache)",
     "head.start(torch.tensor([window[1]], device=dev), torch.tensor([window[0]], device=dev), cache)"),
    ('D5 draft: every row reads prev',
     "        before = prev if j == 0 else drafts[-1]",
     "        before = prev"),
    ('D6 draft: first row always exact',
     "        if j == 0 and exact_first:\n            row = base[0]",
     "        if j == 0:\n            row = base[0]"),
    ('D7 draft: first row never exact',
     "        if j == 0 and exact_first:\n            row = base[0]",
     "        if False:\n            row = base[0]"),
    ('D8 draft: head residual ignored',
     "            row = (base[j] + resid.to(torch.float64)).masked_fill(special, float(\"-inf\"))",
     "            row = base[j].masked_fill(special, float(\"-inf\"))"),
    ('D9 draft: proposal untempered',
     "        p = tempered_probs(row, temperature)  # p_j, fixed",
     "        p = tempered_probs(row, 1.0)  # p_j, fixed"),
    ('D10 draft: row steps not counted',
     "cache)[0, 0]\n        if passes is not None:\n            passes[0] += 1",
     'cache)[0, 0]'),
    ("D11 draft: row j drawn from row j's parallel row",
     "        tok = sample_categorical(p, gen)",
     "        tok = sample_categorical(tempered_probs(base[j], temperature), gen)"),
    ('O1 onepass: u_prev in float32',
     "torch.tensor([u_prev], dtype=torch.float64, device=dev)",
     "torch.tensor([u_prev], device=dev)"),
    ('O2 onepass: first row always exact',
     "        if j == 0 and exact_first:\n            p = base_p[0]",
     "        if j == 0:\n            p = base_p[0]"),
    ('O3 onepass: first row never exact',
     "        if j == 0 and exact_first:\n            p = base_p[0]",
     "        if False:\n            p = base_p[0]"),
    ('O4 onepass: low-rank term reads prev on every row',
     "r = r + head.prev_term(gate[0, j], prev if j == 0 else drafts[-1])",
     "r = r + head.prev_term(gate[0, j], prev)"),
    ('O5 onepass: low-rank term dropped',
     "            if gate is not None:\n                r = r + head.prev_term",
     "            if False:\n                r = r + head.prev_term"),
    ('O6 onepass: draft drawn from the parallel row',
     "        drafts.append(inverse_cdf(p, u[j]))",
     "        drafts.append(inverse_cdf(base_p[j], u[j]))"),
    ('O7 onepass: draft at the next uniform',
     "        drafts.append(inverse_cdf(p, u[j]))",
     "        drafts.append(inverse_cdf(p, u[(j + 1) % m]))"),
    ('O8 onepass: parallel rows untempered',
     "    base_p = [tempered_probs(base[j], temperature) for j in range(m)]",
     "    base_p = [tempered_probs(base[j], 1.0) for j in range(m)]"),
    ('O9 onepass: proposal untempered',
     "            p = tempered_probs((base[j] + r.to(torch.float64)).masked_fill(special, float(\"-inf\")), temperature)",
     "            p = tempered_probs((base[j] + r.to(torch.float64)).masked_fill(special, float(\"-inf\")), 1.0)"),
    ('O10 onepass: window dropped',
     "        win = (torch.tensor([window[0]], device=dev), torch.tensor([window[1]], device=dev))",
     "        win = None"),
    ('O11 onepass: pass counted twice',
     "pos, win)\n    if passes is not None:\n        passes[0] += 1",
     'pos, win)\n    if passes is not None:\n        passes[0] += 2'),
    ('O12 onepass: model positions p + 0',
     "e_prev, u_prev = row_inputs(base_p, u, prev)\n    pos = torch.tensor([[p + 1 for p in positions]], device=dev)",
     "e_prev, u_prev = row_inputs(base_p, u, prev)\n    pos = torch.tensor([[p for p in positions]], device=dev)"),
]


def run(name: str, old: str, new: str) -> bool:
    """True when the rule tests fail on this mutant (caught)."""
    with tempfile.TemporaryDirectory(prefix="ptp-mutant-") as tmp:
        for part in ("engine", "app", "storage", "tests"):
            shutil.copytree(ROOT / part, Path(tmp) / part, ignore=shutil.ignore_patterns("__pycache__"))
        shutil.copy(ROOT / "pyproject.toml", tmp)
        target = Path(tmp) / FILE
        src = target.read_text()
        if src.count(old) != 1:
            print(f"{name}: STALE (the text it mutates is not in {FILE} exactly once)")
            return False
        target.write_text(src.replace(old, new))
        r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-p", "no:randomly",
                            TEST, "-k", "not is_exact"], cwd=tmp, capture_output=True, text=True)
    err = next((line for line in r.stdout.splitlines() if line.startswith("E ")), "")
    print(f"{name}: {'CAUGHT' if r.returncode else 'MISSED'} {err[:160]}", flush=True)
    return r.returncode != 0


def main(argv: list[str]) -> int:
    chosen = [m for m in MUTANTS if not argv or m[0].split()[0] in argv]
    missed = [m[0] for m in chosen if not run(*m)]
    print(f"missed: {len(missed)} of {len(chosen)}")
    return 1 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
