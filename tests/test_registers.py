"""The AXI4-Lite register interface: its map, the compressor behind it in simulation, the
map's writers and the Verilog export. (Its contract is proven alone: properties/registers.py,
jobs ``registers-*``.)"""

import json
import subprocess
import sys

import pytest
from amaranth.sim import Simulator

from amaranth.hdl import Shape

from gradient_compressor.design.compressor import signature
from gradient_compressor.design.registers import (OKAY, SLVERR, CompressorWithRegisters,
                                                  main as registers_main, register_map)

SMALL = dict(addr_width=8, grad_width=8, sets=4, ways=2, max_updates=3, fifo_depth=4,
             burst_size=2)
LIMIT = 200     # cycles any handshake may take


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
    from pathlib import Path
    import io
    import contextlib
    text = io.StringIO()
    with contextlib.redirect_stdout(text):
        registers_main(["--format", "md"])
    committed = Path(__file__).resolve().parent.parent / "docs" / "registers.md"
    assert committed.read_text() == text.getvalue()


def test_verilog_export_with_registers(tmp_path):
    from gradient_compressor.design.verilog import main as export
    out = tmp_path / "top.v"
    export(["--registers", "-o", str(out), "--sets", "4", "--ways", "2", "--fifo-depth", "4",
            "--burst-size", "2"])
    text = out.read_text()
    for port in ("s_axi_awaddr", "s_axi_rdata", "s_axi_bresp", "in_valid", "dram_value"):
        assert port in text
    assert "small_threshold" not in text.split(");")[0]     # settings only by register
