# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""edge-loop regress on a Ray cluster of three nodes on this machine (ray.cluster_utils).

One cluster for the module (its start-up is most of the time): a head without CPUs, so every
task runs on the two one-CPU worker nodes. The report must equal a serial run's; a worker
process killed mid-chunk and a worker node removed mid-run must lose nothing and count
nothing twice. The node test runs last (it leaves one worker node).
"""

from __future__ import annotations

import os
import signal

import pytest
import ray
from conftest import GOOD
from ray.cluster_utils import Cluster

from edge_loop.fleet import cli, engine, merge, sharding
from edge_loop.fleet.cache import ResultCache
from edge_loop.fleet.replay import default_params

CFG = cli.load_config()
TASK = {**CFG['task'], 'max_chunk': 3, 'chunks_per_worker': 1}


@pytest.fixture(scope='module')
def cluster(tmp_path_factory):
    # Node death is noticed within about a second instead of Ray's default of many.
    config = {'health_check_initial_delay_ms': 0, 'health_check_period_ms': 500,
              'health_check_failure_threshold': 2}
    c = Cluster(initialize_head=True, head_node_args={
        'num_cpus': 0, 'include_dashboard': False, '_system_config': config})
    workers = [c.add_node(num_cpus=1) for _ in range(2)]
    c.wait_for_nodes()
    ray.init(address=c.address, log_to_driver=False)
    yield c, workers
    ray.shutdown()
    c.shutdown()


@pytest.fixture(scope='module')
def serial_report(bag_set):
    report, _ = cli.regress([bag_set], out=None, address='serial', progress=False)
    return report


def test_ray_report_equals_serial(cluster, bag_set, serial_report):
    report, _ = cli.regress([bag_set], out=None, address='auto', progress=False)
    assert report['run']['workers'] == 2
    assert report['summary']['bad'] == 2 and report['summary']['replayed'] == len(GOOD)
    assert merge.without_timing(report) == merge.without_timing(serial_report)
    # both worker nodes replayed bags
    nodes = {w.split(':')[0] for w in report['run']['bags_per_worker']}
    assert len(nodes) == 2


def test_shipped_bags_report_equals_serial(cluster, bag_set, serial_report):
    # --ship: the bags' files travel with the tasks (no shared file system)
    report, _ = cli.regress([bag_set / 'nominal_s800', bag_set / 'broken'], out=None,
                            address='auto', progress=False, ship=True)
    assert merge.without_timing(report['bags']['nominal_s800']) == merge.without_timing(
        serial_report['bags']['nominal_s800'])
    # the bad ones for the same reasons, naming the bag's own path (not the worker's copy)
    assert {b['bag']: b['kind'] for b in report['bad_bags']} == {
        'nominal_s999': 'corrupt', 'joints_only': 'schema'}
    corrupt = next(b for b in report['bad_bags'] if b['kind'] == 'corrupt')
    assert str(bag_set / 'broken' / 'nominal_s999') in corrupt['reason'], corrupt


def _run_and_kill(bag_set, kill) -> tuple[engine.Collector, str]:
    """Replay the good bags in chunks of three, calling ``kill(where)`` once one bag is in.

    Its task is then still replaying the rest of its chunk. Returns (collector, killed where).
    """
    bags = [b for b in sharding.discover([bag_set]) if not b.bag_id.startswith('broken/')]
    keys = {b.bag_id: b.bag_id for b in bags}
    killed = []

    def on_bag(result):
        if not killed:
            where = collector.workers[result['bag']]
            killed.append(where)
            kill(where)

    collector = engine.Collector(bags, keys, ResultCache(None), on_bag=on_bag)
    chunks = sharding.shards(bags, 2, TASK['max_chunk'], TASK['chunks_per_worker'])
    assert [len(c) for c in chunks] == [3, 3]
    engine.run_ray(chunks, default_params(), collector, task=TASK)
    return collector, killed[0]


def _check_complete(collector, serial_report, killed):
    report = merge.merge(collector.results, worst=CFG['worst_frames'])
    assert merge.without_timing(report) == merge.without_timing(
        {**serial_report, 'bad_bags': [], 'summary': report['summary'],
         'bags': {k: v for k, v in serial_report['bags'].items()
                  if not k.startswith('broken/')}})
    assert report['summary']['frames'] == sum(
        len(b['frames']) for k, b in serial_report['bags'].items() if b['status'] == 'ok')
    # every bag once, none lost. (Which bags the killed process finished depends on how far
    # its stream had got when the kill landed: items already sent are kept, the retry's
    # repeats of them dropped; so no count of its bags is asserted.)
    assert sorted(collector.results) == sorted(collector.refs)
    assert all(r['status'] == 'ok' for r in collector.results.values())
    assert killed in collector.workers.values()


def test_killed_worker_process_is_retried(cluster, bag_set, serial_report):
    collector, killed = _run_and_kill(
        bag_set, lambda where: os.kill(int(where.split(':')[1]), signal.SIGKILL))
    _check_complete(collector, serial_report, killed)


@pytest.mark.ros
def test_graph_mode_on_ray_equals_fast_mode(cluster, bag_set, serial_report):
    # Graph mode: each bag through the node graph (bag_player, locator, grasp planner,
    # occupancy mapper as bringup starts them) in a Ray task, each on a ROS domain of its own.
    # Two short bags on the two one-CPU worker nodes at once, and the two bad ones.
    report, _ = cli.regress([bag_set / 'nominal_s800', bag_set / 'dim_s801',
                             bag_set / 'broken'], out=None, address='auto', mode='graph',
                            progress=False)
    assert report['summary']['replayed'] == 2 and report['summary']['bad'] == 2
    # the nodes answered every frame with what the kernels compute (judged by the same code)
    good = ('nominal_s800', 'dim_s801')
    assert merge.without_timing({k: report['bags'][k] for k in good}) == merge.without_timing(
        {k: serial_report['bags'][k] for k in good})
    # the bad bags for the same reasons (read before any node starts)
    assert {b['bag']: (b['kind'], b['reason']) for b in report['bad_bags']} == {
        b['bag'].removeprefix('broken/'): (b['kind'], b['reason'])
        for b in serial_report['bad_bags']}
    assert 'total_ms' in report['latency']
    # each graph on a domain of its own: the two tasks ran at once on the two nodes
    where = list(report['run']['bags_per_worker'])
    domains = [w.rsplit(':domain', 1)[1] for w in where]
    assert len(where) == 2 and len(set(domains)) == 2, where
    assert len({w.split(':')[0] for w in where}) == 2


def test_removed_node_is_retried_last(cluster, bag_set, serial_report):
    c, workers = cluster

    def remove(where):
        node = next(w for w in workers if w.node_id.startswith(where.split(':')[0]))
        c.remove_node(node, allow_graceful=False)

    collector, killed = _run_and_kill(bag_set, remove)
    _check_complete(collector, serial_report, killed)
