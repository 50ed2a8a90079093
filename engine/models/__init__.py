"""Our model classes; importing this registers them with transformers' Auto classes."""

from .asarm import AsArmConfig, AsArmModel

__all__ = ["AsArmConfig", "AsArmModel"]
