"""The errors an operator's launch input can raise; main() prints each as one line, exit code 2."""

from __future__ import annotations


class LaunchInputError(ValueError):
    """A flag, key, environment variable or value the launch refuses; the message names what
    was wrong and what is accepted, on one line."""


class ConfigFileError(LaunchInputError):
    """A config file that cannot be read or parsed; the message names the file and the line."""


class ResolutionError(LaunchInputError):
    """A resolution handler found the operator's values in conflict with a hard requirement, or
    could not find what it needs (the model's config.json, the bundled default model)."""


class SealedRecordError(AttributeError):
    """An assignment to a record leaf once resolution started; handlers change values with declare()."""
