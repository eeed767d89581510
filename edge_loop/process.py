# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Node processes: the venv's Python, the parent's environment, a log file, a sure stop.

The ROS wheels' bootstrap re-execs Python with LD_LIBRARY_PATH and marks the environment, so
children must get both the same interpreter and the parent's whole environment.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any


def _die_with_parent() -> None:
    """In the child: SIGTERM when the parent dies, so a killed launcher leaves no orphans."""
    try:
        import ctypes

        ctypes.CDLL('libc.so.6', use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


class NodeProcess:
    """One node executable in its own process (``python -m edge_loop.nodes.<module>``)."""

    def __init__(self, module: str, ros_args: list[str], env: dict[str, str],
                 log_path: Path, name: str | None = None) -> None:
        self.module = module
        self.name = name or module.rsplit('.', 1)[-1]
        # A restarted node keeps the earlier process's log: name.log, name.1.log, ...
        n = 0
        while log_path.exists():
            n += 1
            log_path = log_path.with_name(f'{self.name}.{n}.log')
        self.log_path = log_path
        self._log = open(log_path, 'wb')  # noqa: SIM115 - closed in stop()
        cmd = [sys.executable, '-m', module, *ros_args]
        self.proc = subprocess.Popen(cmd, env=env, stdout=self._log, stderr=subprocess.STDOUT,
                                     start_new_session=True, preexec_fn=_die_with_parent)

    @property
    def pid(self) -> int:
        """Process id."""
        return self.proc.pid

    def alive(self) -> bool:
        """True while the process runs."""
        return self.proc.poll() is None

    def output(self) -> str:
        """Everything the process printed so far."""
        self._log.flush()
        return self.log_path.read_text(errors='replace')

    def wait_for_output(self, text: str, timeout: float) -> bool:
        """Wait until ``text`` appears in the process output."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if text in self.output():
                return True
            if not self.alive():
                return text in self.output()
            time.sleep(0.05)
        return False

    def signal(self, sig: int) -> None:
        """Send ``sig`` to the process."""
        if self.alive():
            self.proc.send_signal(sig)

    def stop(self, timeout: float = 10.0) -> int | None:
        """SIGINT, then SIGTERM, then SIGKILL; returns the exit code."""
        for sig, wait in ((signal.SIGINT, timeout), (signal.SIGTERM, 3.0),
                          (signal.SIGKILL, 3.0)):
            if not self.alive():
                break
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, sig)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(wait)
        self._log.close()
        return self.proc.poll()


def start_node(executable: str, env: dict[str, str], log_dir: Path, name: str | None = None,
               params: dict[str, Any] | None = None, params_file: Path | None = None,
               remaps: tuple[tuple[str, str], ...] = ()) -> NodeProcess:
    """Start the node ``executable`` (an entry in setup.py) as ``name``."""
    from edge_loop.bringup import NodeSpec

    spec = NodeSpec(name=name or executable, executable=executable, parameters=params or {},
                    remappings=remaps)
    log_dir.mkdir(parents=True, exist_ok=True)
    return NodeProcess(f'edge_loop.nodes.{executable}',
                       spec.ros_args(params_file, log_dir / 'params'), env,
                       log_dir / f'{spec.name}.log', name=spec.name)
