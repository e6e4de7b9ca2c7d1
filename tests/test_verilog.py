import re
import subprocess

from gradient_compressor.design.verilog import (main, yosys_command, INPUTS, EVENTS, MODE_INPUTS,
                                                PORTS, LINE_PORTS)


def test_verilog_has_flat_ports_and_reads_back(tmp_path):
    path = tmp_path / "gc.v"
    main(["-o", str(path), "--sets", "4", "--ways", "2"])
    text = path.read_text()
    header = re.search(r"module gradient_compressor\((.*?)\);", text, re.S).group(1)
    ports = {name.strip() for name in header.split(",")}
    assert ports == {"clk", "rst", *PORTS, *MODE_INPUTS, *EVENTS}
    for name in INPUTS:
        assert re.search(rf"input (signed )?(\[\d+:0\] )?{name};", text), name
    assert re.search(r"output signed \[15:0\] dram_value;", text)   # the input's format
    assert re.search(r"output signed \[48:0\] discard_sum;", text)
    assert re.search(r"input \[31:0\] bypass__1__limit;", text)
    # Yosys reads the file back and finds a complete, well-formed design.
    script = "read_verilog gc.v; hierarchy -check -top gradient_compressor; proc; check -assert"
    subprocess.run([yosys_command(), "-q", "-p", script], cwd=tmp_path, check=True)


def test_lines_have_data_and_mask_ports(tmp_path):
    """On lines the streams are AXI-like: the lanes side by side (TDATA) and a bit per lane
    (TKEEP, WSTRB)."""
    path = tmp_path / "gc.v"
    main(["-o", str(path), "--sets", "4", "--ways", "2", "--lanes", "8"])
    text = path.read_text()
    header = re.search(r"module gradient_compressor\((.*?)\);", text, re.S).group(1)
    ports = {name.strip() for name in header.split(",")}
    assert ports == ({"clk", "rst", *PORTS, *LINE_PORTS, *MODE_INPUTS, *EVENTS} -
                     {"in_grad", "dram_value"})
    assert re.search(r"input \[127:0\] in_grads;", text)
    assert re.search(r"input \[7:0\] in_mask;", text)
    assert re.search(r"output \[127:0\] dram_values;", text)
    assert re.search(r"output \[7:0\] dram_mask;", text)
    assert re.search(r"output \[7:0\] discard;", text)


def test_whole_line_is_a_flag_that_keeps_the_ports(tmp_path, capsys):
    """--whole-line (the default) builds L1 deciding by the whole-line rule, --no-whole-line
    by the seed's policy: the ports are those of lines, or of one lane, the DRAM values a
    gradient's width, or with the seed's policy two bits wider."""
    path = tmp_path / "gc.v"
    assert main(["-o", str(path), "--sets", "4", "--ways", "2", "--lanes", "2",
                 "--whole-line"]) == 0
    assert "whole_line=True" in capsys.readouterr().out
    header = re.search(r"module gradient_compressor\((.*?)\);", path.read_text(), re.S).group(1)
    assert {name.strip() for name in header.split(",")} == (
        {"clk", "rst", *PORTS, *LINE_PORTS, *MODE_INPUTS, *EVENTS} - {"in_grad", "dram_value"})
    # A DRAM line write has the input beat's format: a gradient's width a lane (16 bits here),
    # as wide as in_grads (AXI's WDATA as wide as TDATA).
    text = path.read_text()
    assert re.search(r"input \[31:0\] in_grads;", text)
    assert re.search(r"output \[31:0\] dram_values;", text)
    assert re.search(r"output \[1:0\] dram_mask;", text)
    # One lane too, with the one-lane ports: a record's value is a gradient's width (16 bits
    # here, as in_grad), not grad_width + 2.
    assert main(["-o", str(path), "--whole-line"]) == 0
    assert "whole_line=True" in capsys.readouterr().out
    text = path.read_text()
    header = re.search(r"module gradient_compressor\((.*?)\);", text, re.S).group(1)
    assert {name.strip() for name in header.split(",")} == (
        {"clk", "rst", *PORTS, *MODE_INPUTS, *EVENTS})
    assert re.search(r"input signed \[15:0\] in_grad;", text)
    assert re.search(r"output signed \[15:0\] dram_value;", text)
    # The seed's policy: a value of grad_width + 2 bits (a sum's), one lane and lines
    assert main(["-o", str(path), "--no-whole-line"]) == 0
    assert "whole_line=False" in capsys.readouterr().out
    assert re.search(r"output signed \[17:0\] dram_value;", path.read_text())
    assert main(["-o", str(path), "--lanes", "8", "--no-whole-line"]) == 0
    assert re.search(r"output \[143:0\] dram_values;", path.read_text())


def test_bad_parameter_is_a_usage_error(capsys):
    assert main(["--ways", "3"]) == 2
    assert capsys.readouterr().err == ("python -m gradient_compressor.design.verilog: error: "
                                       "ways must be a power of two (1, 2, 4, ...), not 3\n")


def test_bad_lanes_is_a_usage_error(capsys):
    assert main(["--lanes", "3"]) == 2
    assert capsys.readouterr().err == ("python -m gradient_compressor.design.verilog: error: "
                                       "lanes must be a power of two (1, 2, 4, ...), not 3\n")
    assert main(["--lanes", "2", "--addr-width", "5", "--sets", "16"]) == 2
    assert "addr_width must be greater than log2(sets) + log2(lanes) = 5" in (
        capsys.readouterr().err)


def test_the_bypass_windows_are_counted_by_a_parameter(tmp_path, capsys):
    from gradient_compressor.design.params import mode_inputs
    path = tmp_path / "gc.v"
    main(["-o", str(path), "--sets", "4", "--ways", "2", "--bypass-windows", "3"])
    header = re.search(r"module gradient_compressor\((.*?)\);", path.read_text(), re.S).group(1)
    ports = {name.strip() for name in header.split(",")}
    assert ports == {"clk", "rst", *PORTS, *mode_inputs(3), *EVENTS}
    assert {"bypass__2__base", "bypass__2__limit", "bypass__2__enable"} <= ports
    assert main(["-o", str(path), "--bypass-windows", "9"]) == 2
    assert "bypass_windows must be at most 8, not 9" in capsys.readouterr().err
