from amaranth.sim import Simulator

from gradient_compressor.design import Streamer


def test_threshold_travels_with_the_gradient():
    """Every 4-bit gradient with every 4-bit threshold: passed on unchanged with it."""
    dut = Streamer(addr_width=4, grad_width=4)
    seen = []

    async def testbench(ctx):
        ctx.set(dut.grad_in.valid, 1)
        ctx.set(dut.grad_out.ready, 1)
        for threshold in range(16):
            for grad in range(-8, 8):
                ctx.set(dut.threshold, threshold)
                ctx.set(dut.grad_in.p.grad, grad)
                ctx.set(dut.grad_in.p.addr, grad & 15)
                assert ctx.get(dut.grad_out.p.grad) == grad
                assert ctx.get(dut.grad_out.p.threshold) == threshold
                assert ctx.get(dut.grad_out.p.addr) == grad & 15
                seen.append((grad, threshold))
        ctx.set(dut.grad_out.ready, 0)
        assert not ctx.get(dut.grad_in.ready)
        ctx.set(dut.grad_in.valid, 0)
        assert not ctx.get(dut.grad_out.valid)

    sim = Simulator(dut)
    sim.add_testbench(testbench)
    sim.run()
    assert len(seen) == 256
