#!/usr/bin/env python3
"""Build the demo git repository: the wordstat sources with a six-commit history.

    python3 examples/demo/make_history.py [--no-config] DIR

--no-config leaves .gitperf.toml out of every commit: a project that has never seen git perf (the
README's first check starts there, with `git perf init`).

Each commit is one realistic change; the README next to this file lists them with their ground
truth.  The script is deterministic (fixed author, dates) so commit ids are stable across runs.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SRC = HERE / "src"

CONFIG = """\
# git perf configuration of the wordstat demo
[build]
command = "make -s"
binary = "wordstat"

[[workload]]
name = "small"            # fast; its exact call counts are the ground truth in the README
command = "./wordstat 2000 100"
timeout = 60

[[workload]]
name = "gate"             # what checks and the pre-push hook compare: the checksum's share is larger
command = "./wordstat 10000 20"
repeat = 5                # medians of 5 runs: one disturbed run does not decide
timeout = 120

[[workload]]
name = "default"          # ~370k calls of is_word_char; ~6 s under full tracing
command = "./wordstat 50000 1000"
timeout = 300

[[workload]]
name = "large"            # 1.5 million calls of is_word_char: for sampling modes and benchmarks
command = "./wordstat 200000 2000"
timeout = 600

[collect]
mode = "trace"            # exact counts of every call (the README's ground truth); without a mode,
                          # collect would stay within a 5% overhead budget (pilot run, then trace or sample)

[hook]
workloads = ["gate"]
"""


def edit(root: Path, name: str, old: str, new: str) -> None:
    p = root / name
    text = p.read_text()
    if old not in text:
        raise SystemExit(f"make_history: {name} does not contain the expected text:\n{old}")
    p.write_text(text.replace(old, new, 1))


def comment_only(root: Path) -> None:
    edit(root, "hashtab.c", "/* FNV-1a: the helper every lookup goes through */",
         "/* FNV-1a (Fowler-Noll-Vo, variant 1a), 32-bit: xor each byte in, then multiply by the\n"
         " * FNV prime.  Every lookup and every resize goes through this helper. */")


def rename(root: Path) -> None:
    for name in ("mathx.c", "demo.h", "main.c"):
        p = root / name
        p.write_text(p.read_text().replace("checksum_all", "checksum_strings"))


def slowdown(root: Path) -> None:
    # Two passes over the buffer and a modulus the compiler cannot strength-reduce: ~2-3x slower.
    edit(root, "mathx.c", """NOINLINE uint32_t checksum_block(const unsigned char *buf, size_t n) {
    uint32_t a = 1, b = 0;
    for (size_t i = 0; i < n; i++) {
        a = (a + buf[i]) % 65521u;
        b = (b + a) % 65521u;
    }
    return checksum_combine(a, b);
}""", """uint32_t adler_modulus = 65521u; /* a variable, so tests can try other moduli */

NOINLINE uint32_t checksum_block(const unsigned char *buf, size_t n) {
    /* pass 1: the byte sum */
    uint32_t a = 1;
    for (size_t i = 0; i < n; i++) a = (a + buf[i]) % adler_modulus;
    /* pass 2: the sum of the running byte sums */
    uint32_t run = 1, b = 0;
    for (size_t i = 0; i < n; i++) {
        run = (run + buf[i]) % adler_modulus;
        b = (b + run) % adler_modulus;
    }
    return checksum_combine(a, b);
}""")


def speedup(root: Path) -> None:
    # One random draw per word instead of two rng_range calls (three rng_next calls).
    edit(root, "text.c", """        unsigned vocab = 1 + rng_range(1 + rng_range(400));""",
         """        uint64_t r = rng_next();
        unsigned vocab = 1 + (unsigned)((r >> 32) % (1 + (r & 0xffff) % 400));""")


def new_function(root: Path) -> None:
    edit(root, "report.c", "void report_summary(", """void report_lengths(entry_t **entries, size_t n) {
    size_t hist[8] = {0};
    for (size_t i = 0; i < n; i++) {
        size_t len = 0;
        while (entries[i]->key[len]) len++;
        hist[len < 7 ? len : 7] += (size_t)entries[i]->count;
    }
    printf("lengths:");
    for (int i = 1; i < 8; i++) printf(" %d:%zu", i, hist[i]);
    printf("\\n");
}

void report_summary(""")
    edit(root, "demo.h", "void report_summary(", "void report_lengths(entry_t **entries, size_t n);\nvoid report_summary(")
    edit(root, "main.c", "    report_top(entries, unique, 5);\n",
         "    report_top(entries, unique, 5);\n    report_lengths(entries, unique);\n")


# One workload, nothing else set: what `collect` does at defaults (tests/test_workflows.py's history
# at defaults, bench/resample.py's demo sessions)
DEFAULTS_CONFIG = """\
[build]
command = "make -s"
binary = "wordstat"

[[workload]]
name = "gate"
command = "./wordstat 250000 20"
"""
# (250,000 words, ~60 ms a run under the budget's samples: at 10,000 the 3-5 ms run left checksum_block
# 3-4 stack samples a run at the 5% budget, and on a VM whose vCPUs ran 1.5x faster at some moments than
# at others the slowdown was missed in 3 of 3 histories; at 40,000, ~17 ms, in 1 of 3 (CI): the small
# functions' residuals spread ±50-85% in one pair, widening every test of it; at 100,000, ~25 ms and
# ~50 samples a run, in 2 of 2 fresh CI runs on 2026-11-29, whose runs of one commit spread 23-37 ms:
# checksum_block +321% [-4%, +1753%], its session noise moderated to ±42% towards the sampled
# functions around it)


HISTORY = [
    ("wordstat: text statistics with hashing, sorting and expressions", None),
    ("hashtab: document the FNV-1a hash (comment only)", comment_only),
    ("mathx: rename checksum_all to checksum_strings", rename),
    ("mathx: compute the Adler-32 sums in two passes with a configurable modulus", slowdown),
    ("text: draw each word from one random number", speedup),
    ("report: print a histogram of word lengths", new_function),
]

# Ground truth for diff tracing, read off each commit's source diff by hand: the functions whose
# behaviour changed (commit index -> names).  The comment changes nothing; the rename changes a name,
# not code (main's call site differs only in the callee's name); the new function changes main too.
CHANGED: dict[int, set[str]] = {
    1: set(),
    2: set(),
    3: {"checksum_block"},
    4: {"text_generate"},
    5: {"report_lengths", "main"},
}


# What `git perf check C --collect --workload gate` should say of each commit (index -> the verdicts
# that are right, the function a degradation must name first, and why), printed by `make demo` beside
# what it said (examples/demo/truth.py) and asserted by tests/test_paired_collect.py.
EXPECTED: dict[int, tuple[tuple[str, ...], str, str]] = {
    1: (("no-change",), "", "a comment changes no code"),
    2: (("no-change",), "", "a rename changes a name, not the code it runs"),
    3: (("degradation",), "checksum_block", "two passes and a division by a variable modulus: ~2-3x slower"),
    # text_generate is ~5% of gate's run and gets ~12% faster: at the edge of what 60 paired rounds of
    # gate resolve (the `large` workload resolves it); a miss (no change, or unresolved: its interval
    # reaching across the 5% threshold) is not a false alarm, a degradation is
    4: (("optimization", "no-change", "unresolved"), "", "one random number per word instead of three"),
    # the run's interval may still reach across ±5% when the rounds end: unresolved, never a verdict
    5: (("no-change", "unresolved"), "", "a new function that prints a small histogram: microseconds of a 5 ms run"),
}


def git(root: Path, *args: str, date: str | None = None) -> str:
    env = dict(os.environ, GIT_AUTHOR_NAME="Demo Developer", GIT_AUTHOR_EMAIL="dev@example.com",
               GIT_COMMITTER_NAME="Demo Developer", GIT_COMMITTER_EMAIL="dev@example.com")
    if date:
        env.update(GIT_AUTHOR_DATE=date, GIT_COMMITTER_DATE=date)
    return subprocess.run(["git", *args], cwd=root, env=env, check=True, capture_output=True, text=True).stdout


def copy_sources(dest: Path) -> None:
    """The program's sources and Makefile, as the first commit has them."""
    for f in SRC.iterdir():
        if f.suffix in (".c", ".h") or f.name == "Makefile":
            shutil.copy(f, dest / f.name)


def build(dest: Path, config: bool = True) -> list[str]:
    """Create the repository at DEST (must not exist or be empty); returns the commit ids, oldest first."""
    if dest.exists() and any(dest.iterdir()):
        raise SystemExit(f"make_history: {dest} exists and is not empty")
    dest.mkdir(parents=True, exist_ok=True)
    git(dest, "init", "-q", "-b", "main")
    copy_sources(dest)
    if config:
        (dest / ".gitperf.toml").write_text(CONFIG)
    (dest / ".gitignore").write_text("*.o\nwordstat\n")
    commits = []
    for i, (subject, change) in enumerate(HISTORY):
        if change:
            change(dest)
        git(dest, "add", "-A")
        git(dest, "commit", "-q", "-m", subject, date=f"2026-01-{i + 1:02d}T12:00:00+00:00")
        commits.append(git(dest, "rev-parse", "HEAD").strip())
    return commits


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--no-config"]
    if len(args) != 1:
        raise SystemExit(__doc__)
    for c, (subject, _) in zip(build(Path(args[0]), config="--no-config" not in sys.argv), HISTORY):
        print(c[:12], subject)
