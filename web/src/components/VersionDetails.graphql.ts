// A package version's details.
// Typed by codegen (codegen.ts reads every *.graphql.ts) from the committed schema.graphql.
import { graphql } from "../gql";

export const PackageVersionQuery = graphql(`
  query PackageVersion($package: String!, $version: String!) {
    packageVersion(package: $package, version: $version) {
      id version compatibility migrationGuide dependencies
      pinnedDependencies { name version packageId direct range }
    }
  }
`);
