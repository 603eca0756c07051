// Every operation of the app, typed by codegen from the committed schema.graphql.
import { graphql } from "./gql";

export const TypesQuery = graphql(`
  query Types {
    types { name parent kind unit shape description }
  }
`);

export const MeQuery = graphql(`
  query Me { me { username roles } }
`);

export const CheckConnectionQuery = graphql(`
  query CheckConnection($source: String!, $target: String!) {
    checkConnection(source: $source, target: $target) { compatibility reason }
  }
`);

export const PackagesQuery = graphql(`
  query Packages($cursor: String, $search: String) {
    packages(limit: 100, cursor: $cursor, search: $search) {
      items { id name visibility owner organizationSlug description currentVersion updatedAt }
      nextCursor
    }
  }
`);

export const PackageQuery = graphql(`
  query Package($id: ID!) {
    package(id: $id) {
      id name visibility owner organizationSlug description currentVersion
      functions { id name currentVersion }
      versions {
        id version isLatest isStable gitRef gitCommit changelog createdAt
        functions { name version status functionId }
      }
    }
  }
`);

export const PackageVersionQuery = graphql(`
  query PackageVersion($package: String!, $version: String!) {
    packageVersion(package: $package, version: $version) {
      id version compatibility migrationGuide dependencies
      pinnedDependencies { name version packageId direct range }
    }
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

export const FunctionVersionFields = graphql(`
  fragment FunctionVersionFields on FunctionVersion {
    id version functionId inputsSchema outputsSchema typed changelog
    deprecated deprecatedMessage removalVersion isBreakingChange deployedAt
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

export const WorkflowsQuery = graphql(`
  query Workflows($cursor: String, $search: String) {
    workflows(limit: 100, cursor: $cursor, search: $search) {
      items { id slug name visibility owner latestVersion updatedAt }
      nextCursor
    }
  }
`);

export const WorkflowsWithLastRunQuery = graphql(`
  query WorkflowsWithLastRun($cursor: String, $search: String) {
    workflows(limit: 100, cursor: $cursor, search: $search) {
      items {
        id slug name visibility owner latestVersion updatedAt
        lastRun { id status startedAt firstFailedNodeKey }
      }
      nextCursor
    }
  }
`);

export const WorkflowQuery = graphql(`
  query Workflow($slug: String!) {
    workflow(slug: $slug) {
      id slug name visibility owner latestVersion
      latest { id version graph inputNodes resolvedFunctions createdAt }
    }
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

export const CreateRunMutation = graphql(`
  mutation CreateRun($workflow: String!, $inputs: JSON!) {
    createWorkflowRun(workflow: $workflow, inputs: $inputs) { id }
  }
`);

export const RunFields = graphql(`
  fragment RunFields on WorkflowRun {
    id status startedAt completedAt inputs terminalOutputs errorMessage firstFailedNodeKey
    planSnapshot revision workflowId rerunOf
    workflowVersion { version workflowId }
    workflow { slug }
    nodeStates {
      nodeKey status jobId outputs error attempt retryAt attempts reused startedAt finishedAt functionVersionId
      attemptJobs { id createdAt finishedAt }
      job { id status inputs inputsOmitted logs cacheHit createdAt startedAt finishedAt }
      functionVersion { id version outputsSchema inputsSchema function { name } }
    }
  }
`);

export const RunQuery = graphql(`
  query Run($id: ID!) { workflowRun(id: $id) { ...RunFields } }
`);

export const TickMutation = graphql(`
  mutation Tick($id: ID!) { tickRun(id: $id) { ...RunFields } }
`);

export const CancelRunMutation = graphql(`
  mutation CancelRun($id: ID!) { cancelRun(id: $id) { ...RunFields } }
`);

export const RerunRunMutation = graphql(`
  mutation RerunRun($id: ID!, $from: String!) { rerunRun(id: $id, from: $from) { id } }
`);

export const RunUpdatesSubscription = graphql(`
  subscription RunUpdates($id: ID!) { runUpdates(id: $id) { ...RunFields } }
`);

export const RunsQuery = graphql(`
  query Runs($status: [String!], $workflow: String, $cursor: String, $startedAfter: String, $startedBefore: String) {
    workflowRuns(status: $status, workflow: $workflow, limit: 100, cursor: $cursor, startedAfter: $startedAfter, startedBefore: $startedBefore) {
      items { id status startedAt completedAt workflowId firstFailedNodeKey workflowVersion { version } workflow { slug } }
      nextCursor
    }
  }
`);

export const JobsQuery = graphql(`
  query Jobs($cursor: String, $function: String, $status: [String!], $createdAfter: String, $createdBefore: String) {
    jobs(limit: 100, cursor: $cursor, function: $function, status: $status, createdAfter: $createdAfter, createdBefore: $createdBefore) {
      items { id status cacheHit createdAt finishedAt nodeKey function { id name } package { name } run { id workflow { slug } } }
      nextCursor
    }
  }
`);

export const JobQuery = graphql(`
  query Job($id: ID!) {
    job(id: $id) {
      id status inputs outputs error logs cacheHit createdAt startedAt finishedAt
      functionVersionId function { id name } package { id name }
      nodeKey run { id status workflowVersion { version } workflow { slug name } }
    }
  }
`);

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

export const CreateWorkflowMutation = graphql(`
  mutation CreateWorkflow($slug: String!, $name: String!, $graph: JSON!, $organization: String) {
    createWorkflow(slug: $slug, name: $name, graph: $graph, organization: $organization) { slug }
  }
`);

export const PackageDeploymentQuery = graphql(`
  query PackageDeployment($package: String!) {
    packageDeployment(package: $package) {
      strategy state current candidate trafficSplit startedAt endsAt observed criteria viewerMayDecide
      history { version action at reason }
    }
  }
`);

// Events (contract section 9): the run page ticks on its run's events; the header lists the
// signed-in user's run and build events.
export const LiveRunQuery = graphql(`
  query LiveRun($id: ID!, $types: [String!]) {
    workflowRun(id: $id) { ...RunFields }
    events(types: $types, after: "now", limit: 1) { nextCursor }
  }
`);

export const EventsSubscription = graphql(`
  subscription Events($types: [String!], $after: String) {
    events(types: $types, after: $after) { id type subject time data }
  }
`);

export const RecentEventsQuery = graphql(`
  query RecentEvents($types: [String!], $limit: Int!) {
    recentEvents(types: $types, limit: $limit) {
      items { id type subject time data }
      nextCursor
    }
  }
`);

export const PublishPackageMutation = graphql(`
  mutation PublishPackage($manifest: JSON!, $files: JSON!, $visibility: Visibility, $organization: String) {
    publishPackage(manifest: $manifest, files: $files, visibility: $visibility, organization: $organization) {
      packageId package packageVersion isLatest warnings
      functions { id name version status }
    }
  }
`);

// Webhooks (contract section 9).
export const WebhookFields = graphql(`
  fragment WebhookFields on Webhook { id url types description enabled createdAt }
`);

export const WebhooksQuery = graphql(`
  query Webhooks($cursor: String) {
    webhooks(limit: 100, cursor: $cursor) { items { ...WebhookFields } nextCursor }
  }
`);

export const CreateWebhookMutation = graphql(`
  mutation CreateWebhook($url: String!, $types: [String!]!, $description: String!) {
    createWebhook(url: $url, types: $types, description: $description) {
      secret
      webhook { ...WebhookFields }
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

export const SubmitFunctionMutation = graphql(`
  mutation SubmitFunction($name: String!, $code: String!, $requirements: [String!], $inputs: JSON, $outputs: JSON, $visibility: Visibility) {
    submitFunction(name: $name, code: $code, requirements: $requirements, inputs: $inputs, outputs: $outputs, visibility: $visibility) {
      buildId functionId status version versionStatus vulnerabilities functionVersionId
    }
  }
`);

export const UpdateWebhookMutation = graphql(`
  mutation UpdateWebhook($id: ID!, $enabled: Boolean) {
    updateWebhook(id: $id, enabled: $enabled) { ...WebhookFields }
  }
`);

export const DeleteWebhookMutation = graphql(`
  mutation DeleteWebhook($id: ID!) { deleteWebhook(id: $id) }
`);

export const TestWebhookMutation = graphql(`
  mutation TestWebhook($id: ID!) { testWebhook(id: $id) }
`);

export const WebhookDeliveriesQuery = graphql(`
  query WebhookDeliveries($id: ID!, $cursor: String) {
    webhook(id: $id) { ...WebhookFields }
    webhookDeliveries(id: $id, limit: 50, cursor: $cursor) {
      items { id eventId type attempt statusCode error durationMs attemptedAt state nextAttemptAt }
      nextCursor
    }
  }
`);
