"""Issue 41, part 2: the package face is the mechanism. It exports no name of this server's
configuration (those live in `config_bags.server`), and the README's API section lists every
name it exports, so a reader of the README knows the whole face."""

from __future__ import annotations

import re
from pathlib import Path

import config_bags
import config_bags.server

README = Path(__file__).resolve().parents[1] / "README.md"


def test_the_face_exports_no_name_of_this_server() -> None:
    """Reverse-verified: with `Bags` exported from `config_bags` again, this failed naming it."""
    server_objects = {id(getattr(config_bags.server, n)) for n in config_bags.server.__all__}
    leaked = [n for n in config_bags.__all__ if id(getattr(config_bags, n)) in server_objects]
    assert leaked == []
    from_server = [
        n
        for n in config_bags.__all__
        if getattr(getattr(config_bags, n), "__module__", "").startswith("config_bags.server")
    ]
    assert from_server == []


def test_the_face_is_tens_of_names_not_a_hundred() -> None:
    assert len(config_bags.__all__) < 90


def test_the_readme_api_section_lists_every_exported_name() -> None:
    """Reverse-verified: with `published_root_unchecked` dropped from the README's list, this
    failed naming it."""
    section = README.read_text().split("## The API in brief", 1)[1].split("\n## ", 1)[0]
    listed = set(re.findall(r"`@?(\w+)", section))
    assert sorted(set(config_bags.__all__) - listed) == []
