"""A record type with more than MAX_POSITIONAL fields is built by keyword: every dataclass of the runtime
packages (app, engine, storage, lab) whose constructor takes more than MAX_POSITIONAL arguments takes
them keyword-only (`@dataclass(kw_only=True)`, or `*` in a hand-written `__init__`).

Why: `Step(StepKind.ACCEPT, 0, [1], [5], ["a"], [0.5], [0.5], 2.0, 0.5)` says nothing to a reader, and a
field added or moved in the middle silently shifts every positional call after it (a `p` read as `q`
type-checks and runs). Named arguments keep each value tied to its field. The rule is read from the
constructors themselves, imported, so a class added later is held to it with no line here; transformers
makes our model configs dataclasses too, so their `__init__`s are held to it as well."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import pkgutil
from dataclasses import dataclass

#: a constructor may take this many arguments positionally; above it, all by keyword
MAX_POSITIONAL = 3
PACKAGES = ("app", "engine", "storage", "lab")
#: modules not imported: entry points that run on import, and Alembic's scripts (run by Alembic only)
SKIP = (".__main__", ".migrations")
#: dataclasses that must keep a positional constructor, each with why (none today). Format:
#: "package.module.Class": "the caller that needs the positional form, and why it cannot name them"
EXEMPT: dict[str, str] = {}
POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


def runtime_dataclasses() -> list[type]:
    """Every dataclass defined in a module of the runtime packages, imported as the app imports it."""
    out = []
    for pkg in PACKAGES:
        root = importlib.import_module(pkg)
        names = [pkg] + [m.name for m in pkgutil.walk_packages(root.__path__, pkg + ".")]
        for name in names:
            if any(s in name for s in SKIP):
                continue
            mod = importlib.import_module(name)
            out += [c for c in vars(mod).values()
                    if inspect.isclass(c) and c.__module__ == name and dataclasses.is_dataclass(c)]
    return out


def positional_offenders(classes: list[type]) -> list[str]:
    """Classes whose constructor takes more than MAX_POSITIONAL arguments, some of them positionally."""
    out = []
    for c in classes:
        params = [p for p in inspect.signature(c).parameters.values()
                  if p.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)]
        positional = [p.name for p in params if p.kind in POSITIONAL]
        key = f"{c.__module__}.{c.__qualname__}"
        if len(params) > MAX_POSITIONAL and positional and key not in EXEMPT:
            out.append(f"{key}: {len(params)} arguments, positional {positional}: make it keyword-only "
                       "(@dataclass(kw_only=True), or `*` first in its __init__) and name the arguments at its calls")
    return out


def test_dataclasses_with_more_than_three_fields_are_keyword_only():
    bad = positional_offenders(runtime_dataclasses())
    assert not bad, "\n".join(bad)


def test_the_walk_sees_the_record_types():
    """The rule holds only if the walk reaches them: a dataclass from each package and the trace's Step
    are found, and the exemptions name classes that still exist."""
    found = {f"{c.__module__}.{c.__qualname__}" for c in runtime_dataclasses()}
    for name in ("engine.trace.Step", "engine.inputs.masking.MaskedInput", "engine.samplers.acceptance.Verdict",
                 "app.run.streaming.Live", "storage.records.RunRecord", "lab.campaign_plan.Job"):
        assert name in found, f"{name} not seen by the walk"
    assert set(EXEMPT) <= found, f"exemptions for classes that are gone: {set(EXEMPT) - found}"


def test_the_check_sees_a_positional_dataclass():
    """A positional four-field dataclass is reported; the same as kw_only, or with three fields, is not."""

    @dataclass
    class Four:
        a: int
        b: int
        c: int
        d: int = 0

    @dataclass(kw_only=True)
    class FourByName:
        a: int
        b: int
        c: int
        d: int = 0

    @dataclass
    class Three:
        a: int
        b: int
        c: int

    assert [b.split(":")[0] for b in positional_offenders([Four, FourByName, Three])] == [
        f"{__name__}.{Four.__qualname__}"]
