"""The errors an operator's launch input can raise; main() prints each as one line, exit code 2.

The command line, environment and config file are read by config-bags' loader, whose errors
these are: serve names them as its own so its callers need not know where the input was read."""

from __future__ import annotations

from config_bags import ConfigFileError, InputError

LaunchInputError = InputError
"""A flag, key, environment variable or value the launch refuses; the message names what was
wrong and what is accepted, on one line."""

__all__ = ["ConfigFileError", "LaunchInputError", "ResolutionError", "SealedRecordError"]


class ResolutionError(LaunchInputError):
    """A resolution handler found the operator's values in conflict with a hard requirement, or
    could not find what it needs (the model's config.json, the bundled default model)."""


class SealedRecordError(AttributeError):
    """An assignment to a record leaf once resolution started; handlers change values with declare()."""
