# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""The ``edge-loop`` command: up, demo, record, verify, check, params, regress.

Each subcommand lives in its own module and is imported only when used, so ``edge-loop
verify`` does not pay for pybullet and ``edge-loop up`` does not import torch.
"""

from __future__ import annotations

import argparse
import importlib
import sys

# subcommand -> (module, help). The module has add_arguments(parser) and run(args) -> int.
SUBCOMMANDS = {
    'up': ('edge_loop.launcher', 'start the node graph, one process per node, until Ctrl-C'),
    'demo': ('edge_loop.demo', 'closed-loop pick in simulation (or on a bag) with a report'),
    'record': ('edge_loop.sim.record', 'record a scenario bag from the simulator'),
    'verify': ('edge_loop.verify.run', 'run the kernel verification gates and write a report'),
    'check': ('edge_loop.check.runner', 'the deployment checklist, measured on this host'),
    'params': ('edge_loop.params_doc', "every node's parameters by tier (user, tuning, internal)"),
    'regress': ('edge_loop.fleet.cli', 'replay many bags (sharded over Ray), merge, compare'),
}


def build_parser() -> argparse.ArgumentParser:
    """Parser with one sub-parser per subcommand."""
    parser = argparse.ArgumentParser(prog='edge-loop', description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest='command', required=True, metavar='COMMAND')
    for name, (module, help_text) in SUBCOMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.set_defaults(_module=module)
        try:
            importlib.import_module(module).add_arguments(p)
        except ModuleNotFoundError as exc:
            # A dependency of one subcommand (pybullet for `record` on a GPU box, ray for
            # `regress`) must not take the others down: that one says so when it is used.
            # Our own modules are never optional: a missing one is a bug, not a dependency.
            if exc.name is None or exc.name.split('.')[0] == 'edge_loop':
                raise
            p.set_defaults(_missing=f'needs the Python module {exc.name!r}: {exc}')
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``edge-loop``."""
    args = build_parser().parse_args(argv)
    if getattr(args, '_missing', None):
        print(f'edge-loop {args.command}: not available in this build ({args._missing})',
              file=sys.stderr)
        return 2
    return int(importlib.import_module(args._module).run(args) or 0)


if __name__ == '__main__':
    sys.exit(main())
