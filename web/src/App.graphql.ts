// The app shell: the type catalogue every form and value reads.
// Typed by codegen (codegen.ts reads every *.graphql.ts) from the committed schema.graphql.
import { graphql } from "./gql";

export const TypesQuery = graphql(`
  query Types {
    types { name parent kind unit shape description }
  }
`);
