"""Which L1 size and how many lanes save DRAM bytes against dense write-through, per workload.

    python -m gradient_compressor.reports.sizing [WORKLOAD ...] [--lanes 1,8,32] [--max-sets 1024]
        [--max-ways 8] [--out F.md]

For each workload and number of lanes N, every L1 geometry of the grid (``sets`` from 16 to
``--max-sets``, ``ways`` from 1 to ``--max-ways``, powers of two; each entry a line of N
lanes) writes the workload's beats (:func:`reports.line_costs.pack_lines`) through the line model,
and its masked line writes' bytes (from :func:`reports.line_costs.line_policy`: the emulator,
bit-exact with the line model) are set against dense write-through's, with the byte counts
of :data:`reports.line_costs.FORMAT`. The table gives, per workload and N, the smallest geometry
(fewest lines held, then fewest ways) whose line writes cost fewer bytes than dense
write-through, the saving there, the saving at the default geometry, and the best saving of
the grid with the smallest geometry that reaches it (a larger L1 saves no more once it holds
a step's working set). "none" says that no geometry of the grid saves. The line writes are
the default policy's, the whole-line rule's (``LineModel()``, values in the gradients' own
format, as the RTL's ``GradientCompressor()`` writes them), or with ``--no-whole-line`` the
seed's line policy's (masked line writes of 4-byte values).
"""

import sys

from gradient_compressor.design.params import DEFAULTS, WHOLE_LINE
from gradient_compressor.model import LineModel

from gradient_compressor.console import (ArgumentParser, add_policy_option, UsageError, check_writable, file_name,
                                         int_list, positive_integer, progress, run_command, table)
from .line_costs import FORMAT, dense_bytes, line_policy, pack_lines, write_bytes
from gradient_compressor.provenance import write_results

__all__ = ["geometries", "sizing", "main"]

#: The smallest number of sets the grid starts from.
MIN_SETS = 16


def geometries(max_sets, max_ways):
    """The grid's ``(sets, ways)``, smallest first: by lines held (``sets * ways``), then by
    ways (a narrower compare)."""
    sets = [s for s in (2 ** i for i in range(21)) if MIN_SETS <= s <= max_sets]
    ways = [w for w in (2 ** i for i in range(8)) if w <= max_ways]
    return sorted(((s, w) for s in sets for w in ways), key=lambda g: (g[0] * g[1], g[1]))


def _line_bytes(beats, lanes, sets, ways, whole_line=WHOLE_LINE):
    writes = line_policy(lanes=lanes, sets=sets, ways=ways, max_updates=DEFAULTS["max_updates"],
                         whole_line=whole_line).run(beats)
    return write_bytes(whole_line)(len(writes), lanes)


def sizing(ops, lanes, grid, on_step=None, whole_line=WHOLE_LINE):
    """For ``ops`` packed into beats of ``lanes``: ``{"dense": bytes, "bytes": {(sets, ways):
    line bytes}}`` over the geometries ``grid`` (under the whole-line rule if
    ``whole_line``); ``on_step()`` is called after each one."""
    beats = pack_lines(ops, lanes)
    dense = dense_bytes(sum(op[0] == "line" for op in beats), lanes)
    costs = {}
    for sets, ways in grid:
        costs[(sets, ways)] = _line_bytes(beats, lanes, sets, ways, whole_line)
        if on_step:
            on_step()
    return {"dense": dense, "bytes": costs}


def _saving(cost, dense):
    return 1 - cost / dense if dense else 0.0


def _percent(fraction):
    return f"{100 * fraction:.0f} %"


def _row(name, lanes, result, grid):
    dense, costs = result["dense"], result["bytes"]
    saving = {g: _saving(costs[g], dense) for g in grid}
    smallest = next((g for g in grid if saving[g] > 0), None)
    best = max(grid, key=lambda g: (saving[g], -grid.index(g)))
    default = (DEFAULTS["sets"], DEFAULTS["ways"])
    return [name, lanes, dense,
            f"{smallest[0]} x {smallest[1]}" if smallest else "none",
            _percent(saving[smallest]) if smallest else "-",
            _percent(saving[default]) if default in saving else "-",
            f"{_percent(saving[best])} at {best[0]} x {best[1]}"]


HEADERS = ["workload", "N", "dense bytes", "smallest L1 that saves", "saving there",
           f"saving at {DEFAULTS['sets']} x {DEFAULTS['ways']}",
           "best saving, smallest L1 with it"]


def render(rows):
    return table(rows, HEADERS, align=["left", "right", "right", "left", "right", "right",
                                       "left"])


def build_parser():
    parser = ArgumentParser(
        prog="python -m gradient_compressor.reports.sizing",
        description="Per workload and lanes: the smallest L1 geometry whose line writes "
                    "cost fewer DRAM bytes than dense write-through, and how much they save.",
        epilog="Exit status: 0 done, 2 bad argument or trace, 130 interrupted.")
    parser.add_argument("workloads", nargs="*", help="workload names (default: the report's)")
    parser.add_argument("--lanes", type=int_list, default=[1, 8, 32],
                        help="comma-separated lanes per line (default: 1,8,32)")
    parser.add_argument("--max-sets", type=positive_integer, default=1024,
                        help=f"most sets of the grid, whose sets are the powers of two from "
                             f"{MIN_SETS} (default: %(default)s)")
    parser.add_argument("--max-ways", type=positive_integer, default=8,
                        help="most ways of the grid, whose ways are the powers of two from 1 "
                             "(default: %(default)s)")
    add_policy_option(parser, "the line model's policy")
    parser.add_argument("--out", type=file_name, metavar="FILE.md", help="also write the table here, with the "
                        "command, commit and date")
    return parser


def main(argv=None):
    return run_command(build_parser(), _sizing, argv)


def _sizing(args):
    from gradient_compressor.workloads import DEFAULT_WORKLOADS, TraceError, get_workload
    grid = geometries(args.max_sets, args.max_ways)
    try:
        if args.out:
            check_writable("--out", args.out)
        if not grid:
            raise ValueError(f"--max-sets {args.max_sets}: the grid starts at {MIN_SETS} sets")
        for lanes in args.lanes:     # the model checks its parameters before any work
            LineModel(lanes=lanes, sets=grid[-1][0], ways=grid[-1][1])
        traces = [get_workload(name) for name in args.workloads or DEFAULT_WORKLOADS]
    except (TraceError, ValueError, TypeError) as error:
        raise UsageError(error) from None
    bar = progress(len(traces) * len(args.lanes) * len(grid), "geometries", unit="run")
    rows = []
    for trace in traces:
        ops = trace.ops()
        for lanes in args.lanes:
            rows.append(_row(trace.name, lanes, sizing(ops, lanes, grid, lambda: bar.update(1),
                                                       args.whole_line), grid))
    bar.close()
    text = render(rows)
    print(text)
    if args.out:
        rule = ("the whole-line rule's line writes (the default policy: values in the "
                "gradients' format, as the RTL writes them)" if args.whole_line
                else "the seed's line policy's masked line writes (--no-whole-line)")
        write_results(args.out, "Which L1 saves DRAM bytes against dense write-through",
                      f"geometries {grid[0][0]} x {grid[0][1]} to {grid[-1][0]} x {grid[-1][1]} "
                      f"(lines of N lanes), max_updates {DEFAULTS['max_updates']}, {rule}, "
                      f"figures from the line model; {FORMAT}", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
