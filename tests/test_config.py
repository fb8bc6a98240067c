import pytest
from conftest import git, run_cli

from gitperf.core import adopt, config
from gitperf.core.errors import ConfigError


def test_defaults_fill_every_value():
    cfg = config.parse('[[workload]]\nname = "w"\ncommand = "./app"\n', "x.toml")
    assert cfg.build.command == "make"
    assert cfg.collect.engine == "bcc"
    # 0: as the pilot affords
    assert cfg.workloads[0].repeat == 0
    assert cfg.workloads[0].timeout == 300.0
    assert cfg.check.direction == "lower"


def test_a_collection_stays_within_the_overhead_budget_unless_a_mode_is_chosen():
    """Issue #27 item 7: a bare configuration (and `init`'s template) plans within 5% of the native
    time; a mode set in the file is a fixed plan, unless the file sets a budget as well."""
    wl = '[[workload]]\nname = "w"\ncommand = "./app"\n'
    assert config.parse(wl).collect.max_overhead == config.DEFAULT_MAX_OVERHEAD == 5.0
    assert config.parse(config.template()).collect.max_overhead == 5.0
    assert config.parse(wl + '[collect]\nmode = "trace"\n').collect.max_overhead == 0.0
    assert config.parse(wl + '[collect]\nmode = "stack"\nmax_overhead = 2\n').collect.max_overhead == 2.0
    assert config.parse(wl + '[collect]\nmax_overhead = 0\n').collect.max_overhead == 0.0
    assert config.parse(wl + '[collect]\npipeline = "basic"\n').collect.max_overhead == 5.0


def test_template_is_valid_and_commented():
    text = config.template("build/app", "./build/app --size 10")
    cfg = config.parse(text)
    assert cfg.build.binary == "build/app"
    assert cfg.workloads[0].command == "./build/app --size 10"
    assert text.count("#") > 20


@pytest.mark.parametrize("text, key, words", [
    ("[collect]\nmode = \"fast\"\n", "collect.mode", ["'fast'", "trace"]),
    ("[collect]\nsample_every = \"2\"\n", "collect.sample_every", ["an integer", "'2'"]),
    ("[collect]\nsample_every = 0\n", "collect.sample_every", ["at least 1", "0"]),
    ("[build]\nbinnary = \"x\"\n", "build.binnary", ["unknown key", "binary"]),
    ("[[workload]]\nname = \"w\"\n", "workload[0].command", ["missing"]),
    ("[[workload]]\nname = \"w\"\ncommand = \"a\"\n[[workload]]\nname = \"w\"\ncommand = \"b\"\n",
     "workload[1].name", ["duplicate"]),
    ("[buidl]\n", "buidl", ["unknown section"]),
    ("[collect]\nperiod_ms = 5\nwindow_ms = 10\n", "collect.window_ms", ["period_ms"]),
    ("[collect]\nmax_overhead = -5\n", "collect.max_overhead", ["at least 0", "-5"]),
    ("[collect]\nmax_overhead = 2000\n", "collect.max_overhead", ["at most 1000", "2000"]),  # as --max-overhead
    ("[hook]\nrounds = 1\n", "hook.rounds", ["at least 2"]),  # as check --collect --rounds
    ("[collect]\nmax_overhead = \"5%\"\n", "collect.max_overhead", ["a number"]),
    ("[collect]\nwatch = \"parse\"\n", "collect.watch", ["list of strings"]),
    ("[[workload]]\nname = \"w\"\ncommand = \"a\"\ntimeout = 1e-300\n", "workload[0].timeout", ["at least 0.01"]),
    ("[check]\nalign_functions = 48\n", "check.align_functions", ["power of two", "48"]),
    ("[build]\nalign_functions = 8192\n", "build.align_functions", ["up to 4096"]),
])
def test_errors_name_file_key_value_and_expectation(text, key, words):
    with pytest.raises(ConfigError) as e:
        config.parse(text, "/p/.gitperf.toml")
    msg = str(e.value)
    assert msg.startswith(f"/p/.gitperf.toml: {key}: ")
    for w in words:
        assert w in msg


def test_not_toml():
    with pytest.raises(ConfigError, match="not valid TOML"):
        config.parse("[build\n", "f.toml")


def test_init_writes_file_and_refuses_to_overwrite(empty_repo):
    r = run_cli(empty_repo, "init", "--binary", "out/prog")
    assert r.returncode == 0, r.stderr
    assert "max_overhead = 5%" in r.stdout, r.stdout  # what a bare collect will do, said up front
    cfg = config.load(empty_repo)
    assert cfg.build.binary == "out/prog"
    assert cfg.collect.max_overhead == 5.0
    r = run_cli(empty_repo, "init")
    assert r.returncode == 2
    assert "--force" in r.stderr


def test_init_probes_the_program_the_command_runs(empty_repo):
    """lz4's Makefile names `lz4` first (a copy of programs/lz4 it makes): `init --command
    "./programs/lz4 ..."` probes the file the workload runs, not the copy.  A command that runs an
    interpreter, a script or a program on PATH leaves the build files' choice."""
    (empty_repo / "Makefile").write_text("all: lz4\nlz4:\n\t$(MAKE) -C programs lz4 && cp programs/lz4 .\n")
    r = run_cli(empty_repo, "init", "--command", "./programs/lz4 -d -c data.lz4")
    assert r.returncode == 0, r.stderr
    assert config.load(empty_repo).build.binary == "programs/lz4"
    assert "build.binary = programs/lz4 (the program --command runs)" in r.stdout, r.stdout
    assert [adopt.program_of(c) for c in ("./build/app 10", "build/app", "./bench.sh 3", "python3 run.py",
                                          "/usr/bin/time ./app", "sh -c './app'", "app", "", "LC_ALL=C ./app x",
                                          "env A=1 B='2 3' time ./b/app", "A=1", "./a/../app 'unbalanced")] == \
        ["build/app", "build/app", "", "", "app", "", "", "", "app", "b/app", "", ""]


def test_init_runs_the_program_where_a_configured_build_puts_it(empty_repo):
    """zlib has a CMakeLists.txt and a `./configure`; its users run `./minigzip`.  The check builds
    with CMake into build/, so `init --command "./minigzip -d ..."` probes and runs build/minigzip
    (the binary it wrote first was ./minigzip: "binary not found" at the check's first build), and
    says so.  A build command of the user's, or a program in a directory, is taken as given."""
    (empty_repo / "CMakeLists.txt").write_text("project(zlib C)\nadd_executable(minigzip test/minigzip.c)\n")
    r = run_cli(empty_repo, "init", "--command", "LC_ALL=C ./minigzip -d -c < data.gz > /dev/null")
    assert r.returncode == 0, r.stderr
    cfg = config.load(empty_repo)
    assert cfg.build.binary == "build/minigzip"
    assert cfg.workloads[0].command == "LC_ALL=C ./build/minigzip -d -c < data.gz > /dev/null"
    assert "workload command = LC_ALL=C ./build/minigzip -d -c < data.gz > /dev/null (CMake builds" in r.stdout
    r = run_cli(empty_repo, "init", "--force", "--command", "./minigzip 1", "--build", "./configure && make")
    assert r.returncode == 0
    assert (config.load(empty_repo).build.binary, config.load(empty_repo).workloads[0].command) \
        == ("minigzip", "./minigzip 1")
    r = run_cli(empty_repo, "init", "--force", "--command", "./out/minigzip 1")
    assert r.returncode == 0
    assert config.load(empty_repo).build.binary == "out/minigzip"


def test_broken_config_exits_2_naming_file_and_key(demo_repo):
    root, _ = demo_repo
    (root / ".gitperf.toml").write_text('[collect]\nmode = "everything"\n')
    git(root, "commit", "-qam", "break the config")
    r = run_cli(root, "collect", "-q")
    # exit 2 needs a machine that may collect; without eBPF the environment error (4) comes first
    if r.returncode == 4:
        pytest.skip("no eBPF here: collect stops at the environment check")
    assert r.returncode == 2, r.stderr
    assert ".gitperf.toml: collect.mode:" in r.stderr
    assert "'everything'" in r.stderr


def test_lists_of_strings_parse_and_are_checked():
    c = config.parse('[hook]\nworkloads = ["gate"]\n[collect]\nfunctions = ["a", "b"]\n')
    assert c.hook.workloads == ("gate",)
    assert c.collect.functions == ("a", "b")
    with pytest.raises(ConfigError, match="expected a list of strings"):
        config.parse('[hook]\nworkloads = "gate"\n')


def test_a_workload_without_repeat_runs_three_times_where_the_pilot_affords_it():
    """Issue #34: `repeat` the budget affords.  --repeat wins, then the workload's own; else three runs
    where three take at most 30 s at native speed (the budget's pilot measured it), else one; a fixed
    mode has no pilot: one."""
    from gitperf.collect.collection import AUTO_BUDGET_S, runs
    from gitperf.plan.optimize import Optimized
    from gitperf.plan.probes import ProbePlan
    wl = config.Workload("w", "./app")
    opt = lambda native_s: Optimized(plan=ProbePlan(functions=(), root=None), pipeline="none", native_s=native_s)  # noqa: E731
    assert runs(None, wl, opt(0.023)) == 3
    assert runs(None, wl, opt(AUTO_BUDGET_S / 3 + 1)) == 1
    assert runs(None, wl, opt(0.0)) == 1  # fixed mode: no pilot
    assert runs(5, wl, opt(0.023)) == 5
    assert runs(None, config.Workload("w", "./app", repeat=2), opt(0.023)) == 2


def test_every_number_in_the_file_is_bounded_on_its_own_field():
    """Issue #35: bounds lived in five dicts keyed by "section.key" strings, so renaming a field
    silently dropped its bounds.  Each is now stated on the field's annotation (msgspec.Meta or
    Literal, read by `core.typed`): every number a file may set has one, and a section read checks it
    by the field alone."""
    import typing
    sections = (config.BuildConfig, config.Workload, config.CollectConfig, config.CheckConfig, config.HookConfig)

    def bare(hint):
        return typing.get_args(hint)[0] if typing.get_origin(hint) is typing.Annotated else hint

    def is_number(hint) -> bool:
        literal = typing.get_origin(bare(hint)) is typing.Literal
        return bare(hint) in (int, float) or literal and all(type(a) is int for a in typing.get_args(bare(hint)))

    def is_bounded(hint) -> bool:  # a Literal is its own bound; a Meta needs one below and one above
        metas = getattr(hint, "__metadata__", ())
        return typing.get_origin(bare(hint)) is typing.Literal or any(
            {m.ge, m.gt} != {None} and {m.le, m.lt} != {None} for m in metas)
    hints = {f"{cls.__name__}.{name}": h for cls in sections
             for name, h in typing.get_type_hints(cls, include_extras=True).items()}
    numbers = {name: h for name, h in hints.items() if is_number(h)}
    assert len(numbers) >= 15, sorted(numbers)
    unbounded = [name for name, h in numbers.items() if not is_bounded(h)]
    assert unbounded == []
    with pytest.raises(ConfigError, match=r"hook\.max_commits: expected an integer at least 1, got 0"):
        config.parse("[hook]\nmax_commits = 0\n")
    with pytest.raises(ConfigError, match=r"check\.direction: expected one of lower, higher, got 'up'"):
        config.parse('[check]\ndirection = "up"\n')
    with pytest.raises(ConfigError, match=r"collect\.period_ms: expected a number at most 3600000, got inf"):
        config.parse("[collect]\nperiod_ms = inf\n")


def test_each_probe_pad_line_of_the_template_says_what_it_governs():
    """Issue #60: `init` wrote `probe_pad = false` under [build] and `probe_pad = true` under [check],
    which read as a contradiction: each line says which command's builds it is for."""
    from gitperf.core.config import template
    lines = [ln for ln in template().splitlines() if ln.startswith("probe_pad")]
    assert len(lines) == 2, lines
    build, check = lines
    assert build.startswith("probe_pad = false"), build
    assert "collect's builds" in build, build
    assert check.startswith("probe_pad = true"), check
    assert "check --collect's builds" in check, check


def test_a_byte_order_mark_is_read_and_a_confidence_outside_reason_refused():
    """Issue #59: a configuration saved with a byte-order mark gave an unclear error, and `confidence =
    1e-300` was taken silently."""
    cfg = config.parse("\ufeff" + config.template())
    assert cfg.check.confidence == 0.99
    for bad in ("1e-300", "0.3", "1.0"):
        with pytest.raises(ConfigError, match=r"check\.confidence"):
            config.parse(config.template().replace("confidence = 0.99", f"confidence = {bad}"))
    assert config.parse(config.template().replace("confidence = 0.99", "confidence = 0.95")).check.confidence == 0.95


def test_accept_refuses_an_empty_reason(empty_repo):
    """Issue #59: `accept -m ''` was taken silently: the reason is what the next reader of the
    history has.  Nothing is stored."""
    from gitperf.git.repo import open_repo
    from gitperf.store.notes import NotesStore
    r = run_cli(empty_repo, "accept", "HEAD", "-m", "  ")
    assert r.returncode == 2, r.stderr
    assert "say why" in r.stderr, r.stderr
    assert run_cli(empty_repo, "accept", "HEAD").returncode == 2  # -m is required
    assert NotesStore(open_repo(empty_repo)).commits() == []
