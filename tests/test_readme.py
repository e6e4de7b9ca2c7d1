"""The README as a user reads it: its quick start runs and prints what it says it prints, and
every link leads to a file of the checkout."""

import contextlib
import io
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def test_the_quick_start_prints_what_it_says():
    block = re.search(r"## Quick start\n+```python\n(.*?)```", README, re.S).group(1)
    printed = [line.split("#", 1)[1].strip() for line in block.splitlines()
               if line.startswith("print(")]
    assert printed, "the quick start prints nothing: a reader cannot tell it worked"
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(block, "README.md", "exec"), {})
    assert out.getvalue().splitlines() == printed


def test_every_link_is_to_a_file_of_the_checkout():
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README)
    local = [link for link in links if not re.match(r"[a-z]+://", link)]
    assert local
    for link in local:
        path = (ROOT / link).resolve()
        assert path.is_relative_to(ROOT), f"{link}: outside the checkout"
        assert path.exists(), f"{link}: no such file"
    assert "../" not in README, "a path outside the checkout, which a user's clone lacks"


def test_the_readme_stays_short():
    assert len(README.splitlines()) <= 300
