"""Our model classes; importing this registers them with transformers' Auto classes."""

from .asarm import AsArmConfig, AsArmModel

#: --kind of `python -m engine train` -> (config class, model class)
MODEL_KINDS: dict[str, tuple[type, type]] = {"asarm": (AsArmConfig, AsArmModel)}

__all__ = ["MODEL_KINDS", "AsArmConfig", "AsArmModel"]
