import base64
import zlib

import pytest

from gitperf import codec
from gitperf.errors import NoteFormatError
from helpers import make_profile


def test_roundtrip_is_exact():
    p = make_profile("c" * 40, n_functions=5, series=50)
    line = codec.encode(p)
    assert line.startswith("gpz1:") and "\n" not in line
    assert codec.decode(line) == p


def test_plain_json_lines_are_read():
    import json
    p = make_profile("d" * 40)
    assert codec.decode(json.dumps(codec.to_json(p))) == p


@pytest.mark.parametrize("line, words", [
    ("garbage", "unknown encoding"),
    ("gpz1:!!!", "cannot decode"),
    ("gpz1:" + base64.b64encode(b"not zlib").decode(), "cannot decode"),
    ("gpz1:" + base64.b64encode(zlib.compress(b'{"v": 99}')).decode(), "unsupported profile version 99"),
    ('{"v": 1, "h": {}, "m": {}, "p": {}, "f": []}', "missing field 'h.tool_version'"),
])
def test_bad_lines_say_what_is_wrong(line, words):
    with pytest.raises(NoteFormatError, match=words):
        codec.decode(line)


def test_wrong_types_are_rejected():
    d = codec.to_json(make_profile("e" * 40))
    d["f"][0]["c"] = "many"
    with pytest.raises(NoteFormatError, match=r"f\[0\]\.c.*int"):
        codec.from_json(d)


def test_thousand_function_profile_stays_within_tens_of_kilobytes():
    # 1000 functions, 8 sampled calls each: what the series budget allows at that size
    p = make_profile("f" * 40, n_functions=1000, series=8)
    size = len(codec.encode(p))
    assert size < 64 * 1024, size
