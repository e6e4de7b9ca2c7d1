"""The AXI4-Lite register interface: its map, the compressor behind it in simulation, the
map's writers and the Verilog export. (Its contract is proven alone: properties/registers.py,
jobs ``registers-*``.)"""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from amaranth import ClockDomain, Module
from amaranth.sim import Simulator

from amaranth.hdl import Shape

from gradient_compressor.design.compressor import signature
from gradient_compressor.design.registers import (OKAY, SLVERR, CompressorWithRegisters,
                                                  main as registers_main, register_map)

SMALL = dict(addr_width=8, grad_width=8, sets=4, ways=2, max_updates=3, fifo_depth=4,
             burst_size=2)
LIMIT = 200     # cycles any handshake may take
DOCS = Path(__file__).resolve().parent.parent / "docs"
#: The register map as specified, kept by hand: the design's map and the docs' table are
#: checked against it, never it made from them.
SPECIFIED_MAP = DOCS / "registers.json"


def offsets(params=SMALL):
    return {r.name: r.offset for r in register_map(signature(**params))}


@pytest.mark.parametrize("windows", [0, 2, 8])
def test_map_reaches_every_setting_and_shows_every_status(windows):
    from gradient_compressor.design.params import port_name
    sig = signature(bypass_windows=windows)
    registers = register_map(sig)
    assert len({r.offset for r in registers}) == len(registers)
    assert all(r.offset % 4 == 0 and r.offset < 256 for r in registers)
    for r in registers:
        bits = [b for f in r.fields for b in range(f.lsb, f.lsb + f.width)]
        assert len(bits) == len(set(bits)) and max(bits) < 32, r.name
    written = {f.member for r in registers for f in r.fields if f.access == "rw"}
    shown = {f.member for r in registers for f in r.fields if f.access == "ro"}
    inputs = {port_name(path) for path, member, _ in sig.flatten(sig.create())
              if member.flow.name == "In" and path[0] not in ("grad_in", "dram_out")}
    assert written == inputs                 # every setting, the flush barrier included
    assert sum(name.startswith("BYPASS") for name in (r.name for r in registers)) == 2 * windows
    assert {"idle", "accepted_count", "dram_write_count", "discard_count", "discard_sum",
            "l1_valid_count", "l2_level", "current_threshold"} <= shown


async def until_taken(ctx, ready, what):
    """Tick until ``ready`` is high in a cycle (the offer is taken at its end)."""
    for _ in range(LIMIT):
        taken = ctx.get(ready)
        await ctx.tick()
        if taken:
            return
    raise AssertionError(f"{what} not taken")


async def axi_write(ctx, dut, address, data, strobes=0b1111):
    ctx.set(dut.awaddr, address)
    ctx.set(dut.wdata, data)
    ctx.set(dut.wstrb, strobes)
    ctx.set(dut.awvalid, 1)
    ctx.set(dut.wvalid, 1)
    await until_taken(ctx, dut.awready, "write")
    ctx.set(dut.awvalid, 0)
    ctx.set(dut.wvalid, 0)
    ctx.set(dut.bready, 1)
    for _ in range(LIMIT):
        if ctx.get(dut.bvalid):
            response = ctx.get(dut.bresp)
            await ctx.tick()
            ctx.set(dut.bready, 0)
            return response
        await ctx.tick()
    raise AssertionError("no write response")


async def axi_read(ctx, dut, address):
    ctx.set(dut.araddr, address)
    ctx.set(dut.arvalid, 1)
    await until_taken(ctx, dut.arready, "read")
    ctx.set(dut.arvalid, 0)
    ctx.set(dut.rready, 1)
    for _ in range(LIMIT):
        if ctx.get(dut.rvalid):
            data, response = ctx.get(dut.rdata), ctx.get(dut.rresp)
            await ctx.tick()
            ctx.set(dut.rready, 0)
            return data, response
        await ctx.tick()
    raise AssertionError("no read data")


def test_compressor_driven_through_its_registers():
    dut = CompressorWithRegisters(**SMALL)
    regs = offsets()
    seen = {}

    async def bench(ctx):
        ctx.set(dut.dram_out.ready, 1)
        # A strobed write takes only its bytes; an address without a register: SLVERR.
        assert await axi_write(ctx, dut, regs["THRESHOLD"], 0x1234, strobes=0b0001) == OKAY
        assert await axi_read(ctx, dut, regs["THRESHOLD"]) == (0x34, OKAY)
        assert await axi_write(ctx, dut, 0xFC, 1) == SLVERR
        assert (await axi_read(ctx, dut, 0xFC))[1] == SLVERR
        # Threshold 0: every gradient written through as it is.
        assert await axi_write(ctx, dut, regs["THRESHOLD"], 0) == OKAY
        for i in range(5):
            ctx.set(dut.grad_in.payload.addr, i)
            ctx.set(dut.grad_in.payload.grad, i + 1)
            ctx.set(dut.grad_in.valid, 1)
            await until_taken(ctx, dut.grad_in.ready, "gradient")
        ctx.set(dut.grad_in.valid, 0)
        # The flush barrier, by register; wait for idle, by register.
        assert await axi_write(ctx, dut, regs["CONTROL"], 1) == OKAY
        for _ in range(LIMIT):
            status, _ = await axi_read(ctx, dut, regs["STATUS"])
            if status & 1:
                break
        else:
            raise AssertionError("never idle")
        seen["accepted"] = (await axi_read(ctx, dut, regs["ACCEPTED_COUNT"]))[0]
        seen["written"] = (await axi_read(ctx, dut, regs["DRAM_WRITE_COUNT"]))[0]
        seen["control"] = (await axi_read(ctx, dut, regs["CONTROL"]))[0]

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert seen == {"accepted": 5, "written": 5, "control": 1}


def test_discard_sum_reads_sign_extended():
    # DISCARD_SUM_HI holds the bits above 32 of a grad_width + 33-bit signed value: a
    # negative sum reads all ones above its top bit.
    sig = signature()
    [hi] = [r for r in register_map(sig) if r.name == "DISCARD_SUM_HI"]
    [field] = hi.fields
    width = Shape.cast(sig.members["discard_sum"].shape).width
    assert field.extends and field.width == width - 32 < 32


@pytest.mark.parametrize("fmt", ["md", "json", "h"])
def test_map_written_as_markdown_json_and_c_header(fmt, tmp_path):
    out = tmp_path / f"map.{fmt}"
    assert registers_main(["--format", fmt, "-o", str(out)]) == 0
    text = out.read_text()
    assert "THRESHOLD" in text and "DISCARD_SUM_HI" in text
    if fmt == "json":
        data = json.loads(text)
        assert {r["name"] for r in data["registers"]} >= {"CONTROL", "STATUS"}
    if fmt == "h":
        assert "#define GC_THRESHOLD_OFFSET 0x04u" in text


def test_map_command_bad_input():
    done = subprocess.run([sys.executable, "-m", "gradient_compressor.design.registers",
                           "-o", "/proc/x.md"], capture_output=True, text=True)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines() == [
        "python -m gradient_compressor.design.registers: error: -o /proc/x.md: cannot write it "
        + done.stderr.split("cannot write it ")[1].strip()]


def test_committed_register_map_is_current():
    # docs/registers.md is made by the command; a change of the map must regenerate it.
    import io
    import contextlib
    text = io.StringIO()
    with contextlib.redirect_stdout(text):
        registers_main(["--format", "md"])
    assert (DOCS / "registers.md").read_text() == text.getvalue()


def bit_range(bits):
    """``(lsb, width)`` of a field's bits, written ``"msb:lsb"`` or ``"bit"``."""
    msb, _, lsb = bits.partition(":")
    return int(lsb or msb), int(msb) - int(lsb or msb) + 1


def specified_map():
    """The specified map (``docs/registers.json``): the configuration it is for, and a row
    ``(register, offset, field, lsb, width, access, reset)`` per field, in the order of the
    offsets."""
    spec = json.loads(SPECIFIED_MAP.read_text())
    rows = [(r["name"], int(r["offset"], 16), f["name"], *bit_range(f["bits"]), f["access"],
             f["reset"]) for r in spec["registers"] for f in r["fields"]]
    return spec["configuration"], rows


def test_register_map_is_the_specified_one():
    """The register proofs read the design's map, so two registers swapped in it would agree
    with themselves: the map is compared, field by field, with the one specified."""
    configuration, specified = specified_map()
    design = [(r.name, r.offset, f.name, f.lsb, f.width, f.access)
              for r in register_map(signature(**configuration)) for f in r.fields]
    assert design == [row[:6] for row in specified]


def test_register_table_in_the_docs_is_the_specified_one():
    _, specified = specified_map()
    text = (DOCS / "registers.md").read_text()
    rows, register = [], None
    for line in text.splitlines():
        cells = re.match(r"\| (0x[0-9A-F]+) \| (\w*) \| ([\d:]+) \| `(.+?)` \| (\w+) \|", line)
        if cells:
            offset, name, bits, field, access = cells.groups()
            register = name or register             # a register's further fields leave it out
            rows.append((register, int(offset, 16), field, *bit_range(bits), access))
    assert rows == [row[:6] for row in specified]
    # The table has no reset column: the text states the reset of the rw fields.
    assert "Every `rw` field is 0 after reset." in text
    assert {reset for *_, access, reset in specified if access == "rw"} == {0}


def test_registers_read_their_specified_reset_values():
    """Each register, read right after a reset (while L1 clears its SRAM), reads as the
    specified reset values of its fields, at its specified offset."""
    configuration, specified = specified_map()
    dut = CompressorWithRegisters(**configuration)
    m = Module()
    m.submodules.dut = dut
    sync = m.domains.sync = ClockDomain("sync")
    expected = {}
    for _, offset, _, lsb, _, _, reset in specified:
        expected[offset] = expected.get(offset, 0) | reset << lsb
    read = {}

    async def bench(ctx):
        for offset in expected:
            ctx.set(sync.rst, 1)
            await ctx.tick()
            ctx.set(sync.rst, 0)
            read[offset], response = await axi_read(ctx, dut, offset)
            assert response == OKAY, f"{offset:#04x}"

    sim = Simulator(m)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert read == expected
