# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Pick policy: phases against a kinematic TCP, safety envelope, stale inputs, sim episodes."""

from __future__ import annotations

import math

import numpy as np
import pytest

from edge_loop.kernels.grasp_types import PlanarGrasp
from edge_loop.kernels.occupancy import GridSpec
from edge_loop.kernels.policy import (
    PickPolicy,
    PolicyInputs,
    PolicyParams,
    check_grasp_clear,
    symmetric_yaw,
)

SPEC = GridSpec()
DT = 1.0 / 15.0


def _grid(*boxes):
    grid = np.zeros(SPEC.shape, np.int8)
    for x0, y0, x1, y1 in boxes:
        c0, r0 = SPEC.cell_of(x0, y0)[::-1]
        c1, r1 = SPEC.cell_of(x1, y1)[::-1]
        grid[r0:r1 + 1, c0:c1 + 1] = 100
    return grid


TARGET = (-0.015, -0.015, 0.015, 0.015)          # a 3 cm object at the origin
GRASP = PlanarGrasp(center=[0.0, 0.0, 0.02], yaw=0.3, opening=0.05, finger_width=0.02)


class FakeRobot:
    """Integrates twist commands exactly; the touch sensor answers from a script."""

    def __init__(self, params=None):
        params = params or PolicyParams()
        self.tcp = np.array(params.home, dtype=float)
        self.yaw = 0.0
        self.t = 10.0
        self.opening = 0.085

    def apply(self, out):
        self.tcp += np.array(out.twist[:3]) * DT
        self.yaw += out.twist[3] * DT
        self.opening = out.gripper_opening
        self.t += DT


def _inputs(robot, grasp=GRASP, grid=None, touch='open'):
    return PolicyInputs(grasp=grasp, grasp_stamp=robot.t,
                        occupancy=_grid(TARGET) if grid is None else grid,
                        occupancy_stamp=robot.t, grasp_state=touch, grasp_state_stamp=robot.t,
                        tcp=(*robot.tcp, robot.yaw), tcp_stamp=robot.t)


def _run(policy, robot, touch_of, steps=600, grid=None, grasp=GRASP, until=None):
    seen = []
    for _ in range(steps):
        out = policy.step(robot.t, _inputs(robot, grasp, grid, touch_of(policy, robot)))
        if not seen or seen[-1] != out.phase:
            seen.append(out.phase)
        robot.apply(out)
        if until and until(policy, out):
            break
    return seen, out


def _touch_success(policy, robot):
    return 'holding' if policy.phase in ('close', 'confirm', 'lift', 'place') else 'open'


def test_full_pick_runs_through_every_phase_and_ends_home():
    policy, robot = PickPolicy(), FakeRobot()
    seen, out = _run(policy, robot, _touch_success,
                     until=lambda p, o: p.picks == 1 and o.phase == 'observe')
    assert seen == ['observe', 'approach', 'descend', 'close', 'confirm', 'lift', 'place',
                    'release', 'return', 'observe']
    assert policy.picks == 1
    assert np.allclose(robot.tcp, PolicyParams().home, atol=0.02)


def test_gripper_opens_to_the_plan_and_closes_with_the_grip_force():
    policy, robot = PickPolicy(), FakeRobot()
    openings = {}
    for _ in range(400):
        out = policy.step(robot.t, _inputs(robot, touch=_touch_success(policy, robot)))
        openings.setdefault(out.phase, out.gripper_opening)
        robot.apply(out)
        if out.phase == 'lift':
            assert out.gripper_opening == 0.0 and out.gripper_force == 40.0
            break
    assert openings['descend'] == pytest.approx(0.05)
    # at closing height, yaw within tolerance of the grasp (mod pi)
    assert abs(math.remainder(robot.yaw - 0.3, math.pi)) < 0.05


def test_speed_limits_hold():
    p = PolicyParams()
    policy, robot = PickPolicy(p), FakeRobot(p)
    for _ in range(300):
        out = policy.step(robot.t, _inputs(robot, touch=_touch_success(policy, robot)))
        assert np.linalg.norm(out.twist[:3]) <= p.max_speed + 1e-9
        assert abs(out.twist[3]) <= p.max_yaw_rate + 1e-9
        if out.phase == 'descend':
            assert np.linalg.norm(out.twist[:3]) <= p.descend_speed + 1e-9
        robot.apply(out)


@pytest.mark.parametrize('failure', ['closed_empty', 'lost', 'slipping'])
def test_failure_retreats_home_and_replans_with_bounded_attempts(failure):
    p = PolicyParams(max_attempts=2)
    policy, robot = PickPolicy(p), FakeRobot(p)

    def touch(pol, rob):
        if failure == 'closed_empty':
            return 'closed_empty' if pol.phase == 'close' else 'open'
        if pol.phase in ('close', 'confirm'):
            return 'holding'
        return failure if pol.phase == 'lift' else 'open'

    seen, out = _run(policy, robot, touch, steps=2000)
    assert 'retreat' in seen
    assert policy.attempts == 2 and out.reason == 'gave_up' and out.phase == 'observe'
    assert seen.count('approach') == 2
    assert out.twist == (0.0, 0.0, 0.0, 0.0)


def _closing_heights(failure, steps=2000, grasp=None, params=None):
    """Planned closing height (TCP z) of every attempt when each grip fails with ``failure``."""
    p = params or PolicyParams(max_attempts=3)
    policy, robot = PickPolicy(p), FakeRobot(p)
    grasp = grasp or PlanarGrasp(center=[0.0, 0.0, 0.06], yaw=0.3, opening=0.05,
                                 finger_width=0.02)
    heights = []

    def touch(pol, rob):
        if pol.phase == 'close' and (not heights or heights[-1][0] != pol.phase_since):
            heights.append((pol.phase_since, float(pol.plan.center[2])))
        if failure == 'closed_empty':
            return 'closed_empty' if pol.phase == 'close' else 'open'
        if pol.phase in ('close', 'confirm'):
            return 'holding'
        return failure if pol.phase == 'lift' else 'open'

    _run(policy, robot, touch, steps=steps, grasp=grasp)
    return [z for _, z in heights]


@pytest.mark.parametrize('failure', ['lost', 'slipping'])
def test_a_grip_that_let_go_is_retried_lower_at_the_same_spot(failure):
    # the planner plans the same grasp from the same scene: repeating a grip that let go fails
    # the same way (held-out scenes 819 and 886); each retry closes regrasp_deeper lower
    z = _closing_heights(failure)
    assert z == pytest.approx([0.06, 0.05, 0.04])


def test_a_grip_that_never_held_is_retried_at_the_same_height():
    z = _closing_heights('closed_empty')
    assert z == pytest.approx([0.06, 0.06, 0.06])


def test_the_lower_regrasp_stops_at_min_tcp_z_and_can_be_turned_off():
    z = _closing_heights('lost', grasp=PlanarGrasp(center=[0.0, 0.0, 0.03], yaw=0.3,
                                                   opening=0.05, finger_width=0.02))
    assert z == pytest.approx([0.03, PolicyParams().min_tcp_z, PolicyParams().min_tcp_z])
    z = _closing_heights('lost', params=PolicyParams(max_attempts=3, regrasp_deeper=0.0))
    assert z == pytest.approx([0.06, 0.06, 0.06])


def test_a_let_go_elsewhere_does_not_lower_the_grasp():
    policy = PickPolicy()
    policy.let_go_at.append(np.array([0.05, 0.0, 0.06]))
    assert policy._regrasp_depth(np.array([0.0, 0.0, 0.06])) == 0.0
    assert policy._regrasp_depth(np.array([0.04, 0.005, 0.06])) == pytest.approx(0.01)
    policy.reset()
    assert policy._regrasp_depth(np.array([0.04, 0.005, 0.06])) == 0.0


def test_stale_inputs_hold_still():
    p = PolicyParams()
    policy, robot = PickPolicy(p), FakeRobot(p)
    for _ in range(40):   # get moving
        out = policy.step(robot.t, _inputs(robot))
        robot.apply(out)
    assert out.phase == 'approach' and any(out.twist)
    inp = _inputs(robot)
    inp.tcp_stamp = robot.t - p.stale_s - 0.01
    out = policy.step(robot.t, inp)
    assert out.twist == (0.0, 0.0, 0.0, 0.0) and 'stale' in out.reason
    inp = _inputs(robot)
    inp.tcp = None
    assert policy.step(robot.t, inp).twist == (0.0, 0.0, 0.0, 0.0)
    # while closed, a stale grasp state also stops the arm
    _run(policy, robot, _touch_success, until=lambda pol, o: o.phase == 'lift')
    inp = _inputs(robot, touch='holding')
    inp.grasp_state_stamp = robot.t - 1.0
    assert policy.step(robot.t, inp).twist == (0.0, 0.0, 0.0, 0.0)


def test_fingers_over_a_large_unobserved_region_are_refused_only_when_asked():
    from edge_loop.kernels.occupancy import OCC_UNKNOWN

    grid = _grid(TARGET)
    r0, c0 = SPEC.cell_of(0.03, -0.03)
    r1, c1 = SPEC.cell_of(0.07, 0.03)
    grid[r0:r1, c0:c1] = OCC_UNKNOWN        # 4 x 6 cm unknown where the +x finger goes
    grasp = PlanarGrasp(center=[0, 0, 0.02], yaw=0.0, opening=0.05)
    assert check_grasp_clear(grasp, grid, SPEC)[0]     # default: unknown counts as free
    ok, why, hidden = check_grasp_clear(grasp, grid, SPEC, unobserved_cells=50)
    assert not ok and 'unobserved' in why and hidden.any()
    assert (grid[hidden] == OCC_UNKNOWN).all()
    # a region smaller than the limit (an occlusion shadow) does not refuse
    assert check_grasp_clear(grasp, grid, SPEC, unobserved_cells=200)[0]
    # the other finger pair, rotated 90 degrees, stays clear of it
    turned = PlanarGrasp(center=[0, 0, 0.02], yaw=math.pi / 2, opening=0.05)
    assert check_grasp_clear(turned, grid, SPEC, unobserved_cells=50)[0]
    # the policy gives up on the refused grasp with the parameter set, and takes it without
    policy, robot = PickPolicy(PolicyParams(max_attempts=2, unobserved_region_cells=50)), \
        FakeRobot()
    seen, out = _run(policy, robot, _touch_success, steps=100, grid=grid, grasp=grasp)
    assert seen == ['observe'] and out.reason == 'gave_up'
    policy, robot = PickPolicy(PolicyParams(max_attempts=2)), FakeRobot()
    seen, _ = _run(policy, robot, _touch_success, steps=100, grid=grid, grasp=grasp)
    assert 'approach' in seen


def test_a_grasp_whose_fingers_land_on_another_object_is_refused():
    obstacle = (0.03, -0.02, 0.05, 0.02)             # right where the +x finger would go
    grid = _grid(TARGET, obstacle)
    ok, why, blocked = check_grasp_clear(
        PlanarGrasp(center=[0, 0, 0.02], yaw=0.0, opening=0.05), grid, SPEC)
    assert not ok and blocked.any() and 'occupied' in why
    # rotated 90 degrees the fingers are clear; the target's own cells never block
    ok, _, _ = check_grasp_clear(PlanarGrasp(center=[0, 0, 0.02], yaw=math.pi / 2,
                                             opening=0.05), grid, SPEC)
    assert ok
    ok, _, _ = check_grasp_clear(PlanarGrasp(center=[0, 0, 0.02], yaw=0.0, opening=0.02),
                                 _grid(TARGET), SPEC)
    assert ok
    policy, robot = PickPolicy(PolicyParams(max_attempts=3)), FakeRobot()
    blocked_grasp = PlanarGrasp(center=[0, 0, 0.02], yaw=0.0, opening=0.05)
    seen, out = _run(policy, robot, _touch_success, steps=100, grid=grid, grasp=blocked_grasp)
    assert seen == ['observe'] and out.reason == 'gave_up'
    assert out.twist == (0.0, 0.0, 0.0, 0.0)


def _observe_once(policy, robot, grid, grasp, alternatives):
    """Step at home until the policy decides on the frame (accepts or refuses it)."""
    for _ in range(40):
        inp = _inputs(robot, grasp, grid)
        inp.grasp_alternatives = alternatives
        out = policy.step(robot.t, inp)
        robot.apply(out)
        if out.phase != 'observe' or policy.attempts:
            return out
    raise AssertionError(policy.last_reason)


def test_a_refused_grasp_falls_back_to_the_first_clear_alternative_of_the_frame():
    obstacle = (0.03, -0.02, 0.05, 0.02)             # where the +x finger of yaw 0 goes
    grid = _grid(TARGET, obstacle)
    blocked = PlanarGrasp(center=[0, 0, 0.02], yaw=0.0, opening=0.05, quality=0.9)
    also_blocked = PlanarGrasp(center=[0, 0, 0.02], yaw=0.1, opening=0.05, quality=0.8)
    nan = PlanarGrasp(center=[np.nan, 0, 0.02], yaw=math.pi / 2, opening=0.05, quality=0.8)
    clear = PlanarGrasp(center=[0, 0, 0.02], yaw=math.pi / 2, opening=0.05, quality=0.7)
    clear_too = PlanarGrasp(center=[0, 0.001, 0.02], yaw=math.pi / 2, opening=0.05)
    policy, robot = PickPolicy(), FakeRobot()
    out = _observe_once(policy, robot, grid, blocked, [also_blocked, nan, clear, clear_too])
    assert out.phase == 'approach' and policy.attempts == 0
    assert policy.plan.yaw == clear.yaw and policy.plan.center[1] == 0.0
    assert out.reason.startswith('alternative grasp 3 accepted (best refused: finger footprint')
    # none clear: one refused attempt, the best grasp's reason, no motion
    policy, robot = PickPolicy(), FakeRobot()
    out = _observe_once(policy, robot, grid, blocked, [also_blocked])
    assert out.phase == 'observe' and policy.attempts == 1 and policy.plan is None
    assert out.twist == (0.0, 0.0, 0.0, 0.0)
    assert policy.last_reason.startswith('grasp refused: finger footprint')
    # an alternative below min_grasp_quality is not taken
    policy, robot = PickPolicy(PolicyParams(min_grasp_quality=0.75)), FakeRobot()
    out = _observe_once(policy, robot, grid, blocked, [clear])
    assert out.phase == 'observe' and policy.attempts == 1


def test_no_grasp_is_accepted_from_a_frame_taken_before_the_arm_was_home():
    p = PolicyParams()
    policy, robot = PickPolicy(p), FakeRobot(p)
    robot.tcp += [0.0, -0.2, 0.0]          # start in view
    old = robot.t
    for _ in range(60):
        inp = _inputs(robot)
        inp.grasp_stamp = old               # a grasp computed while the arm was in view
        out = policy.step(robot.t, inp)
        robot.apply(out)
    assert out.phase == 'observe'
    out = policy.step(robot.t, _inputs(robot))
    assert out.phase == 'approach'


def test_invalid_grasps_are_ignored():
    policy, robot = PickPolicy(), FakeRobot()
    bad = PlanarGrasp(center=[np.nan, 0, 0.02], yaw=0.0, opening=0.05)
    seen, out = _run(policy, robot, _touch_success, steps=20, grasp=bad)
    assert seen == ['observe'] and out.twist == (0.0, 0.0, 0.0, 0.0)


def test_symmetric_yaw_picks_the_nearest_jaw_orientation():
    assert symmetric_yaw(math.pi - 0.1, 0.0) == pytest.approx(-0.1)
    assert symmetric_yaw(0.2, 3.0) == pytest.approx(0.2 + math.pi)


@pytest.mark.slow
def test_closed_loop_pick_in_the_simulator():
    from edge_loop.pick_episode import run_pick_episode

    result = run_pick_episode(800, 'nominal', n_objects=2)
    assert result.commands_into_occupied == 0
    assert result.success, result.phases


@pytest.mark.slow
def test_a_grip_that_let_go_in_the_simulator_is_picked_lower():
    # held-out scene 819 (harsh shadow) with the planner's former 15 mm grasp depth: the
    # planned grip holds on the table and lets go as the lift starts, three times in a row
    # with regrasp_deeper 0; one centimetre lower it holds. (The shipped 25 mm depth holds at
    # the first grip: docs/worlds.md.)
    from edge_loop.kernels.grasp_planner import GraspParams
    from edge_loop.pick_episode import run_pick_episode

    shallow = GraspParams(grasp_depth=0.015)
    same = run_pick_episode(819, 'harsh_shadow', n_objects=3,
                            params=PolicyParams(regrasp_deeper=0.0), grasp_params=shallow)
    assert not same.success
    assert [r for _, _, r in same.phases].count('lost while lifting') == 3
    lower = run_pick_episode(819, 'harsh_shadow', n_objects=3, grasp_params=shallow)
    assert lower.success, lower.phases
    assert lower.commands_into_occupied == 0
    shipped = run_pick_episode(819, 'harsh_shadow', n_objects=3)
    assert shipped.success and 'lost while lifting' not in [r for _, _, r in shipped.phases]


@pytest.mark.slow
def test_the_episode_metric_sees_a_finger_driven_into_an_object():
    from edge_loop.pick_episode import _into_occupied
    from edge_loop.sim import world as sim

    with sim.SimWorld(0, object_specs=['cube']) as world:
        (pos, _) = world.objects[0].pose
        truth = world.gt_occupancy()
        plan = PlanarGrasp(center=[0.15, 0.1, 0.02], yaw=0.0, opening=0.05)  # elsewhere
        down = (0.0, 0.0, -0.1, 0.0)
        # the +x finger over the cube, fingertips at the table: into the cube
        low = (pos[0] - 0.03, pos[1], 0.02, 0.0)
        assert _into_occupied(world, truth, SPEC, low, 0.0, 0.05, down, plan)
        # the same footprint 0.3 m up, or moving up: not into anything
        assert not _into_occupied(world, truth, SPEC, (low[0], low[1], 0.3, 0.0), 0.0, 0.05,
                                  down, plan)
        assert not _into_occupied(world, truth, SPEC, low, 0.0, 0.05, (0, 0, 0.1, 0), plan)
