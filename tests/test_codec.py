import base64
import copy
import json
import random
import zlib

import msgspec
import pytest
from helpers import make_profile

from gitperf.core import codec
from gitperf.core.errors import NoteFormatError
from gitperf.core.model import MAX_SERIES


def test_roundtrip_is_exact():
    p = make_profile("c" * 40, n_functions=5, series=50)
    line = codec.encode(p)
    assert line.startswith("gpz1:")
    assert "\n" not in line
    assert codec.decode(line) == p
    from dataclasses import replace
    sampled = replace(p, functions=tuple(msgspec.structs.replace(f, stack_samples=9, library_samples=4) for f in p.functions))
    assert codec.decode(codec.encode(sampled)) == sampled != p
    # a recursive function's outermost calls (fewer than its calls) survive, and set its mean
    recursive = msgspec.structs.replace(p.functions[1], count=100, outer_calls=2, total_ns=5_000)
    q = codec.decode(codec.encode(replace(p, functions=(p.functions[0], recursive))))
    assert q.functions[1] == recursive
    assert q.functions[1].mean_ns == 2_500
    assert q.functions[0].mean_ns == \
        p.functions[0].total_ns / p.functions[0].count
    # totals summed once per outermost call: kept, and never compared with the every-call totals of
    # profiles written before (a recursive function's two totals differ by its depth)
    from gitperf.core.model import OUTERMOST, comparison_key
    now = replace(p, plan=replace(p.plan, totals=OUTERMOST))
    assert codec.decode(codec.encode(now)).plan.totals == OUTERMOST
    assert p.plan.totals == ""
    assert comparison_key(now) != comparison_key(p)
    # a plan made for two binaries at once (check --collect: PlanRecord.spec) likewise
    paired = replace(p, plan=replace(p.plan, spec="0123456789"))
    assert comparison_key(replace(paired, plan=replace(paired.plan, totals=OUTERMOST))) != comparison_key(paired)
    # the entry padding the binary was built with (git.pad): kept, and part of what is comparable
    padded = replace(now, plan=replace(now.plan, pad="c++=mfentry cc=patchable"))
    assert codec.decode(codec.encode(padded)).plan.pad == "c++=mfentry cc=patchable"
    assert comparison_key(padded) != comparison_key(now)
    assert comparison_key(replace(padded, plan=replace(padded.plan, spec="0123456789"))) != comparison_key(
        replace(now, plan=replace(now.plan, spec="0123456789")))


def test_every_field_of_a_function_survives_the_note():
    """The reader decodes a line straight into FunctionStats, whose fields `codec._function_to_json`
    writes one by one: a field it left out would read as its default.  Every field set away from its
    default comes back, as the same type; a field added to the model fails here until it has a value
    below and a line in the writer."""
    from dataclasses import replace
    from gitperf.core.model import FunctionStats
    values = {"name": "ns::f<int>", "count": 7, "total_ns": 9_000, "exclusive_ns": -5, "min_ns": 11, "max_ns": 4_000,
              "hist": (0, 2, 5), "sampled": True, "ci": (8_000.5, 10_000.5), "series_gaps": (3, 6),
              "series_ns": (90, 80), "stack_samples": 13, "library_samples": 2, "location": "f.cc:3", "recorded": 17,
              "probe_ns": 19, "nested": 23, "outer_calls": 5, "by_run": True}
    fields = msgspec.structs.fields(FunctionStats)
    assert {x.name for x in fields} == set(values)
    f = FunctionStats(**values)
    assert all(getattr(f, x.name) != x.default for x in fields if x.default is not msgspec.NODEFAULT)
    p = make_profile("c" * 40, n_functions=1)
    [back] = codec.decode(codec.encode(replace(p, functions=(f,)))).functions
    assert back == f
    assert [type(getattr(back, x.name)) for x in fields] == [type(v) for v in values.values()]


def test_a_lines_0_and_1_read_as_false_and_true():
    """A line writes `sampled` and `by_run` as 1 (or leaves them out); readers get bools, which
    `show --json` prints as true and false."""
    d = codec.to_json(make_profile("c" * 40, n_functions=4))
    d["f"][0].update(s=1, br=1, ci=[1.0, 2.0])
    d["f"][1].update(s=0, br=0)
    d["f"][2].update(s=1)
    d["f"][3].update(br=1)
    fs = codec.from_json(d).functions
    assert [(f.sampled, f.by_run) for f in fs] == [(True, True), (False, False), (True, False), (False, True)]
    assert {type(f.sampled) for f in fs} | {type(f.by_run) for f in fs} == {bool}
    assert (fs[0].ci_low, fs[0].ci_high, fs[1].ci_low) == (1.0, 2.0, None)


def test_a_paired_checks_round_and_pairing_are_fields_and_older_notes_keep_them():
    """Issue #35: notes written before the fields kept a paired check's round (a float) and pairing
    id among the plan's parameters; read now they are the fields, and the parameters lose them."""
    from dataclasses import replace
    p = make_profile("e" * 40)
    paired = replace(p, plan=replace(p.plan, round=3, pairing="0123abcd4567"))
    assert codec.decode(codec.encode(paired)) == paired
    old = codec.to_json(p)
    old["p"] = {k: v for k, v in old["p"].items() if k not in ("round", "pairing")}
    old["p"]["params"] = {"stack_hz": 499.0, "round": 3.0, "pairing": "0123abcd4567"}
    plan = codec.decode(json.dumps(old)).plan
    assert (plan.round, plan.pairing, plan.params) == (3, "0123abcd4567", {"stack_hz": 499.0})
    old["p"]["params"]["round"] = 2.5
    with pytest.raises(NoteFormatError, match="p.params.round"):
        codec.decode(json.dumps(old))


def test_a_root_that_never_returned_is_stored_as_such():
    """`by_run` (the root's total is the run's wall time: the program called exit() inside it) was not
    written to the line, so a stored profile lost it, and `check`'s note saying so with it."""
    from dataclasses import replace
    p = make_profile("e" * 40)
    exited = replace(p, functions=(msgspec.structs.replace(p.functions[0], by_run=True),) + p.functions[1:])
    assert codec.decode(codec.encode(exited)) == exited
    assert codec.decode(codec.encode(p)) == p


def test_plain_json_lines_are_read():
    import json
    p = make_profile("d" * 40)
    assert codec.decode(json.dumps(codec.to_json(p))) == p


@pytest.mark.parametrize("line, words", [
    ("garbage", "unknown encoding"),
    ("gpz1:!!!", "cannot decode"),
    ("gpz1:" + base64.b64encode(b"not zlib").decode(), "cannot decode"),
    ("gpz1:" + base64.b64encode(zlib.compress(b'{"v": 99}')).decode(), "unsupported profile version 99"),
    ('{"v": 1, "h": {}, "m": {}, "p": {}, "f": []}', "field 'h.tool_version': missing"),
])
def test_bad_lines_say_what_is_wrong(line, words):
    with pytest.raises(NoteFormatError, match=words):
        codec.decode(line)


def test_wrong_types_are_rejected():
    d = codec.to_json(make_profile("e" * 40))
    d["f"][0]["c"] = "many"
    with pytest.raises(NoteFormatError, match=r"f\[0\]\.count.*integer"):
        codec.from_json(d)


def test_thousand_function_profile_stays_within_tens_of_kilobytes():
    # 1000 functions, 8 sampled calls each: what the series budget allows at that size
    p = make_profile("f" * 40, n_functions=1000, series=8)
    size = len(codec.encode(p))
    assert size < 64 * 1024, size


def _line(**parts) -> str:
    """A plain-JSON note line of a valid profile with some parts replaced (issue #18's reproductions)."""
    d = codec.to_json(make_profile("a" * 40, n_functions=2))
    for path, value in parts.items():
        *up, last = path.split("__")
        node = d
        for k in up:
            node = node[int(k)] if isinstance(node, list) else node[k]
        node[last if isinstance(node, dict) else int(last)] = value
    return json.dumps(d)


@pytest.mark.parametrize("line, words", [
    (_line(f=[1]), r"'f\[0\]': expected an object, got 1"),
    (_line(f__0__h={"a": 1}), r"f\[0\]\.hist': expected a list"),
    (_line(f__0__h=[1, "2"]), r"f\[0\]\.hist\[1\]': expected an integer, got '2'"),
    (_line(cal=[1]), r"'cal': expected an object"),
    (_line(cal={"push": "fast"}), r"'cal\.push': expected a number, got 'fast'"),
    (_line(m__PT="slow"), r"'m\.PT': expected a number"),
    (_line(f__0__c=-4), r"'f\[0\]\.count': expected an integer at least 0, got -4"),
    (_line(f__0__t="100"), r"'f\[0\]\.total_ns': expected an integer, got '100'"),
    (_line(m__PS=float("nan")), "NaN is not a number"),
    (_line(f__0__c=2 ** 70), r"'f\[0\]\.count': expected an integer at most 9223372036854775807"),
    (_line(h__command="./prog"), r"'h\.command': expected a list of strings, got './prog'"),
    (_line(p__removed={"x": [1]}), r"'p\.removed\.x\[0\]': expected text, got 1"),
    (_line(f__0__so=[1, 2], f__0__sd=[3]), "2 ordinals but 1 durations"),
    (_line(f__1__n="fn_0<int>"), r"'f\[1\]\.name': function 'fn_0<int>' is listed twice"),
])
def test_hostile_lines_are_refused_with_the_field_and_the_reason(line, words):
    with pytest.raises(NoteFormatError, match=words):
        codec.decode(line)


def test_a_series_longer_than_any_collect_keeps_is_thinned_evenly_on_read():
    """1,000,000 sampled calls fit in an 8 KB line; every reader of the commit took 3 s and 450 MB."""
    d = codec.to_json(make_profile("c" * 40, n_functions=3, series=6))
    n = 3 * MAX_SERIES
    d["f"][1].update(so=[1] * n, sd=list(range(n)))
    series = codec.from_json(d).functions[1].series
    assert len(series) == MAX_SERIES
    # every third call, in order
    assert series[:2] == ((1, 0), (4, 3))
    assert series[-1] == (n - 2, n - 3)
    assert codec.from_json(d).functions[0].series == make_profile("c" * 40, n_functions=3, series=6).functions[0].series


def test_a_line_that_inflates_beyond_the_limit_is_refused_unread(monkeypatch):
    monkeypatch.setattr(codec, "MAX_JSON", 1 << 20)
    bomb = codec.PREFIX + base64.b64encode(zlib.compress(b"{" + b" " * (4 << 20) + b"}", 9)).decode()
    assert len(bomb) < 20_000
    with pytest.raises(NoteFormatError, match="inflates beyond the 1 MB limit"):
        codec.decode(bomb)
    big = make_profile("b" * 40, n_functions=400, series=400)
    with pytest.raises(NoteFormatError, match="over the 1 MB a note line may hold"):
        codec.encode(big)


def mutations(seed: int, n: int):
    """n note lines: a valid profile with one to three fields replaced by values of the wrong type,
    size or sign, or removed; half of them compressed as collect writes them."""
    rng = random.Random(seed)
    base = codec.to_json(make_profile("c" * 40, n_functions=4, series=6))
    wrong = [None, "x", -1, -0.5, 2 ** 64, 1e308, [], {}, [1], ["a"], {"k": "v"}, True, "", [None], [[1, 2]]]
    for i in range(n):
        d = copy.deepcopy(base)
        for _ in range(rng.randint(1, 3)):
            node, paths = d, []
            while isinstance(node, (dict, list)) and node:
                key = rng.choice(list(node) if isinstance(node, dict) else range(len(node)))
                paths.append((node, key))
                if rng.random() < 0.35:
                    break
                node = node[key]
            parent, key = paths[-1]
            if isinstance(parent, dict) and rng.random() < 0.2:
                del parent[key]
            else:
                parent[key] = copy.deepcopy(rng.choice(wrong))
        text = json.dumps(d)
        if rng.random() < 0.05:
            text = text.replace("-1", "NaN", 1).replace("0.5", "Infinity", 1)
        yield codec.PREFIX + base64.b64encode(zlib.compress(text.encode())).decode() if i % 2 else text


def test_fuzzed_lines_decode_or_raise_note_format_error_never_anything_else():
    decoded = refused = 0
    for line in mutations(1, 3000):
        try:
            p = codec.decode(line)
        except NoteFormatError:
            refused += 1
            continue
        decoded += 1
        assert codec.decode(codec.encode(p)) == p  # what is read can be written back unchanged
    # the mutations hit both ways
    assert refused > 1500, (refused, decoded)
    assert decoded > 100, (refused, decoded)
