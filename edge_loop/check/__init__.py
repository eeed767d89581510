# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""``edge-loop check``: the deployment checklist as a command (docs/check.md).

One module per item family: latency (1), monitor (2), copies (3), verification (4),
resources (5 memory, 6 placement), lifecycle (7), environment (8 settings, 9 versions);
session.py is the live graph they are measured on, runner.py the command, page.py the page.
"""
