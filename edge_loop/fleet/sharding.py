# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Which bags a run replays, what each one is (content hash, scenario), and the shards.

A bag is a rosbag2 folder. ``BAGS`` arguments may be a bag, a folder of bags (searched
depth first; a folder with ``metadata.yaml`` or a storage file is a bag, even a broken one,
so it is reported rather than silently skipped) or a list file (one path a line, relative to
the file, ``#`` comments). The scenario and lighting come from the folder name as
``edge-loop record`` writes it (``<scenario>`` or ``<scenario>_s<seed>``).
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass
from pathlib import Path

STORAGE_SUFFIXES = ('.mcap', '.db3')
_SEED_SUFFIX = re.compile(r'^(?P<scenario>.+?)_s(?P<seed>\d+)$')


@dataclass(frozen=True)
class BagRef:
    """One bag of a run: its id in the report, its folder, content hash and size."""

    bag_id: str
    path: str
    content_hash: str
    size: int
    scenario: str
    lighting: str


def looks_like_bag(folder: Path) -> bool:
    """A rosbag2 folder (metadata.yaml or a storage file), whether or not it is readable."""
    return (folder / 'metadata.yaml').is_file() or any(
        f.suffix in STORAGE_SUFFIXES for f in folder.iterdir() if f.is_file())


def content_hash(folder: str | Path) -> tuple[str, int]:
    """(sha256 over the folder's file names and bytes, total bytes): the bag's identity."""
    digest = hashlib.sha256()
    total = 0
    root = Path(folder)
    for f in sorted(p for p in root.rglob('*') if p.is_file()):
        digest.update(f.relative_to(root).as_posix().encode() + b'\0')
        with f.open('rb') as fh:
            for block in iter(lambda: fh.read(1 << 20), b''):
                digest.update(block)
                total += len(block)
        digest.update(b'\0')
    return digest.hexdigest(), total


def scenario_of(name: str) -> tuple[str, str]:
    """(scenario, lighting) of a bag folder name; ('unknown', 'unknown') if not a record name."""
    from edge_loop.sim.record import parse_scenario

    match = _SEED_SUFFIX.match(name)
    scenario = match['scenario'] if match else name
    try:
        return scenario, parse_scenario(scenario)[1]
    except ValueError:
        return 'unknown', 'unknown'


def _bag_folders(entry: Path) -> list[tuple[Path, Path]]:
    """(bag folder, root its id is relative to) under ``entry``, sorted."""
    if entry.is_file():
        found = []
        for line in entry.read_text().splitlines():
            line = line.split('#', 1)[0].strip()
            if line:
                path = (entry.parent / line).resolve()
                found.append((path, path.parent))
        return found
    if not entry.is_dir():
        raise FileNotFoundError(f'{entry}: no such bag, folder of bags or list file')
    if looks_like_bag(entry):
        return [(entry, entry.parent)]
    found = []
    stack = [entry]
    while stack:
        folder = stack.pop()
        for child in sorted(folder.iterdir(), reverse=True):
            if child.is_dir():
                if looks_like_bag(child):
                    found.append((child, entry))
                else:
                    stack.append(child)
    return sorted(found)


def discover(inputs: list[str | Path]) -> list[BagRef]:
    """Every bag named by ``inputs``, each once, sorted by id (ids unique)."""
    refs: dict[str, BagRef] = {}
    seen: set[Path] = set()
    for entry in inputs:
        for folder, root in _bag_folders(Path(entry)):
            folder = folder.resolve()
            if folder in seen:
                continue
            seen.add(folder)
            bag_id = folder.relative_to(root.resolve()).as_posix()
            while bag_id in refs:     # the same name under two roots
                bag_id = f'{folder.parent.name}/{bag_id}'
            digest, size = content_hash(folder) if folder.is_dir() else ('missing', 0)
            scenario, lighting = scenario_of(folder.name)
            refs[bag_id] = BagRef(bag_id, str(folder), digest, size, scenario, lighting)
    return [refs[k] for k in sorted(refs)]


def shards(bags: list[BagRef], workers: int, max_chunk: int = 16,
           per_worker: int = 4) -> list[list[BagRef]]:
    """Chunks of bags for tasks, balanced by bytes.

    About ``per_worker`` chunks per worker (so a slow chunk does not leave the others idle at
    the end), at most ``max_chunk`` bags each.
    Largest bags are dealt first to the lightest chunk (longest-processing-time first); the
    order inside a chunk and of the chunks is deterministic.
    """
    if not bags:
        return []
    count = max(math.ceil(len(bags) / max_chunk), min(len(bags), per_worker * max(workers, 1)))
    chunks: list[list[BagRef]] = [[] for _ in range(count)]
    loads = [0] * count
    for bag in sorted(bags, key=lambda b: (-b.size, b.bag_id)):
        lightest = min((i for i in range(count) if len(chunks[i]) < max_chunk),
                       key=lambda i: (loads[i], len(chunks[i]), i))
        chunks[lightest].append(bag)
        loads[lightest] += max(bag.size, 1)
    return [sorted(c, key=lambda b: b.bag_id) for c in chunks if c]
