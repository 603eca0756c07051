// Webhooks (contract section 9).
// Typed by codegen (codegen.ts reads every *.graphql.ts) from the committed schema.graphql.
import { graphql } from "../gql";

export const WebhookFields = graphql(`
  fragment WebhookFields on Webhook { id url types description enabled createdAt }
`);

export const WebhooksQuery = graphql(`
  query Webhooks($cursor: String) {
    webhooks(limit: 100, cursor: $cursor) { items { ...WebhookFields } nextCursor }
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
