# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Parameter tiers: one declaration per parameter, and docs/parameters.md generated from it."""

from __future__ import annotations

from pathlib import Path

from edge_loop import params_doc

ROOT = Path(__file__).resolve().parent.parent


def test_docs_parameters_page_is_the_generated_user_table():
    text = (ROOT / 'docs' / 'parameters.md').read_text()
    start = text.index(params_doc.BEGIN)
    end = text.index(params_doc.END) + len(params_doc.END)
    assert text[start:end] == params_doc.markdown(('user',)), (
        'docs/parameters.md is out of date: replace its generated block with the output of '
        '`edge-loop params --markdown --tier user`')


def test_the_user_tier_is_what_a_robot_must_set():
    """Extrinsics (and their source), workspace, hand, budgets, pads: each with a meaning."""
    user = {(r.node, r.name): r for r in params_doc.rows() if r.tier == 'user'}
    must = {('/**', 'camera_position'), ('/**', 'camera_orientation'),
            ('/**', 'extrinsics_source'), ('object_locator', 'roi_x'),
            ('object_locator', 'roi_y'), ('occupancy_mapper', 'grid_origin'),
            ('pick_controller', 'home'), ('pick_controller', 'drop'),
            ('pick_controller', 'min_tcp_z'), ('grasp_planner', 'max_opening'),
            ('grasp_planner', 'finger_width'), ('grasp_state', 'force_bias'),
            ('deadline_monitor', 'control_rate_hz'), ('deadline_monitor', 'end_to_end_budget_ms'),
            ('deadline_monitor', 'stage_budgets_ms')}
    assert must <= set(user), sorted(must - set(user))
    assert all(len(r.description) > 10 for r in user.values())
    # The stage table and topic wiring are internal: a user overrides budgets, not stages.
    tiers = {(r.node, r.name): r.tier for r in params_doc.rows()}
    assert tiers[('deadline_monitor', 'stage_names')] == 'internal'
    assert tiers[('/**', 'debug_delay_ms')] == 'internal'
