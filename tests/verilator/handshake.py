"""What both cocotb testbenches do on the compressor's flat ports: offer an input until it is
taken, and raise ``flush`` until ``idle``. A testbench here is an object with ``dut``,
``cycle`` and ``async step()``, which runs one cycle and returns whether the input offered
was taken."""

from cocotb.triggers import Timer


async def offer(bench, what, limit):
    """Hold ``in_valid`` (its payload set by the caller) until the input is taken; fail
    naming ``what`` after ``limit`` cycles."""
    bench.dut.in_valid.value = 1
    for _ in range(limit):
        if await bench.step():
            bench.dut.in_valid.value = 0
            return
    raise AssertionError(f"cycle {bench.cycle}: {what} not taken within {limit} cycles")


async def flush(bench, limit, hold):
    """Raise ``flush`` until ``idle`` (within ``limit`` cycles), keep it ``hold`` cycles more
    (``idle`` must stay high), then drop it."""
    dut = bench.dut
    dut.flush.value = 1
    for _ in range(limit):
        await Timer(1, unit="ns")
        if dut.idle.value:
            break
        await bench.step()
    else:
        raise AssertionError(f"cycle {bench.cycle}: not idle within {limit} cycles of flush")
    for _ in range(hold):
        await bench.step()
        await Timer(1, unit="ns")
        assert dut.idle.value, f"cycle {bench.cycle}: idle fell while flush was high"
    dut.flush.value = 0
