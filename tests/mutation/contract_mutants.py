"""Hand-written mutants of the sampler contract (issue 23): each breaks one promise of one sampler
or of the run's preparation, and tests/engine/samplers/test_sampler_contract.py must fail on every one.

    python tests/mutation/contract_mutants.py        # all of them
    python tests/mutation/contract_mutants.py M2 M5  # some

Each mutant runs in a scratch copy of the sources (a temporary folder), so the working tree is never
touched, even when a run is interrupted. Prints CAUGHT or MISSED per mutant with the first assertion
line; exit status 1 when one is missed.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TEST = "tests/engine/samplers/test_sampler_contract.py"

#: (name, file, original text, mutated text, pytest -k selection)
MUTANTS = [
    ("M1 assd skips the commit record of its first draft", "engine/samplers/assd.py",
     '        yield commit_exact(oracle, rec, rnd, positions[0], drafts[0], float(p[0][drafts[0]]), "first draft")',
     '        commit_exact(oracle, rec, rnd, positions[0], drafts[0], float(p[0][drafts[0]]), "first draft")',
     "assd]"),
    ("M2 sequential counts one call twice", "engine/samplers/sequential.py",
     "        q = tempered_probs(oracle.call([], [(pos, 0)])[0], temperature)",
     "        q = tempered_probs(oracle.call([], [(pos, 0)])[0], temperature)\n        oracle.calls += 1 if r == 0 else 0",
     "sequential]"),
    ("M3 pipelined ASSD calls the network once more per round, unrecorded", "engine/samplers/assd.py",
     "                                     logit_rows=m - start)\n",
     "                                     logit_rows=m - start)\n"
     "        oracle.call([], [(positions[0], 0)])\n",
     "pipelined"),
    ("M4 verify records a rejection but not its resample", "engine/samplers/assd.py",
     '        yield rec(StepKind.RESAMPLE, rnd, [positions[i]], [v.token], q=[v.q_token], note="residual max(q - p, 0)")',
     "        pass", "ngram"),
    ("M5 mdm reveals one position twice", "engine/samplers/mdm.py",
     "        unrevealed = [p for j, p in enumerate(unrevealed) if j not in chosen]",
     "        unrevealed = [p for j, p in enumerate(unrevealed)\n"
     "                      if j not in chosen or (j == pick[0] and len(unrevealed) == len(mi.masked))]",
     "mdm"),
    ("M6 self-spec records its drafts at the neighbouring position", "engine/samplers/selfspec.py",
     "        yield rec(StepKind.DRAFT, rnd, positions, chain,",
     "        yield rec(StepKind.DRAFT, rnd, [p - 1 if p else p for p in positions], chain,", "self-spec"),
    ("M7 the n-gram drafter's rows are not normalised", "engine/samplers/drafters.py",
     "            rows.append(row)", "            rows.append(row * 2)", "drafter_contract and ngram"),
    ("M8 InfillRun no longer refuses a wrong model kind up front", "engine/run_setup.py",
     "    require_kind(lm, spec)\n", "", "wrong_kind"),
    ("M9 assd-ptp records a first draft other than the one it verifies", "engine/samplers/ptp.py",
     "        yield rec(StepKind.DRAFT, rnd, positions, drafts,",
     "        yield rec(StepKind.DRAFT, rnd, positions, [d + 1 if i == 0 else d for i, d in enumerate(drafts)],",
     "assd-ptp]"),
    ("M10 the diffusion drafter reports no calls for its passes", "engine/samplers/diffusion_drafter.py",
     "            spent += self.model.config.nc_share", "            spent += 0.0", "diffusion"),
    ("M11 InfillRun skips the catalogue's drafter fit check", "engine/run_setup.py",
     "        spec.second.check(lm, draft_lm)\n", "", "wrong_kind"),
    ("M12 mdm's entry promises calls <= masked tokens", "engine/samplers/mdm.py",
     '    calls_note="Its calls', '    calls_note="" and "Its calls', "mdm or page"),
]


def run(name: str, file: str, old: str, new: str, select: str) -> bool:
    """True when the contract test fails on this mutant (caught)."""
    with tempfile.TemporaryDirectory(prefix="contract-mutant-") as tmp:
        for part in ("engine", "lab", "app", "storage", "tests"):
            shutil.copytree(ROOT / part, Path(tmp) / part, ignore=shutil.ignore_patterns("__pycache__"))
        shutil.copy(ROOT / "pyproject.toml", tmp)
        target = Path(tmp) / file
        src = target.read_text()
        if src.count(old) != 1:
            print(f"{name}: STALE (the line it mutates is not in {file} exactly once)")
            return False
        target.write_text(src.replace(old, new))
        r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", TEST, "-k", select],
                           cwd=tmp, capture_output=True, text=True)
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
