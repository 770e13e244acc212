"""Issue 41, part 3: loading for any root. From a root type config-bags builds an argparse parser
(one flag per leaf, help from the leaf's doc, grouped by bag, `--no-x` for booleans), reads
environment variables under the stack's prefix and a YAML or TOML file, applies cli > env > file
> default, keeps each leaf's provenance, and dumps and explains the result."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from loading_stack import ApiBag, CacheBag, LoadRoot

import config_bags
from config_bags import CommandLine, build_parser, dump, explain, load

HERE = Path(__file__).parent
COMMAND = CommandLine(root_type=LoadRoot, prog="engine", env_prefix="ENGINE_", description="Run the engine.")


def test_the_parser_has_a_flag_per_leaf_grouped_by_bag_with_the_leaf_help() -> None:
    """Reverse-verified: with every leaf added to the first bag's group, the api section held no flag."""
    text = build_parser(COMMAND).format_help()
    sections = {s.split(":\n", 1)[0].strip(): s for s in re.split(r"\n(?=[a-z.]+:\n)", text)}
    assert "--block-size INT" in sections["cache"] and "The KV cache: block size and eviction." in sections["cache"]
    assert "--served-name STR" in sections["api"]
    flat = " ".join(text.split())
    assert "Tokens per KV-cache block. [int >= 1 and <= 2^63-1; default 16; cold]" in flat
    assert "--evict {lru,fifo}" in flat
    assert "Precedence: flag > ENGINE_<FLAG> environment variable > --config file > default." in flat
    assert "--no-log-requests" in sections["api"]


def test_a_boolean_is_true_bare_false_with_no_and_either_in_words() -> None:
    """Reverse-verified: without the `--no-x` argument, `--no-log-requests` was an unknown flag."""

    def log_requests(*argv: str) -> bool:
        value: bool = load(COMMAND, list(argv), {}).root().api.log_requests  # type: ignore[attr-defined]
        return value

    assert log_requests("--no-log-requests") is False
    assert log_requests("--log-requests") is True
    assert log_requests("--log-requests", "no") is False
    assert log_requests("--no-log-requests", "--log-requests") is True  # the last flag wins


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("engine.toml", 'block-size = 32\nevict = "fifo"\nserved_name = "from-file"\n'),
        pytest.param(
            "engine.yaml",
            "block-size: 32\nevict: fifo\nserved_name: from-file\n",
            marks=pytest.mark.skipif(importlib.util.find_spec("yaml") is None, reason="YAML needs config-bags[yaml]"),
        ),
    ],
)
def test_precedence_is_cli_then_env_then_file_then_default_with_provenance(
    tmp_path: Path, name: str, text: str
) -> None:
    """Reverse-verified: with the env layer applied after the flags, block_size came out 64 (env)."""
    config = tmp_path / name
    config.write_text(text)
    loaded = load(
        COMMAND,
        ["--config", str(config), "--block-size", "128"],
        {"ENGINE_BLOCK_SIZE": "64", "ENGINE_EVICT": "lru", "HOME": "/root"},
    )
    root = loaded.root()
    assert isinstance(root, LoadRoot)
    assert (root.cache.block_size, root.cache.evict, root.api.served_name, root.api.max_batch) == (
        128, "lru", "from-file", None,
    )  # fmt: skip
    assert loaded.provenance() == {
        "block_size": "cli", "evict": "env", "served_name": "file", "log_requests": "default", "max_batch": "default",
    }  # fmt: skip
    origins = loaded.origins()
    assert (origins["block_size"], origins["evict"], origins["served_name"]) == (
        "--block-size 128", "ENGINE_EVICT", f"{config}:3",
    )  # fmt: skip


def test_dump_and_explain_any_root(tmp_path: Path) -> None:
    loaded = load(COMMAND, ["--served-name", "e1", "--dump-config"], {"ENGINE_MAX_BATCH": "64"})
    assert loaded.dump_config
    dumped = dump(loaded)
    assert dumped["config_hash"] == config_bags.hash_of(loaded.root())
    assert dumped["leaves"]["served_name"] == {
        "bag": "api",
        "value": "e1",
        "provenance": "cli",
        "origin": "--served-name e1",
    }
    assert dumped["leaves"]["block_size"] == {"bag": "cache", "value": 16, "provenance": "default", "origin": ""}
    assert explain(loaded, "max_batch").splitlines() == [
        "max_batch = 64",
        "  provenance: env",
        "  origin: ENGINE_MAX_BATCH",
        "  bag: api (hot); default None; accepted: int >= 1 and <= 2^63-1, or unset",
        "  help: Most requests in one batch (unset: no cap).",
    ]
    assert load(COMMAND, ["--explain", "max-batch"], {}).explain == "max_batch"


@pytest.mark.parametrize(
    ("argv", "environ", "message"),
    [
        (["--block-sise", "8"], {}, "unknown flag --block-sise; did you mean --block-size?"),
        (["--block-size", "0"], {}, "--block-size: block_size: Expected `int` >= 1"),
        (["--evict", "random"], {}, "accepted: one of lru, fifo"),
        (["--block-size"], {}, "argument --block-size: expected one argument"),
        (
            [],
            {"ENGINE_BLOCKSIZE": "8"},
            "unknown environment variable ENGINE_BLOCKSIZE; did you mean ENGINE_BLOCK_SIZE?",
        ),
        ([], {"ENGINE_MAX_BATCH": "many"}, "ENGINE_MAX_BATCH: max_batch: cannot read 'many'; accepted: int >= 1"),
        (["--explain", "evicts"], {}, "--explain: unknown flag 'evicts'; did you mean --evict?"),
    ],
)
def test_bad_input_is_an_input_error_naming_where_and_what_is_accepted(
    argv: list[str], environ: dict[str, str], message: str
) -> None:
    with pytest.raises(config_bags.InputError) as refused:
        load(COMMAND, argv, environ)
    assert message in str(refused.value) and "\n" not in str(refused.value)
    assert isinstance(refused.value, config_bags.ConfigError)


def test_a_bad_file_key_or_value_names_the_file_and_line(tmp_path: Path) -> None:
    config = tmp_path / "engine.toml"
    config.write_text('evict = "lru"\n\nblock_sise = 8\n')
    with pytest.raises(config_bags.InputError, match=rf"^{re.escape(str(config))}:3: key 'block_sise': unknown flag"):
        load(COMMAND, ["--config", str(config)], {})
    config.write_text("[cache]\nblock_size = 8\n")
    with pytest.raises(config_bags.InputError, match="unknown flag 'cache'"):
        load(COMMAND, ["--config", str(config)], {})


def test_the_loaded_root_keeps_the_root_types_rules() -> None:
    loaded = load(COMMAND, ["--max-batch", "8"], {})
    with pytest.raises(config_bags.RuleBrokenError, match="max_batch = 8 requires max_batch >= block_size = 16"):
        loaded.root()


def test_a_yaml_file_without_pyyaml_says_what_to_install(tmp_path: Path) -> None:
    """TOML needs nothing beyond the standard library; YAML needs PyYAML, and without it the
    refusal says so (PyYAML is made unimportable in the child)."""
    config = tmp_path / "engine.yaml"
    config.write_text("block-size: 32\n")
    code = (
        "import sys; sys.modules['yaml'] = None\n"
        "import config_bags\nfrom loading_stack import LoadRoot\n"
        "command = config_bags.CommandLine(root_type=LoadRoot, prog='engine', env_prefix='ENGINE_')\n"
        "try:\n"
        f"    config_bags.load(command, ['--config', {str(config)!r}], {{}})\n"
        "except config_bags.ConfigFileError as err:\n"
        "    print(err)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(HERE)}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == (
        f"{config}: reading YAML needs PyYAML, which is not installed; install config-bags[yaml], or use a .toml file"
    )


def test_bags_and_roots_are_keyword_only_and_frozen_without_saying_so() -> None:
    """Reverse-verified: without BagMeta's kw_only default, CacheBag(32) built a bag."""
    with pytest.raises(TypeError, match="Extra positional arguments"):
        CacheBag(32)  # type: ignore[misc]
    with pytest.raises(AttributeError):
        ApiBag().served_name = "x"  # type: ignore[misc]
    assert LoadRoot().cache is LoadRoot().cache  # a frozen default bag is shared, never copied


def test_a_value_flag_sets_its_leaf_and_refuses_the_leafs_own_flag_beside_it() -> None:
    """A peer's spelling (`--lru-cache` for `--evict lru`) sets the leaf as its own flag would; given
    with the leaf's own flag it is a parse error naming both, never dropped. Reverse-verified: without
    the mutually exclusive group, `--lru-cache --evict fifo` loaded evict = fifo, the value flag dropped."""
    command = CommandLine(
        root_type=LoadRoot, prog="engine", env_prefix="ENGINE_", value_flags={"--lru-cache": ("evict", "lru")}
    )
    loaded = load(command, ["--lru-cache"], {})
    assert loaded.root().cache.evict == "lru" and loaded.provenance()["evict"] == "cli"  # type: ignore[attr-defined]
    with pytest.raises(config_bags.InputError, match="not allowed with argument --lru-cache"):
        load(command, ["--lru-cache", "--evict", "fifo"], {})
    with pytest.raises(config_bags.DefinitionError, match="value_flags name evicts"):
        build_parser(CommandLine(root_type=LoadRoot, prog="e", env_prefix="E_", value_flags={"--x": ("evicts", "lru")}))
