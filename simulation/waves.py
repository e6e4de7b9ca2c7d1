"""GTKWave save files (``.gtkw``) for the project's VCD waveforms, with the signal groups of the
trace table (:data:`COLUMNS`), so that ``gtkwave trace.vcd trace.gtkw`` opens a readable view of
any of them: a counterexample from SymbiYosys,
``python -m gradient_compressor.proofs replay --vcd``, ``compressor-report --vcd`` (Amaranth or
compiled CXXRTL simulator).

The VCDs name the same signal differently (the proof harness has ``in_valid``, a simulation
of the compressor ``grad_in__valid``; hierarchies differ), so each column of the trace table
is looked up under its name and its aliases (:data:`ALIASES`), by the end of the full dotted
name; columns a VCD lacks are left out.

    # write the save file for a VCD
    python -m gradient_compressor.simulation.waves trace.vcd [trace.gtkw]
"""

import sys
from pathlib import Path

from vcd.gtkw import GTKWSave
from vcd.reader import TokenKind, VCDParseError, tokenize

__all__ = ["read_vcd_header", "vcd_summary", "write_gtkw", "gtkw_path_for", "ALIASES", "GROUPS",
           "COLUMNS"]

#: The trace table's columns (``python -m gradient_compressor.proofs trace``, and the groups of
#: every save file): (header, signal name (suffix), signed); a header starting with ``|`` opens
#: a group.
COLUMNS = [
    ("rst",    "rst",                      False),
    ("in.v",   "in_valid",                 False),
    ("in.rdy", "dut.grad_in__ready",       False),
    ("addr",   "in_addr",                  False),
    ("grad",   "in_grad",                  True),
    ("thr",    "in_thresh",                False),
    ("flush",  "in_flush",                 False),
    ("|L1 st", "dut.l1.state",             False),
    ("s1.v",   "dut.l1.s1_valid",          False),
    ("s2.v",   "dut.l1.s2_valid",          False),
    ("fwd",    "dut.l1.s2_fwd",            False),
    ("s3.v",   "dut.l1.s3_valid",          False),
    ("s3.a",   "dut.l1.s3.addr",           False),
    ("s3.g",   "dut.l1.s3.grad",           True),
    ("s4.v",   "dut.l1.s4_valid",          False),
    ("rsv",    "dut.l1.reserved",          False),
    ("scan",   "dut.l1.scan_set",          False),
    ("vcnt",   "dut.l1.valid_count",       False),
    ("|push.v", "dut.l1.push__valid",      False),
    ("p.rdy",  "dut.l1.push__ready",       False),
    ("p.a",    "dut.l1.push__payload.addr", False),
    ("p.val",  "dut.l1.push__payload.value", True),
    ("cause",  "dut.l1.push__payload.cause", False),
    ("|L2 lvl", "dut.writeback.level",     False),
    ("burst",  "dut.writeback.bursting",   False),
    ("|dram.v", "dut.dram_out__valid",     False),
    ("d.rdy",  "in_ready",                 False),
    ("d.a",    "dut.dram_out__payload.addr", False),
    ("d.val",  "dut.dram_out__payload.value", True),
    ("idle",   "dut.idle",                 False),
    ("|track", "track",                    False),
    ("bal",    "balance",                  True),
    ("l1",     "l1_sum",                   True),
    ("pipe",   "stages_sum",               True),
    ("queue",  "queue_sum",                True),
    ("l2",     "l2_sum",                   True),
]

#: Names a trace-table column's signal has in a simulation of the compressor (rather than in
#: the proof harness). The harness's ``in_*`` wires are the compressor's inputs.
ALIASES = {
    "in_valid": ["grad_in__valid"],
    "dut.grad_in__ready": ["grad_in__ready"],
    "in_addr": ["grad_in__payload.addr"],
    "in_grad": ["grad_in__payload.grad"],
    "in_thresh": ["threshold"],
    "in_flush": ["flush"],
    "in_ready": ["dram_out__ready"],
}

#: Group titles, in the order of the trace table's groups (a header starting with ``|``
#: opens the next group).
GROUPS = ["inputs", "L1", "L1 to L2 push", "L2", "DRAM", "proof harness"]


def _column_groups():
    """``[(title, [(header, key, signed), ...]), ...]`` from the trace table's columns."""
    groups = []
    for head, key, signed in COLUMNS:
        if not groups or head.startswith("|"):
            index = len(groups)
            groups.append((GROUPS[index] if index < len(GROUPS) else head.lstrip("|"), []))
        groups[-1][1].append((head.lstrip("|"), key, signed))
    return groups


def read_vcd_header(path):
    """``{full dotted name: (gtkwave name, width)}`` of the variables a VCD declares (read with
    pyvcd). The GTKWave name is the scopes and the reference, joined by dots, with ``[w-1:0]``
    for a vector (as Amaranth writes its own save files)."""
    variables, scopes = {}, []
    with open(path, "rb") as f:
        # GTKWave names a signal whose name holds a dot, or was escaped in the file, with a
        # backslash (``top.\\s1.addr[31:0]``); pyvcd drops the escape, so look for it in the
        # declarations.
        lines = []
        for line in f:
            lines.append(line)
            if b"$enddefinitions" in line:
                break
        header = b"".join(lines).decode(errors="replace")
        f.seek(0)
        for token in tokenize(f):
            if token.kind is TokenKind.SCOPE:
                scopes.append(token.data.ident)
            elif token.kind is TokenKind.UPSCOPE:
                scopes.pop()
            elif token.kind is TokenKind.VAR:
                var = token.data
                escaped = "." in var.reference or f" \\{var.reference} " in header
                gtkw = ".".join([*scopes, "\\" * escaped + var.reference])
                if var.size > 1:
                    gtkw += f"[{var.size - 1}:0]"
                full = ".".join([*scopes, var.reference.lstrip("\\")])
                variables.setdefault(full, (gtkw, var.size))
            elif token.kind is TokenKind.ENDDEFINITIONS:
                break
    return variables


def vcd_summary(path):
    """``(variables, last_ns)``: :func:`read_vcd_header`'s variables and the last timestamp in
    nanoseconds, reading the whole file with pyvcd (so a malformed file raises)."""
    variables = read_vcd_header(path)
    last, ns_per_unit = 0, 1.0
    with open(path, "rb") as f:
        for token in tokenize(f):
            if token.kind is TokenKind.TIMESCALE:
                ns_per_unit = token.data.magnitude.value * _NS_PER[token.data.unit.value]
            elif token.kind is TokenKind.CHANGE_TIME:
                last = token.data
    return variables, last * ns_per_unit


_NS_PER = {"s": 1e9, "ms": 1e6, "us": 1e3, "ns": 1.0, "ps": 1e-3, "fs": 1e-6}


def _find(variables, key):
    """The full name of the variable for trace-table ``key`` (or an alias): the shortest name
    that is the key or ends with ``.`` + the key without the harness's ``dut.`` prefix."""
    for name in [key, *ALIASES.get(key, [])]:
        suffix = name[4:] if name.startswith("dut.") else name
        found = [v for v in variables if v == suffix or v.endswith("." + suffix)]
        if found:
            return min(found, key=len)
    return None


def write_gtkw(vcd_path, gtkw_path=None, *, dumpfile=None):
    """Write a GTKWave save file for ``vcd_path`` (default: the same name, ``.gtkw``) with
    the trace table's signal groups; returns its path and the number of signals in it.
    ``dumpfile``: the VCD the save file names, if not ``vcd_path`` (a VCD written under a
    temporary name, renamed later)."""
    vcd_path = Path(vcd_path)
    gtkw_path = Path(gtkw_path) if gtkw_path else gtkw_path_for(vcd_path)
    variables = read_vcd_header(vcd_path)
    count = 0
    with open(gtkw_path, "w") as f:
        save = GTKWSave(f)
        save.dumpfile(str(Path(dumpfile or vcd_path).resolve()))
        save.size(1400, 900)
        save.zoom_markers(-7)       # about 50 cycles of 10 ns across the window
        save.signals_width(260)
        clock = _find(variables, "clk")
        if clock:
            save.trace(variables[clock][0], alias="clk")
        for title, columns in _column_groups():
            found = [(head, _find(variables, key), signed) for head, key, signed in columns]
            found = [(head, name, signed) for head, name, signed in found if name]
            if not found:
                continue
            with save.group(title):
                for head, name, signed in found:
                    gtkw, width = variables[name]
                    # GTKWave shows an alias only after its last dot: in.v -> in_v.
                    save.trace(gtkw, alias=head.replace(".", "_"),
                               datafmt="signed" if signed else
                               "dec" if width > 1 else "hex")
                    count += 1
    return gtkw_path, count


def gtkw_path_for(vcd_path):
    """Where the save file of ``vcd_path`` goes: beside it, ``.gtkw`` instead of ``.vcd``."""
    return Path(vcd_path).with_suffix(".gtkw")


def main(argv=None):
    import argparse
    from gradient_compressor.console import ArgumentParser, usage_error
    parser = ArgumentParser(prog="python -m gradient_compressor.simulation.waves",
                            description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("vcd", help="a VCD file")
    parser.add_argument("gtkw", nargs="?", help="save file to write (default: beside the VCD)")
    args = parser.parse_args(argv)
    from gradient_compressor.console import replacing
    path = Path(args.gtkw) if args.gtkw else gtkw_path_for(args.vcd)
    try:
        with replacing(path) as [part]:
            _, count = write_gtkw(args.vcd, part)
    except (OSError, ValueError, VCDParseError) as error:
        return usage_error(parser.prog, f"{args.vcd}: {error}")
    print(f"wrote {path} ({count} signals): gtkwave {args.vcd} {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
