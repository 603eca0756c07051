// The run page's live run: what it reads of a run, first and on each tick.
// Typed by codegen (codegen.ts reads every *.graphql.ts) from the committed schema.graphql.
import { graphql } from "../gql";

// Per node only what the graph, the timeline and the node's facts show (a 1,000-node run is
// read whole on every tick): the function versions once each (`functionVersions`), and a node's
// inputs, outputs, error and logs only for the selected node (pages/Run.graphql.ts, RunNode).
export const RunFields = graphql(`
  fragment RunFields on WorkflowRun {
    id status startedAt completedAt inputs terminalOutputs errorMessage firstFailedNodeKey
    planSnapshot revision workflowId rerunOf
    workflowVersion { version workflowId }
    workflow { slug }
    functionVersions { id version outputsSchema inputsSchema function { name } }
    nodeStates {
      nodeKey status jobId outputsOmitted attempt retryAt attempts reused startedAt finishedAt functionVersionId
      attemptJobs { id createdAt finishedAt }
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

// Only this run's events and its jobs' (`run`): the server does not even wake the subscription
// for other runs' jobs, so a page costs nothing while its own run is quiet.
export const RunEventsSubscription = graphql(`
  subscription RunEvents($run: ID!, $types: [String!], $after: String) {
    events(run: $run, types: $types, after: $after) { id type data }
  }
`);
