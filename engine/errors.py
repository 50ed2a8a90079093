"""Errors a person can act on.

Every problem with user input is an `InfillError` (a `ValueError`), so callers (the CLI, the app,
the storage layer) can show its message verbatim instead of a stack trace.
"""


class InfillError(ValueError):
    """Base class: the message is written for the person who typed the input."""


class NoMaskError(InfillError):
    pass


class EmptyTextError(InfillError):
    pass


class BadSpanLengthError(InfillError):
    pass


class InputTooLongError(InfillError):
    pass


class UnrepresentableTextError(InfillError):
    pass


class BadParameterError(InfillError):
    pass


class ModelNotFoundError(InfillError):
    pass


class IncompatibleModelsError(InfillError):
    pass


class DistributionError(InfillError):
    """A model or drafter gave a row that cannot be sampled or tested (NaN, infinite, all zero, or
    zero mass on the token it drew): refusing beats a silently wrong sample."""
