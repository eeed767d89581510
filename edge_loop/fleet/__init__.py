# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Fleet-scale replay regression (``edge-loop regress``): many bags, sharded over Ray.

Modules: :mod:`~edge_loop.fleet.sharding` (which bags, their content hash, the chunks),
:mod:`~edge_loop.fleet.replay` (one bag through the kernels in lock-step, per-frame records),
:mod:`~edge_loop.fleet.cache` (results keyed by bag hash, package revision and parameters,
written atomically), :mod:`~edge_loop.fleet.engine` (serial and Ray execution, the
``ray.wait`` loop), :mod:`~edge_loop.fleet.merge` (one report dict, baseline comparison),
:mod:`~edge_loop.fleet.report` (Markdown, HTML, plots, overlays) and
:mod:`~edge_loop.fleet.cli` (the subcommand). Only the engine imports Ray.
"""
