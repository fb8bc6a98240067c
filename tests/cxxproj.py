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


def history(root: Path, files: dict[str, str], first: str, changed: dict[str, str], second: str) -> list[str]:
    """A two-commit history in `root`: `files`, then `changed` over them; [first, second] commit ids."""
    root.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (root / name).write_text(text)
    _git(root, "init", "-q", "-b", "main")
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", first)
    for name, text in changed.items():
        (root / name).write_text(text)
    _git(root, "commit", "-qam", second)
    return _git(root, "rev-list", "--reverse", "HEAD").split()


def build(root: Path) -> list[str]:
    """The history in `root`: [base, slowed] commit ids."""
    files = {"widget.h": WIDGET_H, "widget.cc": WIDGET_CC, "words.cc": WORDS_CC, "main.cc": MAIN_CC,
             "Makefile": MAKEFILE, ".gitperf.toml": CONFIG, ".gitignore": "*.o\napp\n"}
    return history(root, files, "widget: scan the words", {"widget.cc": SLOW_SCAN}, "widget: a second pass in scan")


# ---------------------------------------------------------------- the term indexer (issue #33's case)
# A term dictionary on std::unordered_map, then on std::map: every lookup becomes a tree descent of
# std::string comparisons (a new template callee, libc's memcmp under it), slowing `Index::add_term`
# and `Index::find` several times over in instructions and time.

INDEX_H = """\
#pragma once
#include <string>
#include <{header}>

struct Posting {{ long count = 0; long last = -1; }};

class Index {{
 public:
  void add_term(const std::string& term, long doc);
  long find(const std::string& term) const;
  long stats() const;
 private:
  std::{container}<std::string, Posting> terms_;
}};
"""

INDEX_CC = """\
#include "index.h"

void Index::add_term(const std::string& term, long doc) {
  Posting& p = terms_[term];
  p.count++;
  p.last = doc;
}

long Index::find(const std::string& term) const {
  auto it = terms_.find(term);
  return it == terms_.end() ? 0 : it->second.count;
}

long Index::stats() const {
  long s = 0;
  for (const auto& kv : terms_) s += kv.second.count * (long)kv.first.size();
  return s;
}
"""

INDEXER_CC = """\
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>
#include "index.h"

static std::vector<std::string> vocabulary(int n) {
  std::vector<std::string> out;
  unsigned x = 2463534242u;
  for (int i = 0; i < n; i++) {
    std::string w;
    int len = 4 + i % 9;
    for (int k = 0; k < len; k++) { x ^= x << 13; x ^= x >> 17; x ^= x << 5; w += (char)('a' + x % 26); }
    out.push_back("term_" + w);
  }
  return out;
}

// the rest of the program: work the commit does not touch
__attribute__((noinline)) static long digest(const std::vector<std::string>& vocab, int passes) {
  unsigned long h = 1469598103u;
  for (int p = 0; p < passes; p++)
    for (const std::string& w : vocab)
      for (char c : w) h = (h ^ (unsigned char)c) * 1099511628211ul;
  return (long)(h >> 1);
}

int main(int argc, char** argv) {
  int docs = argc > 1 ? atoi(argv[1]) : 200;
  std::vector<std::string> vocab = vocabulary(5000);
  long d = digest(vocab, 12 * docs / 10);
  Index idx;
  unsigned x = 88172645u;
  for (int d = 0; d < docs; d++)
    for (int w = 0; w < 300; w++) { x ^= x << 13; x ^= x >> 17; x ^= x << 5; idx.add_term(vocab[x % vocab.size()], d); }
  long hits = 0;
  for (int q = 0; q < 20000; q++) hits += idx.find(vocab[(q * 7919u) % vocab.size()]);
  printf("%ld %ld %ld\\n", hits, idx.stats(), d);
  return 0;
}
"""

INDEXER_MAKEFILE = """\
CXXFLAGS ?= -O2 -g
OBJS = indexer.o index.o
indexer: $(OBJS)
\t$(CXX) $(CXXFLAGS) -o $@ $(OBJS)
%.o: %.cc index.h
\t$(CXX) $(CXXFLAGS) -c $< -o $@
"""

INDEXER_CONFIG = """\
[build]
command = "make -s"
binary = "indexer"

[[workload]]
name = "index"
command = "./indexer 1000"
timeout = 60
"""

ADD_TERM = "_ZN5Index8add_termERKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEEl"
FIND = "_ZNK5Index4findERKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE"


def build_indexer(root: Path) -> list[str]:
    """The indexer's history in `root`: [hash map, std::map] commit ids."""
    files = {"index.h": INDEX_H.format(header="unordered_map", container="unordered_map"), "index.cc": INDEX_CC,
             "indexer.cc": INDEXER_CC, "Makefile": INDEXER_MAKEFILE, ".gitperf.toml": INDEXER_CONFIG,
             ".gitignore": "*.o\nindexer\n"}
    return history(root, files, "index: terms in a hash map",
                    {"index.h": INDEX_H.format(header="map", container="map")}, "index: terms in an ordered map")
