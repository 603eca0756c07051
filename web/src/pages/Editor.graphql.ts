// The editor's own operations (it also reads Workflows' and Functions' queries).
// Typed by codegen (codegen.ts reads every *.graphql.ts) from the committed schema.graphql.
import { graphql } from "../gql";

export const CheckConnectionQuery = graphql(`
  query CheckConnection($source: String!, $target: String!) {
    checkConnection(source: $source, target: $target) { compatibility reason }
  }
`);

export const ValidateWorkflowQuery = graphql(`
  query ValidateWorkflow($graph: JSON!) {
    validateWorkflow(graph: $graph) { valid report }
  }
`);

export const UpdateWorkflowMutation = graphql(`
  mutation UpdateWorkflow($slug: String!, $graph: JSON!) {
    updateWorkflow(slug: $slug, graph: $graph) { id latestVersion }
  }
`);
