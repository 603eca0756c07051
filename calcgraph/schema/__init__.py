"""The GraphQL door: its types, context and loaders; `schema.build` assembles the schema from
the resolvers."""
