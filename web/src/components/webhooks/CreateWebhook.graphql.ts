// A new webhook (its fields: WebhookFields, beside the Webhooks page).
// Typed by codegen (codegen.ts reads every *.graphql.ts) from the committed schema.graphql.
import { graphql } from "../../gql";

export const CreateWebhookMutation = graphql(`
  mutation CreateWebhook($url: String!, $types: [String!]!, $description: String!) {
    createWebhook(url: $url, types: $types, description: $description) {
      secret
      webhook { ...WebhookFields }
    }
  }
`);
