# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""The simulated gripper's pad sensing: the pad wrench and what the force sensors read."""

from __future__ import annotations

import numpy as np

from edge_loop.sim.gripper import ForceSensor
from edge_loop.sim.world import SimWorld


def _held_cube(seed=0):
    """A world whose gripper holds the cube 5 cm above the table, 40 N per pad."""
    world = SimWorld(seed, object_specs=['cube'])
    g = world.gripper
    pos, _ = world.objects[0].pose
    g.teleport([pos[0], pos[1], pos[2]], 0.0)
    g.set_opening_now(0.08)
    g.command_gripper(0.0, 40.0)
    world.step(120)
    g.command_twist([0.0, 0.0, 0.1], 0.0)
    world.step(120)
    g.command_twist([0.0, 0.0, 0.0], 0.0)
    world.step(60)
    return world


def test_pad_wrench_of_a_held_cube():
    world = _held_cube()
    try:
        g = world.gripper
        normal, shear, field, torsion = g.true_pad_wrench()
        assert np.allclose(normal, g.true_forces())
        assert np.all(normal > 20.0)
        # the pads carry the weight (shear) below the friction limit; the field is the sum
        # of the contact magnitudes, never below the magnitude of their sum
        assert np.all(shear > 0.0) and np.all(shear < normal)
        assert np.all(field >= shear - 1e-9)
        assert np.all(np.isfinite(torsion)) and np.all(torsion >= 0.0)
        # a moment of contact frictions about a point of the pad: at most the field times
        # the pad's diagonal (2 x 10 mm by 2 x 30 mm)
        assert np.all(torsion <= field * np.hypot(0.02, 0.06) + 1e-9)
    finally:
        world.close()


def test_the_sensors_read_the_wrench_of_three_steps_before():
    world = _held_cube(1)
    try:
        g = world.gripper
        delay = ForceSensor().delay_steps
        truth, normal, shear = [], [], []
        for _ in range(40):
            world.step()
            truth.append(g.true_normal_shear)
            assert all(np.array_equal(a, b) for a, b in zip(g.true_normal_shear,
                                                             g.true_pad_wrench()[:2]))
            normal.append(g.joint_state()[2])
            shear.append(g.measured_shear())
        true_normal = np.array([w[0] for w in truth])
        true_shear = np.array([w[1] for w in truth])
        # held still: each reading is the truth of delay_steps earlier plus a bias (0.15 N,
        # drawn once) and noise (0.08 N + 3 %)
        for got, true in ((normal, true_normal), (shear, true_shear)):
            err = np.array(got)[delay:] - true[:-delay]
            assert np.all(np.abs(err.mean(axis=0)) < 0.6)
            assert np.all(err.std(axis=0) < 0.08 + 0.03 * true.max() + 0.1)
    finally:
        world.close()
