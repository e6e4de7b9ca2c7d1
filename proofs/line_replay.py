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

A counterexample of the line L1 alone (a job of the harness built with ``alone=True``, e.g.
``l1-lines2-small-bmc``, the lane mutants' first check) is replayed on L1 alone: its free
inputs (``in_*``, the beat's fields, ``flush``, ``push.ready``, the random bits) drive a fresh
``L1Alone`` around the job's ``LineAccumulator``, which is then drained, and its contract
as seen at its ports is checked: ``push``'s stream rules, and per address that the gradients
accepted equal the values pushed plus the discards whenever L1 is idle (:func:`check_l1_steps`).
"""

import os

from amaranth import Value
from amaranth.lib.wiring import In

from .trace_table import TraceError, read_vcd
from gradient_compressor.design.params import port_name

__all__ = ["input_port_names", "input_ports", "read_port_steps", "simulate_line_steps",
           "check_line_steps", "table_rows", "l1_input_names", "read_l1_steps",
           "simulate_l1_steps", "check_l1_steps", "l1_table_rows"]


def input_port_names(config):
    """The names of the input ports of ``GradientCompressor(**config)``, as in the RTLIL, from
    its signature alone (no compressor is built)."""
    from gradient_compressor.design.compressor import signature
    sig = signature(**config)
    return [port_name(path) for path, member, _ in sig.flatten(sig.create())
            if member.flow == In]


def input_ports(dut):
    """``{name: value}`` of the compressor's input ports, named as in the RTLIL
    (``grad_in__payload``, ``threshold``, ``bypass__0__base``, ...)."""
    return {port_name(path): Value.cast(value)
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
    dut = dut_factory()
    ports = input_ports(dut)
    drained = {name: 0 for name in ports} | {"flush": 1, "dram_out__ready": 1, "rst": 0}

    def drive(ctx, inputs):
        for name, port in ports.items():
            ctx.set(port, inputs.get(name, 0))
    records = _simulate(dut, steps, drain=drain, drained=drained, drive=drive,
                        record=lambda ctx, k, last, inputs: _record(ctx, dut, k, last, inputs),
                        vcd=vcd)
    return dut, records


def _simulate(dut, steps, *, drain, drained, drive, record, vcd):
    """Drive ``steps`` into ``dut`` (``drive(ctx, inputs)`` each cycle, the reset from each
    step's ``rst``), then up to ``drain`` cycles of ``drained`` until it is idle. Returns
    ``record(ctx, cycle, draining, inputs)`` of every cycle."""
    from amaranth import ClockDomain, Elaboratable, Module
    from gradient_compressor.simulation.driver import run_testbench
    cd = ClockDomain("sync")

    class Top(Elaboratable):
        def elaborate(self, platform):
            m = Module()
            m.domains.sync = cd
            m.submodules.dut = dut
            return m

    records = []

    async def bench(ctx):
        for k in range(len(steps) + drain):
            inputs = steps[k] if k < len(steps) else drained
            ctx.set(cd.rst, inputs.get("rst", 0))
            drive(ctx, inputs)
            records.append(record(ctx, k, k >= len(steps), inputs))
            await ctx.tick()
            if records[-1]["drain"] and records[-1]["idle"] and k >= len(steps) + 2:
                break

    run_testbench(Top(), bench, vcd=vcd)
    return records


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
    return _check_records(records, drain, out="dram", stream="dram_out", written="written",
                          held=("valid_count", "l2_level")), records


def _check_records(records, drain, *, out, stream, written, held):
    """The violations of the contract on lines in the replay's ``records``: the output
    stream's rules (``stream``, whose fields are ``out_valid``, ``out_addr``, ... in a
    record) in every cycle; ``idle`` only with each of ``held`` 0; and for each address, the
    gradients accepted equal the values taken from ``stream`` plus the discards accounted
    (``written``) whenever idle, and after the drain."""
    errors, accepted, taken, last = [], {}, {}, None

    def payload(r):
        return r[f"{out}_addr"], r[f"{out}_values"], r[f"{out}_mask"]

    def balance(when):
        for a in sorted(set(accepted) | set(taken)):
            if accepted.get(a, 0) != taken.get(a, 0):
                errors.append(f"{when} address {a}: accepted {accepted.get(a, 0)} != "
                              f"{written} + accounted {taken.get(a, 0)}")

    for r in records:
        k = r["cycle"]
        if r["rst"]:
            accepted, taken, last = {}, {}, None
            continue
        if last is not None and last[f"{out}_valid"] and not last["ready"]:
            if not r[f"{out}_valid"]:
                errors.append(f"cycle {k}: {stream}.valid dropped before ready")
            elif payload(r) != payload(last):
                errors.append(f"cycle {k}: {stream} payload changed before ready")
        if r["idle"] and any(r[name] for name in held):
            errors.append(f"cycle {k}: idle with " +
                          " ".join(f"{name}={r[name]}" for name in held))
        if r["idle"]:
            balance(f"cycle {k}: idle but")
        if r["valid"] and r["in_ready_out"]:
            for a, g in _lanes(r["line"], r["grads"], r["mask"]):
                accepted[a] = accepted.get(a, 0) + g
        if r[f"{out}_valid"] and r["ready"]:
            for a, v in _lanes(*payload(r)):
                taken[a] = taken.get(a, 0) + v
        for a, e in _lanes(r["discard_addr"], r["discard_errors"], r["discard"]):
            taken[a] = taken.get(a, 0) + e    # accounted (dual threshold): as written
        last = r
    if not records[-1]["idle"]:
        errors.append(f"not idle {drain} cycles into the final drain")
    balance("after the drain,")
    return list(dict.fromkeys(errors))


def table_rows(records):
    """The replay as the rows and headings of a cycle-by-cycle table."""
    return _rows(records, "d", "dram", [("idle", "idle"), ("vcnt", "valid_count"),
                                        ("l2", "l2_level")])


# -- the line L1 alone (a job of the harness built with alone=True and lanes) -------------------

def l1_input_names(config):
    """The free inputs of the line L1 alone's harness (``properties.harness.FormalHarness``
    with ``alone=True``), as its trace names them: ``in_valid``, ``in_addr`` (the beat's line
    is its address with the lane bits cleared), ``in_thresh`` (the beat's threshold),
    ``in_<field>`` for every other field of the beat, ``in_flush``, ``in_ready``
    (``push.ready``), ``in_random`` (the random bits a step takes) and ``in_lfsr_load``."""
    from gradient_compressor.design.layouts import classified_line_layout
    layout = classified_line_layout(config["addr_width"], config["grad_width"],
                                    config["lanes"])
    fields = [name for name, _ in layout if name not in ("addr", "threshold")]
    return (["in_valid", "in_addr", "in_thresh"] + [f"in_{name}" for name in fields] +
            ["in_flush", "in_ready", "in_random", "in_lfsr_load"])


#: The stand-in random source's state at the trace's first step (it has no reset: a check
#: from reset starts it anywhere), under this name in the trace.
RANDOM_STATE = "dut.lfsr.random_bits"


def read_l1_steps(path, names):
    """``[{name: value}]`` per step of the line L1 alone's trace at ``path`` (a ``.vcd``, or
    a ``.yw`` with its ``.vcd`` beside it): ``rst`` and each free input in ``names`` (unknown
    bits read as 0), and in the first step the random source's state (``random_state``).
    Raises :class:`~proofs.trace_table.TraceError` if there is no trace to read, or it
    records none of the inputs."""
    trace = read_vcd(_vcd_beside(path))
    columns = {name: trace.values(name) for name in names}
    if not any(v is not None for v in columns.values()):
        raise TraceError(f"{path}: records none of the line L1's free inputs: not a trace of "
                         f"a job of the line L1 alone")
    columns["rst"] = trace.values("rst")
    steps = [{name: (values[k] or 0) if values else 0 for name, values in columns.items()}
             for k in range(trace.steps)]
    state = trace.values(RANDOM_STATE)
    if steps and state:
        steps[0]["random_state"] = state[0] or 0
    return steps


def _vcd_beside(path):
    vcd = path if path.endswith(".vcd") else os.path.splitext(path)[0] + ".vcd"
    if not os.path.isfile(vcd):
        raise TraceError(f"{path}: a line job's replay reads the VCD beside its witness, and "
                         f"{vcd} does not exist")
    return vcd


def simulate_l1_steps(l1_factory, steps, *, drain=200, vcd=None):
    """Drive ``steps`` (as :func:`read_l1_steps` gives them) into a fresh line L1 alone
    (``l1_factory()``: a ``properties.harness.L1Alone`` around a ``LineAccumulator``, its
    random bits from a ``FreeRandom`` whose next state is ``in_random``, loaded only while
    L1 is idle, as in the proof), then drain it (``flush`` high, ``push.ready`` high, no
    beat). Returns ``(dut, records)``, one record per cycle."""
    dut = l1_factory()
    l1, N = dut.l1, dut.l1.lanes
    payload = l1.grad_in.payload
    fields = {f"in_{name}": Value.cast(getattr(payload, name)) for name, _ in payload.shape()
              if name not in ("addr", "threshold")}

    def drive(ctx, inputs):
        if "random_state" in inputs:
            ctx.set(dut.lfsr.state, inputs["random_state"])
        ctx.set(l1.grad_in.valid, inputs.get("in_valid", 0))
        ctx.set(payload.addr, inputs.get("in_addr", 0) & ~(N - 1))
        ctx.set(payload.threshold, inputs.get("in_thresh", 0))
        for name, field in fields.items():
            ctx.set(field, inputs.get(name, 0))
        ctx.set(l1.flush, inputs.get("in_flush", 0))
        ctx.set(l1.push.ready, inputs.get("in_ready", 0))
        ctx.set(dut.lfsr.source, inputs.get("in_random", 0))
        ctx.set(dut.lfsr.load, inputs.get("in_lfsr_load", 0) & ctx.get(l1.idle))
    records = _simulate(dut, steps, drain=drain,
                        drained={"rst": 0, "in_flush": 1, "in_ready": 1}, drive=drive,
                        record=lambda ctx, k, last, inputs: _l1_record(ctx, l1, k, last, inputs),
                        vcd=vcd)
    return dut, records


def _l1_record(ctx, l1, cycle, drain, inputs):
    beat, push, N = l1.grad_in, l1.push, l1.lanes
    return dict(
        cycle=cycle, drain=drain, rst=inputs.get("rst", 0), flush=ctx.get(l1.flush),
        valid=ctx.get(beat.valid), in_ready_out=ctx.get(beat.ready),
        line=ctx.get(beat.p.addr), grads=[ctx.get(beat.p.grads[i]) for i in range(N)],
        mask=ctx.get(beat.p.mask), ready=ctx.get(push.ready), push_valid=ctx.get(push.valid),
        push_addr=ctx.get(push.p.addr), push_values=[ctx.get(push.p.values[i]) for i in range(N)],
        push_mask=ctx.get(push.p.mask), idle=ctx.get(l1.idle),
        valid_count=ctx.get(l1.valid_count), discard=ctx.get(l1.discard),
        discard_addr=ctx.get(l1.discard_addr),
        discard_errors=[ctx.get(l1.discard_error[i]) for i in range(N)])


def check_l1_steps(l1_factory, steps, *, drain=200, vcd=None):
    """Replay ``steps`` on the line L1 alone and check its contract as seen at its ports:
    ``push``'s stream rules in every cycle (valid held with a stable payload until ready);
    ``idle`` only with no line held; and, for each address (lane ``i`` of a beat, a line
    write or a discard is at its address plus ``i``), that the gradients accepted equal the
    values pushed plus the discards accounted whenever L1 is idle, and after the drain.
    Returns ``(violations, records)``."""
    dut, records = simulate_l1_steps(l1_factory, steps, drain=drain, vcd=vcd)
    return _check_records(records, drain, out="push", stream="push", written="pushed",
                          held=("valid_count",)), records


def l1_table_rows(records):
    """The line L1 alone's replay as the rows and headings of a cycle-by-cycle table."""
    return _rows(records, "p", "push", [("disc", "discard"), ("idle", "idle"),
                                        ("vcnt", "valid_count")])


def _rows(records, short, out, tail):
    """The table of a line replay: the beat offered, ``out``'s ready, valid and line write
    (headed ``short``), then the ``tail`` columns (heading, record key; masks in binary)."""
    heads = ["cyc", "rst", "in.v", "in.rdy", "line", "grads", "mask", "flush", f"{short}.rdy",
             f"|{out}.v", f"{short}.addr", f"{short}.values", f"{short}.mask",
             *(head for head, _ in tail), ""]

    def shown(key, value):
        return f"{value:b}" if key == "discard" else value
    rows = [[r["cycle"], r["rst"], r["valid"], r["in_ready_out"], r["line"],
             ",".join(map(str, r["grads"])), f"{r['mask']:b}", r["flush"], r["ready"],
             r[f"{out}_valid"], r[f"{out}_addr"], ",".join(map(str, r[f"{out}_values"])),
             f"{r[out + '_mask']:b}", *(shown(key, r[key]) for _, key in tail),
             "(drain)" if r["drain"] else ""] for r in records]
    return rows, heads
