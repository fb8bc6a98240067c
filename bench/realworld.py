"""A real-world project for the benchmarks: the Lua 5.4 interpreter (~700 functions).

Lua's sources are fetched from the lupa 2.2 source distribution on PyPI (the one registry these
machines reach), checked against a pinned sha256, and turned into a two-commit git history: the
release, and a commit that slows down `addfield` (used by table.concat) - a known change for diff
tracing and the checks to find.   Usage: python bench/realworld.py DEST
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import sys
import tarfile
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
SIMPLE = "https://pypi.org/simple/lupa/"
SDIST = "lupa-2.2.tar.gz"
SHA256 = "665a006bcf8d9aacdfdb953824b929d06a0c55910a662b59be2f157ab4c8924d"
CACHE = HERE / ".cache"

CONFIG = """\
[build]
command = "make -s MYCFLAGS='-std=c99 -DLUA_USE_LINUX -g -fno-omit-frame-pointer' MYLIBS=-ldl lua"
binary = "lua"

[[workload]]
name = "bench"
command = "./lua bench.lua"
timeout = 600
"""
SLOW_FROM = "static void addfield (lua_State *L, luaL_Buffer *b, lua_Integer i) {\n"
SLOW_TO = SLOW_FROM + "  for (volatile int spin = 0; spin < 2000; spin++) ;  /* the regression */\n"


def fetch() -> Path:
    """The lupa sdist, downloaded once into bench/.cache and verified."""
    CACHE.mkdir(exist_ok=True)
    dest = CACHE / SDIST
    if dest.exists() and hashlib.sha256(dest.read_bytes()).hexdigest() == SHA256:
        return dest
    page = urllib.request.urlopen(SIMPLE, timeout=60).read().decode()
    m = re.search(r'href="([^"]*/' + re.escape(SDIST) + r')#sha256=([0-9a-f]+)"', page)
    if not m or m.group(2) != SHA256:
        raise SystemExit(f"cannot find {SDIST} with sha256 {SHA256} on {SIMPLE}")
    data = urllib.request.urlopen(m.group(1), timeout=300).read()
    if hashlib.sha256(data).hexdigest() != SHA256:
        raise SystemExit(f"{SDIST}: sha256 mismatch")
    dest.write_bytes(data)
    return dest


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def make_history(dest: Path) -> list[str]:
    """A git repository of Lua 5.4 with two commits; returns their ids (oldest first)."""
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    prefix = "lupa-2.2/third-party/lua54/"
    with tarfile.open(fetch()) as tar:
        for m in tar.getmembers():
            if m.isfile() and m.name.startswith(prefix) and "/" not in m.name[len(prefix):]:
                name = m.name[len(prefix):]
                if name.endswith((".c", ".h")) or name == "makefile":
                    (dest / name).write_bytes(tar.extractfile(m).read())
    (dest / "bench.lua").write_text((HERE / "lua" / "bench.lua").read_text())
    (dest / ".gitperf.toml").write_text(CONFIG)
    (dest / ".gitignore").write_text("*.o\n*.a\nlua\nluac\n")
    env = ["-c", "user.name=bench", "-c", "user.email=bench@example.com"]
    git(dest, "init", "-q", "-b", "main")
    git(dest, "add", "-A")
    git(dest, *env, "commit", "-q", "-m", "Lua 5.4 (from lupa 2.2)")
    src = (dest / "ltablib.c").read_text()
    assert SLOW_FROM in src
    (dest / "ltablib.c").write_text(src.replace(SLOW_FROM, SLOW_TO))
    git(dest, *env, "commit", "-q", "-am", "ltablib: slow down addfield")
    return git(dest, "rev-list", "--reverse", "HEAD").split()


if __name__ == "__main__":
    print("\n".join(make_history(Path(sys.argv[1]))))
