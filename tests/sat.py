"""A combinational fact proven for every input by Yosys' SAT solver (too wide to enumerate)."""

import subprocess

from amaranth.back import rtlil

from gradient_compressor.design.verilog import yosys_command

__all__ = ["assert_always_one"]


def assert_always_one(tmp_path, module, inputs, output):
    """Yosys' ``sat -prove`` shows the 1-bit ``output`` of ``module`` to be 1 for every value
    of ``inputs``; it exits non-zero, and this fails, if some value makes it 0."""
    (tmp_path / "top.il").write_text(rtlil.convert(module, name="top",
                                                   ports=[*inputs, output]))
    result = subprocess.run([yosys_command(), "-q", "-p",
                             f"read_rtlil top.il; prep -top top; "
                             f"sat -prove {output.name} 1 -verify"],
                            cwd=tmp_path, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
