"""`python -m engine ...`: infill, models, train, bench, data, eval, report.

User errors print one readable line and exit 2; nothing prints a stack trace for bad input.
"""

from __future__ import annotations

import argparse
import json
import sys

from .errors import InfillError


def _infill(a: argparse.Namespace) -> int:
    from .api import infill
    from .device import apply_device_flag
    from .samplers import DOMAIN_DEFAULT

    apply_device_flag(a.device)
    apply_hub_flags(a)
    r = infill(
        a.text, model=a.model, sampler=a.sampler or DOMAIN_DEFAULT, domain=a.domain, k=a.k, temperature=a.temperature,
        seed=a.seed, cache=a.cache, steps=a.steps, dtau=a.dtau, window=a.window, inner=a.inner,
        draft_model=a.draft_model,
    )
    if a.json:
        print(json.dumps(r.to_json(with_steps=True)))
    else:
        print(r.text)
        print(
            f"-- {r.sampler} on {r.model}: {r.masked_tokens} tokens, {r.calls:g} calls, {r.rounds} rounds, "
            f"{r.tokens_per_call:.2f} tokens/call, {r.seconds:.2f} s, log p = {r.log_prob}",
            file=sys.stderr,
        )
    return 0


def _models(a: argparse.Namespace) -> int:
    from .registry import available

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


def build_parser() -> argparse.ArgumentParser:
    """The parser of `python -m engine` (infill, models); the delegated subcommands parse their own."""
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
    p.add_argument("--domain", default=None, choices=["text", "code", "protein"])
    p.add_argument("--k", type=int, default=5, help="draft length per round")
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--cache", default=None, action=argparse.BooleanOptionalAction, help="KV cache (AS-ARM)")
    p.add_argument("--steps", type=int, default=None, help="MDM steps (32) / drafter steps per round (4)")
    p.add_argument("--dtau", type=float, default=0.05, help="self-spec cosine window width")
    p.add_argument("--window", default="cosine", choices=["cosine", "linear"])
    p.add_argument("--inner", type=int, default=1, help="self-spec verify loops per non-causal pass")
    p.add_argument("--draft-model", default=None, help="drafter: a hybrid for assd-diffusion, a PTP head for assd-ptp")
    add_device_arg(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_infill)

    p = sub.add_parser("models", help="list available models with their metrics")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_models)

    for name in DELEGATED:
        sub.add_parser(name, help=f"see python -m engine {name} --help")
    return ap


def add_hub_args(p: argparse.ArgumentParser) -> None:
    """`--tokenizer ID` and `--code-map/--no-code-map`: a Hub model's options (registry.HubOptions)."""
    p.add_argument("--tokenizer", default=None,
                   help="with a Hub --model: take the tokenizer from this Hub id (NAME@REV) or folder "
                        "(default: the checkpoint's own, else its family's, XLNet: xlnet/xlnet-base-cased)")
    p.add_argument("--code-map", default=None, action=argparse.BooleanOptionalAction,
                   help="with a Hub --model: the ASSD paper's whitespace mapping for code (default: on for */ASARM@code)")


def apply_hub_flags(a: argparse.Namespace) -> None:
    """Record --tokenizer / --code-map for the Hub model named by --model (nothing for other models)."""
    from .registry import is_hub_spec, set_hub_options

    if getattr(a, "model", None) and (a.tokenizer is not None or a.code_map is not None) and is_hub_spec(a.model):
        set_hub_options(a.model, tokenizer=a.tokenizer, code_map=a.code_map)


def add_device_arg(p: argparse.ArgumentParser) -> None:
    """`--device auto|cpu|cuda[:N]` (default: $INFILL_DEVICE, else auto); shared by every subcommand."""
    p.add_argument("--device", default=None, help="auto (CUDA when available), cpu or cuda; default $INFILL_DEVICE")


DELEGATED = {"train": "train", "bench": "bench", "data": "data", "eval": "evaluate", "report": "report"}


def main(argv: list[str] | None = None) -> int:
    """Entry point of `python -m engine`: delegated subcommands go to engine.lab, user errors print
    one line and exit 2."""
    argv = sys.argv[1:] if argv is None else argv
    try:
        if argv and argv[0] in DELEGATED:  # each owns its own argument parser
            import importlib

            return int(importlib.import_module(f"engine.lab.{DELEGATED[argv[0]]}").cli(argv[1:]) or 0)
        a = build_parser().parse_args(argv)
        return a.func(a)
    except InfillError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
