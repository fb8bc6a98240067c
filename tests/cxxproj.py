"""A small C++ project with a two-commit history, for tests of C++ checks (issue #38).

Three translation units each instantiate `std::vector<std::string>::push_back` (the COMDAT case that
GCC 12's `-fpatchable-function-entry` cannot link), a class `Widget` whose member `scan` the second
commit makes ~2x slower (a second pass over every word), and a template `count_if_len<N>`.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

WIDGET_H = """\
#pragma once
#include <string>
#include <vector>

std::vector<std::string> make_words(int n);

class Widget {
 public:
  explicit Widget(std::vector<std::string> words) : words_(std::move(words)) {}
  long scan(const std::string& needle) const;
  void add(const std::string& w) { words_.push_back(w); }
 private:
  std::vector<std::string> words_;
};
"""

WIDGET_CC = """\
#include "widget.h"

long Widget::scan(const std::string& needle) const {
  long n = 0;
  for (const std::string& w : words_)
    n += (w == needle) + (long)w.size();
  return n;
}
"""

SLOW_SCAN = """\
#include "widget.h"

long Widget::scan(const std::string& needle) const {
  long n = 0;
  for (const std::string& w : words_)
    n += (w == needle) + (long)w.size();
  for (const std::string& w : words_)  // a second pass: the slowdown
    for (char c : w)
      n += c == needle[0];
  return n;
}
"""

WORDS_CC = """\
#include "widget.h"

std::vector<std::string> make_words(int n) {
  std::vector<std::string> out;
  unsigned x = 12345;
  for (int i = 0; i < n; i++) {
    x = x * 1103515245u + 12345u;
    out.push_back(std::string(3 + (x >> 16) % 9, (char)('a' + (x >> 8) % 26)));
  }
  return out;
}
"""

MAIN_CC = """\
#include <cstdio>
#include <cstdlib>
#include "widget.h"

template <int N> __attribute__((noinline)) long count_if_len(const std::vector<std::string>& ws) {
  long k = 0;
  for (const std::string& w : ws) k += w.size() == N;
  return k;
}

int main(int argc, char** argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 100;
  std::vector<std::string> words = make_words(20000);
  words.push_back("needle");
  long k = count_if_len<5>(words) + count_if_len<7>(words);
  Widget w(words);
  long total = 0;
  for (int r = 0; r < rounds; r++) total += w.scan(r % 2 ? "needle" : "aaaa");
  printf("%ld %ld\\n", total, k);
  return 0;
}
"""

MAKEFILE = """\
CXXFLAGS ?= -O2 -g
OBJS = main.o widget.o words.o
app: $(OBJS)
\t$(CXX) $(CXXFLAGS) -o $@ $(OBJS)
%.o: %.cc widget.h
\t$(CXX) $(CXXFLAGS) -c $< -o $@
"""

CONFIG = """\
[build]
command = "make -s"
binary = "app"

[[workload]]
name = "scan"
command = "./app 200"
timeout = 60
"""


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=root, check=True,
                          capture_output=True, text=True).stdout.strip()


def build(root: Path) -> list[str]:
    """The history in `root`: [base, slowed] commit ids."""
    root.mkdir(parents=True, exist_ok=True)
    files = {"widget.h": WIDGET_H, "widget.cc": WIDGET_CC, "words.cc": WORDS_CC, "main.cc": MAIN_CC,
             "Makefile": MAKEFILE, ".gitperf.toml": CONFIG, ".gitignore": "*.o\napp\n"}
    for name, text in files.items():
        (root / name).write_text(text)
    _git(root, "init", "-q", "-b", "main")
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "widget: scan the words")
    (root / "widget.cc").write_text(SLOW_SCAN)
    _git(root, "commit", "-qam", "widget: a second pass in scan")
    return _git(root, "rev-list", "--reverse", "HEAD").split()
