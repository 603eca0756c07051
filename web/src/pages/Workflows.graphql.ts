// The Workflows pages (the editor and New workflow read the same workflow).
// Typed by codegen (codegen.ts reads every *.graphql.ts) from the committed schema.graphql.
import { graphql } from "../gql";

export const WorkflowsWithLastRunQuery = graphql(`
  query WorkflowsWithLastRun($cursor: String, $search: String) {
    workflows(limit: 100, cursor: $cursor, search: $search) {
      items {
        id slug name visibility owner latestVersion updatedAt
        lastRun { id status startedAt firstFailedNodeKey }
      }
      nextCursor
    }
  }
`);

export const WorkflowQuery = graphql(`
  query Workflow($slug: String!) {
    workflow(slug: $slug) {
      id slug name visibility owner latestVersion
      latest { id version graph inputNodes resolvedFunctions createdAt }
    }
  }
`);

export const CreateRunMutation = graphql(`
  mutation CreateRun($workflow: String!, $inputs: JSON!) {
    createWorkflowRun(workflow: $workflow, inputs: $inputs) { id }
  }
`);
