"""The deepest register-to-register paths of a synthesised netlist, without place and route.

    python -m gradient_compressor.synth.depth build/synth/default/top.json [--count 20]
    python -m gradient_compressor.synth.depth build/synth/default/top.json --path l1.s4_dec

Reads the JSON netlist that ``python -m gradient_compressor.synth`` leaves in each
configuration's folder (``top.json``, after Yosys ``synth_ecp5``) and estimates, for every
flip-flop, the delay of the longest combinational path into it, with a fixed delay model close
to nextpnr-ecp5's averages on this design: a net between cells 0.9 ns, a LUT4 0.24 ns, a
wide-LUT mux (PFUMX, L6MUX21) 0.2 ns behind its LUTs, a carry cell 0.45 ns into its chain and
0.07 ns along it, a LUT RAM read 0.5 ns, a DSP multiply 4 ns, a flip-flop's clock-to-output
0.52 ns (a block RAM's read data counts as a flip-flop's, so from 128 sets up the paths from
L1's RAM are optimistic). It prints the deepest endpoint of each Amaranth signal, the signal its
path starts from, the fewest registers on a loop through that path, how many endpoints lie
beyond 5, 6, 7 and 8 ns, and those beyond 5 ns (200 MHz) by the loop they are on.

The loop column says what can shorten a path. A path on no loop (``-``) can be cut by one more
pipeline register, at the cost of a cycle of latency. A path on a loop of ``k`` registers
shares ``k`` cycles with the rest of that loop: one more register would change what the loop
computes per cycle (1: the register feeds itself, as the accumulate loop's sum does: a gradient
must see the sum the one before it left), so such a path needs less logic, logic moved to
another part of the loop, or the decision made a cycle ahead.

Why: place and route moves one netlist's Fmax by up to 14 % from one placement seed to the next
(docs/synth.md), so a change worth a few percent cannot be told from noise by three seeds; this
estimate is the same on every run and shows every deep path, not only the worst. It is a model,
not a timing analysis: it knows no placement, so it ranks paths and netlists rather than
predicting an Fmax (its deepest path on the default netlist: 10.0 ns, where the seeds' critical
paths were 9.4-10.0 ns). Yosys' ABC maps every path to about the depth of the deepest one it
must keep (docs/synth.md, design rules for timing), so the deepest paths here are where a change
can gain.

Exit status: 0 done, 2 bad argument or input file.
"""

import sys
from collections import Counter, defaultdict, deque

from gradient_compressor.console import ArgumentParser, positive_integer, usage_error
from .netlist import Netlist

__all__ = ["path_estimates", "deepest_path", "cell_graph", "loop_components", "loop_registers",
           "depth_summary", "main"]

ROUTE = 0.9          # a net from one cell to the next
CLOCK_TO_Q = 0.52    # a flip-flop's output

# Combinational arcs: cell type -> output port -> [(input port, delay in ns, routed)]; routed
# arcs add ROUTE for the net into the input (a wide-LUT mux takes its LUTs' outputs, and a carry
# cell its chain's carry, through dedicated wires).
_LUT_INPUTS = [("A", 0.24, True), ("B", 0.24, True), ("C", 0.24, True), ("D", 0.24, True)]
_CARRY_INPUTS = [f"{p}{i}" for i in (0, 1) for p in "ABCD"]
ARCS = {
    "LUT4": {"Z": _LUT_INPUTS},
    "PFUMX": {"Z": [("ALUT", 0.2, False), ("BLUT", 0.2, False), ("C0", 0.2, True)]},
    "L6MUX21": {"Z": [("D0", 0.2, False), ("D1", 0.2, False), ("SD", 0.2, True)]},
    "CCU2C": {
        "COUT": [(p, 0.45, True) for p in _CARRY_INPUTS] + [("CIN", 0.07, False)],
        "S0": [(p, 0.4, True) for p in _CARRY_INPUTS[:4]] + [("CIN", 0.4, False)],
        "S1": [(p, 0.45, True) for p in _CARRY_INPUTS] + [("CIN", 0.4, False)],
    },
    "TRELLIS_DPR16X4": {"DO": [("RAD", 0.5, True)]},
}
MULTIPLY = 4.0       # MULT18X18D: every A and B input to every output


def path_estimates(netlist):
    """The estimated arrival (ns) at every flip-flop's data input.

    Returns
    -------
    list of (float, str, int, int)
        ``(delay, register, start, end)``: the delay including the last net, the Amaranth signal
        the flip-flop holds (or its cell name), the net bit the path starts from and the
        flip-flop's output bit; deepest first.
    """
    cells = netlist.cells
    driver = _drivers(cells)
    arrival = {}          # bit -> (delay, start bit)
    ends = []
    for name, cell in cells.items():
        if cell["type"] != "TRELLIS_FF":
            continue
        bit = cell["connections"]["DI"][0]
        if not isinstance(bit, int):
            continue
        _arrive(bit, cells, driver, arrival)
        delay, start = arrival[bit]
        ends.append((delay + ROUTE, netlist.register_name(name) or name, start,
                     cell["connections"]["Q"][0]))
    return sorted(ends, key=lambda end: -end[0])


def _drivers(cells):
    """``{bit: (cell name, output port)}``: the cell output that drives each net bit."""
    driver = {}
    for name, cell in cells.items():
        for port, direction in cell["port_directions"].items():
            if direction == "output":
                for bit in cell["connections"][port]:
                    if isinstance(bit, int):
                        driver[bit] = (name, port)
    return driver


def _arcs(cell, port):
    """The combinational arcs into output ``port`` of ``cell``: ``[(input port, delay,
    routed)]``, or None where the output starts a path."""
    kind = cell["type"]
    if kind == "MULT18X18D":
        return [(p, MULTIPLY, True) for p in cell["connections"]
                if p[0] in "AB" and p[1:].isdigit()]
    return ARCS.get(kind, {}).get(port)


def deepest_path(netlist, register):
    """The estimated deepest path into ``register`` (an Amaranth signal, as the summary names
    it), from its start: ``[(ns, cell type, names)]``, one row per net bit on the path (the
    arrival there, the cell that drives it, the bit's Amaranth names, most specific first);
    None if no flip-flop holds ``register``."""
    cells = netlist.cells
    driver = _drivers(cells)
    arrival, via = {}, {}
    ends = [cell["connections"]["DI"][0] for name, cell in cells.items()
            if cell["type"] == "TRELLIS_FF" and netlist.register_name(name) == register
            and isinstance(cell["connections"]["DI"][0], int)]
    if not ends:
        return None
    for bit in ends:
        _arrive(bit, cells, driver, arrival, via)
    bit = max(ends, key=lambda bit: arrival[bit][0])
    path = []
    while bit is not None:
        source = driver.get(bit)
        path.append((round(arrival[bit][0], 2), cells[source[0]]["type"] if source else "input",
                     netlist.signal_names(bit)))
        bit = via.get(bit)
    return path[::-1]


def _arrive(bit, cells, driver, arrival, via=None):
    """Add to ``arrival`` the ``(delay, start bit)`` of ``bit`` and of every bit in its cone
    (and to ``via``, if given, the bit each one's deepest arc comes from)."""
    # Iterative depth-first search: the netlist's cones are deeper than Python's stack.
    stack = [bit]
    while stack:
        top = stack[-1]
        if top in arrival:
            stack.pop()
            continue
        source = driver.get(top)
        inputs = _arcs(cells[source[0]], source[1]) if source else None
        if not inputs:        # a flip-flop, an input port, a block RAM, a constant
            arrival[top] = (CLOCK_TO_Q if source else 0.0, top)
            stack.pop()
            continue
        connections = cells[source[0]]["connections"]
        pending = [b for port, _, _ in inputs for b in connections.get(port, [])
                   if isinstance(b, int) and b not in arrival]
        if pending:
            stack.extend(pending)
            continue
        best, came_from = (0.0, top), None
        for port, delay, routed in inputs:
            for b in connections.get(port, []):
                if isinstance(b, int):
                    t = arrival[b][0] + delay + (ROUTE if routed else 0.0)
                    if t > best[0]:
                        best, came_from = (t, arrival[b][1]), b
        arrival[top] = best
        if via is not None:
            via[top] = came_from
        stack.pop()


def cell_graph(netlist):
    """Every cell's arcs from its input bits to its output bits, flip-flops and memories
    included: ``{bit: [(bit, registers)]}``, ``registers`` 1 where the arc goes through
    state and 0 where it is combinational (``Netlist.arcs``). Its cycles are the netlist's
    loops.

    Every input of a flip-flop counts as an arc through state, its enable and reset as well
    as its data, as each decides the next value: a path into a flip-flop's enable is on a
    loop if the flip-flop reaches that enable's source (with data arcs only, 553 of the 1092
    paths beyond 5 ns on the default netlist would be on no loop, against 249)."""
    graph = defaultdict(list)
    for a, b, through_state in netlist.arcs():
        graph[a].append((b, int(through_state)))
    return graph


def loop_components(graph):
    """The strongly connected component of every bit of ``graph`` (:func:`cell_graph`) that
    lies on a loop: ``{bit: component}`` for the components of more than one bit, or of one
    bit with an arc to itself; two bits are on one loop when their components are equal."""
    # Tarjan's algorithm, iterative (the netlist's paths are deeper than Python's stack).
    index, low, on_stack, stack, component = {}, {}, set(), [], {}
    for root in list(graph):
        if root in index:
            continue
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        work = [(root, iter(graph[root]))]
        while work:
            node, successors = work[-1]
            for succ, _ in successors:
                if succ not in index:
                    index[succ] = low[succ] = len(index)
                    stack.append(succ)
                    on_stack.add(succ)
                    work.append((succ, iter(graph.get(succ, ()))))
                    break
                if succ in on_stack:
                    low[node] = min(low[node], index[succ])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    members = []
                    while not members or members[-1] != node:
                        members.append(stack.pop())
                        on_stack.discard(members[-1])
                    if len(members) > 1 or any(b == node for b, _ in graph.get(node, ())):
                        component.update((member, node) for member in members)
    return component


def loop_registers(graph, component, start, end):
    """The fewest registers on a loop through a path from bit ``start`` to the flip-flop whose
    output is bit ``end`` (that flip-flop included), or None if the path is on no loop: the
    number of clock cycles the loop's whole computation is spread over."""
    return loops_through(reversed_graph(graph), component, start).get(end)


def reversed_graph(graph):
    """``graph`` (:func:`cell_graph`) with every arc turned round."""
    reverse = defaultdict(list)
    for bit, successors in graph.items():
        for succ, registers in successors:
            reverse[succ].append((bit, registers))
    return reverse


def loops_through(reverse, component, start):
    """:func:`loop_registers` for every end at once: ``{end: registers}`` for each bit ``end``
    from which a loop runs back to ``start``, by a 0-1 breadth-first search from ``start`` on
    the reversed graph (``reverse``, :func:`reversed_graph`) within its component. The paths
    deeper than 5 ns start from a few dozen bits, so one search per start is what the summary
    needs, where one per end is thousands on a netlist of 16 lanes."""
    if start not in component:
        return {}
    loop = component[start]
    distance = {start: 0}
    queue = deque([start])
    while queue:
        bit = queue.popleft()
        for pred, registers in reverse.get(bit, ()):
            if component.get(pred) != loop:
                continue
            d = distance[bit] + registers
            if d < distance.get(pred, d + 1):
                distance[pred] = d
                (queue.append if registers else queue.appendleft)(pred)
    return {bit: d + 1 for bit, d in distance.items()}


#: The limits (ns) the summary counts flip-flops beyond: 5 ns is 200 MHz, the goal of issue 8.
LIMITS = (5, 6, 7, 8)


def depth_summary(netlist, count=20):
    """What ``python -m gradient_compressor.synth.depth`` prints, as data
    (``python -m gradient_compressor.synth`` records it too).

    Returns
    -------
    dict
        ``deepest``: for the ``count`` deepest registers, ``{"register", "start", "ns",
        "loop"}`` (``loop``: :func:`loop_registers`, None if on no loop); ``flip_flops``;
        ``beyond``: ``{limit: flip-flops}`` for each of :data:`LIMITS`; ``beyond_5_by_loop``:
        the flip-flops beyond 5 ns by the fewest registers on a loop through their path
        (``"none"``, ``"1"`` ... ``"6"``, ``"7+"``).
    """
    ends = path_estimates(netlist)
    graph = cell_graph(netlist)
    component = loop_components(graph)
    reverse = reversed_graph(graph)
    loops = {}                 # start -> loops_through, each start searched once

    def loop(start, end):
        if start not in loops:
            loops[start] = loops_through(reverse, component, start)
        return loops[start].get(end)

    deepest = {}
    for delay, register, start, end in ends:
        deepest.setdefault(register, (delay, start, end))
    rows = [{"register": register, "start": netlist.signal_name(start) or "(unnamed)",
             "ns": round(delay, 2), "loop": loop(start, end)}
            for register, (delay, start, end) in list(deepest.items())[:count]]
    by_loop = Counter(min(loop(start, end) or 0, 7)
                      for delay, _, start, end in ends if delay > LIMITS[0])
    return {
        "deepest": rows,
        "flip_flops": len(ends),
        "beyond": {limit: sum(1 for d, *_ in ends if d > limit) for limit in LIMITS},
        "beyond_5_by_loop": {("none" if k == 0 else "7+" if k == 7 else str(k)): n
                             for k, n in sorted(by_loop.items(), key=lambda kv: kv[0] or 8)},
    }


def summary_lines(summary):
    """The summary's last lines: the flip-flops beyond each limit, and beyond 5 ns by loop."""
    beyond = ", ".join(f"{n} beyond {limit} ns" for limit, n in summary["beyond"].items())
    by_loop = ", ".join(f"{k}: {n}" for k, n in summary["beyond_5_by_loop"].items())
    return [f"{summary['flip_flops']} flip-flops: {beyond}",
            f"beyond 5 ns, by loop: {by_loop}"]


def _parser():
    parser = ArgumentParser(prog="python -m gradient_compressor.synth.depth",
                            description=__doc__.split("\n\n")[0],
                            epilog="Exit status: 0 done, 2 bad argument or input file.")
    parser.add_argument("netlist",
                        help="a top.json that python -m gradient_compressor.synth wrote")
    parser.add_argument("--count", type=positive_integer, default=20,
                        help="signals to list (default: 20)")
    parser.add_argument("--path", metavar="REGISTER",
                        help="print the deepest path into REGISTER (a signal as listed, "
                             "l1.s4_dec), cell by cell, instead of the summary")
    return parser


def main(argv=None):
    args = _parser().parse_args(argv)
    try:
        netlist = Netlist(args.netlist)
    except (OSError, ValueError, KeyError) as error:
        return usage_error("python -m gradient_compressor.synth.depth",
                           f"cannot read {args.netlist} as a synth_ecp5 netlist ({error})")
    if args.path is not None:
        path = deepest_path(netlist, args.path)
        if path is None:
            return usage_error("python -m gradient_compressor.synth.depth",
                               f"no flip-flop holds {args.path!r} in {args.netlist}")
        print("estimated ns  cell      net (its Amaranth names)")
        for ns, kind, names in path:
            print(f"{ns:12.2f}  {kind:<8}  {', '.join(names[:2]) or '(unnamed)'}")
        return 0
    summary = depth_summary(netlist, args.count)
    print("estimated ns  loop  register <- the signal its deepest path starts from")
    for row in summary["deepest"]:
        print(f"{row['ns']:12.2f}  {row['loop'] or '-':>4}  {row['register']} <- {row['start']}")
    for line in summary_lines(summary):
        print(line)
    print("loop: the fewest registers on a loop through the path (the cycles its computation "
          "has), - if none")
    return 0


if __name__ == "__main__":
    sys.exit(main())
