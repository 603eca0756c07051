// New workflow.
// Typed by codegen (codegen.ts reads every *.graphql.ts) from the committed schema.graphql.
import { graphql } from "../gql";

export const CreateWorkflowMutation = graphql(`
  mutation CreateWorkflow($slug: String!, $name: String!, $graph: JSON!, $organization: String) {
    createWorkflow(slug: $slug, name: $name, graph: $graph, organization: $organization) { slug }
  }
`);
