"""`git perf show --format pprof|speedscope`: each file read back by its own ecosystem's reader (npm's
pprof-format decoder; speedscope's published schema and its viewer in Chromium), not by our code."""

from __future__ import annotations

import functools
import http.server
import json
import subprocess
import threading
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from conftest import NODE_MODULES, git, history, profile, read_cli

from gitperf.core.errors import InputError
from gitperf.core.model import StoredProfile
from gitperf.views import exports

# pprof-format's decoder, from npm: the profile as [root-first frames, value] pairs, its types and comments
READ_PPROF = """
const fs = require('fs'), zlib = require('zlib');
const { Profile } = require('pprof-format');
const p = Profile.decode(zlib.gunzipSync(fs.readFileSync(process.argv[1])));
const st = p.stringTable.strings, name = new Map(p.function.map(f => [String(f.id), st[Number(f.name)]]));
const frame = new Map(p.location.map(l => [String(l.id), name.get(String(l.line[0].functionId))]));
console.log(JSON.stringify({
  types: p.sampleType.map(t => [st[Number(t.type)], st[Number(t.unit)]]),
  samples: p.sample.map(s => [s.locationId.map(i => frame.get(String(i))).reverse(), Number(s.value[0])]),
  comments: p.comment.map(c => st[Number(c)]),
  mapping: p.mapping.map(m => st[Number(m.filename)])}));
"""


def _folded(root: Path) -> dict[str, int]:
    r = read_cli(root, "show", "HEAD", "--folded")
    assert r.returncode == 0, r.stderr
    return {s: int(n) for s, n in (line.rsplit(" ", 1) for line in r.stdout.splitlines())}


@pytest.mark.viewers
def test_pprof_export_is_read_by_pprofs_own_decoder_with_the_stacks_show_folded_prints(empty_repo, tmp_path):
    history(empty_repo, 2)
    out = tmp_path / "head.pb.gz"
    r = read_cli(empty_repo, "show", "HEAD", "--format", "pprof", "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert "wrote" in r.stderr, r.stderr
    read = subprocess.run(["node", "-e", READ_PPROF, str(out)], capture_output=True, text=True, check=True,
                          env={"NODE_PATH": str(NODE_MODULES), "PATH": "/usr/bin:/bin"})
    got = json.loads(read.stdout)
    assert got["types"] == [["samples", "count"]]
    assert {";".join(f): v for f, v in got["samples"]} == _folded(empty_repo)  # readable names, same weights
    assert any("std::vector<int>::push_back" in f for f, _ in got["samples"])  # (a C++ symbol, demangled)
    head = git(empty_repo, "rev-parse", "HEAD")
    assert any(head in c and "stack samples of 3 run(s)" in c for c in got["comments"]), got["comments"]
    assert got["mapping"] == ["app"]


@pytest.mark.viewers
def test_speedscope_export_is_valid_by_speedscopes_published_schema(empty_repo):
    import jsonschema
    history(empty_repo, 2)
    r = read_cli(empty_repo, "show", "HEAD", "--format", "speedscope")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    schema = json.loads((NODE_MODULES / "speedscope" / "dist" / "release" / "file-format-schema.json").read_text())
    jsonschema.validate(doc, schema)
    with pytest.raises(jsonschema.ValidationError):  # (the schema does refuse what it should)
        jsonschema.validate({**doc, "profiles": [{**doc["profiles"][0], "unit": "furlongs"}]}, schema)
    frames = [f["name"] for f in doc["shared"]["frames"]]
    (p,) = doc["profiles"]
    assert {";".join(frames[i] for i in s): w for s, w in zip(p["samples"], p["weights"])} == _folded(empty_repo)
    assert p["endValue"] == sum(p["weights"])


@pytest.mark.viewers
@pytest.mark.browser
def test_speedscope_opens_the_export_in_chromium(empty_repo, tmp_path):
    """The file in speedscope's own viewer (its release build from npm, served beside the file)."""
    from selenium.webdriver.support.ui import WebDriverWait
    from test_dashboard import _chromium
    history(empty_repo, 2)
    site = tmp_path / "site"
    subprocess.run(["cp", "-r", str(NODE_MODULES / "speedscope" / "dist" / "release"), str(site)], check=True)
    r = read_cli(empty_repo, "show", "HEAD", "--format", "speedscope", "-o", str(site / "head.json"))
    assert r.returncode == 0, r.stderr
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(site))
    handler.log_message = lambda *a: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    driver = _chromium(tmp_path)
    try:
        base = f"http://127.0.0.1:{server.server_port}"
        driver.get(f"{base}/index.html#profileURL={base}/head.json")
        # speedscope titles the page with the file's name once it has imported it
        WebDriverWait(driver, 30).until(lambda d: "git perf" in d.title)
        text = driver.execute_script("return document.body.innerText")
        assert "w: stack samples" in text, text[:500]
        assert "went wrong" not in text.lower(), text[:500]
        driver.save_screenshot(str(tmp_path / "speedscope.png"))
    finally:
        driver.quit()
        server.shutdown()


def test_a_traced_only_workload_exports_its_functions_own_time_one_frame_each():
    rng = np.random.default_rng(3)
    runs = [StoredProfile("c" * 40, i, f"id{i}", replace(profile("c" * 40, rng), stacks={})) for i in range(1, 4)]
    doc = exports.speedscope("c" * 40, runs)
    (p,) = doc["profiles"]
    names = [f["name"] for f in doc["shared"]["frames"]]
    got = {names[s[0]]: w for s, w in zip(p["samples"], p["weights"])}
    want = {}
    for sp in runs:
        for f in sp.profile.functions:
            want[f.name] = want.get(f.name, 0) + f.exclusive_ns
    assert all(len(s) == 1 for s in p["samples"])
    assert p["unit"] == "nanoseconds"
    assert got == want  # (the synthetic names are readable as they are)
    assert "a trace records no call paths" in p["name"]
    # one file of both kinds would hold two units: pprof has one kind of value
    sampled = StoredProfile("c" * 40, 9, "id9", replace(profile("c" * 40, rng), header=replace(
        runs[0].profile.header, workload="other")))
    with pytest.raises(InputError, match="give --workload"):
        exports.pprof("c" * 40, runs + [sampled])
