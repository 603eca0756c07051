// The run page's own operations (the run itself: lib/liveRun.graphql.ts).
// Typed by codegen (codegen.ts reads every *.graphql.ts) from the committed schema.graphql.
import { graphql } from "../gql";

// The selected node's values, error and logs: read for that node alone, not with every node
// of the run on each tick.
export const RunNodeQuery = graphql(`
  query RunNode($id: ID!, $key: String!) {
    workflowRun(id: $id) {
      id
      nodeState(key: $key) {
        nodeKey outputs outputsOmitted error
        job { id inputs inputsOmitted logs cacheHit }
      }
    }
  }
`);

// A node's outputs left out of the run (over 64 KiB, contract 8b), read whole through its job.
export const JobOutputsQuery = graphql(`
  query JobOutputs($id: ID!) {
    job(id: $id) { id outputs outputsOmitted }
  }
`);
