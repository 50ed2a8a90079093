"""`python -m engine ...`: infill, exactness, models, domains, train, bench, data, eval, report.

User errors print one readable line and exit 2; nothing prints a stack trace for bad input.
"""

from __future__ import annotations

import argparse
import json
import sys

from .errors import InfillError


def _infill(a: argparse.Namespace) -> int:
    from .api import infill
    from .samplers import DOMAIN_DEFAULT

    apply_device_args(a)
    apply_hub_flags(a)
    r = infill(a.text, model=a.model, sampler=a.sampler or DOMAIN_DEFAULT, domain=a.domain, seed=a.seed,
               cache=a.cache, draft_model=a.draft_model, **knob_values(a))
    if r.note:  # what the domain's normaliser changed in TEXT (the page shows the same sentence)
        print(f"note: {r.note}", file=sys.stderr)
    ignored = unread_knobs(r.sampler, knob_values(a))
    if ignored:  # the page hides the knobs a sampler does not read; here they are said to be ignored
        print(f"note: {r.sampler} does not read {', '.join('--' + n.replace('_', '-') for n in ignored)}; "
              "ignored", file=sys.stderr)
    if a.json:
        print(json.dumps(r.to_json(with_steps=True)))
    else:
        print(r.text)
        print(summary_line(r), file=sys.stderr)
    return 0


def unread_knobs(sampler: str, given: dict[str, object]) -> list[str]:
    """The knobs set away from their defaults that `sampler` neither reads nor records with the ones it
    reads (engine.params.recorded): a flag that changes nothing, which a user should hear about."""
    from .params import KNOBS, recorded
    from .samplers import SAMPLERS

    spec = SAMPLERS.get(sampler)
    if spec is None:
        return []
    kept = set(recorded(spec.reads))
    return [n for n, v in given.items() if n in KNOBS and n not in kept and v != KNOBS[n].default]


def summary_line(r) -> str:
    """The line `infill` writes under the completed text (stderr): counts that agree with their number,
    and the log-probability, or why there is none (a hybrid model has no exact joint density)."""
    from .wording import plural

    lp = f"log p = {r.log_prob}" if r.log_prob is not None else "log p = n/a (hybrid model: no exact likelihood)"
    return (f"-- {r.sampler} on {r.model}: {plural(r.masked_tokens, 'token')}, {plural(r.calls, 'call')}, "
            f"{plural(r.rounds, 'round')}, {r.tokens_per_call:.2f} tokens/call, {r.seconds:.2f} s, {lp}")


def _exactness(a: argparse.Namespace) -> int:
    from engine.exactness.check import run_check

    apply_device_args(a)
    if (a.text is None) == (a.inputs is None):
        print("error: give TEXT or --inputs FILE.jsonl (one of them)", file=sys.stderr)
        return 2
    if a.inputs is not None:
        return _exactness_inputs(a)
    r = run_check(a.text, samplers=a.samplers, samples=a.samples, model=a.model, domain=a.domain, seed=a.seed,
                  **knob_values(a))
    if a.json:
        print(json.dumps(r.to_json()))
        return 0
    print(f"{r.source}  ({r.model}, {r.masked_tokens} masked tokens, N = {r.samples}, seed {r.seed}, "
          f"temperature {r.params['temperature']:g}, {r.extra.get('seconds', 0):.0f} s)")
    if r.extra.get("auto"):
        print(r.extra["auto"])
    print(f"exact law: {r.law}")
    print(f"test: {r.extra.get('statistic', 'chi-square')} at level {r.alpha:g}")
    top = sorted(r.exact.items(), key=lambda kv: -kv[1])[: a.top]
    names = [s.name for s in r.samplers]
    print(f"\n{'fill':<24} {'exact':>7} " + " ".join(f"{n[:16]:>16}" for n in names))
    for fill, p in top:
        row = " ".join(f"{s.counts.get(fill, 0) / r.samples:>16.3f}" for s in r.samplers)
        print(f"{r.texts.get(fill, '?')[:24]!r:<24} {p:>7.3f} {row}")
    other = [1 - sum(s.counts.get(f, 0) for f, _ in top) / r.samples for s in r.samplers]
    print(f"{'(every other fill)':<24} {1 - sum(p for _, p in top):>7.3f} " + " ".join(f"{o:>16.3f}" for o in other))
    print(f"\n{'sampler':<28} {'p-value':>9} {'calls':>6} {'ms':>7}  verdict")
    for s in r.samplers:
        j = s.judgement
        print(f"{s.name:<28} {s.p_value:>9.2g} {s.calls_per_sample:>6.2f} {1000 * s.seconds_per_sample:>7.1f}  "
              f"{j.sentence() if j else s.verdict}")
        if j and j.worst_position is not None and j.position_p:
            print(f"{'':<28} departs most at masked token {j.worst_position + 1} of {r.masked_tokens} "
                  f"(p = {j.position_p[j.worst_position]:.2g} there)")
    j = r.samplers[0].judgement
    if j and j.departure:
        print(f"\nsmallest departure the test sees at this N: {j.departure}")
    return 0


def _samples_arg(value: str) -> int | str:
    """--samples: a whole number or 'auto'."""
    if value.strip().lower() == "auto":
        return "auto"
    try:
        return int(value)
    except ValueError:
        raise argparse.ArgumentTypeError("N must be a whole number or 'auto'") from None


def _exactness_inputs(a: argparse.Namespace) -> int:
    """`exactness --inputs FILE.jsonl`: the check on each line's {"text": ...} (a short [MASK:n] span),
    one JSON result per input (or a summary line each); a bad line is reported by its number on
    stderr and the others still run. mask_rate lines do not apply: the check needs a short span."""
    from engine.exactness.check import run_check
    from engine.inputs.inputs_file import text_objects

    from .errors import InfillError

    try:
        objects, skipped = text_objects(a.inputs)
    except InfillError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for e in skipped:
        print(e, file=sys.stderr)
    results = []
    for n, obj in objects:
        try:
            if "mask_rate" in obj:
                raise ValueError("mask_rate does not apply to the exactness check: mark one short [MASK:n] span")
            r = run_check(obj["text"], samplers=a.samplers, samples=a.samples, model=a.model, domain=a.domain,
                          seed=a.seed + n, **knob_values(a))
        except (InfillError, ValueError) as e:
            skipped.append(f"{a.inputs}:{n}: {e}")
            print(skipped[-1], file=sys.stderr)
            continue
        results.append({"line": n, **r.to_json()})
        if not a.json:
            said = ", ".join(f"{s.name} {s.judgement.sentence() if s.judgement else s.verdict} (p = {s.p_value:.2g})"
                             for s in r.samplers)
            print(f"line {n}: {r.source!r}: {said}")
    skipped.sort(key=lambda e: int(e[len(a.inputs) + 1 :].split(":", 1)[0]))  # in line order
    if a.json:
        print(json.dumps({"per_input": results, "skipped": skipped}))
    if not results:
        print(f"error: no usable line in {a.inputs}", file=sys.stderr)
        return 2
    return 0


def _models(a: argparse.Namespace) -> int:
    from engine.loading.registry import available

    rows = available()
    if a.json:
        print(json.dumps(rows))
        return 0
    if not rows:
        print("No models found in assets/models or INFILL_MODEL_DIRS.")
    for r in rows:
        m = ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in r["metrics"].items())
        print(f"{r['name']:<22} {r['kind']:<7} {r['domain']:<8} {m}")
    return 0


def _domains(a: argparse.Namespace) -> int:
    from engine.inputs.domains import listing, studio_domains

    if a.names:
        print(" ".join(studio_domains()))
        return 0
    rows = listing()
    if a.json:
        print(json.dumps(rows))
        return 0
    for r in rows:
        where = "studio" if r["studio"] else "lab"
        print(f"{r['name']:<8} {where:<6} [MASK] = {r['span']:<9} {r['tokenizer']:<9} quality: {r['quality']:<28} "
              f"models: {', '.join(r['models'])}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The parser of `python -m engine` (infill, exactness, models, domains); the delegated subcommands
    parse their own."""
    from engine.inputs.domains import studio_domains

    from .samplers import DEFAULT_SAMPLERS, SAMPLERS

    ap = argparse.ArgumentParser(prog="python -m engine", description=__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)

    p = sub.add_parser("infill", help="fill the [MASK] spans of TEXT")
    p.add_argument("text")
    p.add_argument("--model", default=None,
                   help="bundled model name, checkpoint folder, or Hugging Face model id, optionally NAME@REVISION "
                        "(e.g. xlnet/xlnet-base-cased, therealgabeguo/ASARM@code)")
    add_hub_args(p)
    defaults = ", ".join(f"{d} {c.sampler} ({c.ratio:.2f}x cached sequential)" for d, c in DEFAULT_SAMPLERS.items())
    p.add_argument("--sampler", default=None, choices=sorted(SAMPLERS),
                   help=f"default per domain, the fastest exact speculative sampler measured on a 2-core CPU: {defaults}")
    p.add_argument("--domain", default=None, choices=studio_domains())
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--cache", default=None, action=argparse.BooleanOptionalAction, help="KV cache (AS-ARM)")
    add_knob_args(p)
    p.add_argument("--draft-model", default=None, help="drafter: a hybrid for assd-diffusion, a PTP head for assd-ptp")
    add_device_arg(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_infill)

    from engine.exactness.check import DEFAULT_SAMPLES
    from engine.exactness.law import LAW_KNOBS
    from engine.exactness.wrong_samplers import WRONG_SAMPLERS

    p = sub.add_parser("exactness", help="draw N fills of a short span from each sampler and test them against "
                                         "the model's exact law")
    p.add_argument("text", nargs="?", default=None,
                   help="text with one short masked span, e.g. 'It was the [MASK:2] of times.'")
    p.add_argument("--inputs", default=None, metavar="FILE.jsonl",
                   help='one {"text": ...} object a line: the check on each (seed + line number); bad lines '
                        "are reported by number and the rest still run")
    p.add_argument("--samplers", required=True,
                   help=f"comma-separated; any of the catalogue plus the deliberately wrong {', '.join(WRONG_SAMPLERS)}")
    p.add_argument("--samples", type=_samples_arg, default=DEFAULT_SAMPLES,
                   help="N, draws per sampler, or 'auto': the N whose power against the wrong rules reaches 0.9, "
                        "within 2000 draws and 300 s")
    p.add_argument("--model", default=None, help="bundled model name or checkpoint folder")
    p.add_argument("--domain", default=None, choices=studio_domains())
    p.add_argument("--seed", type=int, default=0, help="the check's seed (each draw gets its own seed from it)")
    add_knob_args(p, note={n: "Also sets the hybrid's exact law." for n in LAW_KNOBS if n != "temperature"})
    p.add_argument("--top", type=int, default=10, help="fills listed in the table (most likely first)")
    add_device_arg(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_exactness)

    p = sub.add_parser("domains", help="list the domains (engine/inputs/domains.py): span, tokenizer, quality measure, "
                                       "bundled models, data")
    p.add_argument("--json", action="store_true")
    p.add_argument("--names", action="store_true", help="only the studio's domain names, one line (for scripts)")
    p.set_defaults(func=_domains)

    p = sub.add_parser("models", help="list available models with their metrics")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_models)

    for name in DELEGATED:
        sub.add_parser(name, help=f"see python -m engine {name} --help")
    return ap


def add_knob_args(p: argparse.ArgumentParser, note: dict[str, str] | None = None) -> None:
    """One flag per sampler knob, built from engine.params.KNOBS: its type, default, range and
    sentence, and the samplers that read it (the API checks the range)."""
    from .params import KNOBS
    from .samplers import SAMPLERS, readers

    for name, k in KNOBS.items():
        who = readers(name)
        if k.default is None:
            own = ", ".join(f"{s} {SAMPLERS[s].default_steps}" for s in who)
            said = f"default: the sampler's own ({own})"
        else:
            said = f"default {k.default}"
        rng = f"; {k.range[0]:g} to {k.range[1]:g}" if k.range else ""
        extra = f" {note[name]}" if note and name in note else ""
        by = "every sampler" if len(who) == len(SAMPLERS) else ", ".join(who)
        help_ = f"{k.help}{extra} ({said}{rng}; read by {by})"
        # a two-word knob reads like the CLI's other flags (--draft-model): --k-first, and --k_first too
        flags = dict.fromkeys([f"--{name.replace('_', '-')}", f"--{name}"])
        if k.choices:
            p.add_argument(*flags, dest=name, default=k.default, choices=list(k.choices), help=help_)
        else:
            p.add_argument(*flags, dest=name, type=k.type, default=k.default, help=help_)


def knob_values(a: argparse.Namespace) -> dict:
    """The sampler knobs parsed by add_knob_args, by name (the API's keyword arguments)."""
    from .params import KNOBS

    return {name: getattr(a, name) for name in KNOBS}


def add_hub_args(p: argparse.ArgumentParser) -> None:
    """`--tokenizer ID`, `--code-map/--no-code-map` and `--exclude-special/--no-exclude-special`: a Hub
    model's options (engine/loading/hub.py: HubOptions)."""
    p.add_argument("--tokenizer", default=None,
                   help="with a Hub --model: take the tokenizer from this Hub id (NAME@REV) or folder "
                        "(default: the checkpoint's own, else its family's, XLNet: xlnet/xlnet-base-cased)")
    p.add_argument("--code-map", default=None, action=argparse.BooleanOptionalAction,
                   help="with a Hub --model: the ASSD paper's whitespace mapping for code (default: on for */ASARM@code)")
    p.add_argument("--exclude-special", default=None, action=argparse.BooleanOptionalAction,
                   help="with a Hub --model: no fill takes a special token (default: on; --no-exclude-special "
                        "removes only <mask>, as the ASSD authors' sampler does)")


def apply_hub_flags(a: argparse.Namespace) -> None:
    """Record --tokenizer / --code-map / --exclude-special for the Hub model named by --model (nothing for other models)."""
    from engine.loading.hub import is_hub_spec, set_hub_options

    given = (a.tokenizer, a.code_map, getattr(a, "exclude_special", None))
    if getattr(a, "model", None) and any(v is not None for v in given) and is_hub_spec(a.model):
        set_hub_options(a.model, *given)


def add_device_arg(p: argparse.ArgumentParser) -> None:
    """`--device auto|cpu|cuda[:N]` (default: $INFILL_DEVICE, else auto) and `--precision auto|fp32|bf16`
    (default: $INFILL_PRECISION, else auto); shared by every subcommand that loads models."""
    p.add_argument("--device", default=None, help="auto (CUDA when available), cpu or cuda; default $INFILL_DEVICE")
    p.add_argument("--precision", default=None,
                   help="CPU matmuls: auto (bf16 on a CPU with AMX, else fp32), fp32 or bf16; default $INFILL_PRECISION")


def apply_device_args(a: argparse.Namespace):
    """Check and export `--device` and `--precision` (engine/loading/device.py, engine/loading/precision.py):
    a bad setting stops the command with one line before anything loads. Returns the torch device."""
    from engine.loading.device import apply_device_flag
    from engine.loading.precision import apply_precision_flag

    apply_precision_flag(getattr(a, "precision", None))
    return apply_device_flag(a.device)


DELEGATED = {"train": "train", "bench": "bench", "data": "data", "eval": "evaluate", "report": "report"}


def main(argv: list[str] | None = None) -> int:
    """Entry point of `python -m engine`: delegated subcommands go to the top-level package lab (named
    by string and imported only when called: the runtime never imports lab), user errors print one
    line and exit 2."""
    argv = sys.argv[1:] if argv is None else argv
    try:
        if argv and argv[0] in DELEGATED:  # each owns its own argument parser
            import importlib

            return int(importlib.import_module(f"lab.{DELEGATED[argv[0]]}").cli(argv[1:]) or 0)
        a = build_parser().parse_args(argv)
        return a.func(a)
    except InfillError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
