"""Replay a counterexample of the compressor on lines (a job of
:class:`properties.line_harness.LineHarness`, e.g. ``lines2-bmc``) in the Amaranth simulator and
check its contract there, lane by lane.

The line harness drives every input port of ``GradientCompressor(lanes=N)`` from a free value,
so the trace's VCD holds each port's value in every step under the port's own name (below
``dut``); a witness (``.yw``) is read through the VCD beside it. The replay drives the same
values into a fresh compressor of the job's configuration (the LFSR is the design's own, as in
the line harness), then drains it (``flush`` high, DRAM always ready, no beat) and checks:
``dram_out``'s stream rules in every cycle; ``idle`` only with L1 and L2 empty; and, for each
address (lane ``i`` of a beat, a DRAM write or a discard is at its address plus ``i``), that
the gradients accepted equal the values written to DRAM plus the discards accounted whenever
the compressor is idle, and after the drain.
"""

import os

from amaranth import Value
from amaranth.lib.wiring import In

from .trace_table import TraceError, read_vcd

__all__ = ["input_port_names", "input_ports", "read_port_steps", "simulate_line_steps",
           "check_line_steps", "table_rows"]


def input_port_names(config):
    """The names of the input ports of ``GradientCompressor(**config)``, as in the RTLIL, from
    its signature alone (no compressor is built)."""
    from gradient_compressor.design.compressor import signature
    return ["__".join(map(str, path)) for path, member in signature(**config).members.flatten()
            if member.is_port and member.flow == In]


def input_ports(dut):
    """``{name: value}`` of the compressor's input ports, named as in the RTLIL
    (``grad_in__payload``, ``threshold``, ``bypass0_base``, ...)."""
    return {"__".join(map(str, path)): Value.cast(value)
            for path, member, value in dut.signature.flatten(dut) if member.flow == In}


def read_port_steps(path, names):
    """``[{name: value}]`` per step of the trace at ``path`` (a ``.vcd``, or a ``.yw`` with its
    ``.vcd`` beside it): the reset (``rst``) and each input port in ``names`` (unknown bits read
    as 0). Raises :class:`~proofs.trace_table.TraceError` if there is no trace to read, or it
    records none of the ports."""
    vcd = path if path.endswith(".vcd") else os.path.splitext(path)[0] + ".vcd"
    if not os.path.isfile(vcd):
        raise TraceError(f"{path}: a line job's replay reads the VCD beside its witness, and "
                         f"{vcd} does not exist")
    trace = read_vcd(vcd)
    columns = {name: trace.values(f"dut.{name}") for name in names}
    columns["rst"] = trace.values("rst")
    if not any(v is not None for k, v in columns.items() if k != "rst"):
        raise TraceError(f"{vcd}: records none of the compressor's input ports: not a trace "
                         f"of a line job")
    return [{name: (values[k] or 0) if values else 0 for name, values in columns.items()}
            for k in range(trace.steps)]


def simulate_line_steps(dut_factory, steps, *, drain=200, vcd=None):
    """Drive ``steps`` (as :func:`read_port_steps` gives them) into a fresh compressor on
    lines, then drain it. Returns ``(dut, records)``, one record per cycle."""
    from amaranth import ClockDomain, Elaboratable, Module
    from gradient_compressor.simulation.driver import run_testbench

    dut = dut_factory()
    ports = input_ports(dut)
    cd = ClockDomain("sync")

    class Top(Elaboratable):
        def elaborate(self, platform):
            m = Module()
            m.domains.sync = cd
            m.submodules.dut = dut
            return m

    records = []
    drained = {name: 0 for name in ports} | {"flush": 1, "dram_out__ready": 1}

    async def bench(ctx):
        for k in range(len(steps) + drain):
            inputs = steps[k] if k < len(steps) else dict(drained, rst=0)
            ctx.set(cd.rst, inputs.get("rst", 0))
            for name, port in ports.items():
                ctx.set(port, inputs.get(name, 0))
            records.append(_record(ctx, dut, k, k >= len(steps), inputs))
            await ctx.tick()
            if records[-1]["drain"] and records[-1]["idle"] and k >= len(steps) + 2:
                break

    run_testbench(Top(), bench, vcd=vcd)
    return dut, records


def _record(ctx, dut, cycle, drain, inputs):
    beat, out, N = dut.grad_in, dut.dram_out, dut.lanes
    return dict(
        cycle=cycle, drain=drain, rst=inputs.get("rst", 0), flush=ctx.get(dut.flush),
        valid=ctx.get(beat.valid), in_ready_out=ctx.get(beat.ready),
        line=ctx.get(beat.p.addr) & ~(N - 1),
        grads=[ctx.get(beat.p.grads[i]) for i in range(N)], mask=ctx.get(beat.p.mask),
        ready=ctx.get(out.ready), dram_valid=ctx.get(out.valid),
        dram_addr=ctx.get(out.p.addr), dram_values=[ctx.get(out.p.values[i]) for i in range(N)],
        dram_mask=ctx.get(out.p.mask), idle=ctx.get(dut.idle),
        valid_count=ctx.get(dut.l1_valid_count), l2_level=ctx.get(dut.l2_level),
        discard=ctx.get(dut.discard), discard_addr=ctx.get(dut.discard_addr),
        discard_errors=[ctx.get(dut.discard_error[i]) for i in range(N)])


def _lanes(base, values, mask):
    """``(address, value)`` of each lane in ``mask``."""
    return [(base + i, v) for i, v in enumerate(values) if mask >> i & 1]


def check_line_steps(dut_factory, steps, *, drain=200, vcd=None):
    """Replay ``steps`` and check the contract on lines. Returns ``(violations, records)``."""
    dut, records = simulate_line_steps(dut_factory, steps, drain=drain, vcd=vcd)
    errors, accepted, written, last = [], {}, {}, None

    def balance(when):
        for a in sorted(set(accepted) | set(written)):
            if accepted.get(a, 0) != written.get(a, 0):
                errors.append(f"{when} address {a}: accepted {accepted.get(a, 0)} != "
                              f"written + accounted {written.get(a, 0)}")

    for r in records:
        k = r["cycle"]
        if r["rst"]:
            accepted, written, last = {}, {}, None
            continue
        if last is not None and last["dram_valid"] and not last["ready"]:
            if not r["dram_valid"]:
                errors.append(f"cycle {k}: dram_out.valid dropped before ready")
            elif _payload(r) != _payload(last):
                errors.append(f"cycle {k}: dram_out payload changed before ready")
        if r["idle"] and (r["valid_count"] or r["l2_level"]):
            errors.append(f"cycle {k}: idle with valid_count={r['valid_count']} "
                          f"l2_level={r['l2_level']}")
        if r["idle"]:
            balance(f"cycle {k}: idle but")
        if r["valid"] and r["in_ready_out"]:
            for a, g in _lanes(r["line"], r["grads"], r["mask"]):
                accepted[a] = accepted.get(a, 0) + g
        if r["dram_valid"] and r["ready"]:
            for a, v in _lanes(r["dram_addr"], r["dram_values"], r["dram_mask"]):
                written[a] = written.get(a, 0) + v
        for a, e in _lanes(r["discard_addr"], r["discard_errors"], r["discard"]):
            written[a] = written.get(a, 0) + e    # accounted (dual threshold): as written
        last = r
    if not records[-1]["idle"]:
        errors.append(f"not idle {drain} cycles into the final drain")
    balance("after the drain,")
    return list(dict.fromkeys(errors)), records


def _payload(r):
    return r["dram_addr"], r["dram_values"], r["dram_mask"]


def table_rows(records):
    """The replay as the rows and headings of a cycle-by-cycle table."""
    heads = ["cyc", "rst", "in.v", "in.rdy", "line", "grads", "mask", "flush", "d.rdy",
             "|dram.v", "d.addr", "d.values", "d.mask", "idle", "vcnt", "l2", ""]
    rows = [[r["cycle"], r["rst"], r["valid"], r["in_ready_out"], r["line"],
             ",".join(map(str, r["grads"])), f"{r['mask']:b}", r["flush"], r["ready"],
             r["dram_valid"], r["dram_addr"], ",".join(map(str, r["dram_values"])),
             f"{r['dram_mask']:b}", r["idle"], r["valid_count"], r["l2_level"],
             "(drain)" if r["drain"] else ""] for r in records]
    return rows, heads
