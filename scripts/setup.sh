#!/usr/bin/env bash
# One idempotent set-up for git perf, used by `make demo` and `make test`.
#
#   1. Debian packages: Python 3.11 (every user can run it), bcc (+ its Python module), kernel headers,
#      C and C++ compilers, make and cmake (the test projects; `init` recognises CMake), chromium and
#      chromedriver (dashboard tests), valgrind, uftrace and hyperfine (benchmarks' peers), perl with its
#      standard modules (the tests render folded stacks with the vendored flamegraph.pl)
#   2. /lib/modules/$(uname -r)/{build,source} -> installed headers when the running kernel has none
#   3. .venv with the pinned Python dependencies and the project (editable)
#   4. Debian's bcc Python module made importable inside .venv
#   5. the readers the export tests open git perf's pprof and speedscope files with (npm, pinned, in
#      .venv/npm): pprof-format's decoder, speedscope's schema and viewer
#
# Running it twice changes nothing.  Without root it reports each step it could not do
# and carries on with the rest (the venv still works for everything but collection).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
STAMP="$VENV/.gitperf-setup-stamp"
DEBS=(python3.11 python3.11-venv python3-bpfcc libbpfcc linux-headers-amd64 gcc g++ make cmake ccache chromium chromium-driver valgrind uftrace hyperfine perl nodejs)
SKIPPED=()

say() { printf 'setup: %s\n' "$*" >&2; }
is_root() { [ "$(id -u)" -eq 0 ]; }

# --- 1. Debian packages -------------------------------------------------------------------
missing=()
for p in "${DEBS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if is_root; then
    say "installing Debian packages: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  else
    SKIPPED+=("apt-get install ${missing[*]} (needs root)")
  fi
fi
# Debian's nodejs comes without npm (NodeSource's has it): the package only when the command is missing
if ! command -v npm >/dev/null && is_root; then
  say "installing Debian package: npm"
  apt-get install -y -qq --no-install-recommends npm >/dev/null
fi

# --- 2. kernel headers for bcc's run-time compiler ---------------------------------------
KREL="$(uname -r)"
MODDIR="/lib/modules/$KREL"
if [ ! -e "$MODDIR/build/include/generated" ] || [ ! -e "$MODDIR/source/include/linux/kconfig.h" ]; then
  # Debian splits headers: the arch package has the generated files, -common the sources.
  arch_hdr="$(ls -d /usr/src/linux-headers-*-amd64 2>/dev/null | grep -v -- -rt- | grep -v cloud | sort -V | tail -1 || true)"
  common_hdr="${arch_hdr%-amd64}-common"
  if [ -z "$arch_hdr" ] || [ ! -d "$common_hdr" ]; then
    SKIPPED+=("kernel headers: none installed under /usr/src (install linux-headers-amd64)")
  elif is_root; then
    say "linking $MODDIR/{build,source} to $arch_hdr (running kernel $KREL has no headers package)"
    mkdir -p "$MODDIR"
    ln -sfn "$arch_hdr" "$MODDIR/build"
    ln -sfn "$common_hdr" "$MODDIR/source"
  else
    SKIPPED+=("ln -s $arch_hdr $MODDIR/build; ln -s $common_hdr $MODDIR/source (needs root)")
  fi
fi

# --- 3. virtual environment -----------------------------------------------------------------
# Debian's interpreter by default: every user can execute it, so the read side (show, check, serve)
# works for users other than the one who set up (a pyenv interpreter under /root is mode 0700).
if [ -n "${PYTHON:-}" ]; then PY="$PYTHON"; elif [ -x /usr/bin/python3.11 ]; then PY=/usr/bin/python3.11; else PY=python3; fi
if ! "$PY" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))'; then
  say "error: git perf needs Python 3.11 (found $("$PY" --version 2>&1)); set PYTHON=/path/to/python3.11"
  exit 2
fi
PY_HOME="$(dirname "$(readlink -f "$(command -v "$PY")")")"
if [ -f "$VENV/pyvenv.cfg" ] && ! grep -qx "home = $PY_HOME" "$VENV/pyvenv.cfg"; then
  say "re-creating $VENV on $PY (it was made with another interpreter)"
  rm -rf "$VENV"
fi
[ -x "$VENV/bin/python" ] || { say "creating $VENV"; "$PY" -m venv "$VENV"; }

# Re-install only when the pins or the project metadata changed.
want="$(cat "$ROOT/requirements.lock" "$ROOT/pyproject.toml" | sha256sum | cut -d' ' -f1)"
if [ "$(cat "$STAMP" 2>/dev/null)" != "$want" ]; then
  say "installing pinned Python dependencies (first run: a few minutes, angr is large)"
  "$VENV/bin/pip" install -q --disable-pip-version-check -r "$ROOT/requirements.lock"
  "$VENV/bin/pip" install -q --disable-pip-version-check --no-deps -e "$ROOT"
  echo "$want" > "$STAMP"
fi

# --- 4. Debian's bcc module inside the venv ---------------------------------------------------
# bcc's Python binding is pure Python over libbcc.so (ctypes), so linking just that package
# into the venv works with any CPython 3.11 and keeps the rest of dist-packages out.
SITE="$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
if [ -d /usr/lib/python3/dist-packages/bcc ]; then
  [ "$(readlink "$SITE/bcc" 2>/dev/null)" = /usr/lib/python3/dist-packages/bcc ] \
    || ln -sfn /usr/lib/python3/dist-packages/bcc "$SITE/bcc"
else
  SKIPPED+=("bcc Python module: /usr/lib/python3/dist-packages/bcc missing (install python3-bpfcc)")
fi

# --- 5. the export tests' readers (npm) --------------------------------------------------------
NPM_DIR="$VENV/npm"
NPM_PINS="pprof-format@2.3.2 speedscope@1.25.0"
if [ "$(cat "$NPM_DIR/.stamp" 2>/dev/null)" != "$NPM_PINS" ]; then
  if ! command -v npm >/dev/null; then
    SKIPPED+=("npm: not installed (apt-get install nodejs npm; the export tests read pprof and speedscope files with it)")
  elif mkdir -p "$NPM_DIR" && npm install --prefix "$NPM_DIR" --no-audit --no-fund --no-save --loglevel=error \
         $NPM_PINS >/dev/null; then
    say "installed the export tests' readers from npm: $NPM_PINS"
    echo "$NPM_PINS" > "$NPM_DIR/.stamp"
  else
    SKIPPED+=("npm install $NPM_PINS into $NPM_DIR (the export tests' readers)")
  fi
fi

if [ ${#SKIPPED[@]} -gt 0 ]; then
  say "could not do these steps; collection will not work until they are done:"
  for s in "${SKIPPED[@]}"; do say "  - $s"; done
fi
exit 0
