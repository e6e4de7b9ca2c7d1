"""Directed scenarios that reach every mechanism, as reference-model operations.

The seed's own phases (``workloads.seed``) never reach some of them: at threshold 50, its
"max-updates" phases cross the threshold long before 255 updates. These do, with threshold 50
and the default geometry (32 sets x 4 ways, max_updates 255).
"""

THRESHOLD = 50
SETS = 32


def pure_accumulation():
    """Value 4, again and again, to 32 addresses: L1 hits until the sums reach the threshold."""
    return [("grad", 0x1000 + 4 * i, 4, THRESHOLD) for _ in range(20) for i in range(32)]


def outlier_bypass():
    """Values above the threshold (100, -100, the extremes) go straight on."""
    values = [100, -100, 50, -50, 32767, -32768]
    return [("grad", 0x2000 + i, values[i % len(values)], THRESHOLD) for i in range(19)]


def address_conflict():
    """Six tags in one set (4 ways): allocation, then round-robin eviction."""
    return [("grad", 0x20 + SETS * tag, 3, THRESHOLD) for _ in range(3) for tag in range(6)]


def accumulation_overflow():
    """Sums that cross the threshold upwards and downwards, including by a large step."""
    ops = [("grad", 0x300, 7, THRESHOLD) for _ in range(8)]          # 56 >= 50
    ops += [("grad", 0x301, -9, THRESHOLD) for _ in range(6)]        # -54
    ops += [("grad", 0x302, 49, THRESHOLD), ("grad", 0x302, 49, THRESHOLD)]
    return ops


def full_capacity_eviction():
    """Fill all 4 ways of all 32 sets, then a fifth tag in every set: 32 evictions."""
    ops = [("grad", tag * SETS + index, 1, THRESHOLD) for tag in range(4) for index in range(SETS)]
    ops += [("grad", 4 * SETS + index, 2, THRESHOLD) for index in range(SETS)]
    return ops


def max_updates_flush():
    """260 updates to one address that never reach the threshold: forced out at 255."""
    return [("grad", 0x4000, (1, -1)[i % 2], THRESHOLD) for i in range(260)]


DIRECTED = {
    "pure_accumulation":      pure_accumulation,
    "outlier_bypass":         outlier_bypass,
    "address_conflict":       address_conflict,
    "accumulation_overflow":  accumulation_overflow,
    "full_capacity_eviction": full_capacity_eviction,
    "max_updates_flush":      max_updates_flush,
}
