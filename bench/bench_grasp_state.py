# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Tactile grasp state on simulated grasp episodes: accuracy, decision latency, false holding.

Usage: python bench/bench_grasp_state.py [--episodes 10] [--synthetic 20] [--kinds ...]
[--split heldout|train] [--save traces.pkl | --load traces.pkl]

Episodes run in ``SimWorld`` on held-out objects (800-999, scene seeds from 851; ``--split
train``: training objects 000-799, scene seeds from 1, for tuning thresholds without looking
at the held-out episodes): the gripper is put over the mask
baseline's grasp, descends, closes, lifts, shakes and (``normal``) releases; ``empty`` closes
next to the object; ``heavy`` makes the object 1.5 kg and grips with 6 N, so it slips or drops
during the lift and the shake; ``rotational`` grips the object 50-70 % of the way from its
centre to one end along its long axis, makes it 0.3-0.8 kg and grips with 8-20 N, so the
weight's moment and the shake turn it in the grip. The estimator sees what
``/gripper/joint_states`` carries (the simulator's noisy, biased, 3-step delayed pad forces) and
the commanded opening. The truth comes from the noiseless, undelayed simulation: both pads
touching (contact force > 0.5 N), the command, and *slipping* once the grip has settled (0.1 s)
when the object moved in the grip faster than 2 cm/s on average over the last 3 steps
(12.5 ms) -- its centre of mass or its material at a pad contact (a turn in the grip slides
the contacts while the centre of mass hardly moves), relative to the pads (the finger pair
vibrates sideways under a shake: moving with both pads is no slip) -- with a pad at the
friction limit (noiseless shear >= 0.85 of the friction coefficient times the normal force).
Motion in the grip with both pads well inside the friction cone is the solver's soft contacts
giving way, not Coulomb sliding: no force sensor shows it, so it is labelled ``holding`` and
counted as *drift* (share of held samples) in the tables.

Every episode is classified twice: from what ``/gripper/joint_states`` carries with the pads'
shear channel (``sim_robot`` publishes it by default, ``shear_sensing``), and from pad normal
forces and finger positions alone (a gripper without shear sensing).

Accuracy is per episode over all samples except the 20 ms after each true change (the latency
budget). A true change is decided when the estimator first reports the new state (for a loss:
``slipping`` or ``lost``) before the truth changes again (plus the 20 ms grace); otherwise it is
missed, so a 4 ms slip blip is a miss, not a long latency to some later slip. A *slip event* is
a run of true ``slipping`` (with the ``lost`` that may follow it); it is detected when the
estimator reports ``slipping`` or ``lost`` during it (plus the grace); its latency is counted
from the start of the relative motion (the label looks 3 steps back, so that is 2 steps,
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
LABEL_LAG_STEPS = 2        # the slip label looks 3 steps back: the motion began 2 steps earlier
SLIP_WINDOW_STEPS = 3
LIMIT_SHARE = 0.85         # of the friction coefficient: the pads split the load unevenly
CONTACT_N = 0.5
SETTLE_S = 0.1
SIM_KINDS = ('normal', 'empty', 'heavy', 'rotational')


def _pose_in_grip(world, body, g):
    """(object position (3,), rotation (3, 3), contact points (k, 3)) in the grip frame.

    The grip frame is the palm's, moved along the closing axis with the finger pair: the pair
    vibrates sideways under a shake (the symmetry coupling is a soft constraint), and an object
    that moves with both pads does not slip.
    """
    import pybullet as p

    c = world.client
    pos_g, orn_g = p.getBasePositionAndOrientation(g.body, physicsClientId=c)
    rot_g = np.array(p.getMatrixFromQuaternion(orn_g)).reshape(3, 3)
    q = [s[0] for s in p.getJointStates(g.body, [0, 1], physicsClientId=c)]
    origin = np.array(pos_g) + rot_g[:, 0] * (q[1] - q[0]) / 2
    pos_o, orn_o = p.getBasePositionAndOrientation(body, physicsClientId=c)
    rot_o = np.array(p.getMatrixFromQuaternion(orn_o)).reshape(3, 3)
    points = [cp[6] for cp in p.getContactPoints(bodyA=g.body, bodyB=body,
                                                 physicsClientId=c)]
    points = np.array(points).reshape(-1, 3)
    return ((np.array(pos_o) - origin) @ rot_g, rot_g.T @ rot_o, (points - origin) @ rot_g)


def _slip_speed(before, now, steps: int, dt: float) -> float:
    """Mean speed over ``steps`` of the object in the grip (m/s).

    The faster of its centre of mass and of its material at the pad contacts: a turn in the
    grip slides the contacts even when the centre of mass hardly moves. Net motion over the
    window, so solver jitter of the contacts is no slip.
    """
    pos0, rot0, _ = before
    pos1, rot1, points = now
    moved = [float(np.linalg.norm(pos1 - pos0))]
    if len(points):
        # where the material now at each contact point was ``steps`` ago (grip frame)
        was = (points - pos1) @ rot1 @ rot0.T + pos0
        moved.append(float(np.linalg.norm(points - was, axis=1).max()))
    return max(moved) / (steps * dt)


def at_limit(wrench) -> bool:
    """True when a pad's noiseless shear is at the friction limit.

    That is shear / normal force >= ``LIMIT_SHARE`` of the pad-object friction coefficient.
    """
    normal, shear = wrench[0], wrench[1]
    return bool(np.any(shear >= LIMIT_SHARE * ops.FRICTION * np.maximum(normal, 1e-6)))


class Recorder:
    """Steps the world and records the sensor sample and the true state of every step."""

    def __init__(self, world, body):
        from edge_loop.sim.world import DT

        self.world, self.body, self.world_dt = world, body, DT
        self.rows, self.truth, self.extra = [], [], []
        self.cmd = 0.085
        self.gripped = False
        self.gripped_since = 0.0
        self.poses = []

    def step(self, n):
        g = self.world.gripper
        for _ in range(n):
            self.world.step()
            drift = False
            pos, vel, force = g.joint_state()
            true_f = g.true_normal_shear[0]
            opening = float(pos.sum())
            touching = bool(true_f.min() > CONTACT_N)
            self.poses.append(_pose_in_grip(self.world, self.body, g))
            back = min(SLIP_WINDOW_STEPS, len(self.poses) - 1)
            speed = _slip_speed(self.poses[-1 - back], self.poses[-1], max(back, 1),
                                self.world_dt)
            if self.cmd > opening + 0.003:
                state = gs.OPEN
                self.gripped = False
            elif touching:
                t = self.world.sim_time
                if not self.gripped:
                    self.gripped, self.gripped_since = True, t
                # moved in the grip over the last 3 steps (12.5 ms), once the grip has
                # settled (not the push of the closing fingers), with a pad contact at the
                # friction limit: motion with every contact inside the friction cone is the
                # solver's soft contacts giving way (drift), which no force sensor can show
                moving = speed > SLIP_SPEED and t - self.gripped_since >= SETTLE_S
                slip = moving and at_limit(g.true_normal_shear)
                drift = moving and not slip
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
            self.extra.append([*g.measured_shear(), *np.concatenate(g.true_normal_shear),
                               speed, float(drift)])

    def trace(self, kind):
        a = np.array(self.rows)
        tr = ops.Trace(kind, a[:, 0], a[:, 1:3], a[:, 3:5], a[:, 5:7], a[:, 7], self.truth, {})
        x = np.array(self.extra)
        tr.shears = x[:, 0:2]
        tr.true_normal_shear = x[:, 2:6].reshape(-1, 2, 2)
        tr.rel_speed, tr.drift = x[:, 6], x[:, 7].astype(bool)
        return tr


def _off_centre(world, frame, grasp, rng) -> None:
    """Move ``grasp`` towards one end of the object along its long axis, height from there."""
    from edge_loop.kernels.camera import camera_to_world, deproject
    from edge_loop.sim.baselines import DEPTH_BELOW_TOP_M
    from edge_loop.sim.world import TRAY_FLOOR

    mask = (frame.label == 1) & (frame.depth_true_m > 0)
    pts = camera_to_world(deproject(frame.depth_true_m, frame.intrinsics)[mask],
                          world.extrinsics).astype(np.float64)
    along = np.array([-np.sin(grasp.yaw), np.cos(grasp.yaw)])
    proj = (pts[:, :2] - grasp.center[:2]) @ along
    end = proj.max() if rng.random() < 0.5 else proj.min()
    shift = float(rng.uniform(0.5, 0.7)) * end
    grasp.center[:2] += shift * along
    near = np.abs(proj - shift) < 0.006
    top = float(np.percentile(pts[near, 2], 98)) if near.any() else float(grasp.center[2])
    grasp.center[2] = top - min(DEPTH_BELOW_TOP_M, 0.5 * (top - TRAY_FLOOR))


def run_episode(seed: int, kind: str, split: str = 'heldout'):
    """One scripted grasp episode in a scene of ``split``; returns the recorded Trace."""
    import pybullet as p

    from edge_loop.sim.baselines import mask_centroid_grasp
    from edge_loop.sim.grasp_trial import MIN_TCP_Z, surface_height
    from edge_loop.sim.world import DT, SimWorld

    with SimWorld(seed, n_objects=1, split=split) as world:
        frame = world.render()
        grasp = mask_centroid_grasp(world, frame)
        if grasp is None:
            return None
        obj = world.objects[0]
        grip_force = 40.0
        if kind == 'heavy':
            p.changeDynamics(obj.body_id, -1, mass=1.5, physicsClientId=world.client)
            grip_force = 6.0
        if kind == 'rotational':
            # gripped near one end: the weight's moment about the grasp axis turns the object
            # in the pads (a heavier object, the inertia scaled with the mass)
            rng = np.random.default_rng([seed, 5])
            _off_centre(world, frame, grasp, rng)
            mass = float(rng.uniform(0.3, 0.8))
            inertia = np.array(p.getDynamicsInfo(obj.body_id, -1,
                                                 physicsClientId=world.client)[2])
            p.changeDynamics(obj.body_id, -1, mass=mass,
                             localInertiaDiagonal=(inertia * mass / obj.mass).tolist(),
                             physicsClientId=world.client)
            grip_force = float(rng.uniform(8.0, 20.0))
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
    if getattr(trace, 'drift', None) is not None:
        s['drift'] = float((trace.drift & held).sum() / max(1, held.sum()))
    return s


def _pct(values, q):
    return f'{np.percentile(values, q):.1f}' if len(values) else '-'


def _table(title, results):
    print(f'## {title}\n')
    print('| kind | episodes | accuracy mean | accuracy min | episodes >= 99 % | '
          'decisions p50 / p95 / p99 ms | missed | sustained slips (>= 25 ms) detected | '
          'their latency from the motion p50 / p95 / p99 ms | false holding | '
          'false slipping | drift |')
    print('|---|---|---|---|---|---|---|---|---|---|---|---|')
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
        drift = [s['drift'] for s in rows if 'drift' in s]
        dr = f'{np.mean(drift):.2%}' if drift else '-'
        print(f'| {kind} | {len(rows)} | {acc.mean():.4f} | {acc.min():.4f} | '
              f'{np.mean(acc >= 0.99):.0%} | {_pct(fin, 50)} / {_pct(fin, 95)} / '
              f'{_pct(fin, 99)} | {len(lat) - len(fin)} of {len(lat)} | '
              f'{len(sfin)}/{len(slip)} | {_pct(sfin, 50)} / {_pct(sfin, 95)} / '
              f'{_pct(sfin, 99)} | {fh:.3%} | {fs:.3%} | {dr} |')
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


SEED_START = {'heldout': 850, 'train': 0}


def simulate(kinds, episodes: int, split: str = 'heldout') -> list:
    """``episodes`` recorded traces of each kind, from the same seeds every run."""
    traces = []
    for kind in kinds:
        seed, done = SEED_START[split], 0
        while done < episodes and seed < SEED_START[split] + 150:
            seed += 1
            trace = run_episode(seed, kind, split)
            if trace is None:
                continue
            trace.events['seed'] = seed
            traces.append(trace)
            done += 1
    return traces


def classify(trace, channels: str, params=gs.DEFAULT_PARAMS, kernel=gs):
    """State names of a trace from ``channels``: 'normal' (forces, fingers) or 'shear' (too).

    ``kernel``: a module with the grasp_state API (to compare another version on saved traces).
    """
    kwargs = {}
    if channels == 'shear':
        kwargs['shears'] = trace.shears
    return kernel.state_names(kernel.classify_trace(
        trace.t, trace.positions, trace.velocities, trace.forces, trace.commanded_opening,
        params=params, **kwargs))


def main() -> None:
    import pickle

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--episodes', type=int, default=10, help='simulated episodes per kind')
    parser.add_argument('--synthetic', type=int, default=20, help='synthetic episodes per kind')
    parser.add_argument('--kinds', nargs='+', default=list(SIM_KINDS))
    parser.add_argument('--split', choices=sorted(SEED_START), default='heldout',
                        help='objects and scene seeds to simulate (train: for tuning)')
    parser.add_argument('--save', help='pickle the simulated traces here')
    parser.add_argument('--load', help='classify these pickled traces instead of simulating')
    args = parser.parse_args()
    t0 = time.perf_counter()
    if args.load:
        with open(args.load, 'rb') as fh:
            traces = [tr for tr in pickle.load(fh) if tr.kind in args.kinds]
    else:
        traces = simulate(args.kinds, args.episodes, args.split)
    if args.save:
        with open(args.save, 'wb') as fh:
            pickle.dump(traces, fh)
    took = time.perf_counter() - t0
    results, with_shear = [], []
    for trace in traces:
        for out, channels in ((results, 'normal'), (with_shear, 'shear')):
            out.append((trace.kind, scores_with_loss_alarm(trace, classify(trace, channels))))
    objects = 'held-out' if args.load is None and args.split == 'heldout' else (
        'training' if args.load is None else 'loaded')
    _table(f'simulated grasp episodes, {objects} objects, /gripper/joint_states with the pad '
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
