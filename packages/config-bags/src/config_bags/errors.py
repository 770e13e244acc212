"""The exceptions config-bags raises; each message names what was wrong and what is accepted."""

from __future__ import annotations


class ConfigError(Exception):
    """Base class of every config-bags error."""


class UnknownLeafError(ConfigError, KeyError):
    """A leaf name that no bag declares."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class LeafValueError(ConfigError, ValueError):
    """A value of the wrong type, outside a leaf's constraints, or refused by a bag's cross-leaf check."""


class ColdLeafError(ConfigError):
    """A cold leaf asked to change after the process began serving."""


class NotPublishedError(ConfigError, RuntimeError):
    """A bag read before `publish()` installed the bags of this process."""


class RoleViolationError(ConfigError, RuntimeError):
    """A read of a namespace outside the reading role's declared set (enforce mode)."""


class WireError(ConfigError, ValueError):
    """Bytes that do not decode into valid Bags."""


class UnknownBagError(ConfigError, LookupError):
    """A bag asked for (by type, or by a named accessor) that the published root does not hold."""
