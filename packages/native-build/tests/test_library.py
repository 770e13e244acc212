"""native_build compiles a C++ source into a loadable library once, keyed by what it was built
from, and a machine without a working compiler or a writable cache gets an error saying what to do."""

from __future__ import annotations

import ctypes
from pathlib import Path

import pytest

from native_build import NativeBuildError, build_library, cache_dir_of, default_compiler, load_library
from native_build.library import INCLUDE_DIR

FLAGS = ("-O2", "-shared", "-fPIC")


def _source(directory: Path, body: str) -> Path:
    source = directory / "answer.cpp"
    source.write_text('extern "C" long answer(long x) { ' + body + " }\n")
    return source


def test_builds_once_and_loads(tmp_path: Path) -> None:
    """The library is real (ctypes calls it); a second build of the same source is the cached file,
    untouched; an edited source builds beside it under a new key."""
    source = _source(tmp_path, "return x * 6;")
    cache = tmp_path / "cache"
    compiler = default_compiler("the test library")
    path = build_library(source, FLAGS, cache_dir=cache, compiler=compiler, what="the test library")
    assert ctypes.CDLL(str(path)).answer(7) == 42
    built_at = path.stat().st_mtime_ns
    assert build_library(source, FLAGS, cache_dir=cache, compiler=compiler, what="the test library") == path
    assert path.stat().st_mtime_ns == built_at
    edited = build_library(_source(tmp_path, "return x * 7;"), FLAGS, cache_dir=cache, compiler=compiler, what="t")
    assert edited != path and ctypes.CDLL(str(edited)).answer(7) == 49
    assert sorted(p.name for p in cache.iterdir()) == sorted([path.name, edited.name])


def test_shared_headers_are_on_the_include_path_and_in_the_key(tmp_path: Path) -> None:
    """A source includes a shared header by its path under the include directory; editing the
    header builds a new library under a new key (the cached one would be stale), and the shipped
    headers compile. Reverse-verified by hand: without the headers' text in the key the edited
    header's build answered the stale 42."""
    include = tmp_path / "include"
    (include / "native_build").mkdir(parents=True)
    header = include / "native_build" / "factor.h"
    header.write_text("inline long factor() { return 6; }\n")
    source = tmp_path / "uses_header.cpp"
    source.write_text(
        "#include <native_build/factor.h>\n#include <native_build/amx_tiles.h>\n"
        'extern "C" long answer(long x) { return x * factor(); }\n'
    )
    cache, compiler = tmp_path / "cache", default_compiler("the test library")
    shipped = ("-I", str(INCLUDE_DIR))
    path = build_library(source, FLAGS + shipped, cache_dir=cache, compiler=compiler, what="t", include_dir=include)
    assert ctypes.CDLL(str(path)).answer(7) == 42
    header.write_text("inline long factor() { return 7; }\n")
    edited = build_library(source, FLAGS + shipped, cache_dir=cache, compiler=compiler, what="t", include_dir=include)
    assert edited != path and ctypes.CDLL(str(edited)).answer(7) == 49


def test_a_header_beside_the_source_is_in_the_key(tmp_path: Path) -> None:
    """A kernel split into a source and its own header (`#include "..."`, found beside the source)
    builds anew when only the header changes. Reverse-verified by hand: without the headers beside
    the source in the key the edited header's build was the stale library's path (answering 42)."""
    kernel = tmp_path / "kernel"
    kernel.mkdir()
    header = kernel / "factor.h"
    header.write_text("inline long factor() { return 6; }\n")
    source = kernel / "uses_local_header.cpp"
    source.write_text('#include "factor.h"\nextern "C" long answer(long x) { return x * factor(); }\n')
    cache, compiler = tmp_path / "cache", default_compiler("the test library")
    path = build_library(source, FLAGS, cache_dir=cache, compiler=compiler, what="t")
    assert ctypes.CDLL(str(path)).answer(7) == 42
    header.write_text("inline long factor() { return 7; }\n")
    edited = build_library(source, FLAGS, cache_dir=cache, compiler=compiler, what="t")
    assert edited != path and ctypes.CDLL(str(edited)).answer(7) == 49


def test_load_library_builds_into_the_package_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """What the runtime packages call: the default compiler, $XDG_CACHE_HOME/<package>, loaded."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    library = load_library(_source(tmp_path, "return x + 1;"), FLAGS, package="some-package", what="the test library")
    assert library.answer(41) == 42
    assert [p.suffix for p in (tmp_path / "xdg" / "some-package").iterdir()] == [".so"]


def test_cache_dir_follows_xdg_cache_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache_dir_of("attn-backends") == tmp_path / "attn-backends"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert cache_dir_of("attn-backends") == Path.home() / ".cache" / "attn-backends"


def test_a_missing_or_failing_compiler_or_an_unusable_cache_says_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No compiler on PATH, one that cannot run, one that fails, or a cache directory that cannot be
    made: each raises NativeBuildError naming it, and nothing half-written is left in the cache."""
    source = _source(tmp_path, "return x;")
    (tmp_path / "a-file").write_text("")
    with pytest.raises(NativeBuildError, match="cannot create the cache .*a-file/cache for the kernel.*XDG_CACHE_HOME"):
        build_library(source, FLAGS, cache_dir=tmp_path / "a-file" / "cache", compiler="g++", what="the kernel")
    with pytest.raises(
        NativeBuildError, match="could not run the C\\+\\+ compiler '/no/such/g\\+\\+'.*install g\\+\\+"
    ):
        build_library(source, FLAGS, cache_dir=tmp_path / "missing", compiler="/no/such/g++", what="the kernel")
    with pytest.raises(NativeBuildError, match="failed \\(exit 1\\)"):
        build_library(source, FLAGS, cache_dir=tmp_path / "failing", compiler="false", what="the kernel")
    assert not any((tmp_path / "failing").iterdir())
    monkeypatch.delenv("CXX", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(NativeBuildError, match="the kernel needs a C\\+\\+ compiler.*Install g\\+\\+ or set CXX"):
        default_compiler("the kernel")
