"""The pure access policy, with plain data."""

from __future__ import annotations

from typing import get_args

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


ACTS: tuple[policy.Act, ...] = get_args(policy.Act)
THINGS = [None] + [
    package(visibility, org)
    for visibility in ("private", "internal", "public")
    for org in ("org-1", None)
]


@pytest.mark.parametrize("act", ACTS)
def test_the_role_is_read_only_when_it_can_change_the_verdict(act: policy.Act) -> None:
    """`access_service.require` skips the membership statement when `role_matters` says no:
    then every role must give the same verdict."""
    for who in (OWNER, OTHER, ADMIN):
        for thing in THINGS:
            for submitted_by in (None, OWNER.user_id, OTHER.user_id):
                facts = policy.Facts(None, thing, submitted_by)
                if policy.role_matters(act, who, facts):
                    continue
                verdicts = {
                    policy.decide(act, who, policy.Facts(role, thing, submitted_by))
                    for role in (None, "member", "owner")
                }
                assert len(verdicts) == 1, (act, who.username, thing, submitted_by)


def test_acts_name_the_rules() -> None:
    internal = package("internal")
    member = policy.Facts("member", internal)
    assert policy.decide("see_package", OTHER, member)
    assert not policy.decide("manage_package", OTHER, member)
    assert policy.decide("manage_package", OTHER, policy.Facts("owner", internal))
    assert policy.decide("see_job", OTHER, policy.Facts("member", internal, OTHER.user_id))
    assert not policy.decide("see_job", OTHER, policy.Facts("member", internal, OWNER.user_id))
    assert policy.decide("see_run", ADMIN, policy.Facts(None, None, OWNER.user_id))
    assert not policy.decide("see_package", OTHER, policy.Facts())  # gone
    assert policy.decide("read_organization", OTHER, policy.Facts("member"))
    assert not policy.decide("manage_members", OTHER, policy.Facts("member"))
    assert policy.decide("publish_into_organization", ADMIN, policy.Facts())
