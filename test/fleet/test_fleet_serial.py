# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""edge-loop regress without Ray: sharding, merging, caching and resuming, bad bags, baseline."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import pytest
from conftest import copy_good

from edge_loop.fleet import cli, merge, sharding
from edge_loop.fleet.replay import BadBagError, default_params, replay_frames

CFG = cli.load_config()


def test_discover_folder_list_file_and_names(bag_set, tmp_path):
    bags = sharding.discover([bag_set])
    ids = [b.bag_id for b in bags]
    assert ids == sorted(ids) and len(ids) == 8
    assert 'broken/nominal_s999' in ids and 'broken/joints_only' in ids
    nominal = next(b for b in bags if b.bag_id == 'nominal_s800')
    assert (nominal.scenario, nominal.lighting) == ('nominal', 'nominal')
    assert next(b for b in bags if b.bag_id == 'broken/joints_only').scenario == 'unknown'
    # a list file, relative to itself, with a comment; a bag named twice counts once
    listing = tmp_path / 'bags.txt'
    rel = Path('..') / bag_set.relative_to(tmp_path.parent) / 'glare_s802'
    listing.write_text(f'# two bags\n{bag_set / "dim_s801"}\n{rel}  # relative\n')
    listed = sharding.discover([listing, bag_set / 'dim_s801'])
    assert [b.bag_id for b in listed] == ['dim_s801', 'glare_s802']
    assert listed[0].content_hash == next(b for b in bags
                                          if b.bag_id == 'dim_s801').content_hash
    with pytest.raises(FileNotFoundError):
        sharding.discover([tmp_path / 'nothing_here'])


def test_shards_cover_every_bag_once_balanced(bag_set):
    bags = sharding.discover([bag_set])
    fake = [sharding.BagRef(f'b{i:03d}', '', 'h', size, 's', 'l')
            for i, size in enumerate([100] * 40 + [1000] * 8)]
    for workers, max_chunk in ((1, 16), (2, 16), (4, 3), (64, 16)):
        chunks = sharding.shards(fake, workers, max_chunk)
        flat = [b.bag_id for c in chunks for b in c]
        assert sorted(flat) == [b.bag_id for b in fake]          # each once
        assert max(len(c) for c in chunks) <= max_chunk
        loads = [sum(b.size for b in c) for c in chunks]
        assert max(loads) - min(loads) <= 1000                   # LPT: within one big bag
        assert chunks == sharding.shards(list(reversed(fake)), workers, max_chunk)
    assert len(sharding.shards(fake, 2, 16)) == 8                # four per worker
    assert sharding.shards([], 2) == []
    assert len(bags) == 8


def test_bad_bags_listed_with_reasons(bag_set):
    with pytest.raises(BadBagError) as corrupt:
        list(replay_frames(bag_set / 'broken' / 'nominal_s999', default_params()))
    with pytest.raises(BadBagError):
        list(replay_frames(bag_set / 'broken' / 'joints_only', default_params()))
    report, _ = cli.regress([bag_set / 'broken', bag_set / 'nominal_s800'], out=None,
                            address='serial', progress=False)
    bad = {b['bag']: b for b in report['bad_bags']}
    assert corrupt.value.kind == 'corrupt'
    assert bad['nominal_s999']['kind'] == 'corrupt'
    assert 'truncated or corrupt' in bad['nominal_s999']['reason']
    assert bad['joints_only']['kind'] == 'schema'
    assert 'no camera topics' in bad['joints_only']['reason']
    assert report['summary']['replayed'] == 1 and report['summary']['bad'] == 2
    assert cli.exit_code(report, CFG) == 0
    assert cli.exit_code(report, {**CFG, 'fail_on_bad_bags': True}) == 1


@pytest.fixture
def fixed_revision(monkeypatch):
    # Other work may edit the kernels while a test runs (a shared checkout): the revision is
    # pinned so that these tests see the cache logic only.
    monkeypatch.setattr('edge_loop.fleet.cache.package_revision', lambda: 'test-revision')


def test_package_revision_hashes_the_replay_sources():
    from edge_loop.fleet.cache import REVISION_SOURCES, package_revision

    assert 'kernels' in REVISION_SOURCES and 'fleet/replay.py' in REVISION_SOURCES
    import edge_loop

    version, digest = package_revision().split('+')
    assert version == edge_loop.__version__ and len(digest) == 12


def test_cache_reuses_and_resumes(tmp_path, fixed_revision):
    bags = tmp_path / 'bags'
    copy_good(bags, ('nominal', 'dim', 'glare'))
    cache = tmp_path / 'cache'
    first, _ = cli.regress([bags], out=None, address='serial', cache_dir=cache,
                           progress=False)
    assert first['run']['fresh'] == 3 and first['run']['cached'] == 0
    again, _ = cli.regress([bags], out=None, address='serial', cache_dir=cache,
                           progress=False)
    assert again['run']['fresh'] == 0 and again['run']['cached'] == 3
    assert merge.without_timing(again) == merge.without_timing(first)
    # a changed bag replays, the others come from the cache
    shutil.rmtree(bags / 'dim_s801')
    shutil.copytree(bags / 'glare_s802', bags / 'dim_s801')
    changed, _ = cli.regress([bags], out=None, address='serial', cache_dir=cache,
                             progress=False)
    assert changed['run']['fresh'] == 1
    # other parameters are another key
    params = default_params()
    params['locator'] = {'min_pixels': 81}
    other, _ = cli.regress([bags], out=None, address='serial', cache_dir=cache,
                           progress=False, params=params)
    assert other['run']['fresh'] == 3


def test_interrupted_run_resumes(tmp_path, monkeypatch, fixed_revision):
    bags = tmp_path / 'bags'
    copy_good(bags, ('nominal', 'dim', 'glare'))
    cache = tmp_path / 'cache'
    from edge_loop.fleet import engine

    real = engine.Collector._finish

    def die_after_first(self, bag_id, result, store):
        real(self, bag_id, result, store)
        raise KeyboardInterrupt            # the run is killed once one bag is stored

    monkeypatch.setattr(engine.Collector, '_finish', die_after_first)
    with pytest.raises(KeyboardInterrupt):
        cli.regress([bags], out=None, address='serial', cache_dir=cache, progress=False)
    monkeypatch.setattr(engine.Collector, '_finish', real)
    stored = list(cache.rglob('*.json'))
    assert len(stored) == 1 and not list(cache.rglob('*.tmp'))
    resumed, _ = cli.regress([bags], out=None, address='serial', cache_dir=cache,
                             progress=False)
    assert resumed['run']['fresh'] == 2 and resumed['run']['cached'] == 1
    assert resumed['summary']['replayed'] == 3


def _result(bag, frames, status='ok'):
    return {'bag': bag, 'hash': 'h' + bag, 'scenario': 'nominal', 'lighting': 'nominal',
            'status': status, 'path': '/x/' + bag, 'frames': frames,
            **({'kind': 'corrupt', 'reason': 'cut'} if status != 'ok' else {})}


def _frame(index, missed=0, err=1.0, iou=0.95, issues=(), ms=5.0):
    return {'index': index, 'stamp_ns': index, 'truth': True, 'n_truth': 2, 'missed': missed,
            'false': 0, 'errors_mm': [err] * (2 - missed), 'grasp_issues': list(issues),
            'occupancy_iou': iou, 'detected': [], 'grasp': None,
            'timing': {'locator_ms': ms, 'grasp_ms': ms, 'occupancy_ms': ms, 'total_ms': ms}}


def test_merge_is_order_free_and_compare_finds_worse_frames():
    results = {'a': _result('a', [_frame(0), _frame(1, err=2.0)]),
               'b': _result('b', [_frame(0, missed=1)]),
               'c': _result('c', [], status='bad')}
    report = merge.merge(results)
    shuffled = {k: {**v, 'frames': list(reversed(v['frames']))}
                for k, v in reversed(list(results.items()))}
    slower = copy.deepcopy(shuffled)
    for r in slower.values():
        for f in r['frames']:
            f['timing'] = {k: 99.0 for k in f['timing']}
    assert merge.without_timing(merge.merge(slower)) == merge.without_timing(report)
    assert json.dumps(merge.merge(shuffled), sort_keys=True) == json.dumps(report,
                                                                            sort_keys=True)
    assert report['summary']['detection_rate'] == pytest.approx(5 / 6)
    assert report['worst_frames'][0]['bag'] == 'b'
    assert report['bad_bags'] == [{'bag': 'c', 'kind': 'corrupt', 'reason': 'cut'}]
    assert report['latency']['total_ms']['p50'] == 5.0
    # the same run against itself: nothing worse
    tol = CFG['tolerances']
    assert merge.compare(report, report, tol)['regressions'] == []
    # a frame of bag a loses an object and its grasp: worse bag, worse frame, regression
    worse = merge.merge({**results, 'a': _result('a', [_frame(0), _frame(
        1, missed=1, err=2.0, issues=['grasp centre off'])])})
    found = merge.compare(worse, report, tol)
    assert [(w['bag'], w['index']) for w in found['worse_frames']] == [('a', 1)]
    assert found['worse_frames'][0]['change'] == pytest.approx(2.0)
    assert any('detection rate' in r for r in found['regressions'])
    assert any('frame 1' in r for r in found['regressions'])
    # a small error change stays inside the tolerances but is still listed
    slight = merge.merge({**results, 'a': _result('a', [_frame(0), _frame(1, err=2.3)])})
    small = merge.compare(slight, report, tol)
    assert small['regressions'] == [] and len(small['worse_frames']) == 1
    # a bag that turned bad is a regression; one missing from the new run is listed
    gone = merge.merge({'a': _result('a', [], status='bad'), 'c': results['c']})
    lost = merge.compare(gone, report, tol)
    assert lost['missing_bags'] == ['b'] and 'a: replayed in the baseline' in \
        lost['regressions'][0]


def test_cli_writes_report_and_fails_on_regression(tmp_path, capsys):
    bags = tmp_path / 'bags'
    copy_good(bags, ('nominal', 'dim'))
    base = tmp_path / 'base'
    assert cli.run(cli_args([str(bags), '--out', str(base), '--address', 'serial'])) == 0
    for name in ('report.json', 'report.md', 'report.html'):
        assert (base / name).is_file()
    page = (base / 'report.html').read_text()
    assert 'Fleet replay regression' in page and 'data:image/png;base64' in page
    # the baseline made worse by hand: this run must fail against it
    data = json.loads((base / 'report.json').read_text())
    for frame in data['bags']['dim_s801']['frames']:
        frame['occupancy_iou'] = 1.0     # the new run's fused grid is now worse than this
    data['bags']['dim_s801']['summary'] = merge.bag_summary(data['bags']['dim_s801'])
    doctored = tmp_path / 'doctored.json'
    doctored.write_text(json.dumps(data))
    code = cli.run(cli_args([str(bags), '--out', str(tmp_path / 'new'), '--address', 'serial',
                             '--baseline', str(doctored)]))
    assert code == 1
    assert 'REGRESSION dim_s801' in capsys.readouterr().out
    assert 'Against the baseline' in (tmp_path / 'new' / 'report.md').read_text()
    with pytest.raises(ValueError, match='mode'):
        cli.regress([bags], out=None, address='serial', mode='slow', progress=False)


def cli_args(argv):
    from edge_loop.cli import build_parser

    return build_parser().parse_args(['regress', '--no-cache', '--quiet', *argv])


def test_progress_line_counts_and_eta():
    import io

    from edge_loop.fleet.report import Progress

    out = io.StringIO()
    bar = Progress(10, cached=4, stream=out, every_s=0.0)
    assert 'ETA     ?' in bar.line()
    bar.bag({'status': 'ok'})
    bar.bag({'status': 'bad'})
    line = out.getvalue().splitlines()[-1]
    assert '6/10 bags (4 cached, 1 bad)' in line and 'ETA' in line
    assert line.startswith('[' + '#' * 18 + '.')


def test_batched_keeps_every_item_in_order_and_streams():
    from edge_loop.fleet.engine import batched

    items = []
    for bag in ('a', 'b', 'c'):
        items += [('frame', bag, {'index': i}) for i in range(3)] + [('done', bag, 3, 'w')]
    lists = list(batched(iter(items), batch_frames=100, batch_s=60.0))
    # the first bag at once, the rest together (neither limit reached)
    assert [len(x) for x in lists] == [4, 8]
    assert [i for x in lists for i in x] == items
    # a long bag streams: at most batch_frames frames a list
    long = [('frame', 'a', {'index': i}) for i in range(10)] + [('bad', 'b', 'corrupt', 'x')]
    lists = list(batched(iter(long), batch_frames=4, batch_s=60.0))
    assert [len(x) for x in lists] == [4, 4, 3]
    assert [i for x in lists for i in x] == long
    # batch_s 0: every item its own list
    assert [len(x) for x in batched(iter(items), batch_frames=100, batch_s=0.0)] == [1] * 12


def test_graph_mode_domain_claims_never_collide(monkeypatch):
    # Graph mode's replays claim their ROS_DOMAIN_ID like the ROS tests (an flock per id):
    # claims held at once are distinct even when every claim starts its search at one id.
    import itertools

    from edge_loop import testing

    monkeypatch.setattr(testing, '_domain_counter', itertools.repeat(0))
    monkeypatch.setattr(testing.os, 'getpid', lambda: 41)
    held = [testing.claim_domain_id() for _ in range(5)]
    try:
        ids = [d for d, _ in held]
        assert len(set(ids)) == 5 and all(1 <= d <= 100 for d in ids)
    finally:
        for _, lock in held:
            lock.close()
    # released: the first id is free again
    domain, lock = testing.claim_domain_id()
    lock.close()
    assert domain == ids[0]


def test_graph_nodes_are_bringups_perception_graph_in_lockstep():
    from edge_loop.fleet.graph import GRAPH_STAGES, graph_nodes

    params = default_params()
    params['locator'] = {'min_pixels': 81}
    nodes = {n.name: n for n in graph_nodes('/bags/x', params)}
    assert list(nodes) == ['bag_player', *GRAPH_STAGES]
    player = nodes['bag_player'].parameters
    assert player['bag'] == '/bags/x' and player['mode'] == 'lockstep'
    assert player['restamp'] is False and player['wait_for_manager'] == 'lifecycle_manager'
    assert nodes['object_locator'].parameters['min_pixels'] == 81
    assert all(nodes[s].parameters['transport'] == 'shm' for s in GRAPH_STAGES)
