"""Row ids are random (version 4) UUIDs in their canonical text form."""

from __future__ import annotations

import uuid

from calcgraph.db.base import new_id


def test_new_ids_are_canonical_random_uuids() -> None:
    ids = [new_id() for _ in range(20_000)]
    for text in ids:
        parsed = uuid.UUID(text)
        assert str(parsed) == text
        assert parsed.version == 4
        assert parsed.variant == uuid.RFC_4122
    assert len(set(ids)) == len(ids)
    # Every variant digit appears: the random nibble under the variant bits is kept.
    assert {text[19] for text in ids} == set("89ab")
