// The Runs list and its workflow filter (New workflow's list of workflows to start from).
// Typed by codegen (codegen.ts reads every *.graphql.ts) from the committed schema.graphql.
import { graphql } from "../gql";

export const RunsQuery = graphql(`
  query Runs($status: [String!], $workflow: String, $cursor: String, $startedAfter: String, $startedBefore: String) {
    workflowRuns(status: $status, workflow: $workflow, limit: 100, cursor: $cursor, startedAfter: $startedAfter, startedBefore: $startedBefore) {
      items { id status startedAt completedAt workflowId firstFailedNodeKey workflowVersion { version } workflow { slug } }
      nextCursor
    }
  }
`);

export const WorkflowsQuery = graphql(`
  query Workflows($cursor: String, $search: String) {
    workflows(limit: 100, cursor: $cursor, search: $search) {
      items { id slug name visibility owner latestVersion updatedAt }
      nextCursor
    }
  }
`);
