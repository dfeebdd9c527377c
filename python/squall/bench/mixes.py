"""Frame size mixes for the generator and for generated traces.

Sizes are RFC 2544 frame sizes: Ethernet header to FCS included, so "64 B"
is the smallest frame; the generator and the traces leave the 4-byte FCS off
(no port here appends one). Gbit/s figures count these frame bytes (layer 2,
no preamble or inter-frame gap).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

FCS_BYTES = 4
MIN_FRAME = 64
MAX_FRAME = 1518
MAX_ENTRIES = 64  # the generator's sizes[] limit


def interleave(classes: Sequence[tuple[int, int]]) -> list[int]:
    """(count, size) classes spread evenly over one cycle, so no run of one
    size is longer than it must be."""
    slots = []
    for k, (count, size) in enumerate(classes):
        slots += [((j + 0.5) / count, k, size) for j in range(count)]
    return [size for _, _, size in sorted(slots)]


@dataclass(frozen=True)
class Mix:
    name: str  # used in summary names: "64b", "imix", "dcmix"
    label: str  # for people: "64 B", "IMIX"
    sizes: tuple[int, ...]  # one generator cycle
    about: str = ""

    @property
    def mean_bytes(self) -> float:
        return statistics.fmean(self.sizes)

    @property
    def median_bytes(self) -> float:
        return statistics.median(self.sizes)

    def gbps(self, pps: float) -> float:
        """Layer-2 bit rate (frames with FCS) at pps packets per second."""
        return pps * self.mean_bytes * 8 / 1e9


def fixed(size: int) -> Mix:
    if not MIN_FRAME <= size <= MAX_FRAME:
        raise ValueError(f"frame size {size} outside {MIN_FRAME}..{MAX_FRAME}")
    return Mix(f"{size}b", f"{size} B", (size,))


# Simple IMIX (7:4:1).
IMIX = Mix(
    "imix",
    "IMIX",
    tuple(interleave([(7, 64), (4, 570), (1, 1518)])),
    "simple IMIX: 7 x 64 B, 4 x 570 B, 1 x 1518 B",
)

# seed 002 §4.1 uses "an empirical packet size distribution from Facebook's
# web server cluster [Roy et al., SIGCOMM 2015]: the median packet size is
# ~120B, and most packets are less than 256B". The seed gives no table; this
# 64-entry mix has those two properties (median 120 B, 51/64 = 80% under
# 256 B) with a tail of full-size frames, mean 265.5 B.
DC_MIX = Mix(
    "dcmix",
    "DC mix",
    tuple(
        interleave(
            [(18, 64), (13, 96), (6, 120), (8, 160), (6, 220), (5, 400), (4, 800), (4, 1518)]
        )
    ),
    "data-center web-server mix after seed 002 §4.1: median 120 B, 80% under 256 B, mean 265.5 B",
)

FIXED_SIZES = (64, 128, 256, 512, 1024, 1518)
ALL_MIXES: tuple[Mix, ...] = (*(fixed(s) for s in FIXED_SIZES), IMIX, DC_MIX)


def by_name(name: str) -> Mix:
    for m in ALL_MIXES:
        if m.name == name:
            return m
    if name.endswith("b") and name[:-1].isdigit():
        return fixed(int(name[:-1]))
    raise ValueError(f"unknown size mix {name!r}: {', '.join(m.name for m in ALL_MIXES)}")
