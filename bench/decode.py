#!/usr/bin/env python3
"""How fast a note line reads (issue #35): `codec.parse` of one profile of N functions, against the two
JSON parsers alone (the floor of any reader: the stdlib's, which the hand-written reader used, and
msgspec's untyped), in one run.  Two shapes: the dashboard's (functions without a call series) and a
full trace's (each function with 20 sampled calls).

    .venv/bin/python bench/decode.py [--functions 20000]
"""

from __future__ import annotations

import argparse
import json
import random
import time

import msgspec
from _common import table

from gitperf.core import codec
from gitperf.core.model import FunctionStats, Header, Metrics, PlanRecord, Profile, series_fields


def profile(n: int, series: int) -> Profile:
    rnd = random.Random(1)
    fs = tuple(FunctionStats(
        name=f"ns::fn_{i}<int>", count=rnd.randint(1, 10 ** 6), total_ns=rnd.randint(1, 10 ** 9),
        exclusive_ns=rnd.randint(1, 10 ** 8), min_ns=10, max_ns=1000, hist=tuple(rnd.randint(0, 99) for _ in range(12)),
        location=f"src/f{i}.cpp:{i}", stack_samples=3, probe_ns=100,
        **series_fields([(k * 3, rnd.randint(1, 999)) for k in range(series)])) for i in range(n))
    header = Header("1", "c" * 40, "build/app", "id", ("./app",), "w", "bcc", "m", "k", 1.0, 2.0)
    return Profile(header=header, metrics=Metrics(), plan=PlanRecord(probed=tuple(f.name for f in fs)), functions=fs)


def best(f, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        f()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--functions", type=int, default=20000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    rows = []
    for shape, series in (("no series", 0), ("20 calls each", 20)):
        p = profile(args.functions, series)
        raw = codec.inflated(codec.encode(p))
        assert codec.parse(raw) == p
        parse = best(lambda: codec.parse(raw), args.repeat)
        rows.append([shape, f"{len(raw) / 2 ** 20:.1f}", f"{parse * 1e3:.0f}",
                     f"{best(lambda: json.loads(raw), args.repeat) * 1e3:.0f}",
                     f"{best(lambda: msgspec.json.decode(raw), args.repeat) * 1e3:.0f}",
                     f"{parse / args.functions * 1e6:.2f}"])
    print(f"one profile of {args.functions:,} functions, best of {args.repeat}")
    print(table(["shape", "JSON MB", "codec.parse ms", "json.loads ms", "msgspec untyped ms", "us/function"], rows))


if __name__ == "__main__":
    main()
