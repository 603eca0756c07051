// The run page's live run: what it reads of a run once (its frozen plan and facts), and what it
// reads first and again on each tick (its state).
// Typed by codegen (codegen.ts reads every *.graphql.ts) from the committed schema.graphql.
import { graphql } from "../gql";

// What never changes in a run, read once: the plan as the graph draws it (`planGraph`, half
// of `planSnapshot`), its inputs and version, and the function versions once each.
export const RunPlanFields = graphql(`
  fragment RunPlanFields on WorkflowRun {
    id startedAt inputs planGraph workflowId rerunOf
    workflowVersion { version workflowId }
    workflow { slug }
    functionVersions { id version outputsSchema inputsSchema function { name } }
  }
`);

// What a tick may change, read on every tick (a 1,000-node run is read whole each time): per
// node only what the graph, the timeline and the node's facts show; a node's inputs, outputs,
// error and logs only for the selected node (pages/Run.graphql.ts, RunNode).
export const RunFields = graphql(`
  fragment RunFields on WorkflowRun {
    id status completedAt terminalOutputs errorMessage firstFailedNodeKey revision
    nodeStates {
      nodeKey status jobId outputsOmitted attempt retryAt attempts reused startedAt finishedAt functionVersionId
      attemptJobs { id createdAt finishedAt }
    }
  }
`);

// The first read is two requests sent together: the plan (what the page lays out, hundreds of ms
// for a 1,000-node run) answers first and is laid out while the server still builds the state.
export const RunPlanQuery = graphql(`
  query RunPlan($id: ID!) {
    workflowRun(id: $id) { ...RunPlanFields }
  }
`);

// The first state, with the cursor the page's subscription starts from (read with the state: no
// event between the two is missed).
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
