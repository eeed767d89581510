# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Tactile grasp state on simulated grasp episodes: accuracy, decision latency, false holding.

Usage: python bench/bench_grasp_state.py [--episodes 10] [--synthetic 20]

Episodes run in ``SimWorld`` on held-out objects (800-999): the gripper is put over the mask
baseline's grasp, descends, closes, lifts, shakes and (``normal``) releases; ``empty`` closes
next to the object; ``heavy`` makes the object 1.5 kg and grips with 6 N, so it slips or drops
during the lift and the shake. The estimator sees what ``/gripper/joint_states`` carries (the
simulator's noisy, biased, 3-step delayed pad forces) and the commanded opening. The truth comes
from the noiseless, undelayed simulation: both pads touching (contact force > 0.5 N), the
object's velocity relative to the gripper (> 2 cm/s for 3 steps while touching, 0.1 s after
the grip settled = slipping), the command.

Every episode is classified twice: from what ``/gripper/joint_states`` carries with the pads'
shear channel (``sim_robot`` publishes it by default, ``shear_sensing``), and from pad normal
forces and finger positions alone (a gripper without shear sensing).

Accuracy is per episode over all samples except the 20 ms after each true change (the latency
budget). A true change is decided when the estimator first reports the new state (for a loss:
``slipping`` or ``lost``) before the truth changes again (plus the 20 ms grace); otherwise it is
missed, so a 4 ms slip blip is a miss, not a long latency to some later slip. A *slip event* is
a run of true ``slipping`` (with the ``lost`` that may follow it); it is detected when the
estimator reports ``slipping`` or ``lost`` during it (plus the grace); its latency is counted
from the start of the relative motion (the label needs 3 fast steps, so that is 2 steps,
8.3 ms, before the label; the synthetic episodes label the motion itself). False holding is the
share of samples reported ``holding`` while nothing is held; false slipping the share reported
``slipping`` while the truth is ``holding``. The synthetic episodes of ``verify/ops_grasp_state``
(known slips and losses) follow.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from edge_loop.kernels import grasp_state as gs
from edge_loop.verify import ops_grasp_state as ops

GRACE_S = 0.02
SLIP_SPEED = 0.02
LABEL_LAG_STEPS = 2        # the slip label needs 3 fast steps: the motion began 2 steps earlier
CONTACT_N = 0.5
SETTLE_S = 0.1


def _relative_speed(world, body, g) -> float:
    import pybullet as p

    v_obj, _ = p.getBaseVelocity(body, physicsClientId=world.client)
    pos_obj, _ = p.getBasePositionAndOrientation(body, physicsClientId=world.client)
    v_g, w_g = p.getBaseVelocity(g.body, physicsClientId=world.client)
    pos_g, _ = p.getBasePositionAndOrientation(g.body, physicsClientId=world.client)
    rel = np.array(v_obj) - (np.array(v_g) + np.cross(w_g, np.array(pos_obj) - pos_g))
    return float(np.linalg.norm(rel))


class Recorder:
    """Steps the world and records the sensor sample and the true state of every step."""

    def __init__(self, world, body):
        self.world, self.body = world, body
        self.rows, self.truth, self.shears = [], [], []
        self.cmd = 0.085
        self.gripped = False
        self.gripped_since = 0.0
        self.fast = 0

    def step(self, n):
        g = self.world.gripper
        for _ in range(n):
            self.world.step()
            pos, vel, force = g.joint_state()
            true_f = g.true_forces()
            opening = float(pos.sum())
            touching = bool(true_f.min() > CONTACT_N)
            if self.cmd > opening + 0.003:
                state = gs.OPEN
                self.gripped = False
            elif touching:
                t = self.world.sim_time
                if not self.gripped:
                    self.gripped, self.gripped_since = True, t
                moving = _relative_speed(self.world, self.body, g) > SLIP_SPEED
                self.fast = self.fast + 1 if moving else 0
                # sliding for 3 steps (12.5 ms), once the grip has settled (not the push
                # of the closing fingers)
                slip = self.fast >= 3 and t - self.gripped_since >= SETTLE_S
                state = gs.SLIPPING if slip else gs.HOLDING
            elif self.gripped and self.world.sim_time - self.gripped_since >= SETTLE_S:
                state = gs.LOST                # contact gone after a settled grip
            elif self.gripped:
                state = gs.CLOSING             # contact flickered while the fingers closed
                self.gripped = False
            elif opening <= 0.003 and abs(vel.sum()) < 0.004:
                state = gs.CLOSED_EMPTY
            elif self.cmd < opening - 0.003 or -vel.sum() > 0.004:
                state = gs.CLOSING
            else:
                state = gs.OPEN
            self.rows.append([self.world.sim_time, *pos, *vel, *force, self.cmd])
            self.truth.append(state)
            self.shears.append(g.measured_shear())

    def trace(self, kind):
        a = np.array(self.rows)
        tr = ops.Trace(kind, a[:, 0], a[:, 1:3], a[:, 3:5], a[:, 5:7], a[:, 7], self.truth, {})
        tr.shears = np.array(self.shears)
        return tr


def run_episode(seed: int, kind: str):
    """One scripted grasp episode in a held-out scene; returns the recorded Trace."""
    import pybullet as p

    from edge_loop.sim.baselines import mask_centroid_grasp
    from edge_loop.sim.grasp_trial import MIN_TCP_Z, surface_height
    from edge_loop.sim.world import DT, SimWorld

    with SimWorld(seed, n_objects=1, split='heldout') as world:
        frame = world.render()
        grasp = mask_centroid_grasp(world, frame)
        if grasp is None:
            return None
        obj = world.objects[0]
        grip_force = 40.0
        if kind == 'heavy':
            p.changeDynamics(obj.body_id, -1, mass=1.5, physicsClientId=world.client)
            grip_force = 6.0
        if kind == 'empty':
            for dx, dy in ((0.1, 0), (-0.1, 0), (0, 0.09), (0, -0.09)):
                grasp.center[:2] += (dx, dy)
                if surface_height(world, grasp) < 0.01 and abs(grasp.center[0]) < 0.17 \
                        and abs(grasp.center[1]) < 0.12:
                    break
                grasp.center[:2] -= (dx, dy)
            else:
                return None
            grasp.center[2] = MIN_TCP_Z
        g = world.gripper
        rec = Recorder(world, obj.body_id)
        z_close = max(float(grasp.center[2]), MIN_TCP_Z)
        g.teleport([grasp.center[0], grasp.center[1], z_close + 0.12], grasp.yaw)
        rec.cmd = min(grasp.opening, 0.085)
        g.set_opening_now(rec.cmd)
        g.command_gripper(rec.cmd, grip_force)
        rec.step(24)
        for _ in range(int(3.0 / DT)):
            z = g.tcp_pose()[0][2]
            if z - z_close <= 0.001:
                break
            g.command_twist([0, 0, -min(0.15, max(6.0 * (z - z_close), 0.02))], 0.0)
            rec.step(1)
        g.command_twist([0, 0, 0], 0.0)
        rec.step(6)
        rec.cmd = 0.0
        g.command_gripper(0.0, grip_force)
        rec.step(int(0.6 / DT))
        g.command_twist([0, 0, 0.15], 0.0)
        rec.step(int(1.0 / DT))
        g.command_twist([0, 0, 0], 0.0)
        rec.step(24)
        for i in range(4):
            sign = 1.0 if i % 2 == 0 else -1.0
            g.command_twist([0.3 * sign, 0.2 * sign, 0.0], 1.5 * sign)
            rec.step(int(0.25 / DT))
        g.command_twist([0, 0, 0], 0.0)
        rec.step(int(0.3 / DT))
        rec.cmd = 0.085
        g.command_gripper(0.085, grip_force)
        rec.step(int(0.4 / DT))
        return rec.trace(kind)


def scores_with_loss_alarm(trace, states, label_lag_steps=LABEL_LAG_STEPS):
    """episode_scores plus decisions per true change and per slip event.

    ``events``: (true state entered, latency s or inf = missed) where the decision must come
    before the truth changes again (+ the grace), ``slipping`` counting as an early decision
    for a true loss; ``slips``: (duration s, latency s from the motion onset, which is
    ``label_lag_steps`` before the label, or inf) per slip event;
    ``false_slipping``: share of true ``holding`` samples reported ``slipping`` (outside the
    grace windows).
    """
    s = ops.episode_scores(trace, states, GRACE_S)
    t, truth = trace.t, trace.truth
    n = len(truth)
    changes = [k for k in range(1, n) if truth[k] != truth[k - 1]]
    lat = []
    for i, k in enumerate(changes):
        end = t[changes[i + 1]] + GRACE_S if i + 1 < len(changes) else np.inf
        want = {gs.LOST, gs.SLIPPING} if truth[k] == gs.LOST else {truth[k]}
        hit = next((j for j in range(k, n) if t[j] < end and states[j] in want), None)
        lat.append((truth[k], np.inf if hit is None else t[hit] - t[k]))
    s['events'] = lat
    going = {gs.SLIPPING, gs.LOST}
    slips = []
    k = 0
    while k < n:
        if truth[k] == gs.SLIPPING and (k == 0 or truth[k - 1] != gs.SLIPPING):
            j = k
            while j < n and truth[j] in going:
                j += 1
            end = t[j - 1] + GRACE_S
            hit = next((i for i in range(k, n) if t[i] <= end and states[i] in going), None)
            onset = t[max(k - label_lag_steps, 0)]
            slips.append((t[j - 1] - t[k], np.inf if hit is None else t[hit] - onset))
            k = j
        else:
            k += 1
    s['slips'] = slips
    graced = np.zeros(n, dtype=bool)
    for k in changes:
        graced |= (t >= t[k]) & (t < t[k] + GRACE_S)
    held = np.array([g == gs.HOLDING for g in truth]) & ~graced
    said = np.array([x == gs.SLIPPING for x in states])
    s['false_slipping'] = float((said & held).sum() / max(1, held.sum()))
    return s


def _pct(values, q):
    return f'{np.percentile(values, q):.1f}' if len(values) else '-'


def _table(title, results):
    print(f'## {title}\n')
    print('| kind | episodes | accuracy mean | accuracy min | episodes >= 99 % | '
          'decisions p50 / p95 / p99 ms | missed | sustained slips (>= 25 ms) detected | '
          'their latency from the motion p50 / p95 / p99 ms | false holding | '
          'false slipping |')
    print('|---|---|---|---|---|---|---|---|---|---|---|')
    kinds = sorted({k for k, _ in results})
    for kind in [*kinds, 'all']:
        rows = [s for k, s in results if kind in (k, 'all')]
        if not rows:
            continue
        acc = np.array([s['accuracy'] for s in rows])
        lat = np.array([x for s in rows for _, x in s['events']]) * 1e3
        fin = lat[np.isfinite(lat)]
        slip = np.array([x for s in rows for d, x in s['slips'] if d >= 0.025]) * 1e3
        sfin = slip[np.isfinite(slip)]
        fh = np.mean([s['false_holding'] for s in rows])
        fs = np.mean([s['false_slipping'] for s in rows])
        print(f'| {kind} | {len(rows)} | {acc.mean():.4f} | {acc.min():.4f} | '
              f'{np.mean(acc >= 0.99):.0%} | {_pct(fin, 50)} / {_pct(fin, 95)} / '
              f'{_pct(fin, 99)} | {len(lat) - len(fin)} of {len(lat)} | '
              f'{len(sfin)}/{len(slip)} | {_pct(sfin, 50)} / {_pct(sfin, 95)} / '
              f'{_pct(sfin, 99)} | {fh:.3%} | {fs:.3%} |')
    print()
    by_event: dict[str, list[float]] = {}
    for _, s in results:
        for state, x in s['events']:
            by_event.setdefault(state, []).append(x * 1e3)
    print('| event (true state entered) | count | latency p50 ms | p95 ms | p99 ms | missed |')
    print('|---|---|---|---|---|---|')
    for state, xs in sorted(by_event.items()):
        arr = np.array(xs)
        fin = arr[np.isfinite(arr)]
        print(f'| {state} | {len(arr)} | {_pct(fin, 50)} | {_pct(fin, 95)} | {_pct(fin, 99)} | '
              f'{len(arr) - len(fin)} |')
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--episodes', type=int, default=10, help='simulated episodes per kind')
    parser.add_argument('--synthetic', type=int, default=20, help='synthetic episodes per kind')
    args = parser.parse_args()
    t0 = time.perf_counter()
    results, with_shear = [], []
    for kind in ('normal', 'empty', 'heavy'):
        seed, done = 850, 0
        while done < args.episodes and seed < 1000:
            seed += 1
            trace = run_episode(seed, kind)
            if trace is None:
                continue
            for out, shears in ((results, None), (with_shear, trace.shears)):
                states = gs.state_names(gs.classify_trace(
                    trace.t, trace.positions, trace.velocities, trace.forces,
                    trace.commanded_opening, shears=shears))
                out.append((kind, scores_with_loss_alarm(trace, states)))
            done += 1
    took = time.perf_counter() - t0
    _table(f'simulated grasp episodes, held-out objects, /gripper/joint_states with the pad '
           f'shear channel ({took:.0f} s)', with_shear)
    _table('the same episodes from normal force and finger positions only (no shear '
           'sensing)', results)
    synth, synth_shear = [], []
    for kind in ops.EPISODE_KINDS:
        for seed in range(args.synthetic):
            trace = ops.synthetic_episode(1000 + seed, kind)
            for out, shears in ((synth, None), (synth_shear, trace.shears)):
                states = gs.state_names(gs.classify_trace(
                    trace.t, trace.positions, trace.velocities, trace.forces,
                    trace.commanded_opening, shears=shears))
                out.append((kind, scores_with_loss_alarm(trace, states, label_lag_steps=0)))
    _table('synthetic episodes (verify/ops_grasp_state.synthetic_episode)', synth)
    _table('synthetic episodes with their shear channel', synth_shear)
    print('targets: per-episode accuracy >= 99 %, decision latency <= 20 ms, false holding '
          '<= 0.5 %')


if __name__ == '__main__':
    main()
