"""Our model classes; importing this registers them with transformers' Auto classes."""

from .asarm import AsArmConfig, AsArmModel
from .judge import JudgeConfig, JudgeModel

#: --kind of `python -m engine train` -> (config class, model class)
MODEL_KINDS: dict[str, tuple[type, type]] = {"asarm": (AsArmConfig, AsArmModel), "judge": (JudgeConfig, JudgeModel)}

__all__ = ["MODEL_KINDS", "AsArmConfig", "AsArmModel", "JudgeConfig", "JudgeModel"]
