"""Our model classes; importing this registers them with transformers' Auto classes."""

from .asarm import AsArmConfig, AsArmModel
from .hybrid import HybridConfig, HybridModel
from .judge import JudgeConfig, JudgeModel

#: --kind of `python -m engine train` -> (config class, model class)
MODEL_KINDS: dict[str, tuple[type, type]] = {
    "asarm": (AsArmConfig, AsArmModel),
    "hybrid": (HybridConfig, HybridModel),
    "judge": (JudgeConfig, JudgeModel),
}

__all__ = ["MODEL_KINDS", "AsArmConfig", "AsArmModel", "JudgeConfig", "JudgeModel", "HybridConfig", "HybridModel"]
