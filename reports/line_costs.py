"""DRAM cost of a workload streamed as lines of N lanes, three ways (from the line model).

    python -m gradient_compressor.reports.line_costs [WORKLOAD ...] [--lanes 1,8,32] [--sets 32]
        [--ways 4] [--out F.md]

Each workload's gradients are packed into beats as an accelerator would write them: a run of
gradients to one line (``lanes`` addresses from a multiple of ``lanes``), each lane at most once,
is one beat with those lanes in its mask; a flush ends the beat. The same beats are then
written three ways:

* **dense write-through** (no compressor): every beat is one line transfer, its lanes'
  int16 gradients under their strobes;
* **per-gradient records** (the compressor of one lane, at the same ``sets x ways`` entries):
  one transfer per write, an address and a value;
* **masked line writes** (the line model, :class:`model.LineModel`, at ``sets x ways`` lines):
  one transfer per line write, its lanes' values under their strobes;
* **whole-line writes** (the line model's whole-line rule, ``whole_line=True``, which the RTL
  on lines built with ``whole_line=True`` implements): masked line writes whose values have
  the gradients' own width;
* **whole-line records** (the compressor of one lane under the whole-line rule,
  :class:`model.ReferenceModel`'s ``whole_line=True``, at ``sets x ways`` entries): one
  transfer per write, an address and a value of the gradients' own width. With one lane they
  are the whole-line writes; the column sets them beside the seed's per-gradient records on
  every row.

The byte counts are stated in :data:`FORMAT`. Figures come from the line model, which the RTL
on lines matches write for write in simulation (tests/test_line_compressor.py).
:mod:`reports.sizing` runs the same comparison over a grid of L1 geometries.
"""

import sys

import numpy as np

from gradient_compressor.design.params import DEFAULTS
from gradient_compressor.model import LineModel

from gradient_compressor.console import (ArgumentParser, UsageError, check_writable, file_name,
                                         int_list, positive_integer, run_command, table)
from gradient_compressor.provenance import write_results

__all__ = ["FORMAT", "write_format", "write_bytes", "dense_bytes", "line_write_bytes",
           "whole_line_bytes", "line_policy", "pack_lines", "pack_beats",
           "line_costs", "main"]

ADDRESS_BYTES, GRADIENT_BYTES, VALUE_BYTES = 4, 2, 4
_ADDRESS = f"a transfer carries a {ADDRESS_BYTES}-byte address"
_DENSE = (f"dense write-through {GRADIENT_BYTES} bytes per lane of the line (int16 "
          f"gradients)")
_STROBES = "strobes (the mask) are not counted"
#: The byte counts of each way of writing (one place for them).
FORMAT = (f"{_ADDRESS}; {_DENSE}, a per-gradient "
          f"record one {VALUE_BYTES}-byte value (the {DEFAULTS['grad_width'] + 2}-bit sum, "
          f"padded), a masked line write {VALUE_BYTES} bytes per lane of the line, a "
          f"whole-line write {GRADIENT_BYTES} per lane and a whole-line record one "
          f"{GRADIENT_BYTES}-byte value (the gradients' format); {_STROBES}")


def write_format(whole_line):
    """The byte counts of dense write-through and of the compressor's writes under one rule:
    the whole-line rule's (``whole_line``) or the seed's policy's, for a report that ran that
    rule alone (:data:`FORMAT` states every way)."""
    if whole_line:
        writes = (f"the whole-line rule (every line write carries every pending value of its "
                  f"line): a line write {GRADIENT_BYTES} bytes per lane of the line, values in "
                  f"the gradients' own {DEFAULTS['grad_width']}-bit format (one lane: a record "
                  f"of one {GRADIENT_BYTES}-byte value)")
    else:
        writes = (f"the seed's policy: a masked line write {VALUE_BYTES} bytes per lane of "
                  f"the line (one lane: a per-gradient record of one {VALUE_BYTES}-byte "
                  f"value), the {DEFAULTS['grad_width'] + 2}-bit sum, padded")
    return f"{_ADDRESS}; {_DENSE}; {writes}; {_STROBES}"


def write_bytes(whole_line):
    """The byte count of line writes under one rule: :func:`whole_line_bytes` if
    ``whole_line``, else :func:`line_write_bytes` (both ``(writes, lanes) -> bytes``)."""
    return whole_line_bytes if whole_line else line_write_bytes


def dense_bytes(beats, lanes):
    """Bytes of ``beats`` line transfers written through dense (no compressor)."""
    return beats * (ADDRESS_BYTES + GRADIENT_BYTES * lanes)


def line_write_bytes(writes, lanes):
    """Bytes of ``writes`` masked line writes of ``lanes`` (one lane: per-gradient records)."""
    return writes * (ADDRESS_BYTES + VALUE_BYTES * lanes)


def whole_line_bytes(writes, lanes):
    """Bytes of ``writes`` line writes of ``lanes`` under the whole-line rule: values in the
    gradients' own format, as dense write-through's (one lane: whole-line records)."""
    return dense_bytes(writes, lanes)


def line_policy(**params):
    """The line policy with ``params`` (:class:`model.LineModel`'s) on its fastest engine: the
    emulator (:class:`model.emulator.LineEmulator`, bit-exact with the model), or the model
    itself where there is no C++ compiler to build the emulator's kernel, or its build failed
    (said once on stderr, and not tried again)."""
    global _kernel_failed
    from gradient_compressor.model.native import compiler_available
    if compiler_available() and not _kernel_failed:
        from gradient_compressor.model.emulator import LineEmulator, load_kernel
        try:
            load_kernel()
        except (RuntimeError, OSError) as error:
            _kernel_failed = True
            print(f"note: the line model runs the line policy (the same figures, slower): "
                  f"the emulator's kernel did not build: {str(error).splitlines()[0]}",
                  file=sys.stderr)
        else:
            return LineEmulator(**params)
    return LineModel(**params)


#: Whether the emulator's kernel failed to build in this process.
_kernel_failed = False


def pack_lines(ops, lanes):
    """The operations ``ops`` (``("grad", addr, grad, threshold)``, ``("flush",)``, ...) with
    their gradients packed into beats ``("line", line, grads, mask, threshold)``: a run of
    gradients to one line with one threshold, each lane at most once."""
    out, beat = [], None

    def emit():
        nonlocal beat
        if beat is not None:
            out.append(("line", beat[0], list(beat[1]), beat[2], beat[3]))
            beat = None
    for op in ops:
        if op[0] != "grad":
            emit()
            out.append(op)
            continue
        _, addr, grad, threshold = op
        line, lane = addr - addr % lanes, addr % lanes
        if beat is None or beat[0] != line or beat[3] != threshold or beat[2] >> lane & 1:
            emit()
            beat = [line, [0] * lanes, 0, threshold]
        beat[1][lane] = grad
        beat[2] |= 1 << lane
    emit()
    return out


def pack_beats(addr, grad, threshold, lanes):
    """:func:`pack_lines` on arrays: the gradients ``(addr, grad)`` of one step (no flush
    among them) packed into the same beats, for :meth:`model.emulator.LineEmulator.run_beats`.

    Parameters
    ----------
    addr : numpy.ndarray of unsigned int, shape (n,)
    grad : numpy.ndarray of int16, shape (n,)
    threshold : int
        The threshold of every gradient.
    lanes : int

    Returns
    -------
    line : numpy.ndarray of uint64, shape (beats,)
    grads : numpy.ndarray of int16, shape (beats, lanes)
        0 outside each beat's mask.
    mask : numpy.ndarray of uint32, shape (beats,)
    """
    addr = np.asarray(addr).astype(np.uint64)
    n = len(addr)
    lane = (addr % np.uint64(lanes)).astype(np.int64)
    line = addr - lane.astype(np.uint64)
    # A beat runs while the line stays and each lane comes once; a run of rising lanes on one
    # line is certainly one beat, and only where a lane falls back on the same line does the
    # beat depend on which lanes it holds: those stretches are walked gradient by gradient.
    same_line = np.zeros(n, bool)
    same_line[1:] = line[1:] == line[:-1]
    start = ~same_line
    start[1:] |= same_line[1:] & (lane[1:] <= lane[:-1])
    doubtful = np.flatnonzero(start & same_line)
    if doubtful.size:
        line_starts = np.flatnonzero(~same_line)
        bounds = np.append(line_starts, n)
        for k in np.unique(np.searchsorted(line_starts, doubtful, side="right") - 1):
            held = 0
            for i in range(bounds[k], bounds[k + 1]):
                bit = 1 << int(lane[i])
                start[i] = i == bounds[k] or bool(held & bit)
                held = bit if start[i] else held | bit
    beat = np.cumsum(start) - 1
    beats = int(beat[-1]) + 1 if n else 0
    grads = np.zeros((beats, lanes), np.int16)
    grads[beat, lane] = grad
    bits = np.uint64(1) << lane.astype(np.uint64)
    mask = np.add.reduceat(bits, np.flatnonzero(start)) if n else np.empty(0, np.uint64)
    return line[start], grads, mask.astype(np.uint32)     # a beat's lanes differ: sum = OR


def line_costs(ops, *, lanes, sets, ways, max_updates=DEFAULTS["max_updates"]):
    """``{"gradients", "beats", "dense", "records", "lines", "whole_line",
    "whole_line_records"}`` for ``ops`` packed into lines of ``lanes``; each way of writing as
    ``(transfers, bytes)``. The L1 holds ``sets x ways`` lines of ``lanes`` for the line
    writes, and ``sets x ways`` gradients for the records (the seed's policy's and the
    whole-line rule's)."""
    beats = pack_lines(ops, lanes)
    geometry = dict(sets=sets, ways=ways, max_updates=max_updates)
    line_writes = line_policy(lanes=lanes, whole_line=False, **geometry).run(beats)
    records = len(line_policy(lanes=1, whole_line=False, **geometry).run(ops))
    whole = len(line_policy(lanes=lanes, whole_line=True, **geometry).run(beats))
    whole_records = len(line_policy(lanes=1, whole_line=True, **geometry).run(ops))
    n_beats = sum(op[0] == "line" for op in beats)
    return {
        "gradients": sum(op[0] == "grad" for op in ops),
        "beats": n_beats,
        "dense": (n_beats, dense_bytes(n_beats, lanes)),
        "records": (records, line_write_bytes(records, 1)),
        "lines": (len(line_writes), line_write_bytes(len(line_writes), lanes)),
        "whole_line": (whole, whole_line_bytes(whole, lanes)),
        "whole_line_records": (whole_records, whole_line_bytes(whole_records, 1)),
    }


def _saving(cost, dense):
    return f"{100 * (1 - cost / dense):+.0f} %" if dense else "-"


def render(rows):
    headers = ["workload", "N", "gradients", "beats", "dense: transfers", "dense: bytes",
               "records: bytes", "whole-line records", "whole-line records: bytes",
               "line writes", "line bytes", "line bytes vs dense",
               "whole-line writes", "whole-line bytes vs dense"]
    body = [[name, lanes, c["gradients"], c["beats"], c["dense"][0], c["dense"][1],
             c["records"][1], c["whole_line_records"][0], c["whole_line_records"][1],
             c["lines"][0], c["lines"][1],
             _saving(c["lines"][1], c["dense"][1]), c["whole_line"][0],
             _saving(c["whole_line"][1], c["dense"][1])]
            for name, lanes, c in rows]
    return table(body, headers, align=["left"] + ["right"] * (len(headers) - 1))


def build_parser():
    parser = ArgumentParser(
        prog="python -m gradient_compressor.reports.line_costs",
        description="DRAM transfers and bytes of workloads streamed as lines of N lanes: dense "
                    "write-through, per-gradient records (the seed's policy and the whole-line "
                    "rule), and the line model's masked line writes (the same two).",
        epilog="Exit status: 0 done, 2 bad argument or trace.")
    parser.add_argument("workloads", nargs="*", help="workload names (default: the report's)")
    parser.add_argument("--lanes", type=int_list, default=[1, 8, 32],
                        help="comma-separated lanes per line (default: 1,8,32)")
    parser.add_argument("--sets", type=positive_integer, default=DEFAULTS["sets"],
                        help="L1 sets, each holding lines (default: %(default)s)")
    parser.add_argument("--ways", type=positive_integer, default=DEFAULTS["ways"],
                        help="default: %(default)s")
    parser.add_argument("--out", type=file_name, metavar="FILE.md", help="also write the table here, with the "
                        "command, commit and date")
    return parser


def main(argv=None):
    return run_command(build_parser(), _lines, argv)


def _lines(args):
    from gradient_compressor.workloads import DEFAULT_WORKLOADS, TraceError, get_workload
    try:
        if args.out:
            check_writable("--out", args.out)
        for lanes in args.lanes:     # the model checks the geometry before any work
            LineModel(lanes=lanes, sets=args.sets, ways=args.ways)
        traces = [get_workload(name) for name in args.workloads or DEFAULT_WORKLOADS]
    except (TraceError, ValueError, TypeError) as error:
        raise UsageError(error) from None
    rows = [(trace.name, lanes, line_costs(trace.ops(), lanes=lanes, sets=args.sets,
                                           ways=args.ways))
            for trace in traces for lanes in args.lanes]
    text = render(rows)
    print(text)
    if args.out:
        write_results(args.out, "DRAM cost of workloads streamed as lines",
                      f"L1 of {args.sets} x {args.ways} lines, max_updates "
                      f"{DEFAULTS['max_updates']}; {FORMAT}",
                      text + "\n\nFigures from the line model (model/lines.py), which the RTL "
                      "on lines matches write for write in simulation; the whole-line columns "
                      "from its whole-line rule (one lane: model/reference.py's), which the "
                      "RTL on lines built with whole_line=True matches line write for line "
                      "write out of L1 (its L2 may merge some).\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
