# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""One checklist item's result, and the page's verdict.

Every item is measured on this host by ``edge-loop check``; an item that could not be
measured is ``NOT RUN`` with the reason, never ``PASS``. The page passes (exit code 0) only
when every *required* item passes: a required item that did not run fails the page.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any


class Status(enum.Enum):
    """Outcome of one item."""

    PASS = 'PASS'
    FAIL = 'FAIL'
    NOT_RUN = 'NOT RUN'


# The checklist, in page order: number -> title.
TITLES = {
    1: 'latency budget',   # of the replay or the live camera (the page header says which)
    2: 'deadline monitor armed',
    3: 'copies per frame',
    4: 'verified kernels and models',
    5: 'memory budget',
    6: 'placement',
    7: 'lifecycle and clean exit',
    8: 'transport, clock, CPU settings',
    9: 'versions',
    10: 'workspace seen by the camera',
}


@dataclass
class ItemResult:
    """What one item measured and how it was judged.

    ``fix`` is the one line that says what to change when the item fails (or why it did not
    run). ``rows`` are the item's detail lines for the page (label, measured, limit, ok);
    ``plot`` is data the page renderer draws (kind-specific, see page.py).
    """

    number: int
    status: Status
    measured: str
    limit: str
    fix: str = ''
    required: bool = True
    rows: list[tuple[str, str, str, str]] = field(default_factory=list)
    plot: dict[str, Any] = field(default_factory=dict)

    @property
    def title(self) -> str:
        """The item's name on the page."""
        return TITLES[self.number]

    @property
    def blocks(self) -> bool:
        """True when this item makes the page fail."""
        return self.required and self.status is not Status.PASS


def not_run(number: int, why: str, *, required: bool = True) -> ItemResult:
    """An item that could not be measured here (``why`` says what is missing)."""
    return ItemResult(number, Status.NOT_RUN, f'not measured: {why}', '-', fix=why,
                      required=required)


def page_passes(items: list[ItemResult]) -> bool:
    """True when every required item passed (an item not on the page is not required)."""
    return not any(item.blocks for item in items)


def failing(items: list[ItemResult]) -> list[ItemResult]:
    """The items that make the page fail, in page order."""
    return sorted((i for i in items if i.blocks), key=lambda i: i.number)
