"""The `serve` command line: config-bags' command line over this server's `Bags` (one `--flag`
per leaf, grouped by bag, plus --config, --dump-config and --explain), with `SERVE_<FLAG>`
environment variables, `--model` as the short spelling operators know from other servers, and
SGLang's `--is-embedding` for `--task embed`."""

from __future__ import annotations

import argparse

from config_bags import CommandLine, build_parser
from config_bags.server import Bags

SERVE_COMMAND = CommandLine(
    root_type=Bags,
    prog="serve",
    env_prefix="SERVE_",
    description="Serve an LLM over an OpenAI-compatible HTTP API.",
    aliases={"model_path": ("--model",)},
    # SGLang's spelling of an embedding launch.
    value_flags={"--is-embedding": ("task", "embed")},
    example=("page_size", "16"),
)


def parser() -> argparse.ArgumentParser:
    """The argparse parser of `serve`: a group per bag, one flag per leaf."""
    return build_parser(SERVE_COMMAND)
