"""Read a Yosys JSON netlist (``write_json``) after ``synth_ecp5``.

Gives cell counts, the flip-flops grouped by the Amaranth signal they hold, the Amaranth names of
a net, and which outputs of the top module are reachable from which inputs through
combinational logic only.
"""

import json
import linecache
import pathlib
import re
from collections import Counter, defaultdict

import amaranth

__all__ = ["Netlist", "ECP5_CELLS"]

#: ECP5 cell types the report counts, and what each one is.
ECP5_CELLS = {
    "LUT4": "4-input lookup table",
    "CCU2C": "carry cell (two bits of an adder or comparator)",
    "TRELLIS_FF": "flip-flop",
    "TRELLIS_DPR16X4": "LUT RAM (16 x 4 bits, read without a clock)",
    "DP16KD": "block RAM (16 kbit, registered read)",
}

# Combinational arcs (input port -> output port) of the sequential cells; every other cell
# (LUT4, PFUMX, L6MUX21, CCU2C, ...) is taken as combinational from every input to every output.
# A flip-flop and a block RAM (whose read is clocked) have none; a LUT RAM reads without a clock,
# so its read address reaches its data output, while its write inputs act only at the clock edge.
SEQUENTIAL_ARCS = {
    "TRELLIS_FF": {},
    "DP16KD": {},
    "TRELLIS_DPR16X4": {"RAD": ["DO"]},
}


# Source locations inside Amaranth itself (e.g. ``abs()``) say nothing about the design.
AMARANTH = str(pathlib.Path(amaranth.__file__).parent)


class Netlist:
    """The top module of a Yosys JSON netlist.

    Parameters
    ----------
    path : str or pathlib.Path
        The JSON file written by Yosys ``write_json`` (or ``synth_ecp5 -json``).
    top : str
        The top module's name.
    prefix : str
        Hierarchy prefix to drop from names (the instance name of the design inside the
        wrapper that gives it flat ports), so that names read as in the design: ``l1.s1``.
    """

    def __init__(self, path, top="top", prefix="compressor."):
        with open(path) as f:
            self.module = json.load(f)["modules"][top]
        self.prefix = prefix
        self.cells = self.module["cells"]
        self.netnames = self.module["netnames"]
        # Net bit -> names that the Amaranth design gave it. Amaranth marks its signals with
        # their source location in a .py file; Yosys' names for the nets it makes (``autoname``:
        # ``<net>_<cell type>_<port>...``) point (also) into its own cell library.
        self._names = defaultdict(list)
        for name, net in self.netnames.items():
            locations = net["attributes"].get("src", "").split("|")
            if not all(_is_python(location) for location in locations):
                continue
            signal = self._signal(name, net["attributes"].get("hdlname"))
            for index, bit in enumerate(net["bits"]):
                if isinstance(bit, int):   # not a constant "0", "1" or "x"
                    bit_name = name if len(net["bits"]) == 1 else f"{name}[{index}]"
                    self._names[bit].append((self._short(_bracketed(bit_name)), signal))

        # For the flip-flops that Yosys adds at a block RAM: the memory whose RAM cell reads a
        # net bit.
        self._ram_input = {}
        for name, cell in self.cells.items():
            memory = self.memory_name(name)
            if memory:
                for port, bits in cell["connections"].items():
                    if cell["port_directions"][port] == "input":
                        self._ram_input.update((b, memory) for b in bits if isinstance(b, int))

    def _short(self, name):
        return name[len(self.prefix):] if name.startswith(self.prefix) else name

    def _signal(self, name, hdlname):
        """The whole Amaranth signal that a net (maybe a struct field) is part of."""
        # hdlname is the hierarchy path, space-separated: "compressor l1 fwd_row.ways[0].sum";
        # the top module's own wires (the flat ports) have none.
        path = _bracketed(hdlname).split(" ") if hdlname else [_bracketed(name)]
        path[-1] = re.split(r"[.\[]", path[-1])[0]
        return self._short(".".join(path))

    def cell_counts(self):
        """Number of cells of each type in :data:`ECP5_CELLS` (0 for none)."""
        counts = Counter(cell["type"] for cell in self.cells.values())
        return {kind: counts.get(kind, 0) for kind in ECP5_CELLS}

    def signal_names(self, bit):
        """The Amaranth names of a net bit, most specific (struct field) first."""
        names = [name for name, _ in self._names.get(bit, [])]
        return sorted(names, key=lambda name: (-name.count("."), name))

    def signal_name(self, bit):
        """The whole Amaranth signal a net bit belongs to (``l1.fwd_row``), or None."""
        names = self._names.get(bit)
        if not names:
            return None
        # A bit has a name in every module it passes through: take the innermost (the module
        # that makes it; ``writeback.read__data`` rather than the top's ``dram_value``).
        return max((signal for _, signal in names), key=lambda s: (s.count("."), -len(s)))

    def net_bit(self, name):
        """The net bit that nextpnr calls ``name`` (``net`` or ``net[3]``), or None.

        nextpnr names the nets it reads from the JSON ``name`` (one bit) or ``name[i]``; nets
        that it makes itself (clock buffers, I/O, carry chain feed-through) are not found.
        """
        if name in self.netnames and len(self.netnames[name]["bits"]) == 1:
            bit = self.netnames[name]["bits"][0]
        else:
            base, bracket, index = name.rpartition("[")
            net = self.netnames.get(base)
            if not bracket or net is None or not index.rstrip("]").isdigit():
                return None
            bit = net["bits"][int(index.rstrip("]")) - net.get("offset", 0)]
        return bit if isinstance(bit, int) else None

    def cell_source(self, name):
        """Where in the design's source a cell comes from (``l1.py:178 hit_sum.eq(...)``).

        Yosys keeps the source of carry chains; lookup tables made by ABC have none, and that
        of a flip-flop is where its signal is declared (see :meth:`register_name`). Returns
        None for those, for a cell whose source is only in Amaranth's own library, and for one
        that nextpnr made.
        """
        cell = self.cells.get(name)
        if cell is None or cell["type"] == "TRELLIS_FF":
            return None
        locations = cell["attributes"].get("src", "").split("|")
        location = next((location for location in locations if _is_python(location)
                         and not location.startswith(AMARANTH)), None)
        if not location:
            return None
        path, _, line = location.rpartition(":")
        line = line.split(".")[0]
        text = linecache.getline(path, int(line)).strip().rstrip(",:") if line.isdigit() else ""
        return f"{pathlib.Path(path).name}:{line}" + (f" {text}" if text else "")

    def register_name(self, cell_name):
        """What a flip-flop holds: its Amaranth signal (``l1.s1``) or, for one that Yosys added
        at a block RAM, which (see :meth:`flip_flops_by_signal`); None for any other cell."""
        cell = self.cells.get(cell_name)
        if cell is None or cell["type"] != "TRELLIS_FF":
            return None
        q, d = cell["connections"]["Q"][0], cell["connections"]["DI"][0]
        if self.signal_name(q):
            return self.signal_name(q)
        if q in self._ram_input:
            return f"{self._ram_input[q]} (RAM input register, added by Yosys)"
        if d in self._ram_input:
            return f"{self._ram_input[d]} (copy of the RAM's write data, added by Yosys)"
        return None

    def memory_name(self, cell_name):
        """The Amaranth memory a RAM cell belongs to (``l1.storage``), or None.

        Yosys names the RAM cells of a memory ``<memory>.<i>.<j>``.
        """
        cell = self.cells.get(cell_name)
        if cell is None or cell["type"] not in ("TRELLIS_DPR16X4", "DP16KD"):
            return None
        return self._short(cell_name.rsplit(".", 2)[0])

    def flip_flops_by_signal(self):
        """Flip-flops grouped by the Amaranth signal they hold, largest group first.

        Flip-flops that Yosys added have no Amaranth name. When it maps a memory to block RAM
        and the RAM cannot give the memory's read-during-write behaviour by itself, Yosys
        may register the RAM's inputs (the write is made a cycle later) and keeps a copy of the
        RAM's write data to bypass the RAM on a read of the row being written. Those are
        counted as ``"<memory> (RAM input register, added by Yosys)"`` and ``"<memory> (copy of
        the RAM's write data, added by Yosys)"``; any other as ``"(unnamed)"``.

        Returns
        -------
        dict
            ``{group: count}``.
        """
        groups = Counter(self.register_name(name) or "(unnamed)"
                         for name, cell in self.cells.items() if cell["type"] == "TRELLIS_FF")
        return dict(groups.most_common())

    def arcs(self):
        """Every cell's arcs from an input bit to an output bit, flip-flops and memories
        included: ``(input bit, output bit, through_state)``, ``through_state`` True where the
        input acts only at the clock edge (see ``SEQUENTIAL_ARCS``)."""
        for cell in self.cells.values():
            directions = cell.get("port_directions", {})
            combinational = SEQUENTIAL_ARCS.get(cell["type"])
            outputs = [port for port, d in directions.items() if d == "output"]
            for port, bits in cell["connections"].items():
                if directions.get(port) != "input":
                    continue
                for out in outputs:
                    through_state = combinational is not None and \
                        out not in combinational.get(port, [])
                    for a in bits:
                        for b in cell["connections"][out]:
                            if isinstance(a, int) and isinstance(b, int):
                                yield a, b, through_state

    def combinational_io_paths(self):
        """Outputs of the top module reachable from inputs through combinational logic only.

        A walk over the netlist from each input port's bits, through the combinational arcs of
        every cell (:meth:`arcs`).

        Returns
        -------
        dict
            ``{output port: sorted list of input ports}``, only outputs that have such a path.
        """
        readers = defaultdict(list)   # net bit -> output bits of the cells it reaches at once
        for a, b, through_state in self.arcs():
            if not through_state:
                readers[a].append(b)
        ports = self.module["ports"]
        output_of = {bit: name for name, port in ports.items() if port["direction"] == "output"
                     for bit in port["bits"] if isinstance(bit, int)}
        paths = defaultdict(set)
        for name, port in ports.items():
            if port["direction"] != "input":
                continue
            seen = set()
            frontier = [bit for bit in port["bits"] if isinstance(bit, int)]
            while frontier:
                bit = frontier.pop()
                if bit in seen:
                    continue
                seen.add(bit)
                if bit in output_of:
                    paths[output_of[bit]].add(name)
                frontier.extend(readers[bit])
        return {output: sorted(inputs) for output, inputs in sorted(paths.items())}


def _is_python(location):
    """Whether a Yosys source location (``path:line`` or ``path:l.c-l.c``) is a .py file."""
    return location.rpartition(":")[0].endswith(".py")


def _bracketed(name):
    """A net's name as the design has it: the angle brackets that ``synth.flow.unbracket_names``
    put in its element names made brackets again (``l1.s3_new_sums<0>`` is
    ``l1.s3_new_sums[0]``)."""
    return name.replace("<", "[").replace(">", "]")
