"""The compressor's register interface: an AXI4-Lite slave holding the run-time settings
(threshold, modes, LFSR seed, flush) and reading back the counters and the status.

The register map is data (:func:`register_map`): each register is a 32-bit word at a
word-aligned offset, holding named fields; each field is a member of
:class:`~design.GradientCompressor`, written (``rw``: the register drives that input) or read
(``ro``: the register shows that output, or 32 bits of it), with its width taken from the
compressor's signature. :class:`RegisterFile` implements any such map;
:class:`CompressorWithRegisters` wires one to a compressor.

    python -m gradient_compressor.design.registers [--format md|json|h] [-o FILE]
        [--addr-width N] [--grad-width N] [--bypass-windows N]

writes the map as Markdown, JSON or a C header.

AXI4-Lite, 32-bit data: a write is taken when its address and data are both offered (``AWREADY``
and ``WREADY`` rise together) and no write response is waiting; ``WSTRB`` selects the bytes
written; the response (``BRESP``: ``OKAY``, or ``SLVERR`` for an address that holds no register)
is offered the cycle after and held until taken. A read is taken when no read data is
waiting; its data (``RRESP`` likewise) is offered the cycle after, held until taken. Bits that
no field holds read as 0 and ignore writes. ``AWPROT`` and ``ARPROT`` are not used.
"""

import json
import sys
from dataclasses import dataclass

from amaranth import *
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .compressor import GradientCompressor, signature as compressor_signature
from .params import BYPASS_WINDOWS_MAX, port, port_shapes

__all__ = ["Field", "Register", "register_map", "member_shapes", "RegisterFile",
           "CompressorWithRegisters", "OKAY", "SLVERR", "ADDR_BITS", "render_markdown",
           "render_json", "render_c_header"]

#: AXI responses.
OKAY, SLVERR = 0b00, 0b10
#: Width of the register address (bytes): 64 words.
ADDR_BITS = 8


@dataclass(frozen=True)
class Field:
    """A field of a register: bits ``lsb .. lsb + width - 1`` of the word hold bits
    ``member_lsb ..`` of the compressor's member ``member`` (``member_width`` bits); a
    ``signed`` member's top bit, if the field holds it, fills the word's bits above."""
    member: str
    lsb: int
    width: int
    access: str          # "rw" (drives the member, an input) or "ro" (shows it, an output)
    member_lsb: int = 0
    member_width: int = None
    signed: bool = False

    @property
    def name(self):
        if self.member_lsb == 0 and self.width == self.member_width:
            return self.member
        return f"{self.member}[{self.member_lsb + self.width - 1}:{self.member_lsb}]"

    @property
    def extends(self):
        """The field holds its signed member's top bit: the word's bits above are its sign."""
        return self.signed and self.member_lsb + self.width == self.member_width


@dataclass(frozen=True)
class Register:
    name: str
    offset: int
    fields: tuple
    doc: str

    @property
    def access(self):
        kinds = {f.access for f in self.fields}
        return kinds.pop() if len(kinds) == 1 else "mixed"


# (register, offset, [(member, lsb in the word, access, lsb in the member)], what it is)
_LAYOUT = [
    ("CONTROL", 0x00, [("flush", 0, "rw", 0), ("lfsr_load", 1, "rw", 0),
                       ("stochastic", 2, "rw", 0), ("ema_enable", 3, "rw", 0),
                       ("ema_per_step", 4, "rw", 0)],
     "the flush barrier (a level), the LFSR seed's load (taken while idle), the modes' "
     "switches, each bypass window's enable"),
    ("THRESHOLD", 0x04, [("threshold", 0, "rw", 0)], "the threshold a gradient is judged by"),
    ("SMALL_THRESHOLD", 0x08, [("small_threshold", 0, "rw", 0)],
     "the dual threshold (0: off)"),
    ("EMA_SETTINGS", 0x0C, [("ema_shift", 0, "rw", 0), ("ema_scale", 8, "rw", 0)],
     "the EMA's update shift and its scale (4 fraction bits)"),
    ("EMA_MIN", 0x10, [("ema_min", 0, "rw", 0)], "the EMA threshold's lower bound"),
    ("EMA_MAX", 0x14, [("ema_max", 0, "rw", 0)], "the EMA threshold's upper bound"),
    ("LFSR_SEED", 0x28, [("lfsr_seed", 0, "rw", 0)], "the LFSR's seed (0 loads 1)"),
    ("STATUS", 0x40, [("idle", 0, "ro", 0), ("burst_active", 1, "ro", 0)],
     "idle (nothing accepted inside; under flush: the barrier is complete), L2 in a burst"),
    ("L1_VALID_COUNT", 0x44, [("l1_valid_count", 0, "ro", 0)], "L1 entries held"),
    ("L2_LEVEL", 0x48, [("l2_level", 0, "ro", 0)], "writes held in L2"),
    ("CURRENT_THRESHOLD", 0x4C, [("current_threshold", 0, "ro", 0)],
     "the threshold in force three cycles before"),
    ("EMA_AVERAGE", 0x50, [("ema_average", 0, "ro", 0)], "the EMA of |g| (8 fraction bits)"),
    ("ACCEPTED_COUNT", 0x54, [("accepted_count", 0, "ro", 0)], "gradients accepted (mod 2^32)"),
    ("DRAM_WRITE_COUNT", 0x58, [("dram_write_count", 0, "ro", 0)],
     "DRAM writes taken (mod 2^32)"),
    ("DISCARD_COUNT", 0x5C, [("discard_count", 0, "ro", 0)], "the step's accounted discards"),
    ("DISCARD_SUM_LO", 0x60, [("discard_sum", 0, "ro", 0)],
     "the step's discarded mass (signed), its low 32 bits ..."),
    ("DISCARD_SUM_HI", 0x64, [("discard_sum", 0, "ro", 32)],
     "... and the bits above, sign-extended to 32"),
]
#: Bypass window ``i`` (:data:`~design.params.BYPASS_WINDOWS_MAX` of them at most): its enable
#: is CONTROL's bit ``WINDOW_ENABLE_LSB + i``; its base and limit are the words at
#: ``WINDOWS_OFFSET + 8 * i`` and 4 above.
WINDOW_ENABLE_LSB, WINDOWS_OFFSET = 5, 0x80


def _layout(windows):
    """:data:`_LAYOUT` with ``windows`` bypass windows, in the order of their offsets."""
    layout = [(name, offset, list(fields), doc) for name, offset, fields, doc in _LAYOUT]
    layout[0][2].extend((f"bypass__{i}__enable", WINDOW_ENABLE_LSB + i, "rw", 0)
                        for i in range(windows))
    for i in range(windows):
        base = WINDOWS_OFFSET + 8 * i
        layout += [(f"BYPASS{i}_BASE", base, [(f"bypass__{i}__base", 0, "rw", 0)],
                    f"bypass window {i}'s first address"),
                   (f"BYPASS{i}_LIMIT", base + 4, [(f"bypass__{i}__limit", 0, "rw", 0)],
                    f"bypass window {i}'s last address")]
    return layout


def member_shapes(signature):
    """``{port name: shape}`` of the plain members (not the streams) of a compressor's
    ``signature`` (:func:`design.compressor.signature`), the bypass windows' by their port
    names (:func:`design.params.port_name`)."""
    streams = {"grad_in", "dram_out"}
    return {name: shape for name, shape in port_shapes(signature).items()
            if name.split("__")[0] not in streams}


def register_map(signature):
    """The registers of a compressor of ``signature`` (:func:`design.compressor.signature`,
    or a :class:`~design.GradientCompressor`'s): each field as wide as its member (at most 32
    bits of it)."""
    members = member_shapes(signature)
    windows = signature.members["bypass"].dimensions[0] if "bypass" in signature.members else 0
    registers = []
    for name, offset, fields, doc in _layout(windows):
        placed = []
        for member, lsb, access, member_lsb in fields:
            shape = Shape.cast(members[member])
            total = shape.width
            width = min(total - member_lsb, 32 - lsb)
            if width <= 0:
                continue
            if access == "rw" and width < total:
                raise ValueError(f"register {name}: {member} has {total} bits, more than the "
                                 f"{32 - lsb} its field can hold")
            placed.append(Field(member, lsb, width, access, member_lsb, total, shape.signed))
        if placed:
            registers.append(Register(name, offset, tuple(placed), doc))
    return registers


class RegisterFile(wiring.Component):
    """An AXI4-Lite slave implementing ``registers`` (:func:`register_map`).

    Members
    -------
    awaddr, awvalid, awready, wdata, wstrb, wvalid, wready, bresp, bvalid, bready, araddr,
    arvalid, arready, rdata, rresp, rvalid, rready
        The AXI4-Lite channels (``ADDR_BITS``-bit byte addresses, 32-bit data).
    <member> : ``Out`` for each ``rw`` field, ``In`` for each ``ro`` member
        The compressor's members, by name: a ``rw`` field drives its member (a register, 0
        after reset); a ``ro`` member is read.
    """

    def __init__(self, registers, shapes):
        self.registers = list(registers)
        members = {
            "awaddr": In(ADDR_BITS), "awvalid": In(1), "awready": Out(1),
            "wdata": In(32), "wstrb": In(4), "wvalid": In(1), "wready": Out(1),
            "bresp": Out(2), "bvalid": Out(1), "bready": In(1),
            "araddr": In(ADDR_BITS), "arvalid": In(1), "arready": Out(1),
            "rdata": Out(32), "rresp": Out(2), "rvalid": Out(1), "rready": In(1),
        }
        for register in self.registers:
            for field in register.fields:
                members[field.member] = (Out if field.access == "rw" else In)(shapes[field.member])
        super().__init__(members)

    def word(self, register):
        """``register``'s 32-bit word: each field's bits of its member in place."""
        word = Const(0, 32)
        for field in register.fields:
            bits = Value.cast(getattr(self, field.member))[field.member_lsb:][:field.width]
            if field.extends and field.lsb + field.width < 32:
                bits = Cat(bits, bits[-1].replicate(32 - field.lsb - field.width))
            word = word | (bits.as_unsigned() << field.lsb)
        return word[:32]

    def elaborate(self, platform):
        m = Module()
        self._write_channel(m)
        self._read_channel(m)
        return m

    def _decoded(self, address):
        """``{register: address names it}``, and whether the address names none."""
        hits = {r.name: (address[2:] == r.offset >> 2) for r in self.registers}
        return hits, ~Cat(*hits.values()).any()

    def _write_channel(self, m):
        take = Signal()
        m.d.comb += [take.eq(self.awvalid & self.wvalid & ~self.bvalid),
                     self.awready.eq(take), self.wready.eq(take)]
        hits, unmapped = self._decoded(self.awaddr)
        with m.If(take):
            m.d.sync += [self.bvalid.eq(1), self.bresp.eq(Mux(unmapped, SLVERR, OKAY))]
        with m.Elif(self.bready):  # mutation site: register-write-response
            m.d.sync += self.bvalid.eq(0)
        # Each field's bits follow the byte strobes of the word they sit in.
        mask = Cat(self.wstrb[i].replicate(8) for i in range(4))  # mutation site: register-strobes
        for register in self.registers:
            for field in register.fields:
                if field.access != "rw":
                    continue
                member = getattr(self, field.member)
                span = slice(field.lsb, field.lsb + field.width)
                with m.If(take & hits[register.name]):
                    m.d.sync += member.eq((member & ~mask[span]) |
                                          (self.wdata[span] & mask[span]))

    def _read_channel(self, m):
        take = Signal()
        m.d.comb += [take.eq(self.arvalid & ~self.rvalid), self.arready.eq(take)]
        hits, unmapped = self._decoded(self.araddr)
        with m.If(take):
            # mutation site: register-read-response
            m.d.sync += [self.rvalid.eq(1), self.rresp.eq(Mux(unmapped, SLVERR, OKAY)),
                         self.rdata.eq(0)]
            for register in self.registers:
                with m.If(hits[register.name]):  # mutation site: register-read-data
                    m.d.sync += self.rdata.eq(self.word(register))
        with m.Elif(self.rready):
            m.d.sync += self.rvalid.eq(0)


class CompressorWithRegisters(wiring.Component):
    """A :class:`~design.GradientCompressor` whose settings and status are reached through an
    AXI4-Lite :class:`RegisterFile` (:func:`register_map`): what an SoC integrator wires up.

    Parameters
    ----------
    **params
        The compressor's parameters.

    Members
    -------
    grad_in, dram_out
        The compressor's data streams.
    awaddr, ..., rready
        The register file's AXI4-Lite channels.
    """

    def __init__(self, **params):
        self.compressor = GradientCompressor(**params)
        self.registers = RegisterFile(register_map(self.compressor.signature),
                                      member_shapes(self.compressor.signature))
        own = self.compressor.signature.members
        ports = member_shapes(self.compressor.signature)
        super().__init__({
            "grad_in": own["grad_in"], "dram_out": own["dram_out"],
            **{name: member for name, member in self.registers.signature.members.items()
               if name not in ports},
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.compressor = c = self.compressor
        m.submodules.registers = r = self.registers
        wiring.connect(m, wiring.flipped(self.grad_in), c.grad_in)
        wiring.connect(m, c.dram_out, wiring.flipped(self.dram_out))
        compressor_ports = member_shapes(c.signature)
        for name, member in r.signature.members.items():
            if name in compressor_ports:             # a field: the register drives an input
                source, sink = (r, c) if member.flow == Out else (c, r)
                m.d.comb += port(sink, name).eq(port(source, name))  # mutation site: register-join
            elif member.flow == In:                  # an AXI input
                m.d.comb += getattr(r, name).eq(getattr(self, name))
            else:
                m.d.comb += getattr(self, name).eq(getattr(r, name))
        return m


def _bits(field):
    return (f"{field.lsb}" if field.width == 1 else f"{field.lsb + field.width - 1}:{field.lsb}")


def _configuration(params):
    return (f"addr_width {params['addr_width']}, grad_width {params['grad_width']}, "
            f"{params['bypass_windows']} bypass windows")


def render_markdown(registers, params):
    lines = ["# Register map", "",
             f"Made by `python -m gradient_compressor.design.registers --format md` for "
             f"{_configuration(params)}. AXI4-Lite, 32-bit "
             f"data, {ADDR_BITS}-bit byte addresses; an address that holds no register "
             f"answers SLVERR; bits no field holds read 0. Every `rw` field is 0 after reset. "
             f"Bypass window i (`--bypass-windows`, up to {BYPASS_WINDOWS_MAX}) has its base and "
             f"limit at 0x{WINDOWS_OFFSET:02X} + 8i and 4 above, its enable in CONTROL's bit "
             f"{WINDOW_ENABLE_LSB} + i.",
             "", "| offset | register | bits | field | access | what |",
             "| --- | --- | --- | --- | --- | --- |"]
    for r in registers:
        for i, f in enumerate(r.fields):
            doc = r.doc.replace("|", "\\|") if i == 0 else ""
            lines.append(f"| 0x{r.offset:02X} | {r.name if i == 0 else ''} | {_bits(f)} | "
                         f"`{f.name}` | {f.access} | {doc} |")
    return "\n".join(lines) + "\n"


def render_json(registers, params):
    return json.dumps({"params": params, "data_bits": 32, "addr_bits": ADDR_BITS,
                       "registers": [{"name": r.name, "offset": r.offset, "doc": r.doc,
                                      "fields": [{"name": f.name, "member": f.member,
                                                  "lsb": f.lsb, "width": f.width,
                                                  "access": f.access,
                                                  "member_lsb": f.member_lsb}
                                                 for f in r.fields]}
                                     for r in registers]}, indent=1) + "\n"


def render_c_header(registers, params):
    lines = ["/* Gradient compressor register map: made by "
             "`python -m gradient_compressor.design.registers --format h`",
             f" * for {_configuration(params)}. AXI4-Lite, 32-bit registers. */",
             "#ifndef GRADIENT_COMPRESSOR_REGS_H", "#define GRADIENT_COMPRESSOR_REGS_H", ""]
    for r in registers:
        lines.append(f"#define GC_{r.name}_OFFSET 0x{r.offset:02X}u  /* {r.access}: {r.doc} */")
        for f in r.fields:
            member = f.member.replace("__", "_").upper()
            stem = f"GC_{r.name}_{member}" + (f"_{f.member_lsb}" if f.member_lsb else "")
            lines.append(f"#define {stem}_SHIFT {f.lsb}u")
            lines.append(f"#define {stem}_MASK 0x{((1 << f.width) - 1) << f.lsb:08X}u")
        lines.append("")
    lines.append("#endif")
    return "\n".join(lines) + "\n"


RENDER = {"md": render_markdown, "json": render_json, "h": render_c_header}


def main(argv=None):
    from gradient_compressor.console import (ArgumentParser, file_name, integer,
                                             run_command)
    from .params import BYPASS_WINDOWS, DEFAULTS
    parser = ArgumentParser(prog="python -m gradient_compressor.design.registers",
                            description="Write the register map.")
    parser.add_argument("--format", choices=sorted(RENDER), default="md")
    parser.add_argument("-o", "--out", type=file_name, default=None, metavar="FILE",
                        help="write here (default: standard output)")
    parser.add_argument("--addr-width", type=integer, default=DEFAULTS["addr_width"])
    parser.add_argument("--grad-width", type=integer, default=DEFAULTS["grad_width"])
    parser.add_argument("--bypass-windows", type=integer, default=BYPASS_WINDOWS)
    return run_command(parser, _write_map, argv)


def _write_map(args):
    """The command, once parsed; its exit status."""
    from gradient_compressor.console import UsageError, check_writable, replacing
    from .params import Config
    params = {"addr_width": args.addr_width, "grad_width": args.grad_width,
              "bypass_windows": args.bypass_windows}
    try:
        registers = register_map(compressor_signature(Config(**params)))
    except (ValueError, TypeError) as error:   # a parameter, or a field the map cannot hold
        raise UsageError(error) from None
    text = RENDER[args.format](registers, params)
    if args.out is None:
        sys.stdout.write(text)
        return 0
    check_writable("-o", args.out)
    with replacing(args.out) as [part], open(part, "w") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
