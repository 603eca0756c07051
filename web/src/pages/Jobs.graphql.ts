// The Jobs pages.
// Typed by codegen (codegen.ts reads every *.graphql.ts) from the committed schema.graphql.
import { graphql } from "../gql";

export const JobsQuery = graphql(`
  query Jobs($cursor: String, $function: String, $status: [String!], $createdAfter: String, $createdBefore: String) {
    jobs(limit: 100, cursor: $cursor, function: $function, status: $status, createdAfter: $createdAfter, createdBefore: $createdBefore) {
      items { id status cacheHit createdAt finishedAt nodeKey function { id name } package { name } run { id workflow { slug } } }
      nextCursor
    }
  }
`);

export const JobQuery = graphql(`
  query Job($id: ID!) {
    job(id: $id) {
      id status inputs outputs error logs cacheHit createdAt startedAt finishedAt
      functionVersionId function { id name } package { id name }
      nodeKey run { id status workflowVersion { version } workflow { slug name } }
    }
  }
`);
