"""The exceptions config-bags raises; each message names what was wrong and what is accepted.

Every one derives from `ConfigError`, so a stack catches the whole package with one clause. Most
also derive from the built-in exception a Python reader expects of that mistake (`KeyError` for
an unknown leaf, `TypeError` for a declaration of the wrong shape), so code written against the
built-in keeps working.
"""

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


class UnknownRoleError(ConfigError, ValueError):
    """A role that the roles table does not declare, or one reading a namespace the root lacks."""


class WireError(ConfigError, ValueError):
    """Bytes that do not decode into a valid root of the type asked for."""


class UnknownBagError(ConfigError, LookupError):
    """A bag asked for (by type, or by a named accessor) that the published root does not hold."""


class WrongRootError(ConfigError, TypeError):
    """The published root asked for as a type it is not (`published_root(EngineRoot)` over another stack's root)."""


class DefinitionError(ConfigError, TypeError, ValueError):
    """A bag, leaf, root, roles table or accessor declared in a way config-bags cannot take: two
    bags declaring one leaf name, a root field that holds no bag, an accessor naming a namespace
    its root lacks, a help text of several lines."""


class UsageError(ConfigError, ValueError):
    """A call given arguments it cannot take: an override with no source or no leaves."""


class SubscriberError(ConfigError, RuntimeError):
    """An override was applied, but one or more `on_override` subscribers raised when told."""


class InputError(ConfigError, ValueError):
    """An operator's input a loader refuses (a flag, environment variable, file key or value);
    the message names where it was and what is accepted, on one line."""


class ConfigFileError(InputError):
    """A config file that cannot be read or parsed; the message names the file and the line."""
