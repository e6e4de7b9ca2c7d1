"""Construction-time checks: each bad parameter is named, with the allowed range."""

import pytest
from amaranth.back import rtlil

from gradient_compressor.design import GradientCompressor, L1Accumulator, Streamer, WritebackBuffer


@pytest.mark.parametrize("params, error, message", [
    ({"sets": 3},            ValueError, "sets must be a power of two (1, 2, 4, ...), not 3"),
    ({"sets": 0},            ValueError, "sets must be at least 1, not 0"),
    ({"ways": 6},            ValueError, "ways must be a power of two (1, 2, 4, ...), not 6"),
    ({"ways": 2.0},          TypeError,  "ways must be an integer, not 2.0"),
    ({"max_updates": 0},     ValueError, "max_updates must be at least 1, not 0"),
    ({"fifo_depth": 0},      ValueError, "fifo_depth must be at least 1, not 0"),
    ({"burst_size": 0},      ValueError, "burst_size must be at least 1, not 0"),
    ({"fifo_depth": 8, "burst_size": 9},
                             ValueError, "burst_size must be at most fifo_depth (8), not 9"),
    ({"grad_width": 1},      ValueError, "grad_width must be at least 2, not 1"),
    ({"addr_width": 5},      ValueError,
     "addr_width must be greater than log2(sets) = 5 so that a tag remains above the set "
     "index, not 5"),
    ({"addr_width": True},   TypeError,  "addr_width must be an integer, not True"),
    ({"sets": "32"},         TypeError,  "sets must be an integer, not '32'"),
    ({"sets": 2 ** 31},      ValueError,
     "sets must be at most 65536, not 2147483648: sets x ways is at most 65536 L1 entries"),
    ({"sets": 1024, "ways": 128}, ValueError,
     "ways must be at most 64 with 1024 sets, not 128: sets x ways is at most 65536 L1 entries"),
    ({"whole_line": "yes"},  TypeError, "whole_line must be True or False, not 'yes'"),
    ({"lanes": 2, "whole_line": 1}, TypeError, "whole_line must be True or False, not 1"),
])
def test_compressor_parameter_errors(params, error, message):
    with pytest.raises(error) as info:
        GradientCompressor(**params)
    assert str(info.value) == message


def test_the_models_take_the_geometry_check():
    # The reference models (the sweeps' and the training's) check the L1 they would hold.
    from gradient_compressor.model import LineModel, ReferenceModel
    with pytest.raises(ValueError, match=r"^sets must be at most 65536, not 2147483648"):
        ReferenceModel(sets=2 ** 31)
    with pytest.raises(ValueError, match=r"^ways must be at most 16 with 4096 sets, not 32"):
        LineModel(lanes=8, sets=4096, ways=32)
    # (more ways than a set has tags: allowed, the ways beyond never fill)
    assert LineModel(lanes=2, sets=2, ways=4, addr_width=3).ways == 4
    assert ReferenceModel(sets=None).sets is None     # the unbounded oracle holds what it sees


def test_component_parameter_errors():
    with pytest.raises(ValueError, match=r"^addr_width must be at least 3, not 2$"):
        L1Accumulator(addr_width=2, sets=4)
    with pytest.raises(ValueError, match=r"^burst_size must be at most 4, not 5$"):
        WritebackBuffer(depth=4, burst_size=5)
    with pytest.raises(ValueError, match=r"^grad_width must be at least 2, not 0$"):
        Streamer(grad_width=0)


@pytest.mark.parametrize("params", [
    {},
    {"sets": 1, "ways": 1, "addr_width": 1, "max_updates": 1, "fifo_depth": 1, "burst_size": 1},
    {"sets": 64, "ways": 8, "fifo_depth": 5, "burst_size": 5, "grad_width": 8},
])
def test_good_parameters(params):
    dut = GradientCompressor(**params)
    for name, value in params.items():
        assert getattr(dut, name) == value
    assert "module" in rtlil.convert(dut)       # and the configuration elaborates


def test_config_is_frozen_checked_once_and_a_mapping_of_its_parameters():
    import dataclasses
    from gradient_compressor.design.params import DEFAULTS, Config
    config = Config(sets=64, lanes=8)
    assert dict(config) == dict(DEFAULTS, sets=64, lanes=8, bypass_windows=2, whole_line=True)
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.sets = 128
    with pytest.raises(ValueError, match=r"^sets must be a power of two .*, not 3$"):
        config.replace(sets=3)
    assert Config.of(config, ways=8) == Config(sets=64, ways=8, lanes=8)
    with pytest.raises(TypeError, match=r"^config must be a Config or a mapping of its "
                                        r"parameters, not 64$"):
        GradientCompressor(64)
    assert Config.of({"sets": 64}, ways=8) == Config(sets=64, ways=8)


def test_a_compressor_made_from_a_config_is_the_one_made_from_its_parameters():
    from gradient_compressor.design.params import Config
    config = Config(addr_width=6, grad_width=6, sets=4, ways=2, max_updates=3, fifo_depth=4,
                    burst_size=2)
    made = GradientCompressor(config)
    assert made.config == config
    assert rtlil.convert(made) == rtlil.convert(GradientCompressor(**config))
    assert rtlil.convert(GradientCompressor(config, sets=8)) == \
        rtlil.convert(GradientCompressor(**dict(config, sets=8)))


def test_the_mode_inputs_are_one_signature_that_every_list_derives_from():
    from gradient_compressor.design.compressor import signature
    from gradient_compressor.design.params import (LFSR_LOAD_INPUTS, MODE_INPUTS, MODES_OFF,
                                                   check_modes, modes_signature, port_shapes)
    from gradient_compressor.design.verilog import INPUTS
    from gradient_compressor.proofs.replay import INPUTS as WITNESS_INPUTS
    modes = modes_signature(addr_width=12, grad_width=6).members
    members = signature(addr_width=12, grad_width=6).members
    assert all(members[name] == member for name, member in modes.items())
    ports = port_shapes(modes_signature(addr_width=12, grad_width=6))
    assert set(MODE_INPUTS) == set(ports) == set(MODES_OFF) | set(LFSR_LOAD_INPUTS)
    assert set(MODE_INPUTS) <= set(INPUTS)
    assert {f"in_{name}" for name in MODE_INPUTS} <= set(WITNESS_INPUTS)
    # A setting's range is its member's width.
    assert check_modes({"ema_min": 63}, addr_width=12, grad_width=6)["ema_min"] == 63
    with pytest.raises(ValueError, match=r"^ema_min must be at most 63, not 64$"):
        check_modes({"ema_min": 64}, addr_width=12, grad_width=6)
    with pytest.raises(ValueError, match=r"^bypass__1__limit must be at most 4095, not 4096$"):
        check_modes({"bypass__1__limit": 4096}, addr_width=12, grad_width=6)
