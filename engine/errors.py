"""Errors a person can act on.

Every problem with user input is an `InfillError` (a `ValueError`), so callers (the CLI, the app,
the storage layer) can show its message verbatim instead of a stack trace.
"""


class InfillError(ValueError):
    """Base class: the message is written for the person who typed the input."""


class NoMaskError(InfillError):
    """The text has no [MASK] marker: there is nothing to fill."""


class EmptyTextError(InfillError):
    """The text is empty."""


class BadSpanLengthError(InfillError):
    """A span length is zero, negative or beyond what the model takes."""


class InputTooLongError(InfillError):
    """The input, masks included, is longer than the model's context."""


class UnrepresentableTextError(InfillError):
    """The text holds characters the model's tokenizer cannot represent."""


class BadParameterError(InfillError):
    """A sampler parameter is out of its range (a knob of engine.params.KNOBS, the seed ...)."""


class ModelNotFoundError(InfillError):
    """No model by that name, folder or Hub id."""


class IncompatibleModelsError(InfillError):
    """The model does not fit the sampler (an AS-ARM sampler on a hybrid, a drafter of another
    tokenizer ...)."""


class DistributionError(InfillError):
    """A model or drafter gave a row that cannot be sampled or tested (NaN, infinite, all zero, or
    zero mass on the token it drew): refusing beats a silently wrong sample."""


class BadModelError(InfillError):
    """A model folder that cannot be used: config.json unreadable or out of bounds, weights
    missing, truncated or not matching the config (engine/loading/checkpoint.py). The message names the
    folder and what is wrong, in one line."""
