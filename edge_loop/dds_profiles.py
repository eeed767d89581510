# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""The Fast DDS profiles the package ships, set for its processes unless the user has one.

Fast DDS resends a reliable sample that was lost on the way (an image that overflowed the
default 512 KB shared-memory segment, a dropped UDP fragment) only when the writer next
announces what it has: every 3 s by default. The tests measured it: a test sending VGA frames
over plain topics waited about 3 s on most frames (36-52 s for 8 fused frames; 3-8 s with a
50 ms announcement period). In a 15-30 Hz loop a 3 s repair is a stalled topic; the shipped
profiles (``config/fastdds_v2.xml`` for Fast DDS 2.x / Jazzy, ``config/fastdds_v3.xml`` for
3.x / Kilted: the two versions name the setting differently and read different variables)
set 50 ms. A profile of the user's own, in either variable, is left alone.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping

from edge_loop.paths import config_path

# The variable each Fast DDS major version reads, and the file written for it.
PROFILE_FILES = {
    'FASTRTPS_DEFAULT_PROFILES_FILE': 'fastdds_v2.xml',   # Fast DDS 2.x (Jazzy)
    'FASTDDS_DEFAULT_PROFILES_FILE': 'fastdds_v3.xml',    # Fast DDS 3.x (Kilted)
}


def default_profiles() -> dict[str, str]:
    """{variable: path} of the shipped profiles."""
    return {key: str(config_path(name)) for key, name in PROFILE_FILES.items()}


def profiles_to_set(env: Mapping[str, str]) -> dict[str, str]:
    """The shipped profiles' {variable: path}, or {} when ``env`` names a profile already."""
    return {} if any(env.get(key) for key in PROFILE_FILES) else default_profiles()


def with_default_profiles(env: MutableMapping[str, str]) -> MutableMapping[str, str]:
    """``env`` with :func:`profiles_to_set` applied (in place; returned for chaining)."""
    env.update(profiles_to_set(env))
    return env
