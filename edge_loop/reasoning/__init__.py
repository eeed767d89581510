# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""A 7B-class Llama-style decoder co-resident with the loop (issue 32); pure torch, no ROS."""
