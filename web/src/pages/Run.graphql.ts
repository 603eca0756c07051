// The run page's own operations (the run itself: lib/liveRun.graphql.ts).
// Typed by codegen (codegen.ts reads every *.graphql.ts) from the committed schema.graphql.
import { graphql } from "../gql";

// A node's outputs left out of the run (over 64 KiB, contract 8b), read whole through its job.
export const JobOutputsQuery = graphql(`
  query JobOutputs($id: ID!) {
    job(id: $id) { id outputs outputsOmitted }
  }
`);
