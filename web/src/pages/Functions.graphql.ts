// The Functions pages (the editor reads the same list and function).
// Typed by codegen (codegen.ts reads every *.graphql.ts) from the committed schema.graphql.
import { graphql } from "../gql";

export const FunctionVersionFields = graphql(`
  fragment FunctionVersionFields on FunctionVersion {
    id version functionId inputsSchema outputsSchema typed changelog
    deprecated deprecatedMessage removalVersion isBreakingChange deployedAt
  }
`);

export const FunctionsQuery = graphql(`
  query Functions($cursor: String, $search: String) {
    functions(limit: 100, cursor: $cursor, search: $search) {
      items { id name currentVersion package { id name } }
      nextCursor
    }
  }
`);

export const FunctionQuery = graphql(`
  query Function($ref: String!) {
    resolveFunction(reference: $ref) {
      ...FunctionVersionFields
      function { id name package { id name } versions { id version deprecated changelog deployedAt } }
    }
  }
`);

export const ExecuteMutation = graphql(`
  mutation Execute($functionId: ID!, $inputs: JSON!) {
    executeFunction(functionId: $functionId, inputs: $inputs, wait: 30) {
      id status outputs error logs cacheHit
    }
  }
`);
