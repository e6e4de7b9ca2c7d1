"""Progress bars advance in steps while a simulation runs, not from 0 % straight to 100 %:
the compiled simulator reports as it goes, the Amaranth one through the driver's gap hook."""

import pytest

from gradient_compressor.reports.backend import run_rtl
from gradient_compressor.simulation.cxxrtl import compiler_available, simulate_compiled


class Recorder:
    """Stands for a tqdm bar: records ``n`` after each update."""

    def __init__(self):
        self.n, self.seen, self.closed = 0, [], False

    def update(self, steps):
        self.n += steps
        self.seen.append(self.n)

    def close(self):
        self.closed = True


def _ops(n):
    return [("grad", i % 300, (i % 7) - 3, 50) for i in range(n)] + [("flush",)]


@pytest.mark.skipif(not compiler_available(), reason="no C++ compiler (g++) on the path")
def test_compiled_simulator_reports_steps():
    ops = _ops(20_000)
    done = []
    result = simulate_compiled({}, ops, progress=done.append)
    assert len(result.accepted) == 20_000
    assert len(done) >= 100, "the compiled run must report many intermediate steps"
    assert done == sorted(done) and done[-1] == len(ops)
    assert 0 < done[len(done) // 2] < len(ops)


@pytest.mark.parametrize("backend", ["amaranth", "compiled"])
def test_run_rtl_advances_and_closes_the_bar(backend):
    if backend == "compiled" and not compiler_available():
        pytest.skip("no C++ compiler (g++) on the path")
    ops = _ops(400)
    bar = Recorder()
    run_rtl(backend, {}, ops, progress=bar)
    assert bar.closed and bar.n == len(ops)
    assert len([n for n in bar.seen if 0 < n < len(ops)]) >= 2
