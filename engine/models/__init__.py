"""Our model classes. Importing `engine.models.asarm` / `.hybrid` / `.judge` registers them with
transformers' Auto classes; this package itself imports nothing heavy, so that loading a bundled
AS-ARM through `engine.models.asarm_core` never imports transformers (CLI start-up)."""

from __future__ import annotations

import importlib

_WHERE = {"AsArmConfig": "asarm", "AsArmModel": "asarm", "HybridConfig": "hybrid", "HybridModel": "hybrid",
          "JudgeConfig": "judge", "JudgeModel": "judge", "PtpConfig": "ptp", "PtpHead": "ptp"}


def register_all() -> None:
    """Import every model module, registering its classes with the Auto classes."""
    for mod in sorted(set(_WHERE.values())):
        importlib.import_module(f"{__name__}.{mod}")


def __getattr__(name: str):
    if name == "MODEL_KINDS":
        #: --kind of `python -m engine train` -> (config class, model class)
        return {kind: (__getattr__(f"{cls}Config"), __getattr__(f"{cls}Model"))
                for kind, cls in (("asarm", "AsArm"), ("hybrid", "Hybrid"), ("judge", "Judge"))} | {
            "ptp": (__getattr__("PtpConfig"), __getattr__("PtpHead")),  # needs --teacher: distilled from an AS-ARM
        }
    if name in _WHERE:
        return getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
    raise AttributeError(name)


__all__ = ["MODEL_KINDS", "AsArmConfig", "AsArmModel", "JudgeConfig", "JudgeModel", "HybridConfig", "HybridModel",
           "PtpConfig", "PtpHead", "register_all"]
