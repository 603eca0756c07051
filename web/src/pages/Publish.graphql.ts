// Publish a package or a single function.
// Typed by codegen (codegen.ts reads every *.graphql.ts) from the committed schema.graphql.
import { graphql } from "../gql";

export const PublishPackageMutation = graphql(`
  mutation PublishPackage($manifest: JSON!, $files: JSON!, $visibility: Visibility, $organization: String) {
    publishPackage(manifest: $manifest, files: $files, visibility: $visibility, organization: $organization) {
      packageId package packageVersion isLatest warnings
      functions { id name version status }
    }
  }
`);

export const SubmitFunctionMutation = graphql(`
  mutation SubmitFunction($name: String!, $code: String!, $requirements: [String!], $inputs: JSON, $outputs: JSON, $visibility: Visibility) {
    submitFunction(name: $name, code: $code, requirements: $requirements, inputs: $inputs, outputs: $outputs, visibility: $visibility) {
      buildId functionId status version versionStatus vulnerabilities functionVersionId
    }
  }
`);
