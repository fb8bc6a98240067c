"""What `git perf init` writes for a project it has not seen (issue #38): the build system recognised
from the files at the root, a build command that works in a fresh worktree (configure, then build,
into `build/`), and the binary's real path read from the build files.  Pure reading: nothing runs.

A check builds in fresh worktrees (ARCHITECTURE.md §6a), so a command that assumes a configured
build directory (`make -C build`, `ninja -C build`) fails there; each command below configures when
the directory is missing and builds with debug information and optimisation, what a profile needs.
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

_JOBS = "$(nproc)"
# {target}: the program's target when the build file names it (a test target that does not build
# cannot fail the check, and the build is shorter), else nothing: everything
CMAKE = ("cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo > /dev/null && "
         f"cmake --build build -j{_JOBS}{{target}} > /dev/null")
MESON = ("{{ test -d build || meson setup build --buildtype=debugoptimized > /dev/null; }} && "
         "meson compile -C build{target} > /dev/null")
AUTOTOOLS = f'{{ test -f Makefile || ./configure CFLAGS="-O2 -g" CXXFLAGS="-O2 -g" > /dev/null; }} && make -j{_JOBS}'
MAKE = f"make -j{_JOBS}"
# executables whose name says they are not the program (tests, benchmarks of parts, examples)
_NOT_THE_PROGRAM = re.compile(r"(^|[_-])(tests?|unittests?|gtest|example|examples|demo|fuzz\w*)([_-]|$)", re.I)
# build systems that configure a build directory: file, name, command, how it names a target, how an
# executable is declared, how a subdirectory with a build file of its own is (whose programs the build
# puts in the same subdirectory of build/)
_CONFIGURED = (("CMakeLists.txt", "CMake", CMAKE, " --target {}", r"add_executable\s*\(\s*([A-Za-z0-9_.+-]+)",
                "add_executable({} ...) in {}", r"add_subdirectory\s*\(\s*([A-Za-z0-9_.+/-]+)\s*\)"),
               ("meson.build", "Meson", MESON, " {}", r"executable\s*\(\s*['\"]([A-Za-z0-9_.+-]+)['\"]",
                "executable('{}', ...) in {}", r"subdir\s*\(\s*['\"]([A-Za-z0-9_.+/-]+)['\"]\s*\)"))
_PHONY = {"all", "clean", "install", "uninstall", "check", "test", "tests", "dist", "distclean", "help", "depend"}


@dataclass(frozen=True)
class Adoption:
    system: str  # "CMake", "Meson", "autotools", "make", "" = not recognised
    command: str  # the build command
    binary: str  # the program's path after the build, relative to the root
    found: str  # where the binary's name came from ("" = a placeholder: edit it)


def _executables(text: str, pattern: str) -> list[str]:
    return [m for m in re.findall(pattern, text) if "$" not in m and "@" not in m]


def _program(names: list[str], root: Path) -> str:
    """The executable most likely the program: not a test; the one named like the project if any."""
    keep = [n for n in names if not _NOT_THE_PROGRAM.search(n)] or names
    project = root.name.lower()
    return next((n for n in keep if n.lower() == project), keep[0] if keep else "")


def _declared(root: Path, build_file: str, declared: str, subdirs: str) -> tuple[str, str]:
    """(the program's directory relative to `root`, its name) from the build file at the root, else
    from those of the subdirectories it adds (libdeflate declares its programs in
    programs/CMakeLists.txt); ("", "") where none declares a program."""
    text = (root / build_file).read_text(errors="replace")
    if name := _program(_executables(text, declared), root):
        return "", name
    for sub in re.findall(subdirs, text):
        where = os.path.normpath(sub)
        if where.startswith(("..", "/")) or _NOT_THE_PROGRAM.search(os.path.basename(where)):
            continue
        if (root / where / build_file).is_file():
            names = _executables((root / where / build_file).read_text(errors="replace"), declared)
            if name := _program(names, root):
                return where, name
    return "", ""


def recognise(root: Path) -> Adoption:
    """The build system at `root` and the configuration `init` should write for it."""
    for build_file, system, command, target, declared, said, subdirs in _CONFIGURED:
        if (root / build_file).is_file():
            where, name = _declared(root, build_file, declared, subdirs)
            return Adoption(system, command.format(target=target.format(name) if name else ""),
                            os.path.join("build", where, name or "app"),
                            said.format(name, os.path.join(where, build_file)) if name else "")
    if (root / "configure").is_file() and os.access(root / "configure", os.X_OK):
        return Adoption("autotools", AUTOTOOLS, "app", "")
    for makefile in ("GNUmakefile", "makefile", "Makefile"):
        if (root / makefile).is_file():
            targets = [t for t in re.findall(r"^([A-Za-z0-9_.+/-]+)\s*:(?!=)", (root / makefile).read_text(errors="replace"),
                                             re.M) if t not in _PHONY and not t.startswith(".") and "." not in t]
            name = _program(targets, root)
            return Adoption("make", MAKE, name or "app", f"the first program target of {makefile}" if name else "")
    return Adoption("", "make", "build/app", "")


# Words before the program that only set its environment or time it (`FOO=1 env BAR=2 time ./app`)
_PREFIXES = {"env", "time", "nice", "/usr/bin/env", "/usr/bin/time", "/usr/bin/nice"}
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=.*")


def program_of(command: str) -> str:
    """The program a workload's command runs when it names one in the work tree (`./programs/lz4 -d
    ...`: programs/lz4; after variable assignments, `env` or `time`): the binary to probe, whatever the
    build files' first target is (lz4's Makefile also copies it to ./lz4, another file to a uprobe).
    "" for a command that starts with anything else (an interpreter, a script through the shell, a
    program on PATH)."""
    try:
        words = shlex.split(command)
    except ValueError:
        return ""
    while words and (words[0] in _PREFIXES or _ASSIGNMENT.fullmatch(words[0])):
        words = words[1:]
    first = words[0] if words else ""
    if "/" not in first or os.path.isabs(first) or first.endswith((".sh", ".py", ".pl", ".lua")):
        return ""
    return os.path.normpath(first)


def placed(found: Adoption, program: str, command: str) -> tuple[str, str]:
    """The binary and workload command for `command`, whose program is `program` (`program_of`), where
    the recognised build puts it: a configured build (CMake, Meson: `build/`) does not write a
    program at the root, so `./minigzip -d ...` in zlib, which CMake builds as build/minigzip, probes
    and runs `build/minigzip` (else the check's first build would stop at "binary not found").  As
    they are otherwise, and when the command names the program in quotes."""
    out = os.path.dirname(found.binary)
    if not program or os.path.dirname(program) or not out:
        return program, command
    word = re.search(rf"(?:^|(?<=\s))\./{re.escape(program)}(?=[\s;|&<>)]|$)", command)
    if word is None:
        return program, command
    moved = f"{out}/{program}"
    return moved, f"{command[:word.start()]}./{moved}{command[word.end():]}"
