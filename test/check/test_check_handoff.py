# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Item 6: a stage off the CPU is placed only with a measured handoff per frame."""

from __future__ import annotations

import pytest

from edge_loop import placement
from edge_loop.check import handoff, resources
from edge_loop.check.items import Status

torch = pytest.importorskip('torch')
CUDA = torch.cuda.is_available()


def test_stage_planes_are_what_each_stage_uploads():
    color, depth = handoff.stage_planes('object_locator', 64, 48)
    assert color.shape == (48, 64, 3) and color.dtype.name == 'uint8'
    assert depth.shape == (48, 64) and depth.dtype.name == 'uint16'
    assert [p.shape for p in handoff.stage_planes('occupancy_mapper', 64, 48)] == [(48, 64)]


def test_measured_handoff_counts_every_plane_and_frame():
    planes = handoff.stage_planes('grasp_planner', 64, 48)
    cost = handoff.measure_handoff('cpu', planes, repeats=7)
    assert cost.repeats == 7 and cost.nbytes == 64 * 48 * 3   # depth 2 B + labels 1 B
    assert 0.0 <= cost.p50_ms <= cost.p99_ms
    assert 'per frame' in cost.describe()


def test_a_device_that_cannot_take_the_planes_is_named_not_measured():
    bad_device = 'cuda:0' if not CUDA else f'cuda:{torch.cuda.device_count()}'
    measured, failed = handoff.measure_stages(
        {'occupancy_mapper': bad_device, 'object_locator': 'cpu'}, 64, 48, repeats=3)
    assert measured == {} and set(failed) == {'occupancy_mapper'}


def test_placement_off_the_cpu_passes_only_with_a_measured_handoff(monkeypatch):
    monkeypatch.setattr(placement, 'resolve_device', lambda spec, *a: placement.Placement(
        spec, 'cpu' if spec == 'cpu' else 'cuda:0', 'test'))
    devices = {'object_locator': 'cuda', 'occupancy_mapper': 'cpu'}
    missing = resources.placement_item(devices, {}, require=False,
                                       not_measured={'object_locator': 'torch lacks CUDA'})
    assert missing.status is Status.NOT_RUN and missing.required
    assert 'torch lacks CUDA' in missing.fix
    cost = handoff.HandoffTime('cuda:0', 0.21, 0.35, 50, 921600)
    placed = resources.placement_item(devices, {'object_locator': cost}, require=False)
    assert placed.status is Status.PASS and placed.required
    assert any('p99 0.35 ms' in row[1] for row in placed.rows), placed.rows


@pytest.mark.skipif(not CUDA, reason='needs a CUDA device (torch.cuda.is_available() is False)')
def test_handoff_to_a_gpu_is_timed_synchronised():
    planes = handoff.stage_planes('object_locator', 640, 480)
    cost = handoff.measure_handoff('cuda', planes, repeats=20)
    assert cost.device.startswith('cuda') and cost.p50_ms > 0.0


def test_the_check_measures_at_the_camera_size_on_the_resolved_device(monkeypatch):
    from sensor_msgs.msg import CameraInfo

    from edge_loop.check import runner

    monkeypatch.setattr(placement, 'resolve_device', lambda spec, *a: placement.Placement(
        spec, 'cpu' if spec == 'cpu' else 'cuda:0', 'test'))
    asked = []

    def fake_measure(devices, width, height):
        asked.append((dict(devices), width, height))
        return {'object_locator': 'timed'}, {}

    monkeypatch.setattr(handoff, 'measure_stages', fake_measure)
    session = type('S', (), {'recorder': type('R', (), {
        'last': staticmethod(lambda topic: CameraInfo(width=1280, height=720))})()})()
    got = runner.measure_handoffs({'object_locator': 'auto', 'occupancy_mapper': 'cpu'},
                                  session)
    assert got == ({'object_locator': 'timed'}, {})
    assert asked == [({'object_locator': 'cuda:0', 'occupancy_mapper': 'cpu'}, 1280, 720)]
    # Every stage on the CPU: nothing to measure, nothing asked.
    asked.clear()
    assert runner.measure_handoffs({'occupancy_mapper': 'cpu'}, session) == ({}, {})
    assert asked == []
