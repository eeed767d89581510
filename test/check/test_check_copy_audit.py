# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Item 3 reads each stage's copy audit from /diagnostics, WARN periods included.

Under load grasp_planner drops a frame (no locator result) in every diagnostics period, and
its periodic OK summary, which carried the audit, never came: the check read "grasp_planner
reported no copy audit". The audit now travels with the WARN as well.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from diagnostic_msgs.msg import DiagnosticStatus

from edge_loop.check import copies
from edge_loop.check.items import Status
from edge_loop.nodes.stage_health import StageHealth


class FakeNode:
    """What StageHealth uses of a node: params, a publisher, a logger, a clock."""

    def __init__(self) -> None:
        self.params = {'copy_audit': True}
        self.published = []

    def create_publisher(self, _cls, _topic, _depth):
        return SimpleNamespace(publish=self.published.append)

    def get_logger(self):
        return SimpleNamespace(warning=lambda _text: None)

    def get_name(self) -> str:
        return 'grasp_planner'

    def get_clock(self):
        from builtin_interfaces.msg import Time

        return SimpleNamespace(now=lambda: SimpleNamespace(to_msg=Time))


class ViewFrame:
    """A frame whose arrays are all views on its buffer (the audit's zero-copy case)."""

    def audit(self, *arrays) -> int:
        return 0


def test_a_period_that_only_warns_still_reports_the_copy_audit():
    node = FakeNode()
    health = StageHealth(node, 'grasp_planner')
    for _ in range(5):
        health.audit(ViewFrame(), np.zeros(3))
    health.bad_frame('no locator result: 2 frame(s) without /edge_loop/objects', None)
    (status,) = node.published[-1].status
    values = {kv.key: kv.value for kv in status.values}
    assert status.level == DiagnosticStatus.WARN and 'no locator result' in status.message
    assert values['audited_frames'] == '5' and values['copies_per_frame'] == '0'
    # What the check makes of it (session.copies_per_frame reads these two keys).
    item = copies.judge_copies({'grasp_planner': (float(values['copies_per_frame']),
                                                  int(values['audited_frames']))},
                               ['grasp_planner'], {'grasp_planner': 'cpu'}, {})
    assert item.status is Status.PASS, item.fix


def test_a_gpu_stages_transfers_reach_the_demo_observation():
    # A GPU-placed stage's CopyLedger goes out per frame on /diagnostics and the demo's
    # observer reads it back, per stage and kind (the copy audit of a GPU-placed loop).
    pytest.importorskip('torch', reason='torch is not installed (the CI installs it)')
    from diagnostic_msgs.msg import DiagnosticArray

    from edge_loop.commander import LoopObserver, Observation
    from edge_loop.kernels.gpu.transfer import CopyLedger

    node = FakeNode()
    health = StageHealth(node, 'grasp_planner')
    health.ledger = CopyLedger()
    for _ in range(4):
        health.ledger.note('h2d', 640 * 480 * 2)
        health.ledger.note('d2h', 2880, 'grasp table')
        health.processed(1.0)
    health.ledger.note('h2d', 640 * 480 * 2)   # a fifth upload: a frame paired twice
    health.summary(None)
    (status,) = node.published[-1].status
    values = {kv.key: kv.value for kv in status.values}
    assert values['transfers_per_frame: h2d image'] == '1.25'
    assert values['transfers_per_frame: d2h grasp table'] == '1'
    observer = SimpleNamespace(obs=Observation(), manager_error=None)
    LoopObserver._on_diagnostics(observer, DiagnosticArray(status=[status]))
    assert observer.obs.transfers == {'grasp_planner': {'h2d image': 1.25,
                                                        'd2h grasp table': 1.0}}
