"""The reference model on its own: the policy, written out by hand for small cases."""

import pytest

from gradient_compressor.model import ReferenceModel, Write


def test_direct_and_threshold_zero():
    model = ReferenceModel(sets=2, ways=1)
    assert model.write(4, -32768, 50) == [Write(4, -32768, "DIRECT")]
    assert model.write(4, 0, 0) == [Write(4, 0, "DIRECT")]      # threshold 0: all direct
    assert model.valid_count == 0


def test_accumulate_then_threshold():
    model = ReferenceModel(sets=2, ways=1)
    assert model.write(3, 30, 50) == []
    assert model.held() == {3: 30}
    assert model.write(3, -10, 50) == []
    assert model.write(3, -80, 100) == []          # judged by this gradient's threshold
    assert model.held() == {3: -60}
    assert model.write(3, 1, 50) == [Write(3, -59, "ACCUM_THRESHOLD")]
    assert model.valid_count == 0


def test_threshold_crossing_writes_and_frees():
    model = ReferenceModel(sets=2, ways=1)
    model.write(3, 30, 50)
    assert model.write(3, 25, 50) == [Write(3, 55, "ACCUM_THRESHOLD")]
    assert model.valid_count == 0


def test_max_updates():
    model = ReferenceModel(sets=1, ways=1, max_updates=3)
    assert model.write(9, 1, 50) == []
    assert model.write(9, 1, 50) == []
    assert model.write(9, 1, 50) == [Write(9, 3, "MAX_UPDATES")]
    one = ReferenceModel(sets=1, ways=1, max_updates=1)
    assert one.write(9, 1, 50) == [Write(9, 1, "MAX_UPDATES")]


def test_round_robin_eviction_and_free_way_choice():
    model = ReferenceModel(sets=2, ways=2)
    model.write(0, 1, 50)            # set 0, way 0
    model.write(2, 2, 50)            # set 0, way 1
    assert model.write(4, 3, 50) == [Write(0, 1, "EVICTION")]   # victim way 0
    assert model.write(6, 4, 50) == [Write(2, 2, "EVICTION")]   # then way 1
    assert model.write(0, 5, 50) == [Write(4, 3, "EVICTION")]   # then way 0 again
    assert model.held() == {0: 5, 6: 4}


def test_flush_order_is_set_then_way():
    model = ReferenceModel(sets=2, ways=2)
    for addr in (3, 0, 1, 2):
        model.write(addr, addr + 1, 50)
    assert model.flush() == [Write(0, 1, "FLUSH"), Write(2, 3, "FLUSH"),
                             Write(3, 4, "FLUSH"), Write(1, 2, "FLUSH")]
    assert model.flush() == []


def test_unbounded_oracle_never_evicts():
    model = ReferenceModel(sets=None)
    assert all(model.write(addr, 1, 50) == [] for addr in range(1000))
    assert len(model.flush()) == 1000


@pytest.mark.parametrize("call, message", [
    (lambda m: m.write(0, 40000, 5), "gradient 40000 is outside [-32768, 32767]"),
    (lambda m: m.write(0, 1, 70000), "threshold 70000 is outside [0, 65535]"),
    (lambda m: m.run([("flsh",)]), "unknown operation ('flsh',)"),
])
def test_bad_input(call, message):
    with pytest.raises(ValueError) as info:
        call(ReferenceModel())
    assert str(info.value) == message
