# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""rosbag2 folders (MCAP storage, metadata version 9) read and written with ``rosbags``.

Messages are rclpy messages on the outside and CDR bytes inside: ``rclpy.serialization``
round-trips them exactly, and the resulting folders play with ``ros2 bag play``. Errors are
:class:`BagError` with a message that says which bag, which topic and what is wrong.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

from rosbags.rosbag2 import CompressionFormat, CompressionMode, Reader, StoragePlugin, Writer
from rosbags.typesys import Stores, get_typestore


class BagError(Exception):
    """A bag that is missing, truncated, unreadable or holds a type we cannot load."""


class BagMessage(NamedTuple):
    """One raw message: topic, receive time (ns), CDR bytes and its type name."""

    topic: str
    timestamp_ns: int
    data: bytes
    msgtype: str


def msgtype_of(msg: Any) -> str:
    """'pkg/msg/Name' of an rclpy message instance or class."""
    cls = msg if isinstance(msg, type) else type(msg)
    pkg = cls.__module__.split('.')[0]
    return f'{pkg}/msg/{cls.__name__}'


def message_class(msgtype: str) -> type:
    """The rclpy message class of 'pkg/msg/Name' (raises BagError if not installed)."""
    parts = msgtype.split('/')
    if len(parts) != 3 or parts[1] != 'msg':
        raise BagError(f'malformed message type {msgtype!r} (expected pkg/msg/Name)')
    try:
        return getattr(importlib.import_module(f'{parts[0]}.msg'), parts[2])
    except (ImportError, AttributeError):
        raise BagError(f'unknown message type {msgtype!r}: no installed package provides it') \
            from None


def _typestore(distro: str = 'jazzy') -> Any:
    return get_typestore(Stores.ROS2_KILTED if distro == 'kilted' else Stores.ROS2_JAZZY)


class BagWriter:
    """Write rclpy messages to a new rosbag2 MCAP folder (refuses an existing path).

    ``with BagWriter(path) as w: w.write(topic, t_ns, msg)``; a topic's type is registered on
    its first message. ``compress`` uses MCAP chunk compression (zstd), which
    ``ros2 bag play`` reads natively.
    """

    def __init__(self, path: str | Path, *, compress: bool = True) -> None:
        self.path = Path(path)
        if self.path.exists():
            raise BagError(f'bag output {self.path} already exists; choose a new folder')
        self._writer = Writer(self.path, version=9, storage_plugin=StoragePlugin.MCAP)
        if compress:
            self._writer.set_compression(CompressionMode.STORAGE, CompressionFormat.ZSTD)
        self._typestore = _typestore()
        self._connections: dict[str, Any] = {}
        self._open = False

    def open(self) -> BagWriter:
        """Create the folder and storage file."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._writer.open()
        self._open = True
        return self

    def __enter__(self) -> BagWriter:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def write_raw(self, topic: str, msgtype: str, timestamp_ns: int, data: bytes,
                  msgdef: tuple[str, str] | None = None) -> None:
        """Write CDR bytes of type ``msgtype`` at ``timestamp_ns``.

        ``msgdef`` = (definition text, RIHS01 hash) for a type the typestore does not know.
        """
        if not self._open:
            raise BagError('BagWriter.write before open()')
        conn = self._connections.get(topic)
        if conn is None:
            if msgdef is not None:
                conn = self._writer.add_connection(topic, msgtype, msgdef=msgdef[0],
                                                   rihs01=msgdef[1])
            else:
                conn = self._writer.add_connection(topic, msgtype, typestore=self._typestore)
            self._connections[topic] = conn
        elif conn.msgtype != msgtype:
            raise BagError(f'topic {topic!r} already has type {conn.msgtype}, got {msgtype}')
        self._writer.write(conn, int(timestamp_ns), data)

    def write(self, topic: str, timestamp_ns: int, msg: Any) -> None:
        """Serialise an rclpy message and write it."""
        from rclpy.serialization import serialize_message

        self.write_raw(topic, msgtype_of(msg), timestamp_ns, serialize_message(msg))

    def close(self) -> None:
        """Write metadata.yaml and close the storage (idempotent)."""
        if self._open:
            self._writer.close()
            self._open = False


class BagReader:
    """Read a rosbag2 folder; validates it on open and names the problem precisely."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._reader: Reader | None = None

    def open(self) -> BagReader:
        """Open and validate: the folder, metadata.yaml, the storage files, every type."""
        if not self.path.exists():
            raise BagError(f'bag {self.path} does not exist')
        if not self.path.is_dir() or not (self.path / 'metadata.yaml').is_file():
            raise BagError(f'bag {self.path} is not a rosbag2 folder (no metadata.yaml)')
        try:
            self._reader = Reader(self.path)
            self._reader.open()
        except Exception as exc:  # noqa: BLE001 - rosbags raises several types here
            self._reader = None
            raise BagError(f'bag {self.path} cannot be opened (truncated or corrupt?): '
                           f'{exc}') from None
        for conn in self._reader.connections:
            try:
                message_class(conn.msgtype)
            except BagError as exc:
                self.close()
                raise BagError(f'bag {self.path}, topic {conn.topic!r}: {exc}') from None
        return self

    def __enter__(self) -> BagReader:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the storage (idempotent)."""
        if self._reader is not None:
            self._reader.close()
            self._reader = None

    def _check_open(self) -> Reader:
        if self._reader is None:
            raise BagError('BagReader used before open()')
        return self._reader

    @property
    def topics(self) -> dict[str, str]:
        """Topic -> message type."""
        return {c.topic: c.msgtype for c in self._check_open().connections}

    @property
    def message_count(self) -> int:
        """Number of messages in the bag (from its metadata)."""
        return int(self._check_open().message_count)

    def messages(self, topics: Iterable[str] | None = None) -> Iterator[BagMessage]:
        """Raw messages in log-time order, optionally only ``topics``."""
        reader = self._check_open()
        wanted = set(topics) if topics is not None else None
        conns = [c for c in reader.connections if wanted is None or c.topic in wanted]
        count = 0
        try:
            for conn, timestamp, data in reader.messages(connections=conns):
                count += 1
                yield BagMessage(conn.topic, int(timestamp), bytes(data), conn.msgtype)
        except BagError:
            raise
        except Exception as exc:  # noqa: BLE001 - a damaged chunk surfaces here
            raise BagError(f'bag {self.path}: read failed after {count} messages '
                           f'(truncated or corrupt?): {exc}') from None


def deserialize(data: bytes, msgtype: str) -> Any:
    """Rclpy message from CDR bytes."""
    from rclpy.serialization import deserialize_message

    return deserialize_message(data, message_class(msgtype))


def read_messages(path: str | Path,
                  topics: Iterable[str] | None = None) -> list[tuple[str, int, Any]]:
    """Convenience: every (topic, t_ns, rclpy message) of a (small) bag."""
    with BagReader(path) as reader:
        return [(m.topic, m.timestamp_ns, deserialize(m.data, m.msgtype))
                for m in reader.messages(topics)]


# --- header stamps in serialized messages ---------------------------------------------------
# A message whose first field is std_msgs/Header starts, after the 4-byte CDR encapsulation,
# with stamp.sec (int32) and stamp.nanosec (uint32): a replay can read and rewrite the stamp
# in the serialized bytes and publish them as they are, without deserializing the message.
_CDR_BYTE_ORDER = {b'\x00\x00': '>', b'\x00\x01': '<'}   # CDR big / little endian


def header_first(msg_class: Any) -> bool:
    """True when a ROS 2 message class's first field is a std_msgs/Header."""
    fields = list(msg_class.get_fields_and_field_types().items())
    return bool(fields) and fields[0] == ('header', 'std_msgs/Header')


def cdr_stamp_ns(data: bytes | bytearray) -> int:
    """Header stamp (ns) of a serialized header-first message; ValueError if not CDR."""
    order = _CDR_BYTE_ORDER.get(bytes(data[:2]))
    if order is None or len(data) < 12:
        raise ValueError(f'not a plain CDR message (encapsulation {bytes(data[:2])!r})')
    sec = int.from_bytes(data[4:8], 'big' if order == '>' else 'little', signed=True)
    nanosec = int.from_bytes(data[8:12], 'big' if order == '>' else 'little')
    return sec * 1_000_000_000 + nanosec


def cdr_with_stamp(data: bytes | bytearray, stamp_ns: int) -> bytes:
    """The serialized header-first message with its header stamp replaced by ``stamp_ns``."""
    order = _CDR_BYTE_ORDER.get(bytes(data[:2]))
    if order is None or len(data) < 12:
        raise ValueError(f'not a plain CDR message (encapsulation {bytes(data[:2])!r})')
    endian = 'big' if order == '>' else 'little'
    sec, nanosec = divmod(stamp_ns, 1_000_000_000)
    out = bytearray(data)
    out[4:8] = sec.to_bytes(4, endian, signed=True)
    out[8:12] = nanosec.to_bytes(4, endian)
    return bytes(out)


# The RGB-D camera's topics by role, as a RealSense driver names them under its namespace
# (realsense-ros 4.x: /camera/camera/color/image_raw, ...; older and ours: /camera/...).
CAMERA_SUFFIXES = {'color': 'color/image_raw', 'depth': 'aligned_depth_to_color/image_raw',
                   'info': 'color/camera_info'}
COMPRESSED_TYPE = 'sensor_msgs/msg/CompressedImage'
# image_transport's topic names for the compressed colour and depth images
COMPRESSED_SUFFIXES = {'color': '/compressed', 'depth': '/compressedDepth'}


def find_camera_topics(bag_topics: dict[str, str]) -> dict[str, str]:
    """Role ('color', 'depth', 'info') -> the bag's topic, under any one namespace.

    Empty when the bag has no complete set. A bag recorded with ``ros2 bag record`` on a
    RealSense robot keeps the driver's names; the caller republishes them under the
    contract's names. Raw images are preferred; without them, image_transport's compressed
    pair (``.../color/image_raw/compressed`` and
    ``.../aligned_depth_to_color/image_raw/compressedDepth``, CompressedImage) is returned,
    to be decoded at replay (:func:`edge_loop.images.decode_compressed`). Raises BagError
    when images are there only compressed but not as such a pair.
    """
    for topic in sorted(bag_topics):
        if not topic.endswith('/' + CAMERA_SUFFIXES['info']):
            continue
        prefix = topic[:-len(CAMERA_SUFFIXES['info'])]
        found = {role: prefix + suffix for role, suffix in CAMERA_SUFFIXES.items()}
        if all(bag_topics.get(t) not in (None, COMPRESSED_TYPE) for t in found.values()):
            return found
        packed = {**found, 'color': found['color'] + COMPRESSED_SUFFIXES['color'],
                  'depth': found['depth'] + COMPRESSED_SUFFIXES['depth']}
        if (bag_topics.get(packed['info']) not in (None, COMPRESSED_TYPE)
                and bag_topics.get(packed['color']) == COMPRESSED_TYPE
                and bag_topics.get(packed['depth']) == COMPRESSED_TYPE):
            return packed
    compressed = sorted(t for t, msgtype in bag_topics.items() if msgtype == COMPRESSED_TYPE)
    if compressed:
        raise BagError(
            f'the camera images are recorded compressed only ({", ".join(compressed)}), not '
            'as a pair the loop can decode: it needs raw sensor_msgs/Image colour and aligned '
            '16UC1/32FC1 depth, or .../color/image_raw/compressed with '
            '.../aligned_depth_to_color/image_raw/compressedDepth, next to '
            '.../color/camera_info: record the raw topics (ros2 bag record '
            '.../color/image_raw .../aligned_depth_to_color/image_raw .../color/camera_info) '
            'or that compressed pair')
    return {}


def transient_local_topics(reader: BagReader) -> set[str]:
    """Topics the recorder saw offered as transient local (latched), from the metadata.

    rosbag2 stores each topic's offered QoS profiles (``ros2 bag record`` writes them; a
    ``--qos-profile-overrides-path`` file changes what was recorded); durability is an enum
    (1 = transient local) in older metadata and a name in newer.
    """
    latched = set()
    for conn in reader._check_open().connections:
        profiles = getattr(conn.ext, 'offered_qos_profiles', None) or []
        if isinstance(profiles, str):
            import yaml

            profiles = yaml.safe_load(profiles) or []
        for profile in profiles:
            durability = profile.get('durability') if isinstance(profile, dict) else getattr(
                profile, 'durability', None)
            value = getattr(durability, 'value', durability)
            if value in (1, 'transient_local', 'TRANSIENT_LOCAL') or str(value).lower().endswith(
                    'transient_local'):
                latched.add(conn.topic)
    return latched
