// The Organizations pages.
// Typed by codegen (codegen.ts reads every *.graphql.ts) from the committed schema.graphql.
import { graphql } from "../gql";

export const OrganizationQuery = graphql(`
  query Organization($slug: String!) {
    organization(slug: $slug) {
      id slug name createdAt
      members { username role }
      packages { id name visibility currentVersion }
    }
  }
`);

export const CreateOrganizationMutation = graphql(`
  mutation CreateOrganization($slug: String!, $name: String!) {
    createOrganization(slug: $slug, name: $name) { slug }
  }
`);

export const AddMemberMutation = graphql(`
  mutation AddMember($slug: String!, $username: String!, $role: MemberRole!) {
    addMember(slug: $slug, username: $username, role: $role) { username role }
  }
`);

export const RemoveMemberMutation = graphql(`
  mutation RemoveMember($slug: String!, $username: String!) {
    removeMember(slug: $slug, username: $username)
  }
`);

export const SetPackageVisibilityMutation = graphql(`
  mutation SetPackageVisibility($package: String!, $visibility: Visibility!) {
    setPackageVisibility(package: $package, visibility: $visibility) { id visibility }
  }
`);
