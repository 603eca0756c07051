// A package's deployment tab.
// Typed by codegen (codegen.ts reads every *.graphql.ts) from the committed schema.graphql.
import { graphql } from "../gql";

export const PackageDeploymentQuery = graphql(`
  query PackageDeployment($package: String!) {
    packageDeployment(package: $package) {
      strategy state current candidate trafficSplit startedAt endsAt observed criteria viewerMayDecide
      history { version action at reason }
    }
  }
`);

export const PromotePackageVersionMutation = graphql(`
  mutation PromotePackageVersion($package: String!, $version: String!) {
    promotePackageVersion(package: $package, version: $version) { state current }
  }
`);

export const RollbackPackageMutation = graphql(`
  mutation RollbackPackage($package: String!) {
    rollbackPackage(package: $package) { state current }
  }
`);
