"""Our model classes; importing this registers them with transformers' Auto classes."""

from .asarm import AsArmConfig, AsArmModel
from .hybrid import HybridConfig, HybridModel
from .judge import JudgeConfig, JudgeModel
from .ptp import PtpConfig, PtpHead

#: --kind of `python -m engine train` -> (config class, model class)
MODEL_KINDS: dict[str, tuple[type, type]] = {
    "asarm": (AsArmConfig, AsArmModel),
    "hybrid": (HybridConfig, HybridModel),
    "judge": (JudgeConfig, JudgeModel),
    "ptp": (PtpConfig, PtpHead),  # needs --teacher: a drafter distilled from a frozen AS-ARM
}

__all__ = ["MODEL_KINDS", "AsArmConfig", "AsArmModel", "JudgeConfig", "JudgeModel", "HybridConfig", "HybridModel",
           "PtpConfig", "PtpHead"]
