"""`make mutation`: mutation testing (mutmut 3) of the modules whose rules matter most, one module at a time.

Why: a test of a rule must fail when the rule breaks (issue 29). mutmut rewrites one small thing at a
time (an operator, a constant, a comparison, a dropped argument) and runs the tests; a mutant that
every test survives is a rule no test checks. Each module runs only its own fast test files (MODULES
below), in a scratch copy of the sources (.mutation/<module>/), so `make test` is untouched and a run
finishes on a small machine. A survivor is either killed by a new test or listed, with a one-line
reason, in tests/mutation/equivalent.txt ("<mutant name>  # why it changes nothing observable").

    python tests/mutation/run.py                       # every module below
    python tests/mutation/run.py engine/samplers/acceptance.py  # one module
    MUTATION_RESUME=1 python tests/mutation/run.py engine/samplers/assd.py
        # keep .mutation/<module>/'s results: run only the mutants not run yet, and re-run the
        # survivors (so a test added since then gets its chance); for a long module on a busy machine
    MUTATION_TIMEOUT_MULTIPLIER=15 MUTATION_RESUME=1 python tests/mutation/run.py engine/samplers/assd.py
        # re-run only the mutants that timed out, with a longer limit (mutmut keeps every other verdict)
    MUTATION_ONLY="*x_cpu_transposed__* *x__rows_mm__*" python tests/mutation/run.py engine/models/layers.py
        # only the mutants of these functions (mutmut's names, fnmatch patterns): a changed part of a
        # long module whose other functions no run has covered yet; the report counts these alone
        # (ONLY below gives such modules their default part)

Prints, per module, killed / total and the survivors (with their diff), and last:
`unexplained survivors: N of M mutants`. Exit status 1 when N > 0.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from fnmatch import fnmatch
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRATCH = ROOT / ".mutation"
EQUIVALENT = ROOT / "tests" / "mutation" / "equivalent.txt"

# a sampler module ends with its catalogue entries, run functions that take the context and the knobs
# as keyword arguments: test_rounds.py runs the AS-ARM entries on the table model; the hybrid and PTP
# entries are reached through the catalogue, by the contract test (it runs every entry)
CONTRACT = "tests/engine/samplers/test_sampler_contract.py"
SAMPLER_TESTS = ["tests/engine/samplers/test_rounds.py"]
# module -> the fast test files that check its rules (mutmut runs, per mutant, only the tests among
# these that reach the mutated function)
MODULES: dict[str, list[str]] = {
    "engine/samplers/acceptance.py": ["tests/engine/samplers/test_acceptance_rule.py", "tests/engine/test_acceptance_stats.py",
                                      "tests/engine/samplers/test_nan_path.py"],
    # + the next round's rows read from a call that gave every row (next_round_logits), on a tiny AS-ARM
    "engine/samplers/assd.py": SAMPLER_TESTS + ["tests/engine/samplers/test_lean_rows.py"],
    # assd-reuse's rounds on the table model, and which row each next position drafts from (a wrong row keeps the law)
    "engine/samplers/assd_reuse.py": SAMPLER_TESTS + ["tests/engine/samplers/test_assd_reuse.py"],
    "engine/samplers/sequential.py": SAMPLER_TESTS,
    # the drafter table (DRAFTERS, build_drafter) is reached through the catalogue: the contract test
    "engine/samplers/drafters.py": SAMPLER_TESTS + [CONTRACT, "tests/engine/samplers/test_ngram_index.py",
                                                    "tests/engine/samplers/test_ngram_prior.py"],
    # the corpus prior: its counts, rows and file, and the drafter reading it
    "engine/samplers/ngram_prior.py": ["tests/engine/samplers/test_ngram_prior.py"],
    # the n-gram drafter's counts against a full recount, and the samplers that draft with it
    "engine/samplers/ngram_index.py": ["tests/engine/samplers/test_ngram_index.py"] + SAMPLER_TESTS,
    # the CPU drafter assd-ptp drafts with: made once, close to the float head, rows blind to later uniforms
    "engine/models/ptp_int8.py": ["tests/engine/models/test_ptp_int8.py"],
    # the hand-built table model and heads (fast); tests/engine/samplers/test_ptp.py (a real random head, minutes) stays out
    "engine/samplers/ptp.py": ["tests/engine/samplers/test_ptp_rules.py", CONTRACT],
    # the hybrid samplers: a hand-built hybrid with known conditionals (tests/support/hybrid_model.py), in seconds
    # (tests/engine/samplers/test_selfspec.py and test_hybrid.py drive real tiny networks: minutes per mutant)
    "engine/samplers/selfspec.py": ["tests/engine/samplers/test_hybrid_rounds.py", CONTRACT],
    "engine/samplers/mdm.py": ["tests/engine/samplers/test_hybrid_rounds.py", CONTRACT],
    "engine/samplers/diffusion_drafter.py": ["tests/engine/samplers/test_hybrid_rounds.py"],
    "engine/samplers/hybrid_passes.py": ["tests/engine/samplers/test_hybrid_rounds.py"],
    # the knob table and settle(): one frozen value per request (defaults, ranges, unknown names, the seed's rule)
    "engine/params.py": ["tests/engine/test_params_rules.py", "tests/engine/test_params_table.py",
                         "tests/engine/test_seed_rule.py", "tests/engine/test_run_setup.py"],
    # the oracle on tiny random models: every answer against the original forward, cached against uncached,
    # AS-ARM and XLNet (the call and head functions under @torch.inference_mode are not mutated by mutmut)
    "engine/samplers/oracle.py": ["tests/engine/samplers/test_oracle_rules.py", "tests/engine/models/test_xlnet_cache.py",
                                  "tests/lab/test_bench_limits.py", "tests/engine/samplers/test_lean_rows.py"],
    # the run's context: what a sampler is handed (the settled knobs unchanged, the seed, the oracle)
    "engine/samplers/context.py": ["tests/engine/samplers/test_run_context.py", "tests/engine/test_run_setup.py", CONTRACT],
    "engine/inputs/masking.py": ["tests/engine/inputs/test_masking_rules.py", "tests/engine/inputs/test_inputs.py",
                                 "tests/engine/inputs/test_line_starts.py"],
    "engine/budget.py": ["tests/engine/test_budget_rules.py"],
    # the CPU precision setting, and the bf16 path of the model's layers (one law whatever the call's shape);
    # of layers.py and asarm_core.py only the functions ONLY names (below)
    "engine/loading/precision.py": ["tests/engine/models/test_precision.py"],
    "engine/models/layers.py": ["tests/engine/models/test_precision.py", "tests/engine/models/test_speed_exact.py"],
    "engine/models/asarm_core.py": ["tests/engine/models/test_precision.py", "tests/engine/models/test_speed_exact.py"],
    "app/views/render.py": ["tests/app/views/test_render_rules.py",
                      "tests/app/test_app.py::test_text_survives_multibyte_characters_in_every_view"],
    # the write path row by row against literal rows (tests/storage/test_storage.py takes 10 s a mutant: its
    # SIGKILL and 16-writer tests; it stays in `make test`)
    # a comparison's sides stored in one transaction (RunGroup, Store.record_runs): the app's atomic-compare tests
    "storage/recorder.py": ["tests/storage/test_storage_rules.py", "tests/app/stored/test_compare_atomic.py"],
    "storage/repository.py": ["tests/storage/test_storage_rules.py", "tests/app/stored/test_compare_atomic.py",
                              "tests/storage/test_annotate_session.py"],
    "lab/train_ptp.py": ["tests/engine/samplers/test_ptp.py"],
    "app/tabs/freshness.py": ["tests/app/tabs/test_what_stops.py"],
}
# long modules of which only a part is covered: the mutants of these functions alone (mutmut's names, fnmatch
# patterns), unless MUTATION_ONLY names others; the rest of such a module has not been through a run yet
ONLY: dict[str, list[str]] = {
    "engine/models/layers.py": ["*cpu_transposed__mutmut*", "*_pack_bf16__mutmut*", "*_rows_mm__mutmut*",
                                "*_attention64__mutmut*", "*cpu_weights__mutmut*", "*lean_step__mutmut*"],
    "engine/models/asarm_core.py": ["*set_cpu_precision__mutmut*", "*output_head__mutmut*"],
    "lab/train_ptp.py": ["*rank_cut__mutmut*", "*strongest_components__mutmut*"],
    "app/tabs/freshness.py": ["*switch_domain__mutmut*"],
}
# seconds added to a mutant's tests' measured time before the timeout multiplier (mutmut's timeout_constant,
# default 1): mutmut measures only the tests' call phase, so a module-scoped fixture's set-up and the imports are
# not in its estimate; test_compare_atomic's tiny studio takes about 5 s to set up (about 15 s for the file on the
# 2-core CPU), and at 1 s its sound and equivalent mutants were "killed by timeout" at an 8.5 s limit
TIMEOUT_CONSTANT: dict[str, float] = {"storage/recorder.py": 5.0, "storage/repository.py": 5.0}
# the whole program is copied (tests import across packages); only the module under test is mutated
COPY = ["engine", "lab", "app", "storage", "tools", "tests", "pyproject.toml"]
LINKS = ["assets"]  # large and read-only: linked, not copied


def equivalents() -> dict[str, str]:
    """Mutant name -> the reason it is equivalent (tests/mutation/equivalent.txt)."""
    out = {}
    if EQUIVALENT.exists():
        for line in EQUIVALENT.read_text().splitlines():
            line = line.strip()
            if line and not line.startswith("#"):
                name, _, why = line.partition("#")
                out[name.strip()] = why.strip()
    return out


def prepare(module: str, tests: list[str], resume: bool = False) -> Path:
    """A scratch copy of the program with a pyproject.toml whose [tool.mutmut] names this module.
    resume: keep the mutants and results of an earlier run (mutmut regenerates a module's mutants
    only when its source is newer, and the copy keeps the source's time)."""
    work = SCRATCH / module.replace("/", "_").removesuffix(".py")
    kept = SCRATCH / (work.name + ".kept")
    if resume and (work / "mutants").exists():
        shutil.rmtree(kept, ignore_errors=True)
        (work / "mutants").rename(kept)
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    if kept.exists():
        kept.rename(work / "mutants")
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "mutation")
    for name in COPY:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, work / name, ignore=ignore)
        else:
            shutil.copy2(src, work / name)
    for name in LINKS:
        os.symlink(ROOT / name, work / name)
    pkg = module.split("/")[0]
    conf = (
        "\n[tool.mutmut]\n"
        f"source_paths = [{json.dumps(pkg)}]\n"
        f"only_mutate = [{json.dumps(module)}]\n"
        f"also_copy = {json.dumps([n for n in COPY + LINKS if n != pkg])}\n"
        f"pytest_add_cli_args_test_selection = {json.dumps(tests)}\n"
        'pytest_add_cli_args = ["-p", "no:cacheprovider", "-p", "no:randomly", "--timeout=300"]\n'
        'process_isolation = "forkserver"\n'
        # a mutant's wall-clock limit is timeout_multiplier x (its tests' clean time + timeout_constant s) (the fork
        # server's limit; CPU: twice that). mutmut's default 15 lets one hanging mutant take minutes;
        # too low and a loaded machine "kills" sound mutants by timeout (see docs/TESTING.md)
        f"timeout_multiplier = {float(os.environ.get('MUTATION_TIMEOUT_MULTIPLIER', '6'))}\n"
        f"timeout_constant = {float(os.environ.get('MUTATION_TIMEOUT_CONSTANT', TIMEOUT_CONSTANT.get(module, 1.0)))}\n"
        "use_git_change_detection = false\n"
    )
    (work / "pyproject.toml").write_text((work / "pyproject.toml").read_text() + conf)
    return work


def results(work: Path) -> dict[str, int | None]:
    """Mutant name -> pytest exit code (0 survived, 1 killed, None not run) from mutmut's .meta files."""
    out: dict[str, int | None] = {}
    for meta in (work / "mutants").rglob("*.meta"):
        data = json.loads(meta.read_text())
        out.update(data.get("exit_code_by_key", {}))
    return out


KILLED = {1, 3}  # a test failed (3: pytest internal error)
TIMEOUT = {-24, 24, 152, 255, 36}  # the tests hung or spun past mutmut's limit: the mutant was detected


def changed_lines(work: Path, name: str) -> list[str]:
    r = subprocess.run([sys.executable, "-m", "mutmut", "show", name], cwd=work, capture_output=True, text=True)
    return [ln for ln in r.stdout.splitlines() if re.match(r"^[+-](?![+-])", ln)]


STRING = re.compile(r"\"(?:[^\"\\]|\\.)*\"|'(?:[^'\\]|\\.)*'")


def text_only(lines: list[str]) -> bool:
    """A mutant that only rewrites the inside of a string literal ("XX...XX", upper/lower case) of a
    message or note: wording, not a rule; counted apart (the report shows how many)."""
    minus = [STRING.sub('""', ln[1:]) for ln in lines if ln.startswith("-")]
    plus = [STRING.sub('""', ln[1:]) for ln in lines if ln.startswith("+")]
    return bool(minus) and minus == plus


def run_module(module: str, children: int, resume: bool = False) -> tuple[int, int, list[str], list[str]]:
    tests = MODULES[module]
    work = prepare(module, tests, resume)
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "INFILL_DEVICE": "cpu", "OMP_NUM_THREADS": "1"}
    before = results(work) if resume and (work / "mutants").exists() else {}
    only = os.environ.get("MUTATION_ONLY", "").split() or ONLY.get(module, [])
    cmd = [sys.executable, "-m", "mutmut", "run", "--max-children", str(children)]
    r = subprocess.run(cmd + only, cwd=work, env=env, capture_output=True, text=True)
    log = r.stdout + r.stderr
    again = sorted(n for n, c in before.items() if c is not None and c not in KILLED and c not in TIMEOUT)
    if again:  # survivors of the earlier run: re-run by name (mutmut lets a result stand otherwise)
        r2 = subprocess.run(cmd + again, cwd=work, env=env, capture_output=True, text=True)
        log += r2.stdout + r2.stderr
    (work / "mutmut.log").write_text(log)
    codes = {n: c for n, c in results(work).items() if not only or any(fnmatch(n, pat) for pat in only)}
    if r.returncode != 0 and not codes:
        print(f"{module}: mutmut failed (exit {r.returncode}); see {work / 'mutmut.log'}")
        print("\n".join((r.stdout + r.stderr).splitlines()[-15:]))
        return 0, 0, [], ["<mutmut failed>"]
    known = equivalents()
    timeouts = sorted(n for n, c in codes.items() if c in TIMEOUT)
    survivors = sorted(n for n, c in codes.items() if c not in KILLED and c not in TIMEOUT)
    killed = len(codes) - len(survivors)
    explained = [n for n in survivors if n in known]
    diffs = {n: changed_lines(work, n) for n in survivors if n not in known}
    text = [n for n in diffs if text_only(diffs[n])]
    unexplained = [n for n in diffs if n not in text]
    print(f"{module}: killed {killed} / {len(codes)} (of which {len(timeouts)} by timeout); survivors: "
          f"{len(explained)} listed as equivalent, {len(text)} message text only, {len(unexplained)} unexplained"
          f"   [tests: {' '.join(tests)}]")
    prefix = module.removesuffix(".py").replace("/", ".") + "."
    stale = sorted(n for n in known if n.startswith(prefix) and codes.get(n) in KILLED)
    for n in stale:  # mutant numbers shift when the module's code changes: re-check these lines
        print(f"  STALE equivalent entry {n}: that mutant is killed now (renumbered?); fix tests/mutation/equivalent.txt")
    for n in sorted(n for n in known if n.startswith(prefix) and codes.get(n) in TIMEOUT):
        print(f"  equivalent entry {n} timed out: the limit is too tight for this machine's load "
              "(MUTATION_TIMEOUT_MULTIPLIER); its timeouts are not evidence")
    for n in unexplained:
        code = codes[n]
        why = {0: "survived", None: "not run", 5: "no test reached it", 33: "no test reached it"}.get(code, f"exit {code}")
        print(f"  SURVIVOR {n} ({why})")
        print("\n".join("      " + ln for ln in diffs[n][:6]))
    return killed, len(codes), explained, unexplained


def main(argv: list[str]) -> int:
    mods = [m for a in argv for m in a.split()] or list(MODULES)
    bad = [m for m in mods if m not in MODULES]
    if bad:
        print(f"unknown module(s) {bad}; known: {' '.join(MODULES)}")
        return 2
    children = int(os.environ.get("MUTATION_CHILDREN", "1"))  # one test process: a shared 2-core machine
    resume = os.environ.get("MUTATION_RESUME", "") not in ("", "0")
    total = unexplained = 0
    for m in mods:
        _, n, _, un = run_module(m, children, resume)
        total += n
        unexplained += len(un)
    print(f"unexplained survivors: {unexplained} of {total} mutants")
    return 1 if unexplained else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
