// The run page's live run: what it reads of a run, first and on each tick.
// Typed by codegen (codegen.ts reads every *.graphql.ts) from the committed schema.graphql.
import { graphql } from "../gql";

export const RunFields = graphql(`
  fragment RunFields on WorkflowRun {
    id status startedAt completedAt inputs terminalOutputs errorMessage firstFailedNodeKey
    planSnapshot revision workflowId rerunOf
    workflowVersion { version workflowId }
    workflow { slug }
    nodeStates {
      nodeKey status jobId outputs outputsOmitted error attempt retryAt attempts reused startedAt finishedAt functionVersionId
      attemptJobs { id createdAt finishedAt }
      job { id status inputs inputsOmitted logs cacheHit createdAt startedAt finishedAt }
      functionVersion { id version outputsSchema inputsSchema function { name } }
    }
  }
`);

export const LiveRunQuery = graphql(`
  query LiveRun($id: ID!, $types: [String!]) {
    workflowRun(id: $id) { ...RunFields }
    events(types: $types, after: "now", limit: 1) { nextCursor }
  }
`);

export const TickMutation = graphql(`
  mutation Tick($id: ID!) { tickRun(id: $id) { ...RunFields } }
`);
