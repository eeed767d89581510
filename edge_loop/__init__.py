# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""edge_loop: a verified pick loop as ROS 2 lifecycle nodes."""

__version__ = '0.1.0'
