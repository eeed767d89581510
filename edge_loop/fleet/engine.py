# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Run the replays: serially in this process, or as Ray generator tasks (one chunk each).

Both paths feed the same stream of items to a :class:`Collector`: ``('frame', bag, record)``
per replayed frame, then ``('done', bag, frames)`` or ``('bad', bag, kind, reason)`` per bag.
A Ray task streams its items back in small batches (a Ray generator yielding lists of items,
:func:`batched`: the first bag at once, then at most ``batch_frames`` frames or ``batch_s``
seconds of work a batch; the driver's ``ray.wait`` loop takes whichever task has one ready):
one Ray object per frame cost more than a short bag's replay. A task whose worker or node dies is
retried by Ray (``max_retries``) and replays its chunk again: the collector keys frames by
(bag, index) and drops a finished bag's repeats, so nothing is counted twice; a bag is
complete, and written to the cache, only when every frame up to its ``done`` count is in.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from edge_loop.fleet.cache import ResultCache
from edge_loop.fleet.graph import GraphError, replay_graph_frames
from edge_loop.fleet.replay import BadBagError, replay_frames
from edge_loop.fleet.sharding import BagRef


def chunk_items(chunk: list[tuple[str, str]], params: dict[str, Any],
                mode: str = 'fast') -> Iterator[tuple]:
    """The item stream of one chunk of (bag id, path): frames, then done or bad, per bag.

    ``mode`` 'fast' replays through the kernels, 'graph' through the node graph
    (:mod:`edge_loop.fleet.graph`: a graph per bag, on a ROS domain of its own).
    """
    for bag_id, path in chunk:
        frames = 0
        claim: dict[str, Any] = {}
        try:
            records = (replay_graph_frames(path, params, claim) if mode == 'graph' else
                       replay_frames(path, params))
            for record in records:
                yield ('frame', bag_id, record)
                frames += 1
        except BadBagError as exc:
            yield ('bad', bag_id, exc.kind, exc.reason)
            continue
        except GraphError as exc:
            yield ('bad', bag_id, 'graph', str(exc))
            continue
        except Exception as exc:  # noqa: BLE001 - a kernel crash on one bag fails that bag
            yield ('bad', bag_id, 'error', f'replay raised {type(exc).__name__}: {exc}')
            continue
        if frames == 0:
            yield ('bad', bag_id, 'schema', 'no complete camera frame (colour, depth and '
                   'camera_info of one stamp) in the bag')
        else:
            where = _where()
            if 'domain' in claim:
                where += f":domain{claim['domain']}"
            yield ('done', bag_id, frames, where)


def _where() -> str:
    # Which process replayed a bag (for the run's per-worker counts; never in the report):
    # the Ray node (in a worker) or this host, and the process id.
    node = os.uname().nodename
    ray = sys.modules.get('ray')     # never imported for a serial run
    if ray is not None and ray.is_initialized():
        node = ray.get_runtime_context().get_node_id()[:12]
    return f'{node}:{os.getpid()}'


def batched(items: Iterator[tuple], batch_frames: int = 32,
            batch_s: float = 1.0) -> Iterator[list[tuple]]:
    """``items`` in lists: each list ends a bag or holds ``batch_frames`` frames or ``batch_s``.

    The first bag's items go out as soon as that bag ends (the driver sees the task work);
    after that a list goes out once it holds ``batch_frames`` frames or ``batch_s`` seconds
    have passed since the last one, checked after every item, so a long bag still streams.
    Every item is in exactly one list, in order: the collector's semantics do not change.
    """
    buffer: list[tuple] = []
    frames = 0
    first = True
    last = time.monotonic()
    for item in items:
        buffer.append(item)
        frames += item[0] == 'frame'
        ends_bag = item[0] != 'frame'
        if ((first and ends_bag) or frames >= batch_frames
                or time.monotonic() - last >= batch_s):
            yield buffer
            buffer, frames, first, last = [], 0, first and not ends_bag, time.monotonic()
    if buffer:
        yield buffer


def _chunk_task(chunk: list[tuple[str, str]], params: dict[str, Any],
                batch: tuple[int, float] = (32, 1.0),
                mode: str = 'fast') -> Iterator[list[tuple]]:
    # The Ray task body (a generator: Ray streams each list of items back as it is yielded).
    yield from batched(chunk_items(chunk, params, mode), *batch)


class Collector:
    """Assembles per-bag results from items; finished bags go to the cache at once."""

    def __init__(self, bags: list[BagRef], keys: dict[str, str], cache: ResultCache,
                 on_bag: Callable[[dict[str, Any]], None] | None = None) -> None:
        self.refs = {b.bag_id: b for b in bags}
        self.keys = keys
        self.cache = cache
        self.on_bag = on_bag
        self.results: dict[str, dict[str, Any]] = {}
        self._frames: dict[str, dict[int, dict[str, Any]]] = {}
        self.repeats = 0       # items of a retried task that were already in
        self.workers: dict[str, str] = {}   # bag id -> process that replayed it
        self.frames_in = 0

    def _shell(self, bag_id: str) -> dict[str, Any]:
        ref = self.refs[bag_id]
        return {'bag': bag_id, 'path': ref.path, 'hash': ref.content_hash, 'size': ref.size,
                'scenario': ref.scenario, 'lighting': ref.lighting}

    def add_cached(self, result: dict[str, Any]) -> None:
        """A result the cache already had (no replay)."""
        result = {k: v for k, v in result.items() if k != 'cache_key'}
        result.update(self._shell(result['bag']))   # the path may differ from the cached run's
        self._finish(result['bag'], result, store=False)

    def handle(self, item: tuple) -> None:
        """One item of a chunk's stream."""
        kind, bag_id = item[0], item[1]
        if bag_id in self.results:
            self.repeats += 1
            return
        if kind == 'frame':
            frames = self._frames.setdefault(bag_id, {})
            if item[2]['index'] in frames:
                self.repeats += 1
            else:
                frames[item[2]['index']] = item[2]
                self.frames_in += 1
        elif kind == 'done':
            frames = self._frames.get(bag_id, {})
            if sorted(frames) != list(range(item[2])):
                # a retry restarted this bag before its first attempt's frames were all in;
                # the retry's own frames and done item complete it
                return
            self._frames.pop(bag_id)
            if len(item) > 3:
                self.workers[bag_id] = item[3]
            result = {**self._shell(bag_id), 'status': 'ok',
                      'frames': [frames[i] for i in range(item[2])]}
            self._finish(bag_id, result, store=True)
        elif kind == 'bad':
            self._frames.pop(bag_id, None)
            result = {**self._shell(bag_id), 'status': 'bad', 'kind': item[2],
                      'reason': item[3], 'frames': []}
            self._finish(bag_id, result, store=True)
        else:
            raise ValueError(f'unknown item kind {kind!r}')

    def lost(self, bag_ids: list[str], reason: str) -> None:
        """Bags whose task failed for good (retries spent): listed, never silently dropped."""
        for bag_id in bag_ids:
            if bag_id not in self.results:
                self._frames.pop(bag_id, None)
                self._finish(bag_id, {**self._shell(bag_id), 'status': 'bad', 'kind': 'lost',
                                      'reason': reason, 'frames': []}, store=False)

    def _finish(self, bag_id: str, result: dict[str, Any], store: bool) -> None:
        self.results[bag_id] = result
        if store:
            self.cache.put(self.keys[bag_id], result)
        if self.on_bag is not None:
            self.on_bag(result)


def run_serial(chunks: list[list[BagRef]], params: dict[str, Any],
               collector: Collector, mode: str = 'fast') -> None:
    """Every chunk in this process, one after the other."""
    for chunk in chunks:
        for item in chunk_items([(b.bag_id, b.path) for b in chunk], params, mode):
            collector.handle(item)


def ray_init(address: str, num_cpus: int | None, temp_dir: Path | None) -> bool:
    """Connect to Ray (``local``: start a private cluster); True when this call started it."""
    import ray

    if ray.is_initialized():
        return False
    if address == 'local':
        # Ray's session folder holds unix sockets, whose paths are limited to ~107 bytes.
        temp = str(temp_dir.resolve()) if temp_dir is not None else None
        temp = temp if temp is not None and len(temp) < 60 else None
        ray.init(num_cpus=num_cpus or os.cpu_count(), include_dashboard=False,
                 _temp_dir=temp or tempfile.mkdtemp(prefix='el_ray_'),
                 configure_logging=False, log_to_driver=False)
    else:
        _client_or_cluster_init(address)
    return True


# A Ray Client proxy starts one server process per client session; on a loaded head node
# that start fails now and then (``ConnectionAbortedError: Initialization failure from
# server``, seen once in a CI run while the next session on the same head came up). A fresh
# session gets a fresh server, so a few tries turn a transient start-up failure into a delay.
CLIENT_SESSION_ATTEMPTS = 3
CLIENT_RETRY_DELAY_S = 2.0


def _client_or_cluster_init(address: str) -> None:
    """``ray.init(address)``; a Ray Client session whose server failed to start is retried."""
    import ray

    for attempt in range(1, CLIENT_SESSION_ATTEMPTS + 1):
        try:
            ray.init(address=address, log_to_driver=False)
            return
        except ConnectionAbortedError as err:
            first_line = str(err).strip().splitlines()[0] if str(err).strip() else repr(err)
            if attempt == CLIENT_SESSION_ATTEMPTS:
                msg = (f'Ray Client at {address!r}: no session after {attempt} attempts '
                       f"({first_line}); see ray_client_server_*.err in the head node's "
                       'session logs')
                raise ConnectionAbortedError(msg) from err
            print(f"Ray Client at {address!r}: the session's server failed to start "
                  f'({first_line}); trying again ({attempt + 1}/{CLIENT_SESSION_ATTEMPTS})',
                  file=sys.stderr)
            time.sleep(CLIENT_RETRY_DELAY_S * attempt)


def client_connected() -> bool:
    """True when this driver talks to its cluster through Ray Client (``ray://host:port``)."""
    from ray.util.client import ray as client

    return bool(client.is_connected())


def run_ray(chunks: list[list[BagRef]], params: dict[str, Any], collector: Collector, *,
            task: dict[str, Any], ship: bool = False, mode: str = 'fast') -> None:
    """Every chunk as a Ray task; items handled as they arrive (needs ray.init).

    A streaming generator task per chunk sends each batch of items back as it is ready. Ray
    Client (``ray://``) has no streaming generators (``'ObjectRefGenerator' object has no
    attribute 'binary'``, Ray 2.60): there each chunk is a plain task whose items come back
    together when it ends; retries, the lost-bag accounting and the merge are the same.
    """
    import ray

    options: dict[str, Any] = {'num_cpus': float(task.get('num_cpus', 1)),
                               'max_retries': int(task.get('max_retries', 3)),
                               'retry_exceptions': False}
    if task.get('memory_mb'):
        options['memory'] = int(task['memory_mb']) * 2**20
    batch = (int(task.get('batch_frames', 32)), float(task.get('batch_s', 1.0)))
    streaming = not client_connected()
    body = ((_shipped_chunk_task if ship else _chunk_task) if streaming else
            (_shipped_chunk_whole if ship else _chunk_whole))
    remote = ray.remote(body).options(**options)
    params_ref = ray.put(params)
    owner: dict[Any, list[str]] = {}
    for chunk in chunks:
        pairs = ([(b.bag_id, b.path, _pack_bag(b.path)) for b in chunk] if ship else
                 [(b.bag_id, b.path) for b in chunk])
        owner[remote.remote(pairs, params_ref, batch, mode)] = [b.bag_id for b in chunk]
    pending = list(owner)
    while pending:
        ready, pending = ray.wait(pending, num_returns=1, timeout=1.0)
        for ref in ready:
            try:
                batches = [ray.get(next(ref))] if streaming else ray.get(ref)
            except StopIteration:
                continue
            except Exception as exc:  # noqa: BLE001 - retries spent: list the chunk's bags
                collector.lost(owner[ref], f'task failed after its retries: '
                                           f'{type(exc).__name__}: {str(exc)[:200]}')
                continue
            for items in batches:
                for item in items:
                    collector.handle(item)
            if streaming:
                pending.append(ref)
    leftover = [b for ids in owner.values() for b in ids if b not in collector.results]
    if leftover:
        collector.lost(leftover, 'task ended without a result for this bag')


def _pack_bag(path: str) -> dict[str, bytes]:
    """A bag folder's files as {relative name: bytes}, to send through the object store."""
    root = Path(path)
    if not root.is_dir():
        return {}
    return {f.relative_to(root).as_posix(): f.read_bytes()
            for f in sorted(root.rglob('*')) if f.is_file()}


def _shipped_chunk_task(chunk: list[tuple[str, str, dict[str, bytes]]],
                        params: dict[str, Any], batch: tuple[int, float] = (32, 1.0),
                        mode: str = 'fast') -> Iterator[list[tuple]]:
    # For a cluster without a shared file system: the bags travel with the task. A bad bag's
    # reason names the bag's own path, not the worker's copy of it.
    with tempfile.TemporaryDirectory(prefix='el_bag_') as tmp:
        pairs, origin = [], {}
        for i, (bag_id, path, files) in enumerate(chunk):
            folder = Path(tmp) / str(i)
            folder.mkdir()
            for name, data in files.items():
                (folder / name).parent.mkdir(parents=True, exist_ok=True)
                (folder / name).write_bytes(data)
            pairs.append((bag_id, str(folder)))
            origin[bag_id] = (str(folder), path)

        def named(items: Iterator[tuple]) -> Iterator[tuple]:
            for item in items:
                if item[0] == 'bad':
                    copy, path = origin[item[1]]
                    item = (*item[:3], item[3].replace(copy, path))
                yield item
        yield from batched(named(chunk_items(pairs, params, mode)), *batch)


def _chunk_whole(*args: Any) -> list[list[tuple]]:
    # Ray Client's task body: every batch of the chunk, returned when the chunk is done.
    return list(_chunk_task(*args))


def _shipped_chunk_whole(*args: Any) -> list[list[tuple]]:
    # ... and with the bags travelling with the task.
    return list(_shipped_chunk_task(*args))
