"""The README's first check, run as written (issue #36): its walkthrough block, line by line, in
order, on the bundled example — only /tmp moved into the test's directory and `sudo` dropped when
the test is root already."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"


def walkthrough() -> list[str]:
    block = re.search(r"<!-- walkthrough -->\n```sh\n(.*?)```\n<!-- /walkthrough -->", README.read_text(), re.S)
    assert block, "README.md has no walkthrough block"
    return [line for line in block.group(1).splitlines() if line.strip()]


def test_the_readme_stays_short_and_its_walkthrough_comes_after_the_two_commands():
    text = README.read_text()
    assert len(text.encode()) <= 10_000, "README.md over 10 KB: move the detail to docs/"
    assert text.index("make demo") < text.index("make test") < text.index("<!-- walkthrough -->")
    assert [line.split()[0:3] for line in walkthrough()][:3] == [
        ["python3", "examples/demo/make_history.py", "--no-config"], ["cd", "/tmp/wordstat"], ["git", "perf", "init"]]
    for page in re.findall(r"\]\((docs/[A-Z]+\.md)", text):
        assert (ROOT / page).is_file(), page


@pytest.mark.ebpf
@pytest.mark.slow
def test_the_readme_walkthrough_runs_as_written(tmp_path):
    lines = walkthrough()
    status = tmp_path / "status"
    script = ["cd " + str(ROOT)]
    for line in lines:
        command = line.replace("/tmp/", f"{tmp_path}/")
        if os.geteuid() == 0:
            command = command.replace("sudo ", "")
        script.append(f'{command}\necho "$?" >> {status}')
    env = dict(os.environ, PATH=f"{ROOT / '.venv' / 'bin'}{os.pathsep}{os.environ['PATH']}")
    r = subprocess.run(["bash", "-c", "\n".join(script)], capture_output=True, text=True, env=env, timeout=1200)
    codes = [int(c) for c in status.read_text().split()]
    said = dict(zip(lines, codes))
    assert len(codes) == len(lines), (r.stdout[-3000:], r.stderr[-3000:])
    # every line as its comment says: the check of the slowed commit and its reports exit 1, the rest 0
    assert said == {line: 1 if "HEAD~2" in line else 0 for line in lines}, r.stderr[-3000:]
    assert "recognised make" in r.stdout
    assert "build.binary = wordstat (from the first program target" in r.stdout
    assert "checksum_block" in r.stdout  # the markdown report names the slowed function
    assert (tmp_path / "wordstat-report" / "index.html").is_file()
    assert (tmp_path / "wordstat" / ".git" / "hooks" / "pre-push").is_file()
