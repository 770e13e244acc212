"""config-bags: typed, frozen configuration that is published once per process, read at the
moment of use, and overridable after publish with validation and a log.

A stack declares its own bags (`Bag`, `leaf`, the constraint types) and its root (`Root`) with
its roles (`Roles`) and rules (`@rule`), publishes it, and reads a bag by type:

    publish(EngineRoot(), role="engine_core")
    bag(EngineBag).block_size            # 16
    override("admin", max_num_seqs=64)   # checked first; logged; subscribers told

This face exports the mechanism only. This server's own bags, accessors and derived helpers are a
user of it, in `config_bags.server`. See README.md.
"""

from config_bags.accessors import accessor, bag
from config_bags.bag import Bag
from config_bags.command_line import CommandLine, build_parser, flag_of
from config_bags.constraints import (
    INT64_MAX,
    AboveOneFloat,
    BatchSizes,
    NonEmptyStr,
    NonNegativeFloat,
    NonNegativeInt,
    Port,
    PositiveInt,
    PositiveOrDisabledInt,
    UnitFloat,
)
from config_bags.dump import dump, dumped_leaves, explain, explained_lines
from config_bags.errors import (
    ColdLeafError,
    ConfigError,
    ConfigFileError,
    DefinitionError,
    InputError,
    LeafValueError,
    NotPublishedError,
    RoleViolationError,
    SubscriberError,
    UnknownBagError,
    UnknownLeafError,
    UnknownRoleError,
    UsageError,
    WireError,
    WrongRootError,
)
from config_bags.leaf import leaf
from config_bags.leaf_table import LeafSpec
from config_bags.loading import LeafInput, Loaded, env_var_of, load
from config_bags.override import (
    checked_value,
    leaf_value,
    leaf_value_of,
    on_override,
    override,
    overrides_log,
    overriding,
    with_leaves,
)
from config_bags.publish import (
    RepublishWarning,
    begin_serving,
    config_hash,
    is_published,
    is_serving,
    publish,
    published_role,
    published_roles,
    published_root,
    published_root_unchecked,
    published_rules,
    unpublish,
)
from config_bags.roles import (
    ROLE_CHECK_MODE,
    RoleCheckMode,
    Roles,
    RoleViolation,
    clear_role_violations,
    role_violations,
)
from config_bags.root import Root
from config_bags.rules import Rule, RuleBrokenError, broken_rule, check_rules, rule
from config_bags.schema import all_leaves, bag_paths, leaf_spec, leaf_specs, namespaces, root_fields
from config_bags.state import LeafChange, OverrideRecord, hash_of
from config_bags.text_values import parsed_text, parsed_value
from config_bags.wire import decode, encode

__all__ = [
    "AboveOneFloat",
    "Bag",
    "BatchSizes",
    "ColdLeafError",
    "CommandLine",
    "ConfigError",
    "ConfigFileError",
    "DefinitionError",
    "INT64_MAX",
    "InputError",
    "LeafChange",
    "LeafInput",
    "LeafSpec",
    "LeafValueError",
    "Loaded",
    "NonEmptyStr",
    "NonNegativeFloat",
    "NonNegativeInt",
    "NotPublishedError",
    "OverrideRecord",
    "Port",
    "PositiveInt",
    "PositiveOrDisabledInt",
    "ROLE_CHECK_MODE",
    "RepublishWarning",
    "RoleCheckMode",
    "RoleViolation",
    "RoleViolationError",
    "Roles",
    "Root",
    "Rule",
    "RuleBrokenError",
    "SubscriberError",
    "UnitFloat",
    "UnknownBagError",
    "UnknownLeafError",
    "UnknownRoleError",
    "UsageError",
    "WireError",
    "WrongRootError",
    "accessor",
    "all_leaves",
    "bag",
    "bag_paths",
    "begin_serving",
    "broken_rule",
    "build_parser",
    "check_rules",
    "checked_value",
    "clear_role_violations",
    "config_hash",
    "decode",
    "dump",
    "dumped_leaves",
    "encode",
    "env_var_of",
    "explain",
    "explained_lines",
    "flag_of",
    "hash_of",
    "is_published",
    "is_serving",
    "leaf",
    "leaf_spec",
    "leaf_specs",
    "leaf_value",
    "leaf_value_of",
    "load",
    "namespaces",
    "on_override",
    "override",
    "overrides_log",
    "overriding",
    "parsed_text",
    "parsed_value",
    "publish",
    "published_role",
    "published_roles",
    "published_root",
    "published_root_unchecked",
    "published_rules",
    "role_violations",
    "root_fields",
    "rule",
    "unpublish",
    "with_leaves",
]
