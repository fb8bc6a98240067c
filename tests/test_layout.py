"""The package layout follows the data flow (ARCHITECTURE.md §1): imports only go down, functions
stay short and simple, stage functions take few parameters, and the installed distribution is
`gitperf` alone."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import pytest
import setuptools

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / "gitperf"

# Lower ranks never import higher ones (ARCHITECTURE.md §1); packages of one rank are independent.
RANKS = {"core": 0, "stats": 1, "git": 1, "store": 2, "analysis": 3, "plan": 4, "engine": 5, "collect": 6,
         "checks": 7, "views": 8, "web": 9, "hooks": 10, "cli": 11, "__main__": 12, "__init__": 0}
MAX_LINES = 50
MAX_PARAMS = 5
MAX_MODULE_LINES = 600  # a module a reader takes in at one sitting (issue #56: compare.py had grown to 1,162)
# Paths through a function a reader must hold at once (`complexity`), beside the length cap: issue #56
# found `_measure_side` at 30; `noise.analyse` read 38 until it was split.  Radon's grade D (21-30)
# begins at 21: the cap keeps every function below the worst it had, to be lowered as they split.
MAX_COMPLEXITY = 25


def _modules() -> list[Path]:
    return sorted(PKG.rglob("*.py"))


def _layer(module: str) -> str:
    """`gitperf.plan.hybrid` -> `plan`; `gitperf` itself -> `__init__`."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def _imports(source: str) -> list[tuple[int, str]]:
    """Every gitperf module `source` imports, anywhere in the file (function bodies too)."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("gitperf"):
            if node.module == "gitperf":
                out += [(node.lineno, f"gitperf.{a.name}") for a in node.names if a.name != "__version__"]
            else:
                out.append((node.lineno, node.module))
        elif isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names if a.name.startswith("gitperf")]
    return out


def violations(paths: list[Path], sources: dict[Path, str] | None = None) -> list[str]:
    """Imports that climb; `sources` stands in for files' text (a test's own module, never written)."""
    bad = []
    for path in paths:
        here = _layer(_name(path))
        for line, target in _imports((sources or {}).get(path) or path.read_text()):
            there = _layer(target)
            if there == here:
                continue
            if there not in RANKS or here not in RANKS:
                bad.append(f"{path.relative_to(ROOT)}:{line}: {there or here} has no rank in RANKS")
            elif RANKS[there] >= RANKS[here] and there != "__init__":
                bad.append(f"{path.relative_to(ROOT)}:{line}: {here} (rank {RANKS[here]}) imports {target} "
                           f"(rank {RANKS[there]})")
    return bad


def test_every_package_has_a_rank():
    found = {p.name for p in PKG.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    found |= {p.stem for p in PKG.glob("*.py")}
    assert found <= set(RANKS), found - set(RANKS)


def test_imports_only_go_down():
    assert violations(_modules()) == []


def test_the_layout_test_catches_an_import_that_climbs(tmp_path):
    fake = PKG / "core" / "_climbs_for_test.py"  # not written: its text is handed in
    found = violations([fake], {fake: "from gitperf.checks import check\n"})
    assert any("core (rank 0) imports gitperf.checks" in v for v in found), found


def test_planning_reads_no_repository():
    """Issue #56 item 3: what planning needs of the repository is read by `collect` and handed in as
    values (`plan.optimize.Inputs`); `plan/` imports neither pygit2 nor git perf's git or store code."""
    found = []
    for path in sorted((PKG / "plan").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([node.module] if isinstance(node, ast.ImportFrom) and node.module else
                     [a.name for a in node.names] if isinstance(node, ast.Import) else [])
            found += [f"{path.name}:{node.lineno}: {n}" for n in names
                      if n == "pygit2" or n.startswith(("gitperf.git", "gitperf.store"))]
    assert found == []


def _is_click_command(fn: ast.FunctionDef) -> bool:
    """click passes every option as a parameter: commands are exempt from the parameter limit."""
    return any("command" in ast.unparse(d) or "group" in ast.unparse(d) for d in fn.decorator_list)


def test_functions_are_short_and_take_few_parameters():
    long, wide = [], []
    for path in _modules():
        for fn in ast.walk(ast.parse(path.read_text())):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            where = f"{path.relative_to(ROOT)}:{fn.lineno} {fn.name}"
            if fn.end_lineno - fn.lineno + 1 > MAX_LINES:
                long.append(where)
            a = fn.args
            params = [x for x in a.posonlyargs + a.args + a.kwonlyargs if x.arg not in ("self", "cls")]
            if len(params) > MAX_PARAMS and not _is_click_command(fn):
                wide.append(f"{where} ({len(params)})")
    assert long == [], f"functions over {MAX_LINES} lines"
    assert wide == [], f"functions with more than {MAX_PARAMS} parameters"


_BRANCHES = (ast.If, ast.For, ast.AsyncFor, ast.While, ast.IfExp, ast.ExceptHandler, ast.match_case, ast.Assert)


def complexity(fn: ast.AST) -> int:
    """McCabe's cyclomatic complexity: 1 + each branch (`if`, loops, `except`, `case`, a conditional
    expression, an `assert`), each further operand of `and`/`or`, and each comprehension's loop and
    conditions (functions nested inside count toward their outer one: a reader reads them together)."""
    n = 1
    for node in ast.walk(fn):
        if isinstance(node, _BRANCHES):
            n += 1
        elif isinstance(node, ast.BoolOp):
            n += len(node.values) - 1
        elif isinstance(node, ast.comprehension):
            n += 1 + len(node.ifs)
    return n


def test_complexity_counts_every_path():
    fn = ast.parse("def f(x):\n    if x and x > 1:\n        return [y for y in x if y]\n    return 0 if x else 1\n")
    assert complexity(fn.body[0]) == 1 + 1 + 1 + 2 + 1  # if, and, the comprehension and its if, the else


def test_no_function_has_more_paths_than_a_reader_holds_at_once():
    over = [f"{path.relative_to(ROOT)}:{fn.lineno} {fn.name} ({c})" for path in _modules()
            for fn in ast.walk(ast.parse(path.read_text()))
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and (c := complexity(fn)) > MAX_COMPLEXITY]
    assert over == [], f"functions of cyclomatic complexity over {MAX_COMPLEXITY}"


def test_the_distribution_installs_gitperf_only():
    conf = tomllib.loads((ROOT / "pyproject.toml").read_text())
    include = conf["tool"]["setuptools"]["packages"]["find"]["include"]
    found = setuptools.find_packages(str(ROOT), include=include)
    assert "gitperf.web" in found
    assert "gitperf.checks" in found
    assert all(p == "gitperf" or p.startswith("gitperf.") for p in found), found
    data = conf["tool"]["setuptools"]["package-data"]["gitperf"]
    assert "web/templates/*.html" in data
    assert "engine/*.c" in data


@pytest.mark.parametrize("ref", sorted({m for p in _modules() for m in
                                        __import__("re").findall(r"ARCHITECTURE\.md §(\d+)", p.read_text())}))
def test_references_to_the_architecture_exist(ref):
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    assert f"\n## {ref}. " in text


def test_every_module_has_its_job_in_the_architectures_map():
    """Issue #56 item 6: a reader finds a module's job in one table (ARCHITECTURE.md §1), so every module
    of the package is named there, in backquotes, as the table names them (`notes`, `cli.app`)."""
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    table = text[text.index("\n## 1. "):text.index("\n## 2. ")]
    unnamed = [str(p.relative_to(ROOT)) for p in _modules() if p.name != "__init__.py"
               and f"`{p.stem}`" not in table and f"`{p.parent.name}.{p.stem}`" not in table]
    assert unnamed == [], "modules the map in ARCHITECTURE.md §1 does not name"


def test_no_module_is_a_hall():
    """Issue #56: checks/compare.py grew to 1,162 lines and cli.py to 782; a module past this is split by
    what its parts do (the designs of a comparison, the commands by what they touch)."""
    long = {str(p.relative_to(ROOT)): n for p in _modules() if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES}
    assert long == {}, f"modules over {MAX_MODULE_LINES} lines"


def joined_facts(source: str) -> list[int]:
    """The lines of asserts whose condition is several facts joined by `and` (`assert a and b`): when
    one fails, the report does not say which.  Issue #56: one fact an assert (`and` inside a fact, as in
    `all(x and y for ...)`, is that fact's own)."""
    return [a.lineno for a in ast.walk(ast.parse(source))
            if isinstance(a, ast.Assert) and isinstance(a.test, ast.BoolOp) and isinstance(a.test.op, ast.And)]


def test_joined_facts_finds_an_and_at_the_top_of_an_assert_only():
    assert joined_facts("assert a and b\nassert all(x and y for x, y in z)\nassert (a or b)\n") == [1]


def test_each_assert_of_the_tests_states_one_fact():
    found = [f"{p.name}:{n}" for p in sorted((ROOT / "tests").glob("*.py")) for n in joined_facts(p.read_text())]
    assert found == [], "split into one assert a fact"
