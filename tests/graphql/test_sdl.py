"""The committed SDL matches the schema, and every public field says what it is."""

from __future__ import annotations

from pathlib import Path

from graphql import GraphQLEnumType, GraphQLInputObjectType, GraphQLInterfaceType, GraphQLObjectType

from calcgraph.schema.build import build_schema
from calcgraph.schema.export import sdl

SDL_FILE = Path(__file__).resolve().parents[2] / "schema.graphql"


def test_committed_sdl_has_not_drifted() -> None:
    assert SDL_FILE.read_text() == sdl(), (
        "schema.graphql is stale: run `.venv/bin/python -m calcgraph.schema.export > "
        "schema.graphql` and commit it"
    )


def test_every_public_type_and_field_has_a_description() -> None:
    schema = build_schema()._schema
    missing: list[str] = []
    for name, gql_type in schema.type_map.items():
        if name.startswith("__") or name in {"String", "Int", "Float", "Boolean", "ID"}:
            continue
        if isinstance(gql_type, GraphQLObjectType | GraphQLInterfaceType | GraphQLInputObjectType):
            if not gql_type.description and name not in {"Query", "Mutation", "Subscription"}:
                missing.append(name)
            for field_name, field in gql_type.fields.items():
                if not field.description:
                    missing.append(f"{name}.{field_name}")
        elif isinstance(gql_type, GraphQLEnumType) and not gql_type.description:
            missing.append(name)
    assert missing == []
