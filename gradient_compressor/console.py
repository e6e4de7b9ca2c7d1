"""What the command-line tools print: one-line usage errors, tables and progress bars, in one
place so that every command looks and fails the same way.

* :class:`ArgumentParser` reports a bad argument in one line on stderr and exits with status 2
  (status 1 means "a check failed");
* :func:`table` renders every table (``tabulate``), as Markdown pipe tables unless asked
  otherwise, so that what a command prints can be pasted into the README as it is;
* :func:`progress` is the progress bar (``tqdm``) of long runs.
"""

import argparse
import os
import sys

from tabulate import simple_separated_format, tabulate
from tqdm import tqdm

__all__ = ["ArgumentParser", "UsageError", "usage_error", "run_command", "integer", "int_list",
           "positive_integer", "parse_params", "DEFAULT_OUT", "prepare_out", "table", "progress"]

#: Where the reports go unless ``--out`` says otherwise.
DEFAULT_OUT = os.path.join("reports", "out")

#: Exit status of a bad argument or input file.
USAGE_STATUS = 2


class UsageError(ValueError):
    """A bad argument or input (a command-line argument, a file, an environment variable):
    reported in one line, exit status 2."""


def usage_error(prog, message):
    """Print ``prog: error: message`` on stderr (one line) and return status 2."""
    print(f"{prog}: error: {message}", file=sys.stderr)
    return USAGE_STATUS


class ArgumentParser(argparse.ArgumentParser):
    """:class:`argparse.ArgumentParser` whose errors are one line (no usage block) and exit 2."""

    def error(self, message):
        self.exit(USAGE_STATUS, f"{self.prog}: error: {message} (see --help)\n")


def run_command(parser, command, argv=None):
    """Parse ``argv`` with ``parser`` and return ``command(args)``, its exit status; a
    :class:`UsageError` it raises ends in one line and status 2, Ctrl-C in one line and
    status 130 (:func:`interrupted`)."""
    args = parser.parse_args(argv)
    try:
        return command(args)
    except UsageError as error:
        return usage_error(parser.prog, error)
    except KeyboardInterrupt:
        return interrupted(parser.prog)


def integer(text):
    """An argparse ``type``: an integer."""
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None


def positive_integer(text):
    """An argparse ``type``: an integer, at least 1."""
    value = integer(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def int_list(text):
    """``"8,16,32"`` -> ``[8, 16, 32]`` (sorted, without repeats); an empty list is an error."""
    items = [item for item in text.split(",") if item.strip()]
    if not items:
        raise argparse.ArgumentTypeError(f"no value in {text!r}: give a comma-separated list")
    try:
        return sorted({integer(item) for item in items})
    except argparse.ArgumentTypeError as error:
        raise argparse.ArgumentTypeError(f"in {text!r}: {error}") from None


def parse_params(items):
    """``["steps=50", "widths=64,32,10"]`` -> ``{"steps": 50, "widths": (64, 32, 10)}``."""
    def number(text):
        try:
            return int(text)
        except ValueError:
            return float(text)
    params = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.isidentifier():
            raise ValueError(f"bad --param {item!r}: use KEY=VALUE")
        try:
            params[key] = tuple(number(v) for v in value.split(",")) if "," in value \
                else number(value)
        except ValueError:
            raise ValueError(f"bad --param {item!r}: the value must be a number or a "
                             f"comma-separated list of numbers") from None
    return params


def table(rows, headers, *, fmt="pipe", align=None):
    """``rows`` (sequences of cells, printed as given) under ``headers``, as text.

    ``fmt`` is a tabulate format: ``"pipe"`` (Markdown, the default) or ``"plain"`` (aligned
    columns), or ``"compact"``: aligned columns one space apart, for wide cycle-by-cycle
    traces. ``align`` gives each column's alignment ("left", "right", "center"); by default
    the first column is left-aligned and the others right-aligned (a name, then figures)."""
    headers = list(headers)
    rows = [list(map(str, row)) for row in rows]
    if fmt == "pipe":   # a | in a cell (|g|) would end the cell in Markdown
        rows = [[cell.replace("|", "\\|") for cell in row] for row in rows]
    if align is None:
        align = ["left"] + ["right"] * (len(headers) - 1)
    if fmt == "compact":    # the headers as a row: tabulate pads a header line by 2 spaces
        return tabulate([headers] + rows, tablefmt=simple_separated_format(" "),
                        colalign=align, disable_numparse=True)
    return tabulate(rows, headers=headers, tablefmt=fmt, colalign=align, disable_numparse=True)


def progress(total, label, *, enabled=True, unit="op", bar_format=None):
    """A progress bar on stderr over ``total`` steps: call ``update(n)`` with the steps done
    since the last call, then ``close()``. Disabled, it does nothing. ``bar_format``: tqdm's,
    for bars whose steps are not the unit shown."""
    # Into a log file (not a terminal), every redraw stays: redraw seldom.
    interactive = hasattr(sys.stderr, "isatty") and sys.stderr.isatty()
    return tqdm(total=total, desc=label, unit=unit, disable=not enabled, file=sys.stderr,
                dynamic_ncols=True, mininterval=0.5 if interactive else 10,
                bar_format=bar_format)


def check_writable(option, path):
    """Refuse, before any work, an output file ``path`` that cannot be written:
    :class:`UsageError` naming ``option``. A folder is refused; the file is probed by opening
    it for appending (and removed again if it did not exist)."""
    if os.path.isdir(path):
        raise UsageError(f"{option} {path}: a folder, not a file")
    if not os.path.isdir(os.path.dirname(os.path.abspath(path))):
        raise UsageError(f"{option} {path}: no such folder")
    existed = os.path.exists(path)
    try:
        with open(path, "a"):
            pass
    except OSError as error:
        raise UsageError(f"{option} {path}: cannot write it ({error.strerror or error})") \
            from None
    if not existed:
        os.remove(path)


def interrupted(prog, *, files=(), folder=None):
    """After Ctrl-C: remove the partial outputs (``files`` that exist; ``folder`` with what is
    in it, if given: one this run made), print one line and return status 130."""
    import shutil
    removed = [str(path) for path in files if path and os.path.isfile(path)]
    for path in removed:
        os.remove(path)
    if folder and os.path.isdir(folder):
        shutil.rmtree(folder, ignore_errors=True)
        removed.append(folder)
    print(f"{prog}: interrupted" + (f"; removed {', '.join(removed)}" if removed else ""),
          file=sys.stderr)
    return 130


def prepare_out(path):
    """Create the output folder ``path`` now, before minutes of simulation, and check that a
    file can be written there; raise :class:`UsageError` if not."""
    try:
        os.makedirs(path, exist_ok=True)
        with open(os.path.join(path, ".write-test"), "w"):
            pass
        os.remove(os.path.join(path, ".write-test"))
    except OSError as error:
        raise UsageError(f"--out {path}: cannot write there ({error.strerror or error})") \
            from None
