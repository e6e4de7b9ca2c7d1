"""Which code made a report: the package version and, when running from a git checkout, the
commit (so that a figure can be traced back and reproduced)."""

import datetime
import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

__all__ = ["provenance", "describe", "write_results"]

#: The folder above the packages: a git checkout's root when running from one.
_SOURCE_ROOT = Path(__file__).resolve().parent.parent


def _git(*args):
    try:
        done = subprocess.run(["git", "-C", str(_SOURCE_ROOT), *args], capture_output=True,
                              text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


#: What ``dirty`` ignores: the measured tables, which the runs themselves write (``make prove
#: PROVE_ARGS=--out ...`` before ``make prove-seed ... --out ...`` would else call the second
#: table's code changed).
RESULTS = "docs/results"


def provenance():
    """``{"version", "commit", "dirty"}``: ``version`` from the installed package's metadata;
    ``commit`` (the full hash) and ``dirty`` (uncommitted changes to tracked files outside
    :data:`RESULTS`) are None outside a git checkout, e.g. for an installed wheel."""
    try:
        version = metadata.version("gradient-compressor")
    except metadata.PackageNotFoundError:
        version = None
    commit = dirty = None
    if (_SOURCE_ROOT / ".git").exists():
        commit = _git("rev-parse", "HEAD")
        if commit is not None:
            status = _git("status", "--porcelain", "--untracked-files=no", "--", ".",
                          f":(exclude){RESULTS}")
            dirty = bool(status) if status is not None else None
    return {"version": version, "commit": commit, "dirty": dirty}


def describe(info):
    """One line for a Markdown report, from a dict holding :func:`provenance`'s keys."""
    text = f"gradient-compressor {info.get('version') or '(version unknown)'}"
    if info.get("commit"):
        text += f", commit {info['commit'][:12]}" + (" with local changes" if info["dirty"]
                                                      else "")
    return text


def write_results(path, title, summary, body, command=None):
    """A measured table as Markdown at ``path`` (docs/results/), headed by the command that
    made it (``command``, by default this process's), the code (version, commit) and the
    date."""
    if command is None:
        spec = getattr(sys.modules["__main__"], "__spec__", None)
        # python -m MODULE, or a console script (compressor-report) by its name
        program = ("python -m " + spec.name.removesuffix(".__main__") if spec
                   else os.path.basename(sys.argv[0]))
        command = " ".join([program] + sys.argv[1:])
    code = describe(provenance())     # before the file is opened: writing it is a change
    from .console import replacing
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with replacing(path) as [part], open(part, "w") as f:
        f.write(f"# {title}\n\nMade by `{command}` with {code} on "
                f"{datetime.date.today().isoformat()}, {os.cpu_count()} cores: {summary}.\n\n"
                f"{body.rstrip()}\n")
