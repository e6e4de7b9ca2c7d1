import random

from amaranth.sim import Simulator

from gradient_compressor.design import WritebackBuffer


def run(dut, testbench):
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(testbench)
    sim.run()


def test_burst_starts_at_burst_size_and_drains_to_empty():
    dut = WritebackBuffer(addr_width=8, grad_width=8, depth=8, burst_size=4)
    out = []

    async def testbench(ctx):
        ctx.set(dut.dram_out.ready, 1)
        for i in range(3):
            ctx.set(dut.push.valid, 1)
            ctx.set(dut.push.p.addr, i)
            ctx.set(dut.push.p.value, -i)
            await ctx.tick()
        ctx.set(dut.push.valid, 0)
        for _ in range(10):                      # 3 < burst_size: nothing goes out
            assert not ctx.get(dut.dram_out.valid)
            assert not ctx.get(dut.burst_active)
            await ctx.tick()
        assert ctx.get(dut.level) == 3
        ctx.set(dut.push.valid, 1)
        ctx.set(dut.push.p.addr, 3)
        ctx.set(dut.push.p.value, -3)
        await ctx.tick()
        ctx.set(dut.push.valid, 0)
        for _ in range(10):
            if ctx.get(dut.dram_out.valid):
                out.append((ctx.get(dut.dram_out.p.addr), ctx.get(dut.dram_out.p.value)))
            await ctx.tick()
        assert ctx.get(dut.level) == 0
        assert not ctx.get(dut.burst_active)

    run(dut, testbench)
    assert out == [(i, -i) for i in range(4)]


def test_flush_drains_a_partial_buffer():
    dut = WritebackBuffer(addr_width=8, grad_width=8, depth=8, burst_size=8)

    async def testbench(ctx):
        ctx.set(dut.dram_out.ready, 1)
        ctx.set(dut.push.valid, 1)
        ctx.set(dut.push.p.addr, 5)
        await ctx.tick()
        ctx.set(dut.push.valid, 0)
        await ctx.tick().repeat(5)
        assert ctx.get(dut.level) == 1
        ctx.set(dut.flush, 1)
        await ctx.tick().repeat(4)
        assert ctx.get(dut.level) == 0

    run(dut, testbench)


def test_random_traffic_keeps_order_and_stream_rules():
    for depth, burst in [(1, 1), (2, 1), (4, 2), (5, 5), (8, 3)]:
        dut = WritebackBuffer(addr_width=8, grad_width=8, depth=depth, burst_size=burst)
        rng = random.Random(depth * 10 + burst)
        sent, got = [], []

        async def testbench(ctx):
            held = None
            for cycle in range(600):
                ctx.set(dut.flush, cycle > 500)
                if not ctx.get(dut.push.valid) and rng.random() < 0.6 and cycle < 500:
                    payload = (rng.randrange(256), rng.randrange(-512, 512))
                    ctx.set(dut.push.p.addr, payload[0])
                    ctx.set(dut.push.p.value, payload[1])
                    ctx.set(dut.push.valid, 1)
                ctx.set(dut.dram_out.ready, rng.random() < 0.4)
                level = ctx.get(dut.level)
                assert level <= depth
                assert ctx.get(dut.push.ready) == (level < depth)
                if held is not None:
                    assert ctx.get(dut.dram_out.valid)
                    assert (ctx.get(dut.dram_out.p.addr), ctx.get(dut.dram_out.p.value)) == held
                held = None
                if ctx.get(dut.dram_out.valid):
                    payload = (ctx.get(dut.dram_out.p.addr), ctx.get(dut.dram_out.p.value))
                    if ctx.get(dut.dram_out.ready):
                        got.append(payload)
                    else:
                        held = payload
                if ctx.get(dut.push.valid) and ctx.get(dut.push.ready):
                    sent.append((ctx.get(dut.push.p.addr), ctx.get(dut.push.p.value)))
                    await ctx.tick()
                    ctx.set(dut.push.valid, 0)
                else:
                    await ctx.tick()
            assert ctx.get(dut.level) == 0

        run(dut, testbench)
        assert got == sent and len(sent) > 100, (depth, burst)
