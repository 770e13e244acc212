"""Roles: the table, and the three modes chosen by CONFIG_BAGS_ROLE_CHECK at import."""

import os
import subprocess
import sys

import config_bags
import config_bags.server
from config_bags.server import ROLE_READS

PROBE = """
import config_bags as c
from config_bags.server import Bags, get_model, get_schedule
c.publish(Bags(), role="detokenizer")
get_model().model_path
try:
    get_schedule().page_size
    print("read ok")
except c.RoleViolationError as e:
    print("refused:", e)
print("violations:", [(v.role, v.namespace) for v in c.role_violations()])
print("mode:", c.ROLE_CHECK_MODE.value)
"""


def _probe(mode: str) -> str:
    env = {**os.environ, "CONFIG_BAGS_ROLE_CHECK": mode}
    done = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True)
    return done.stdout + done.stderr


def test_every_role_reads_known_namespaces() -> None:
    for role, namespaces in ROLE_READS.items():
        assert namespaces <= config_bags.server.roles.ALL_NAMESPACES, role
    assert ROLE_READS["standalone"] == config_bags.server.roles.ALL_NAMESPACES


def test_off_mode_checks_nothing() -> None:
    out = _probe("off")
    assert "read ok" in out and "violations: []" in out and "mode: off" in out


def test_record_mode_remembers_reads_outside_the_role() -> None:
    out = _probe("record")
    assert "read ok" in out
    assert "violations: [('detokenizer', 'schedule')]" in out


def test_enforce_mode_refuses_reads_outside_the_role() -> None:
    out = _probe("enforce")
    assert "refused: role 'detokenizer' read namespace 'schedule'; it reads only: model, observability, serving" in out


def test_an_unknown_mode_is_refused_at_import() -> None:
    out = _probe("loud")
    assert "CONFIG_BAGS_ROLE_CHECK='loud' is not a role-check mode; accepted: off, record, enforce" in out


def test_bags_declares_this_servers_roles_table() -> None:
    """Bags' ROLES answer exactly ROLE_READS for every role of this server, so making roles data
    changed no role's reads.

    Reverse-verified: with "http" left out of SERVER_ROLES, this failed."""
    namespaces = tuple(config_bags.root_fields(config_bags.server.Bags))
    assert config_bags.server.Bags.ROLES is config_bags.server.SERVER_ROLES
    assert {role: config_bags.server.SERVER_ROLES.reads(role, namespaces) for role in ROLE_READS} == dict(ROLE_READS)
    assert set(config_bags.server.SERVER_ROLES.names) == set(ROLE_READS)
