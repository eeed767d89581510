# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Per-bag results cached by (bag content hash, package revision, parameters, mode).

Each bag's result is one JSON file, written to a temporary name in the cache folder and
renamed over its final name (``os.replace`` is atomic on one file system), so a run that is
killed leaves whole results or none: the next run finds the finished bags and replays the
rest. The package revision is a hash of the sources whose behaviour the results depend on
(the kernels, the replay, the gates), so an edit there invalidates the cache even before it
is committed, and an edit elsewhere (a node, the docs) does not.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import edge_loop

# Sources (relative to the package) that decide a replay's result.
REVISION_SOURCES = ('kernels', 'regression.py', 'images.py', 'bags.py', 'fleet/replay.py')


def package_revision() -> str:
    """edge_loop version + a hash of :data:`REVISION_SOURCES` (12 hex digits)."""
    root = Path(edge_loop.__file__).parent
    digest = hashlib.sha256(edge_loop.__version__.encode())
    for source in REVISION_SOURCES:
        path = root / source
        files = sorted(path.rglob('*.py')) if path.is_dir() else [path]
        for f in files:
            digest.update(f.relative_to(root).as_posix().encode() + b'\0' + f.read_bytes())
    return f'{edge_loop.__version__}+{digest.hexdigest()[:12]}'


def params_hash(params: dict[str, Any]) -> str:
    """Stable hash of a JSON-able parameter dict (key order does not matter)."""
    text = json.dumps(params, sort_keys=True, separators=(',', ':'))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def result_key(bag_hash: str, revision: str, params: dict[str, Any], mode: str) -> str:
    """The cache key of one bag's result."""
    text = '\0'.join((bag_hash, revision, params_hash(params), mode))
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def default_cache_dir() -> Path:
    """$XDG_CACHE_HOME/edge_loop/fleet (~/.cache/edge_loop/fleet)."""
    base = os.environ.get('XDG_CACHE_HOME') or Path.home() / '.cache'
    return Path(base) / 'edge_loop' / 'fleet'


def write_json_atomic(path: Path, data: Any) -> None:
    """Write ``data`` as JSON to ``path`` so a reader sees the old file or the whole new one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f'.{path.name}.', suffix='.tmp', dir=path.parent)
    try:
        with os.fdopen(fd, 'w') as fh:
            json.dump(data, fh, sort_keys=True, separators=(',', ':'))
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class ResultCache:
    """A folder of per-bag results; ``None`` folder = no cache (every bag replays)."""

    def __init__(self, folder: str | Path | None) -> None:
        self.folder = Path(folder) if folder is not None else None
        self.hits = 0
        self.writes = 0

    def _file(self, key: str) -> Path | None:
        return None if self.folder is None else self.folder / key[:2] / f'{key}.json'

    def get(self, key: str) -> dict[str, Any] | None:
        """The cached result, or None (absent, unreadable or from a different key)."""
        path = self._file(key)
        if path is None or not path.is_file():
            return None
        try:
            result = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        if not isinstance(result, dict) or result.get('cache_key') != key:
            return None
        self.hits += 1
        return result

    def put(self, key: str, result: dict[str, Any]) -> None:
        """Store one bag's result atomically (a no-op without a folder)."""
        path = self._file(key)
        if path is not None:
            write_json_atomic(path, {**result, 'cache_key': key})
            self.writes += 1
