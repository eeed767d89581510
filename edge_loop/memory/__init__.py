# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""One memory budget for the loop and a co-resident decoder (issue 32); pure, no ROS."""
