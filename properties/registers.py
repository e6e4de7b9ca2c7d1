"""The register interface's contract (:class:`design.registers.RegisterFile`), stated on the
register file alone and proven in its own harness (:mod:`.component`), every input free.

``registers``:

* AXI4-Lite's handshakes: a write's address and data are taken together, whenever both are
  offered and no response is waiting (and only then); a read whenever it is offered and no
  read data is waiting; the response (``BVALID``) comes the cycle after a write is taken, and
  only then, and is held, unchanged, until taken; likewise a read's data (``RVALID``) the cycle
  after a read is taken, held, unchanged, until taken;
* the responses: ``SLVERR`` for an address that holds no register (the map's offsets, decoded
  here from the byte address with the low two bits ignored), else ``OKAY``;
* a write lands only in its field: every ``rw`` field equals what the writes to its register
  put in its bits, byte by byte as ``WSTRB`` selects (0 after reset);
* a read returns what was written or counted: the data of a read is its register's word as it
  was when the read was taken: the ``rw`` fields as written, the ``ro`` fields the values of
  their members then, bits no field holds 0, a signed member's sign above its top bit.
"""

from amaranth import *

from types import SimpleNamespace

from gradient_compressor.design.params import port
from gradient_compressor.design.registers import OKAY, SLVERR

from .base import past

__all__ = ["contract", "covers", "joined"]


def _decode(r, address):
    """``{register name: address is in its word}``, and whether no register is there."""
    hits = {reg.name: (address & ~3) == reg.offset for reg in r.registers}
    return hits, ~Cat(*hits.values()).any()


def contract(m, P, r):
    write = r.awvalid & r.awready & r.wvalid & r.wready
    read = r.arvalid & r.arready
    shadows = _written(m, r, write)
    _write_channel(m, P, r, write)
    _read_channel(m, P, r, read, shadows)
    P.check("registers", "every_field_holds_what_was_written_to_it",
            Cat(getattr(r, f.member) == shadow for f, shadow in shadows.items()).all())


def _written(m, r, write):
    """``{rw field: what the writes put in it}``, kept bit by bit from the write channel."""
    hits, _ = _decode(r, r.awaddr)
    shadows = {}
    for reg in r.registers:
        for f in reg.fields:
            if f.access != "rw":
                continue
            shadow = Signal(f.width, name=f"written_{f.member}")
            with m.If(write & hits[reg.name]):
                for i in range(f.width):
                    bit = f.lsb + i
                    with m.If(r.wstrb[bit // 8]):
                        m.d.sync += shadow[i].eq(r.wdata[bit])
            shadows[f] = shadow
    return shadows


def _write_channel(m, P, r, write):
    _, unmapped = _decode(r, r.awaddr)
    wrote = past(m, write, "axi_write_taken")
    wrote_unmapped = past(m, write & unmapped, "axi_write_unmapped")
    held = past(m, r.bvalid & ~r.bready, "axi_bresp_waiting")
    bresp = past(m, r.bresp, "axi_bresp")
    P.check("registers", "address_and_data_taken_together", r.awready == r.wready)
    P.check("registers", "write_taken_whenever_offered_and_no_response_waits",
            r.awready == (r.awvalid & r.wvalid & ~r.bvalid))
    P.check("registers", "no_write_taken_while_a_response_waits", ~(r.bvalid & r.awready))
    P.check("registers", "write_response_the_cycle_after_a_write_and_only_then",
            r.bvalid == (wrote | held))
    P.check("registers", "write_response_held_unchanged_until_taken",
            ~held | (r.bresp == bresp))
    P.check("registers", "write_response_slverr_exactly_for_an_address_without_a_register",
            ~wrote | (r.bresp == Mux(wrote_unmapped, SLVERR, OKAY)))


def _read_channel(m, P, r, read, shadows):
    hits, unmapped = _decode(r, r.araddr)
    expected = Signal(32, name="axi_read_expected")
    expected_resp = Signal(2, name="axi_rresp_expected")
    with m.If(read):
        m.d.sync += [expected.eq(0), expected_resp.eq(Mux(unmapped, SLVERR, OKAY))]
        for reg in r.registers:
            with m.If(hits[reg.name]):
                m.d.sync += expected.eq(_word(r, reg, shadows))
    took = past(m, read, "axi_read_taken")
    held = past(m, r.rvalid & ~r.rready, "axi_rdata_waiting")
    P.check("registers", "no_read_taken_while_data_waits", ~(r.rvalid & r.arready))
    P.check("registers", "read_taken_whenever_offered_and_no_data_waits",
            r.arready == (r.arvalid & ~r.rvalid))
    P.check("registers", "read_data_the_cycle_after_a_read_and_only_then",
            r.rvalid == (took | held))
    P.check("registers", "read_returns_the_register_as_it_was_when_taken",
            ~r.rvalid | ((r.rdata == expected) & (r.rresp == expected_resp)))


def _word(r, reg, shadows):
    """``reg``'s word, built here bit by bit: ``rw`` fields as written, ``ro`` fields from
    their members now, a signed member's top bit repeated above it, 0 elsewhere."""
    bits = [Const(0, 1)] * 32
    for f in reg.fields:
        value = shadows[f] if f.access == "rw" else \
            Value.cast(getattr(r, f.member))[f.member_lsb:f.member_lsb + f.width]
        for i in range(f.width):
            bits[f.lsb + i] = value[i]
        if f.access == "ro" and f.extends:
            for i in range(f.lsb + f.width, 32):
                bits[i] = value[f.width - 1]
    return Cat(*bits)


def covers(m, P, r):
    read_back = past(m, r.rvalid & r.rready & (r.rresp == OKAY) & (r.rdata != 0),
                     "axi_nonzero_read")
    P.cover("a_nonzero_word_read_back", read_back)
    P.cover("a_write_with_some_bytes_strobed",
            r.awvalid & r.awready & (r.wstrb != 0) & (r.wstrb != 0b1111))
    P.cover("an_address_without_a_register_answered",
            r.bvalid & (r.bresp == SLVERR))


def joined(m, P, top):
    """``registers_join``: the register file joined to the compressor
    (:class:`design.registers.CompressorWithRegisters`, component ``registers_joined``). The
    register file alone is proven to hold in each ``rw`` field what the writes put in it
    (``registers``); here, at the top's own AXI ports: every compressor input a ``rw`` field
    drives holds, in that field's bits, what the writes put in them (the LFSR's seed and its
    load among them: an input left unwired fails it), and every ``ro`` member the register
    file reads is the compressor's output of that name."""
    r, c = top.registers, top.compressor
    write = top.awvalid & top.awready & top.wvalid & top.wready
    axi = SimpleNamespace(registers=r.registers, awaddr=top.awaddr, wstrb=top.wstrb,
                          wdata=top.wdata)
    shadows = _written(m, axi, write)
    inputs, outputs = [], []
    for reg in r.registers:
        for f in reg.fields:
            if f.access == "rw":
                bits = Value.cast(port(c, f.member))[f.member_lsb:f.member_lsb + f.width]
                inputs.append(bits == shadows[f])
            else:
                outputs.append(Value.cast(port(r, f.member)) == Value.cast(port(c, f.member)))
    P.check("registers_join", "compressor_inputs_hold_what_was_written_to_their_fields",
            Cat(inputs).all())
    P.check("registers_join", "register_file_reads_the_compressor_outputs", Cat(outputs).all())
