"""The pure access policy, with plain data."""

from __future__ import annotations

import pytest

from calcgraph.domain.access import policy
from calcgraph.domain.access.principal import Identity, Principal
from calcgraph.domain.errors import Unauthenticated

OWNER = Principal("u-owner", "s1", "owner", frozenset({"user"}))
OTHER = Principal("u-other", "s2", "other", frozenset({"user"}))
ADMIN = Principal("u-admin", "s3", "admin", frozenset({"admin", "user"}))


def package(visibility: str, org: str | None = "org-1") -> policy.PackageFacts:
    return policy.PackageFacts(owner_id="u-owner", organization_id=org, visibility=visibility)


@pytest.mark.parametrize(
    ("who", "visibility", "member", "visible"),
    [
        (OWNER, "private", False, True),
        (OTHER, "private", True, False),
        (OTHER, "internal", True, True),
        (OTHER, "internal", False, False),
        (OTHER, "public", False, True),
        (ADMIN, "private", False, True),
        (OTHER, "unknown-visibility", True, False),
    ],
)
def test_can_see_package(who: Principal, visibility: str, member: bool, visible: bool) -> None:
    assert policy.can_see_package(who, package(visibility), member) is visible


def test_internal_without_organization_is_the_owners_only() -> None:
    assert not policy.can_see_package(OTHER, package("internal", org=None), True)
    assert policy.can_see_package(OWNER, package("internal", org=None), False)


def test_jobs_follow_their_package_and_submitter() -> None:
    assert policy.can_see_job(OTHER, "u-other", package_visible=True)
    assert not policy.can_see_job(OTHER, "u-other", package_visible=False)
    assert not policy.can_see_job(OTHER, "u-owner", package_visible=True)
    assert policy.can_see_job(ADMIN, "u-owner", package_visible=False)


def test_organizations() -> None:
    assert policy.can_read_organization(OTHER, "member")
    assert not policy.can_read_organization(OTHER, None)
    assert policy.can_read_organization(ADMIN, None)
    assert policy.can_manage_members(OTHER, "owner")
    assert not policy.can_manage_members(OTHER, "member")
    assert policy.can_manage_members(ADMIN, None)
    assert policy.can_remove_member(OTHER, "member", "u-other")
    assert not policy.can_remove_member(OTHER, "member", "u-owner")
    assert not policy.can_remove_member(OTHER, None, "u-other")


def test_identity_from_claims() -> None:
    identity = Identity.from_claims(
        {
            "sub": "abc",
            "preferred_username": "alice",
            "realm_access": {"roles": ["user", "admin", 3]},
            "email": "",
        }
    )
    assert identity.username == "alice"
    assert identity.roles == ("admin", "user")
    assert identity.email is None
    assert Identity.from_claims({"sub": "x"}).roles == ("user",)
    assert Identity.from_claims({"sub": "x"}).username == "x"
    with pytest.raises(Unauthenticated):
        Identity.from_claims({"preferred_username": "nobody"})
