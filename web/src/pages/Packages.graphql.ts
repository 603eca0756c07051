// The Packages pages (the package list is also the Organizations page's picker).
// Typed by codegen (codegen.ts reads every *.graphql.ts) from the committed schema.graphql.
import { graphql } from "../gql";

export const PackagesQuery = graphql(`
  query Packages($cursor: String, $search: String) {
    packages(limit: 100, cursor: $cursor, search: $search) {
      items { id name visibility owner organizationSlug description currentVersion updatedAt }
      nextCursor
    }
  }
`);

export const PackageQuery = graphql(`
  query Package($id: ID!) {
    package(id: $id) {
      id name visibility owner organizationSlug description currentVersion
      functions { id name currentVersion }
      versions {
        id version isLatest isStable gitRef gitCommit changelog createdAt
        functions { name version status functionId }
      }
    }
  }
`);
