"""Function names as people read them (ARCHITECTURE.md §5a).

A profile, a note and every comparison keep the symbol as the binary has it (`_ZNK6Widget4scan...`):
that is the identity, and it is what two builds share.  What a view shows is `readable(name)`: the
C++ name demangled by libstdc++'s own `__cxa_demangle` (the `cxxfilt` package; 47,000 real symbols in
0.08 s, against 0.15 s through binutils' `c++filt` as one batch process: ARCHITECTURE.md §5a), with
the standard library's spelled-out typedefs put back (`std::string`, not
`std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >`).  A C name, or
one the demangler does not know, is shown as it is.  `short(name)` elides template arguments and
parameters for tables; the full readable name goes in JSON and in the dashboard's hover text.
"""

from __future__ import annotations

import functools
import re

try:  # libstdc++ is loaded through ctypes at import; a machine without it shows mangled names
    import cxxfilt
    _demangle = functools.partial(cxxfilt.demangle, external_only=False)
    _invalid: tuple[type[Exception], ...] = (cxxfilt.Error, UnicodeError)
except Exception:  # ImportError, or cxxfilt.LibraryNotFound
    _demangle, _invalid = None, ()

# The standard library's typedefs as a C++ developer writes them (gdb and lldb print them so too).
_STD = ((re.compile(r"std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >"), "std::string"),
        (re.compile(r"std::basic_string<char, std::char_traits<char>, std::allocator<char> >"), "std::string"),
        (re.compile(r"std::basic_string_view<char, std::char_traits<char> >"), "std::string_view"),
        (re.compile(r"std::__cxx11::"), "std::"),
        # a container's default allocator (one level of nested arguments: std::allocator<std::pair<K, V> >)
        (re.compile(r", std::allocator<[^<>]*(?:<[^<>]*>[^<>]*)*> ?>"), ">"),
        (re.compile(r"(?<=[^>\s]) >"), ">"))  # `std::string >`, left by the substitutions above
MAX_NAME = 4096  # a pulled name longer than this is shown cut (a real symbol is far shorter)


_COLD = re.compile(r"\.cold(\.\d+)?$")


def whole(name: str) -> str:
    """The function a `.cold` part belongs to (GCC's hot/cold splitting: `foo.cold` holds `foo`'s
    unlikely code, jumped into from `foo` and never called); other names as they are."""
    return _COLD.sub("", name)


# GCC's clones of a function, named after it: `.part.N` (partial inlining's outlined rest), `.isra.N`
# (parameters passed otherwise), `.constprop.N` (a constant argument folded in), `.lto_priv.N`, older
# `.clone.N`, the `.cold` part; several can stack (`foo.constprop.0.isra.0`).  Clang's `.llvm.NNN`.
_CLONE = re.compile(r"(?:\.(?:part|isra|constprop|lto_priv|clone|llvm)\.\d+|\.cold(?:\.\d+)?)+$")


def origin(name: str) -> str:
    """The function a compiler clone was made from (`foo.isra.0`, `foo.constprop.1.isra.0` -> `foo`);
    other names as they are.  A clone's number is the compiler's choice and changes with unrelated
    edits, so two builds' clones are matched through their origin (`analysis.bindiff.renames`)."""
    return _CLONE.sub("", name)


def unparameterised(name: str) -> str | None:
    """A C++ function's qualified name without its parameter list and qualifiers (`Index::find_id` of
    `Index::find_id(std::string const&) const`), the same for two signatures of one function; None for
    a name that carries no parameters (C, or what does not demangle)."""
    text = readable(origin(name))
    if text == origin(name):
        return None
    depth = 0
    for i, ch in enumerate(text):
        if ch in "<(" and not (ch == "(" and depth == 0 and text[:i].endswith("operator")):
            if ch == "(" and depth == 0:
                return text[:i]
            depth += 1
        elif ch in ">)":
            depth = max(depth - 1, 0)
    return None


def _is_mangled(name: str) -> bool:
    return name.startswith("_Z")


# What no function name holds: control characters (a newline in a pulled name printed a line of its
# own, "ALL GOOD: no significant change"), the line separators and the bidirectional overrides.
_NAME_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _visible(name: str) -> str:
    return _NAME_CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100
                             else f"\\u{ord(m.group()):04x}", name)


@functools.lru_cache(maxsize=65536)
def readable(name: str) -> str:
    """The name a developer reads: demangled, typedefs restored; C names unchanged; a control
    character shown as its escape (`\\x0a`), wherever the name is printed."""
    name = name[:MAX_NAME]
    if _demangle is None or not _is_mangled(name):
        return _visible(name)
    try:
        out = _demangle(name)
    except _invalid:
        return _visible(name)
    for pattern, repl in _STD:
        out = pattern.sub(repl, out)
    return _visible(out)


def _elide(text: str, open_: str, close: str) -> str:
    """`text` with what stands between each outermost `open_` and its `close` replaced by `…`."""
    out, depth = [], 0
    for ch in text:
        if ch == open_:
            if depth == 0:
                out.append(open_ + "…")
            depth += 1
        elif ch == close and depth:
            depth -= 1
            if depth == 0:
                out.append(close)
        elif depth == 0:
            out.append(ch)
    return "".join(out)


def short(name: str, width: int = 60) -> str:
    """`readable(name)` made to fit `width` for a table: first template arguments elided
    (`std::vector<…>::_M_realloc_insert<…>(…)`), then parameters, then cut with `…`.  Names of the
    same function differing only in what is elided stay apart in JSON and on hover."""
    text = readable(name)
    if len(text) <= width:
        return text
    for step in (lambda t: _elide(t, "<", ">"), lambda t: _elide(t, "(", ")")):
        text = step(text)
        if len(text) <= width:
            return text
    return text[:width - 1] + "…"


def labels(names: list[str], width: int = 60) -> list[str]:
    """`short` labels for a table's rows that stay apart.  Where short forms collide (instantiations
    of one template, `long count_if_len<…>(…)`), those rows show their template arguments with the
    parameters elided, or else the part of the readable name around where they first differ."""
    out = [short(n, width) for n in names]
    groups: dict[str, list[int]] = {}
    for i, label in enumerate(out):
        groups.setdefault(label, []).append(i)
    for rows in (g for g in groups.values() if len(g) > 1):
        full = [readable(names[i]) for i in rows]
        for i, text in zip(rows, full):
            out[i] = _apart(text, [t for t in full if t != text], width)
    return out


def _apart(text: str, others: list[str], width: int) -> str:
    """`text` within `width`, told apart from `others` where it can be."""
    for candidate in (text, _elide(text, "(", ")")):
        if len(candidate) <= width:
            return candidate
    at = min((next((k for k, (a, b) in enumerate(zip(text, o)) if a != b), len(o)) for o in others), default=0)
    start = max(0, min(at - width // 2, len(text) - width + 2))
    return ("…" if start else "") + text[start:start + width - 2] + ("…" if start + width - 2 < len(text) else "")
