"""The report's sections 1-5, each in three steps: measure (measure.py, run_bench, HumanEval),
analyse (analyse.py), render (render.py, figures.py). A `Report` carries what the sections share:
the plan, the models, the figures, the headlines and the records section 2 re-reads from section 1."""

from __future__ import annotations

import math
import random
import statistics
import traceback
from pathlib import Path

from . import analyse, figures, render
from .measure import Arm, ModelInfo, Models, Record, measure, sampler_arms, windows
from .plan import ALPHA, ERROR_MARK, SPECULATIVE, Plan, log

ALPHA_TEXT = f"p < {ALPHA}"


class Report:
    """One report run: runs the sections in order and collects their figures and headlines."""

    def __init__(self, *, plan: Plan, models: Models, domains: list[str], fig_dir: Path, rel_fig: str,
                 machine: str = "", date: str = ""):
        self.plan, self.models, self.domains = plan, models, domains
        self.fig_dir, self.rel_fig = fig_dir, rel_fig
        self.machine, self.date = machine, date
        self.figures: dict[str, object] = {}
        self.headlines: list[str] = []
        self.section_seconds: dict[str, float] = {}
        self.data_missing: dict[str, str] = {}
        self.exact_records: dict[str, dict[str, list[Record]]] = {}

    # -- helpers
    def figure(self, name: str, fig) -> str:
        """Keep a figure for export; the placeholder the final text replaces with its link."""
        self.figures[name] = fig
        return f"{{{{FIG:{name}}}}}"

    def domain_ready(self, domain: str) -> str | None:
        """None when the domain's test split exists, else why not."""
        if domain in self.data_missing:
            return self.data_missing[domain]
        from ..data import load_split

        try:
            load_split(domain, "test")
        except Exception as e:  # noqa: BLE001
            self.data_missing[domain] = f"{type(e).__name__}: {e}"
            return self.data_missing[domain]
        return None

    def missing_note(self, domain: str, kind: str) -> str:
        """Why the `<domain>-<kind>` model was skipped, as an italic line."""
        name = f"{domain}-{kind}"
        return f"_Skipped {name}: {self.models.missing.get(name, 'not available')}._"

    def caption(self, *infos: ModelInfo | None, seeds: str) -> str:
        """The models / seeds / machine / date line under a table."""
        return render.caption(infos, seeds, self.machine, self.date)

    def _seeds(self) -> str:
        return f"inputs seed {self.plan.seed}, input i runs with seed {self.plan.seed}+i"

    def _ready_model(self, domain: str, kind: str) -> tuple[ModelInfo | None, list[str]]:
        """The domain's model of `kind` if its data and model are there, else the skip lines."""
        why = self.domain_ready(domain)
        model = self.models.get(domain, kind)
        if why or model is None:
            return None, [f"_Skipped: {why}_" if why else self.missing_note(domain, kind), ""]
        return model, []

    # -- 1. exact samplers
    def section_exact(self) -> list[str]:
        """Every exact sampler against sequential decoding: quality, calls, wall ratios, tests."""
        p = self.plan
        out = ["## 1. Exact samplers against sequential decoding", "",
               f"{int(p.mask_rate_main * 100)}%-masked windows of the test split ({p.length} tokens, proteins: whole "
               f"sequences up to {p.length}), {p.samples} inputs per domain, k = {p.k}. Every sampler runs on every "
               "input with the same seed, interleaved. Judge NLL: mean per-token NLL of the whole completed window "
               "under the domain's left-to-right judge; entropy: unigram entropy (bits) of the generated tokens; "
               "wall ratio: baseline seconds / sampler seconds on the same input, against cached sequential decoding "
               "(sequential-cache, the strongest baseline) and, labelled as such, uncached sequential. Cells are "
               "mean ± standard "
               f"error over inputs; p-values are Welch two-sample t-tests against sequential, flagged when "
               f"{ALPHA_TEXT}.", ""]
        for domain in self.domains:
            out += [f"### {domain}", ""]
            asarm, skip = self._ready_model(domain, "asarm")
            out += skip if asarm is None else self._exact_domain(domain, asarm)
        return out

    def _exact_domain(self, domain: str, asarm: ModelInfo) -> list[str]:
        p = self.plan
        hybrid = self.models.get(domain, "hybrid")
        judge = self.models.get(domain, "judge")
        notes: list[str] = []
        length = min(p.length, asarm.max_tokens)
        if length < p.length:
            notes.append(f"{asarm.name} takes at most {asarm.max_tokens} tokens: windows cut to {length}.")
        arms = sampler_arms(self.models, domain, asarm, p.samplers, notes)
        inputs = windows(asarm, length, 0.95, p.samples, p.seed)
        if len(inputs) < p.samples:
            notes.append(f"the test split gave {len(inputs)} inputs, not {p.samples}.")
        log(f"exact samplers: {domain}, {len(inputs)} inputs of {length} tokens, {len(arms)} samplers")
        recs = measure({asarm.name: inputs}, arms, p.seed, p.k, notes)
        self.exact_records[domain] = recs
        if judge is not None:
            from ..metrics import judge_nll

            for rs in recs.values():
                for r in rs:
                    r.judge_nll = judge_nll([r.text], judge.ref)
        else:
            notes.append(f"judge NLL not measured: {self.models.missing.get(domain + '-judge')}.")
        table, headlines = render.exact_table(domain, analyse.exact_stats(recs, judge is not None), judge is not None)
        self.headlines += headlines
        out = table + [f"- {n}" for n in notes] + ([""] if notes else [])
        return out + [self.caption(asarm, hybrid, judge, seeds=self._seeds()), ""]

    # -- 2. acceptance
    def section_acceptance(self) -> list[str]:
        """Measured acceptance by position in the round against the proposal/target prediction."""
        out = ["## 2. Acceptance explained", "",
               "For each speculative sampler, every draft that went through the acceptance test, grouped by its "
               "position in the round. Measured: the share accepted (± binomial standard error). Predicted: the mean "
               "over the same drafts of min(1, q(x)/p(x)) (proposal p, target q), an unbiased estimate of the "
               "acceptance probability 1 − TV(p, q) at that position. z = (measured − predicted) / SE. "
               "Drafts accepted without a test (the first draft of an ASSD round, pipelined exact rows) are "
               "counted separately.", ""]
        for domain in self.domains:
            out += [f"### {domain}", ""]
            recs = self.exact_records.get(domain)
            if not recs:
                out += ["_Skipped: no ASSD runs for this domain (see section 1)._", ""]
                continue
            rows, assd_rates = [], []
            for s in SPECULATIVE:
                if recs.get(s):
                    rates, untested = analyse.acceptance_rates(recs[s])
                    rows += render.acceptance_rows(s, rates, untested)
                    assd_rates = rates if s == "assd" else assd_rates
            out += render.md_table(["sampler", "position in round", "tested drafts", "measured rate",
                                    "predicted rate", "z", "accepted untested"], rows)
            if assd_rates:
                out += [self.figure(f"acceptance-{domain}", figures.acceptance_figure(domain, self.plan.k, assd_rates)),
                        ""]
                out += render.acceptance_overall([e for r in recs.get("assd", []) for e in r.events])
        return out

    # -- 3. self-spec vs MDM
    def section_self_spec(self) -> list[str]:
        """The self-speculative sampler against MDM at matched quality, on the hybrid."""
        p = self.plan
        out = ["## 3. Self-speculative sampling against MDM", "",
               f"Hybrid models on {int(0.95 * 100)}%-masked test windows of {p.ss_length} tokens, {p.ss_samples} "
               f"inputs, the same seeds for every setting (lab.bench_selfspec.run_bench). MDM with T in "
               f"{p.mdm_steps}; self-speculative with (dtau, inner loops) in {p.self_spec}. Calls are in units of one "
               "full pass of the hybrid; MDM is credited with its best case (a step that reveals nothing is free, "
               "as the self-speculative paper counts it), and its raw count is shown beside it. Matched quality: for "
               "each self-speculative setting, the best-case calls MDM needs to reach the same quality, read off the "
               "piecewise-linear MDM quality-against-calls curve; the ratio is MDM calls / self-speculative calls "
               "(above 1: self-speculative is cheaper).", ""]
        from ..bench_selfspec import run_bench

        for domain in self.domains:
            out += [f"### {domain}", ""]
            hybrid, skip = self._ready_model(domain, "hybrid")
            if hybrid is None:
                out += skip
                continue
            length = min(p.ss_length, hybrid.max_tokens)
            log(f"self-spec vs MDM: {domain}, {p.ss_samples} inputs of {length} tokens")
            try:
                res = run_bench(hybrid.ref, p.ss_samples, length, 0.95, p.seed, mdm_steps=p.mdm_steps,
                                self_spec=p.self_spec)
            except Exception as e:  # noqa: BLE001
                traceback.print_exc()
                out += [f"{ERROR_MARK}: run_bench failed ({type(e).__name__}: {e}).", ""]
                continue
            out += self._self_spec_body(domain, res, hybrid)
        return out

    def _self_spec_body(self, domain: str, res: dict, hybrid: ModelInfo) -> list[str]:
        an = analyse.self_spec_analysis(res["rows"])
        out, ratios = render.self_spec_table(an)
        fig = figures.self_spec_figure(domain, an, f"{hybrid.name} ({res['samples']} inputs of "
                                                   f"{res['length']} tokens)")
        out += [self.figure(f"self-spec-{domain}", fig), ""]
        lines, headline = render.self_spec_sentences(domain, an, ratios)
        if headline:
            self.headlines.append(headline)
        return out + lines + ["", self.caption(hybrid, seeds=self._seeds()), ""]

    # -- 4. HumanEval
    def section_humaneval(self) -> list[str]:
        """pass@1 of single-line HumanEval infills per exact sampler, Fisher-tested against sequential."""
        p = self.plan
        lim = p.humaneval_limit
        out = ["## 4. HumanEval single-line infilling", "",
               f"pass@1 of single-line infills (lab.evaluate.humaneval_pass1: each task's tests run in a "
               f"separate process with a timeout) on {'all tasks' if lim is None else f'a seeded subset of {lim} tasks'}"
               f" (`--humaneval-limit`), the same tasks and seeds for every sampler. pass@1 ± binomial standard error; "
               f"p: Fisher exact test of the pass counts against sequential, flagged when {ALPHA_TEXT}.", ""]
        if "code" not in self.domains:
            return out + ["_Skipped: the code domain is not in `--domains`._", ""]
        asarm = self.models.get("code", "asarm")
        if asarm is None:
            return out + [self.missing_note("code", "asarm"), ""]
        try:
            from ..data import load_humaneval_single_line

            all_tasks = load_humaneval_single_line()
        except Exception as e:  # noqa: BLE001
            return out + [f"_Skipped: {type(e).__name__}: {e}_", ""]
        hybrid = self.models.get("code", "hybrid")
        notes: list[str] = []
        rows = self._humaneval_rows(asarm, all_tasks, notes)
        out += render.md_table(["sampler", "tasks", "pass@1", "calls per task", "tokens/call", "seconds",
                                "p (vs sequential)", "flag"], rows)
        out += [f"- {n}" for n in notes] + ([""] if notes else [])
        return out + [self.caption(asarm, hybrid, seeds="tasks: random.Random(0) sample; task i runs with seed i"), ""]

    def _humaneval_rows(self, asarm: ModelInfo, all_tasks: list[dict], notes: list[str]) -> list[list[str]]:
        from ..evaluate import humaneval_pass1

        p, lim = self.plan, self.plan.humaneval_limit
        drafts = {a.sampler: a.draft for a in sampler_arms(self.models, "code", asarm, p.samplers, notes)}
        tasks = random.Random(0).sample(all_tasks, min(lim, len(all_tasks))) if lim else all_tasks
        tokens = sum(len(asarm.lm.codec.encode(t["middle"])) for t in tasks)  # same selection as humaneval_pass1
        rows, passed = [], {}
        for s in [s for s in p.samplers if s in drafts]:
            log(f"HumanEval: {s} on {len(tasks)} tasks")
            try:
                r = humaneval_pass1(asarm.ref, lim, sampler=s,
                                    draft_model=drafts[s].ref if drafts[s] is not None else None)
            except Exception as e:  # noqa: BLE001
                traceback.print_exc()
                notes.append(f"{ERROR_MARK}: {s} failed ({type(e).__name__}: {e}).")
                continue
            n, pr = r["humaneval_tasks"], r["humaneval_single_line_pass1"]
            tpc, calls = r.get("humaneval_tokens_per_call"), r.get("humaneval_calls_mean")
            if calls is None and tpc:
                calls = tokens / tpc / n
            passed[s] = (round(pr * n), n)
            p_val = analyse.fisher_p(passed[s], passed["sequential"]) \
                if s != "sequential" and "sequential" in passed else float("nan")
            flag = "" if s == "sequential" else ("**differs**" if analyse.finite(p_val) and p_val < ALPHA
                                                 else "ok")
            rows.append([s, str(n), render.fmt_se(pr, math.sqrt(pr * (1 - pr) / n), 3), render.fmt(calls, 1),
                         render.fmt(tpc, 2), render.fmt(r.get("humaneval_seconds"), 1), render.fmt_p(p_val), flag])
        return rows

    # -- 5. scaling
    def section_scaling(self) -> list[str]:
        """Calls and wall time against sequence length and masking rate, with fitted growth."""
        p = self.plan
        out = ["## 5. Scaling", "",
               f"Calls and wall time per input against sequence length ({', '.join(map(str, p.scaling_lengths))} "
               f"tokens at 95% masked) and masking rate ({', '.join(f'{r:g}' for r in p.scaling_rates)} at "
               f"{p.scaling_length} tokens), {p.scaling_samples} inputs per point, every sampler on the same inputs. "
               f"MDM runs with T = {p.scaling_mdm_steps}, self-speculative with dtau = {p.scaling_window_growth:g}. "
               "Slopes are least-squares fits of log(cost) on log(masked tokens).", ""]
        for domain in self.domains:
            out += [f"### {domain}", ""]
            asarm, skip = self._ready_model(domain, "asarm")
            if asarm is None:
                out += skip
                continue
            try:
                out += self._scaling_domain(domain, asarm)
            except Exception as e:  # noqa: BLE001
                traceback.print_exc()
                out += [f"{ERROR_MARK}: scaling failed ({type(e).__name__}: {e}).", ""]
        return out

    def _scaling_arms(self, domain: str, asarm: ModelInfo) -> tuple[list[Arm], ModelInfo | None, list[str]]:
        p = self.plan
        hybrid = self.models.get(domain, "hybrid")
        notes: list[str] = []
        arms = sampler_arms(self.models, domain, asarm, [s for s in p.samplers if s != "assd-diffusion" or hybrid],
                            notes)
        if hybrid is not None:
            arms.append(Arm(label=f"mdm (T={p.scaling_mdm_steps})", sampler="mdm", model=hybrid,
                            kwargs={"steps": p.scaling_mdm_steps}))
            growth = p.scaling_window_growth
            arms.append(Arm(label=f"self-spec (dtau={growth:g})", sampler="self-spec", model=hybrid, kwargs={"dtau": growth}))
        else:
            notes.append(f"assd-diffusion, mdm and self-spec skipped: {self.models.missing.get(domain + '-hybrid')}.")
        return arms, hybrid, notes

    def _sweep(self, arms: list[Arm], points: list[tuple[int, float]], notes: list[str]) -> dict:
        """(length, rate) -> label -> {calls, seconds, masked} (lists over inputs)."""
        p = self.plan
        res: dict = {}
        for length, rate in points:
            models = {a.model.name: a.model for a in arms}
            inputs = {name: windows(m, length, rate, p.scaling_samples, p.seed) for name, m in models.items()}
            log(f"scaling: length {length}, mask rate {rate:g}, {len(arms)} samplers")
            recs = measure(inputs, arms, p.seed, p.k, notes, warmup=False)
            res[(length, rate)] = {lab: {"calls": [r.calls for r in rs], "seconds": [r.seconds for r in rs],
                                         "masked": [r.masked for r in rs]} for lab, rs in recs.items() if rs}
        return res

    def _scaling_domain(self, domain: str, asarm: ModelInfo) -> list[str]:
        p = self.plan
        arms, hybrid, notes = self._scaling_arms(domain, asarm)
        window = min(m.max_tokens for m in [asarm] + ([hybrid] if hybrid else []))
        lengths = [n for n in p.scaling_lengths if n <= window]
        too_long = [n for n in p.scaling_lengths if n > window]
        if too_long:
            notes.append(f"length {', '.join(map(str, too_long))} skipped: exceeds the models' {window}-token window.")
        rate_len = min(p.scaling_length, window)
        # one unrecorded pass of every arm on a short input, so first-call costs land nowhere
        used = {a.model.name: a.model for a in arms}
        measure({n: windows(m, min(lengths or [rate_len]), 0.95, 1, p.seed) for n, m in used.items()}, arms,
                p.seed, p.k, [], warmup=False)
        sweeps = [("length", self._sweep(arms, [(n, 0.95) for n in lengths], notes), "L", lengths,
                   [(n, 0.95) for n in lengths]),
                  ("mask rate", self._sweep(arms, [(rate_len, r) for r in p.scaling_rates], notes), "rate",
                   list(p.scaling_rates), [(rate_len, r) for r in p.scaling_rates])]
        labels = [a.label for a in arms if any(a.label in v for _, sweep, *_ in sweeps for v in sweep.values())]
        out, fig, slopes = self._scaling_sweeps(sweeps, labels)
        out += [self.figure(f"scaling-{domain}", figures.finish_scaling_figure(fig, domain, asarm.name)), ""]
        out += render.scaling_sentences(slopes)
        out += [f"- {n}" for n in notes] + ([""] if notes else [])
        return out + [self.caption(asarm, hybrid, seeds=self._seeds()), ""]

    def _scaling_sweeps(self, sweeps: list[tuple], labels: list[str]) -> tuple[list[str], object, dict]:
        """Tables and figure traces of both sweeps; the slopes the sentences are written from."""
        out: list[str] = []
        fig = figures.scaling_figure()
        slopes: dict[str, dict[str, float]] = {}
        for row, (title, sweep, keyname, xs, keys) in enumerate(sweeps, start=1):
            heads = [f"{keyname}={n if row == 1 else f'{n:g}'}" for n in xs]
            masked_row = ["masked tokens"] + [
                render.fmt(statistics.fmean(next(iter(sweep[k].values()))["masked"]), 1)
                if sweep.get(k) else "n/a" for k in keys]
            curves = {lab: analyse.scaling_curve(sweep, keys, lab) for lab in labels}
            for lab, cur in curves.items():
                slopes.setdefault(lab, {}).update({f"{keyname}_calls": cur["slope_calls"],
                                                   f"{keyname}_seconds": cur["slope_seconds"],
                                                   f"{keyname}_sec_per_call": cur["slope_sec_per_call"],
                                                   f"{keyname}_last": cur["last"]})
                figures.add_scaling_traces(fig, row, lab, labels.index(lab), xs, cur)
            out += render.scaling_tables(title, heads, masked_row, curves)
        return out, fig, slopes
