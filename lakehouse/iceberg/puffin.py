"""Puffin files, Iceberg's container of blobs: here, deletion vectors as ``deletion-vector-v1``
blobs (Iceberg's serialization of a 64-bit roaring bitmap, which is Paimon's 64-bit one), each
naming the data file whose rows it deletes.

Layout: ``PFA1``, the blobs, then the footer: ``PFA1``, a JSON payload describing the blobs, its
size (int32 little-endian), four flag bytes (no compression) and ``PFA1`` again.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Sequence
from dataclasses import dataclass

MAGIC = b"PFA1"
DELETION_VECTOR_V1 = "deletion-vector-v1"
ROW_POSITION_FIELD_ID = 2147483645  # Iceberg's reserved ``_pos`` column, what the vectors hold


@dataclass(frozen=True)
class PuffinLayout:
    """Where each blob of a Puffin file goes, its footer and its size: known before the blobs are
    read."""

    offsets: tuple[int, ...]
    footer: bytes
    size: int


def deletion_vectors_layout(
    data_files: Sequence[str], lengths: Sequence[int], cardinalities: Sequence[int]
) -> PuffinLayout:
    """The layout of a Puffin file of one deletion vector per data file, in order."""
    offsets, blobs, offset = [], [], len(MAGIC)
    for path, length, cardinality in zip(data_files, lengths, cardinalities, strict=True):
        offsets.append(offset)
        blobs.append(
            {
                "type": DELETION_VECTOR_V1,
                "fields": [ROW_POSITION_FIELD_ID],
                "snapshot-id": -1,  # inherited from the manifest entry
                "sequence-number": -1,
                "offset": offset,
                "length": length,
                "properties": {"referenced-data-file": path, "cardinality": str(cardinality)},
            }
        )
        offset += length
    payload = json.dumps({"blobs": blobs, "properties": {"created-by": "lakehouse"}}).encode()
    footer = MAGIC + payload + struct.pack("<i", len(payload)) + bytes(4) + MAGIC
    return PuffinLayout(tuple(offsets), footer, offset + len(footer))


def puffin_bytes(layout: PuffinLayout, blobs: Sequence[bytes]) -> bytes:
    """The Puffin file of ``blobs`` laid out as ``layout`` says."""
    return MAGIC + b"".join(blobs) + layout.footer
