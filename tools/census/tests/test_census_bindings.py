"""Every way Python binds a name is followed: where the census can tell the bound value is (or may
be) the record, reads through the name are counted; where the value may hold the record in a
part the census cannot name, the binding is reported as dynamic with its file, line, function
and form; never dropped. One small module per form."""

from __future__ import annotations

import textwrap

from census import RecordNames, census_of_source
from census.scan import Census


def census(source: str) -> Census:
    return census_of_source(textwrap.dedent(source), "m.py", RecordNames(), {})


def reads(source: str) -> set[tuple[int, str, str]]:
    """(line, leaf, shape) of every read."""
    return {(r.line, r.leaf, r.shape) for r in census(source).reads}


def dynamic(source: str) -> set[tuple[int, str, str]]:
    """(line, function, kind) of every dynamic finding."""
    return {(d.line, d.function, d.kind) for d in census(source).dynamic}


def test_boolean_expressions_may_be_the_record() -> None:
    """`server_args or default` and `a and server_args` may be the record, bound or read off.

    Reverse-verified: with `RecordValues.shape` answering None for a BoolOp, this test fails."""
    source = """\
        def f(server_args, default, flag):
            sa = server_args or default
            other = flag and server_args
            return sa.page_size, other.tp_size, (default or server_args).dp_size
        """
    assert reads(source) == {(4, "page_size", "alias"), (4, "tp_size", "alias"), (4, "dp_size", "direct")}


def test_conditional_expressions_may_be_the_record() -> None:
    """Either branch of `a if c else b` may be the record.

    Reverse-verified: with `RecordValues.shape` answering None for an IfExp, this test fails."""
    source = """\
        def f(server_args, x):
            sa = server_args if x else None
            other = None if x else server_args
            return sa.page_size, other.tp_size
        """
    assert reads(source) == {(4, "page_size", "alias"), (4, "tp_size", "alias")}


def test_getattr_with_the_record_s_name_is_the_record() -> None:
    """`getattr(worker, "server_args")` (with or without a default) is `worker.server_args`, and
    `getattr(self, "args")` a parked record.

    Reverse-verified: with `_call_shape` answering None for getattr, this test fails."""
    source = """\
        class Worker:
            def __init__(self, server_args):
                self.args = server_args

            def run(self, peer):
                sa = getattr(peer, "server_args")
                return sa.page_size, getattr(peer, "server_args", None).tp_size, getattr(self, "args").dp_size
        """
    assert reads(source) == {(7, "page_size", "alias"), (7, "tp_size", "direct"), (7, "dp_size", "parked")}


def test_annotated_assignment_of_the_record() -> None:
    """`sa: Config = server_args` binds like a plain assignment whatever the annotation says.

    Reverse-verified: with `_ann_assign` binding the annotated name to nothing, this test fails."""
    source = """\
        def f(worker):
            sa: Config = worker.server_args
            return sa.page_size
        """
    assert reads(source) == {(3, "page_size", "alias")}


def test_nested_tuple_and_list_targets_pair_element_by_element() -> None:
    """`a, [b, sa] = 1, [2, server_args]`: `sa` is the record, `a` and `b` are not.

    Reverse-verified: with `_bind` binding the elements of a list target to nothing, this test
    fails."""
    source = """\
        def f(server_args):
            a, [b, sa] = 1, [2, server_args]
            return sa.page_size, a.tp_size, b.tp_size
        """
    assert reads(source) == {(3, "page_size", "alias")}
    assert dynamic(source) == set()


def test_starred_targets_take_their_slice() -> None:
    """`*_, sa = (x, server_args)` makes `sa` the record; `first, *rest = (x, server_args)`
    makes `rest` a list holding it, reported as dynamic; a starred slice without the record is
    nothing; a starred target against a value the census cannot take apart that holds the
    record is dynamic.

    Reverse-verified: with `paired` answering None for a starred target (nothing paired), the
    alias of `sa` and `tail` is lost and this test fails; with `_bind_name` not reporting a
    holder, the dynamic findings are lost and it fails too."""
    source = """\
        def f(server_args, x, y):
            *_, sa = (x, server_args)
            first, *rest = (x, server_args)
            head, *middle, tail = server_args, x, y, server_args
            both = [server_args, x]
            one, *others = both
            return sa.page_size, first.tp_size, head.dp_size, tail.pp_size, middle.port
        """
    assert reads(source) == {(7, "page_size", "alias"), (7, "dp_size", "alias"), (7, "pp_size", "alias")}
    assert dynamic(source) == {(3, "f", "assignment"), (5, "f", "assignment"), (6, "f", "assignment")}
    assert [d.expr for d in census(source).dynamic][0] == "first, *rest = (x, server_args)"


def test_a_container_holding_the_record_bound_to_a_name_is_dynamic() -> None:
    """`cfg = {"args": server_args}`, `pair = (1, server_args)`, `dict(args=server_args)`,
    `list(pair)`, an element of a holder (`pair[1]`): the record is inside, where reads through
    the name cannot follow it; a tuple of its members (`(server_args.page_size, 1)`) is not.

    Reverse-verified: with `RecordValues.holds` answering False for tuple, list and set displays,
    this test fails."""
    source = """\
        def f(server_args):
            cfg = {"args": server_args}
            pair = (1, server_args)
            kw = dict(args=server_args)
            again = list(pair)
            sa = pair[1]
            sizes = (server_args.page_size, 1)
            return cfg["args"].page_size, sa.tp_size
        """
    assert dynamic(source) == {(line, "f", "assignment") for line in range(2, 7)}
    assert reads(source) == {(7, "page_size", "direct")}


def test_the_record_stored_where_the_census_does_not_follow_it_is_dynamic() -> None:
    """`d["k"] = server_args`, `worker.cfg = server_args`, `self.pair = (1, server_args)`; not
    `worker.server_args = server_args` (followed by its name) nor `self.args = server_args`
    (parked).

    Reverse-verified: with the container-store branch of `_bind` and the last branch of
    `_bind_attribute` removed, this test fails."""
    source = """\
        class Worker:
            def __init__(self, server_args, peer, d):
                d["k"] = server_args
                peer.cfg = server_args
                self.pair = (1, server_args)
                peer.server_args = server_args
                self.args = server_args
        """
    assert dynamic(source) == {
        (3, "Worker.__init__", "assignment"),
        (4, "Worker.__init__", "assignment"),
        (5, "Worker.__init__", "assignment"),
    }


def test_augmented_assignment_keeps_and_adds_what_it_holds() -> None:
    """`pairs += [server_args]` makes `pairs` hold the record (dynamic); `sa += 1` rebinds an
    alias to something that is not the record.

    Reverse-verified: with `_aug_assign` binding its target to nothing, the dynamic finding is
    lost and this test fails."""
    source = """\
        def f(server_args):
            pairs = []
            pairs += [server_args]
            sa = server_args
            sa += 1
            return sa.page_size
        """
    assert dynamic(source) == {(3, "f", "augmented assignment")}
    assert reads(source) == set()


def test_for_over_a_display_binds_each_element() -> None:
    """`for sa in (server_args,)`, `for a, sa in [(1, server_args), (2, other)]` (paired position
    by position): the record; `for i, sa in enumerate([...])` and `for sa in pairs` over a holder
    cannot be enumerated: dynamic.

    Reverse-verified: with `_for` binding its target to nothing, the reads are lost and this
    test fails; with `each_iteration` answering `element_of` for every iterable, the reads
    through displays are lost and it fails too."""
    source = """\
        def f(server_args, other):
            for sa in (server_args,):
                sa.page_size
            for a, sa in [(1, server_args), (2, other)]:
                sa.tp_size, a.dp_size
            for i, sa in enumerate([server_args, other]):
                sa.pp_size
            pairs = [server_args]
            for sa in pairs:
                sa.port
        """
    assert reads(source) == {(3, "page_size", "alias"), (5, "tp_size", "alias")}
    assert dynamic(source) == {(6, "f", "for"), (8, "f", "assignment"), (9, "f", "for")}
    assert {d.expr for d in census(source).dynamic if d.kind == "for"} == {
        "for i, sa in enumerate([server_args, other])",
        "for sa in pairs",
    }


def test_with_as_binds_what_the_context_is() -> None:
    """`with server_args as sa` binds the record (what most context managers' `__enter__`
    answers); `with make() as sa` then rebinds it to something else.

    Reverse-verified: with `_with` binding its targets to nothing, this test fails."""
    source = """\
        def f(server_args, make):
            with server_args as sa:
                sa.page_size
            with make() as sa:
                sa.tp_size
        """
    assert reads(source) == {(3, "page_size", "alias")}


def test_except_as_binds_an_exception_never_the_record() -> None:
    """`except E as sa` ends the alias `sa` was.

    Reverse-verified: with `_except` not unbinding its name, the alias survives into the
    handler and this test fails."""
    source = """\
        def f(server_args):
            sa = server_args
            try:
                pass
            except ValueError as sa:
                return sa.args
            return sa.page_size
        """
    assert reads(source) == {(7, "page_size", "alias")}


def test_comprehension_targets_bind_in_their_own_scope_before_the_elements() -> None:
    """`[sa.page_size for sa in (server_args,)]` counts (the generator binds before the element
    is read); a comprehension's target does not end an alias outside it; a comprehension whose
    elements are the record holds it: dynamic when bound; a dict comprehension too.

    Reverse-verified: with the comprehension handlers removed from the dispatch (the generic
    walk reads the element before the target is bound, in the enclosing scope), this test
    fails."""
    source = """\
        def f(server_args, xs):
            sizes = [sa.page_size for sa in (server_args,)]
            sa = server_args
            ignored = {sa for sa in xs}
            by_name = {k: v.tp_size for k, v in [("a", server_args)]}
            kept = [sa for sa in (server_args,)]
            return sa.dp_size
        """
    assert reads(source) == {(2, "page_size", "alias"), (5, "tp_size", "alias"), (7, "dp_size", "alias")}
    assert dynamic(source) == {(6, "f", "assignment")}
    assert {r.function for r in census(source).reads} == {"f"}


def test_a_comprehension_over_a_holder_is_dynamic() -> None:
    """`[sa.page_size for sa in pairs]` with `pairs` holding the record: the target may be it.

    Reverse-verified: with `_comprehension` binding its targets to nothing, this test fails."""
    source = """\
        def f(server_args):
            pairs = (server_args, None)
            return [sa.page_size for sa in pairs if sa]
        """
    assert dynamic(source) == {(2, "f", "assignment"), (3, "f", "comprehension")}


def test_a_walrus_in_a_comprehension_binds_the_enclosing_function() -> None:
    """`[(sa := server_args) for _ in xs]` binds `sa` in the function (PEP 572).

    Reverse-verified: with `_named_expr` not landing the binding in the enclosing scope, this
    test fails."""
    source = """\
        def f(server_args, xs):
            [(sa := server_args) for _ in xs]
            return sa.page_size
        """
    assert reads(source) == {(3, "page_size", "alias")}


def test_a_parameter_defaulting_to_the_record_may_be_the_record() -> None:
    """`def f(sa=server_args)`, a keyword-only default, `lambda sa=server_args: ...`: the
    parameter may be the record and the function takes it; a default holding it is dynamic.

    Reverse-verified: with `_parameters` ignoring defaults, this test fails."""
    source = """\
        def outer(server_args):
            def f(x, sa=server_args, *, kw=server_args):
                return sa.page_size, kw.tp_size
            g = lambda sa=server_args: sa.dp_size
            def h(pair=(1, server_args)):
                return pair
            return f, g, h
        """
    assert reads(source) == {(3, "page_size", "alias"), (3, "tp_size", "alias"), (4, "dp_size", "alias")}
    assert dynamic(source) == {(5, "outer.h", "parameter default")}
    assert {(t.function, t.parameter) for t in census(source).takers} == {
        ("outer", "server_args"),
        ("outer.f", "sa"),
        ("outer.f", "kw"),
        ("outer.<lambda>", "sa"),
    }


def test_a_global_bound_to_the_record_is_the_record_in_every_function() -> None:
    """`global sa; sa = server_args` in one function makes `sa` the record at module level and
    in every function, before it in the file too.

    Reverse-verified: with `ModuleScanner.scan` making one pass only (no rescan with the
    global names), the read in `first` is lost and this test fails; with `_land` not carrying
    the binding, the read in `later` is lost too."""
    source = """\
        def first():
            return sa.page_size

        def setup(server_args):
            global sa
            sa = server_args

        def later():
            return sa.tp_size
        """
    assert reads(source) == {(2, "page_size", "alias"), (9, "tp_size", "alias")}


def test_a_nonlocal_bound_to_the_record_is_the_record_in_the_enclosing_function() -> None:
    """Reverse-verified: with `Scope.landing` ignoring `nonlocal`, this test fails."""
    source = """\
        def outer(server_args):
            sa = None
            def bind():
                nonlocal sa
                sa = server_args
            bind()
            return sa.page_size
        """
    assert reads(source) == {(7, "page_size", "alias")}


def test_imports_are_not_record_bindings() -> None:
    """An import rebinds a name to a module or an object: it ends an alias, and a name spelled
    like the record is not read as the record until a parameter or assignment rebinds it. `import
    m as server_args` binds a module; `from m import server_args` may bind a record instance, so
    it is reported as dynamic.

    Reverse-verified: with `_unbind` ignoring `shadow`, `server_args.ServerArgs` counts as a read
    and this test fails; with the import handlers not unbinding, the alias `sa` survives; with
    `_import_from` not reporting, the dynamic finding is lost."""
    source = """\
        from engine import server_args
        import engine.config as server_args

        def f(worker):
            sa = worker.server_args
            from engine import sa
            return sa.page_size, server_args.ServerArgs

        def g(server_args):
            return server_args.tp_size
        """
    assert reads(source) == {(10, "tp_size", "direct")}
    assert [(d.line, d.function, d.kind, d.expr) for d in census(source).dynamic] == [
        (1, "<module>", "import", "from engine import server_args")
    ]


def test_def_and_class_rebind_their_name() -> None:
    """`def sa(): ...` and `class sa: ...` end the alias `sa` was.

    Reverse-verified: with `_function` and `_class` not unbinding their names, this test fails."""
    source = """\
        def f(server_args):
            sa = server_args
            def sa():
                pass
            other = server_args
            class other:
                pass
            return sa.page_size, other.tp_size
        """
    assert reads(source) == set()


def test_a_rebinding_in_one_branch_leaves_the_alias_after_it() -> None:
    """After `if`/`else`, `while`, `match`, `for` and `try`, a name may hold what any branch
    left it (a loop's body may not run, a case may not match, a handler may run after any part
    of the body); only a rebinding on every path ends the alias.

    Reverse-verified: with `Scope.join` keeping nothing of the other branch, this test fails."""
    source = """\
        def f(server_args, c, make):
            sa = server_args
            if c:
                sa = None
            else:
                pass
            sa.page_size
            while c:
                sa = None
            sa.tp_size
            match c:
                case 1:
                    sa = None
            sa.dp_size
            for sa in range(3):
                pass
            sa.pp_size
            try:
                sa = make()
            except ValueError:
                pass
            sa.port
            if c:
                sa = None
            else:
                sa = make()
            sa.host
        """
    assert reads(source) == {
        (7, "page_size", "alias"),
        (10, "tp_size", "alias"),
        (14, "dp_size", "alias"),
        (17, "pp_size", "alias"),
        (22, "port", "alias"),
    }


def test_with_a_call_handed_the_record_is_dynamic() -> None:
    """`with ctx(server_args) as a`: what the context manager enters may be the record or a part
    of it, which the census cannot name, so the binding is reported (issue 41: it was dropped
    silently). A call not handed the record, and the record itself as the context, are not.

    Reverse-verified: with `_handed_the_record` answering False, the two dynamic findings were
    lost and this test failed."""
    source = """\
        def f(server_args, path):
            with nullcontext(server_args) as a:
                a.page_size
            with open(path) as fh, wrap(config=[server_args]) as b:
                fh.read()
            with server_args as sa:
                return sa.port
        """
    assert dynamic(source) == {(2, "f", "with"), (4, "f", "with")}
    assert [d.expr for d in census(source).dynamic] == [
        "with nullcontext(server_args) as a",
        "with wrap(config=[server_args]) as b",
    ]
    assert (7, "port", "alias") in reads(source)
