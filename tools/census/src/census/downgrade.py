"""Rewriting Python 3.12+ syntax into something Python 3.11's parser takes, line for line.

Only used for a file 3.11 refused. Three constructs are rewritten, each keeping every
expression on the line it was on, so the census's line numbers stay right:

- PEP 695 type parameters: `def f[T](x)`, `class C[T]:` lose the `[...]`.
- PEP 695 aliases: `type X[T] = expr` becomes `X = expr`.
- f-strings (PEP 701 lets a replacement field reuse the string's quote): each becomes a tuple
  of its replacement-field expressions, `f"a{x['k']}b{y:{w}}"` -> `(x['k'], y, w, )`, joined
  to a neighbouring string literal with `+` where the source concatenated them implicitly.
"""

from __future__ import annotations

PREFIX_CHARS = frozenset("rRbBuUfF")
OPENERS = {"(": ")", "[": "]", "{": "}"}


def _is_name_char(c: str) -> bool:
    return c.isalnum() or c == "_" or ord(c) > 127


def _string_end(src: str, i: int, quote: str, raw: bool) -> int:
    """Index just past the closing `quote` of a plain string whose body starts at `i`."""
    n = len(src)
    while i < n:
        c = src[i]
        if c == "\\":
            i += 2
            continue
        if src.startswith(quote, i):
            return i + len(quote)
        if c == "\n" and len(quote) == 1:
            return i  # unterminated: let the parser report it
        i += 1
    return n


def _field_end(src: str, i: int, stops: str) -> int:
    """Index of the first character in `stops` at bracket depth 0 from `i`, skipping strings."""
    depth = 0
    n = len(src)
    while i < n:
        c = src[i]
        if c in "\"'" or (c in PREFIX_CHARS and _string_start(src, i) is not None):
            start = _string_start(src, i)
            if start is not None:
                i = _token_end(src, i, start)
                continue
        if c in OPENERS:
            depth += 1
        elif c in ")]}":
            if depth == 0 and c in stops:
                return i
            depth -= 1
        elif depth == 0 and c in stops:
            if c == "!" and src.startswith("!=", i):
                i += 2
                continue
            if c == "=" and (src.startswith("==", i) or (i > 0 and src[i - 1] in "=!<>")):
                i += 2 if src.startswith("==", i) else 1
                continue
            return i
        i += 1
    return n


def _string_start(src: str, i: int) -> tuple[str, str] | None:
    """(prefix, quote) when a string literal starts at `i`, else None."""
    if i > 0 and _is_name_char(src[i - 1]):
        return None
    j = i
    while j < len(src) and j - i < 2 and src[j] in PREFIX_CHARS:
        j += 1
    if j >= len(src) or src[j] not in "\"'":
        return None
    quote = src[j] * 3 if src.startswith(src[j] * 3, j) else src[j]
    return src[i:j], quote


def _token_end(src: str, i: int, start: tuple[str, str]) -> int:
    prefix, quote = start
    body = i + len(prefix) + len(quote)
    if "f" in prefix.lower():
        return _fstring(src, body, quote, "r" in prefix.lower(), [])
    return _string_end(src, body, quote, "r" in prefix.lower())


def _fstring(src: str, i: int, quote: str, raw: bool, out: list[str]) -> int:
    """Scan an f-string body from `i`; append the rewritten pieces to `out`; return its end."""
    n = len(src)
    while i < n:
        if src.startswith(quote, i):
            return i + len(quote)
        c = src[i]
        if c == "\\" and not raw:
            i += 2
            continue
        if c == "\n":
            out.append("\n")
            if len(quote) == 1:
                return i
        elif src.startswith("{{", i) or src.startswith("}}", i):
            i += 2
            continue
        elif c == "{":
            i = _replacement_field(src, i + 1, out)
            continue
        i += 1
    return n


def _replacement_field(src: str, i: int, out: list[str]) -> int:
    """Scan `expr[=][!c][:spec]}` from `i`, appending the expressions; return the index past `}`."""
    end = _field_end(src, i, "=!:}")
    out.append(downgraded(src[i:end]) + ", ")
    i = end
    if i < len(src) and src[i] == "=":
        i += 1
    if i < len(src) and src[i] == "!":
        i += 2
    if i < len(src) and src[i] == ":":
        i += 1
        while i < len(src) and src[i] != "}":
            if src[i] == "{":
                i = _replacement_field(src, i + 1, out)
                continue
            if src[i] == "\n":
                out.append("\n")
            i += 1
    return i + 1


def downgraded(src: str) -> str:
    """`src` with 3.12+ syntax rewritten for Python 3.11's parser, on the same lines."""
    out: list[str] = []
    n = len(src)
    i = 0
    depth = 0
    statement_start = True
    previous = ""  # kind of the last significant token: "str", "fstr", "name", "op"
    generic_owner = False  # just saw `def NAME` / `class NAME` / `type NAME`
    words: list[str] = []  # names since the statement started
    while i < n:
        c = src[i]
        if c == "#":
            end = src.find("\n", i)
            end = n if end == -1 else end
            out.append(src[i:end])
            i = end
            continue
        if c == "\\" and src.startswith("\\\n", i):
            out.append("\\\n")
            i += 2
            continue
        if c == "\n":
            out.append(c)
            if depth == 0:
                statement_start, words, generic_owner = True, [], False
            i += 1
            continue
        if c in " \t\f\r;":
            out.append(c)
            if c == ";":
                statement_start, words, generic_owner, previous = True, [], False, "op"
            i += 1
            continue
        start = _string_start(src, i) if (c in "\"'" or c in PREFIX_CHARS) else None
        if start is not None:
            is_f = "f" in start[0].lower()
            if previous == "fstr" or (is_f and previous == "str"):
                out.append(" + ")
            if is_f:
                pieces: list[str] = ["("]
                i = _fstring(src, i + len(start[0]) + len(start[1]), start[1], "r" in start[0].lower(), pieces)
                pieces.append(")")
                out.append("".join(pieces))
            else:
                end = _token_end(src, i, start)
                out.append(src[i:end])
                i = end
            previous, statement_start, generic_owner = ("fstr" if is_f else "str"), False, False
            continue
        if _is_name_char(c):
            j = i
            while j < n and _is_name_char(src[j]):
                j += 1
            word = src[i:j]
            if statement_start and word == "type" and _type_alias_follows(src, j):
                while j < n and src[j] in " \t":  # `type X = ...` -> `X = ...`
                    j += 1
                words.append("type")
                i = j
                continue
            out.append(word)
            generic_owner = bool(words) and words[-1] in ("def", "class", "type")
            words.append(word)
            previous, statement_start = "name", False
            i = j
            continue
        if c == "[" and generic_owner:
            i = _skip_brackets(src, i, out)
            generic_owner = False
            continue
        if c in OPENERS:
            depth += 1
        elif c in ")]}":
            depth = max(0, depth - 1)
        out.append(c)
        previous, statement_start, generic_owner = "op", False, False
        i += 1
    return "".join(out)


def _type_alias_follows(src: str, i: int) -> bool:
    """Whether `type` ending at `i` starts a PEP 695 alias: `type NAME [params] =`."""
    j = i
    while j < len(src) and src[j] in " \t":
        j += 1
    if j == i or j >= len(src) or not (src[j].isalpha() or src[j] == "_"):
        return False
    while j < len(src) and _is_name_char(src[j]):
        j += 1
    while j < len(src) and src[j] in " \t":
        j += 1
    return j < len(src) and (src[j] == "[" or (src[j] == "=" and not src.startswith("==", j)))


def _skip_brackets(src: str, i: int, out: list[str]) -> int:
    """Skip a balanced `[...]` from `i`, keeping only its newlines; return the index past it."""
    depth = 0
    while i < len(src):
        c = src[i]
        if c == "[":
            depth += 1
        elif c == "]":
            depth -= 1
            if depth == 0:
                return i + 1
        elif c == "\n":
            out.append(c)
        i += 1
    return i
