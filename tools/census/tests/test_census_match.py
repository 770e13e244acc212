"""`match` binds names too: a capture or `as` takes the subject (or the part of it a sequence
pattern pairs with), a class pattern reads members off it, and a class pattern naming the
record type proves the subject is the record."""

from __future__ import annotations

import textwrap

from census import RecordNames, census_of_source


def found(source: str) -> tuple[set[tuple[int, str, str]], set[tuple[int, str]]]:
    """(line, leaf, shape) of every read; (line, kind) of every dynamic finding."""
    census = census_of_source(textwrap.dedent(source), "m.py", RecordNames(), {})
    return {(r.line, r.leaf, r.shape) for r in census.reads}, {(d.line, d.kind) for d in census.dynamic}


def test_a_capture_of_the_record_is_the_record() -> None:
    """`case x` and `case {...} | [...] as x` bind the subject.

    Reverse-verified: with `_pattern` ignoring captures, this test fails."""
    source = """\
        def f(server_args):
            match server_args:
                case x:
                    return x.page_size
            match server_args:
                case [] | {} as y:
                    return y.tp_size
        """
    assert found(source) == ({(4, "page_size", "alias"), (7, "tp_size", "alias")}, set())


def test_a_class_pattern_reads_the_record_s_members() -> None:
    """`case ServerArgs(page_size=4)` reads `page_size`, on the record or on any subject (the
    pattern proves it is the record), and `case ServerArgs() as sa` binds it; a positional
    sub-pattern reads a member named by `__match_args__`: dynamic; a keyword sub-pattern named
    like the record (`case Worker(server_args=sa)`) binds the record.

    Reverse-verified: with `_pattern` ignoring the Members step, the member reads are lost and
    this test fails; with `_refined` answering the subject as it is, the reads on `obj` are lost."""
    source = """\
        def f(server_args, obj):
            match server_args:
                case ServerArgs(page_size=4, tp_size=n):
                    pass
            match obj:
                case ServerArgs(dp_size=1) as sa:
                    return sa.pp_size
                case ServerArgs(8):
                    pass
                case Worker(server_args=inner):
                    return inner.port
        """
    reads, dynamic = found(source)
    assert reads == {
        (3, "page_size", "direct"),
        (3, "tp_size", "direct"),
        (6, "dp_size", "direct"),
        (7, "pp_size", "alias"),
        (11, "port", "alias"),
    }
    assert dynamic == {(8, "match_args")}


def test_a_sequence_pattern_pairs_with_a_display_and_is_dynamic_over_a_holder() -> None:
    """`match (x, server_args): case (a, sa)` pairs `sa` with the record; `case [first, *rest]`
    against a holder cannot say which element is the record: dynamic.

    Reverse-verified: with `steps` giving every sequence element `element_of(subject)` (no
    pairing), the read is lost and this test fails."""
    source = """\
        def f(server_args, x):
            match (x, server_args):
                case (a, sa):
                    return sa.page_size, a.tp_size
            pairs = [x, server_args]
            match pairs:
                case [first, *rest]:
                    return first
        """
    assert found(source) == ({(4, "page_size", "alias")}, {(5, "assignment"), (7, "match")})


def test_a_value_pattern_is_evaluated() -> None:
    """`case server_args.page_size` reads the record (a value pattern is a dotted name).

    Reverse-verified: with `_pattern` ignoring Evaluated steps, this test fails."""
    source = """\
        def f(server_args, n):
            match n:
                case server_args.page_size:
                    return 1
        """
    assert found(source) == ({(3, "page_size", "direct")}, set())
