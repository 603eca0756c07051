// A run's controls: cancel and re-run.
// Typed by codegen (codegen.ts reads every *.graphql.ts) from the committed schema.graphql.
import { graphql } from "../gql";

export const CancelRunMutation = graphql(`
  mutation CancelRun($id: ID!) { cancelRun(id: $id) { ...RunFields } }
`);

export const RerunRunMutation = graphql(`
  mutation RerunRun($id: ID!, $from: String!) { rerunRun(id: $id, from: $from) { id } }
`);
