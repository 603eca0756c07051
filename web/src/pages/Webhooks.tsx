// Webhooks (contract section 9): the caller's webhooks, create one (its secret shown once),
// switch one off or on, send it a test event, delete it (after a confirmation), and each one's
// delivery attempts with the receiver's status codes.
import { useState } from "react";
import { Link, useParams } from "react-router";
import { Pager, useCursorPages } from "../components/Pager";
import { Empty, ErrorBox, Loading, Page } from "../components/Status";
import { CreateWebhook, type Created } from "../components/webhooks/CreateWebhook";
import { SecretOnce } from "../components/webhooks/SecretOnce";
import type { WebhookFieldsFragment } from "../gql/graphql";
import { request } from "../lib/api";
import { when } from "../lib/format";
import { useAsync } from "../lib/hooks";
import { DeleteWebhookMutation, TestWebhookMutation, UpdateWebhookMutation, WebhookDeliveriesQuery, WebhooksQuery } from "./Webhooks.graphql";

type Note = { ok: boolean; text: string } | null;

function message(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

function WebhookRow({ hook, act }: { hook: WebhookFieldsFragment; act: (work: Promise<unknown>, done: string) => void }) {
  const remove = () => {
    if (!window.confirm(`Delete the webhook to ${hook.url}? Its deliveries stop and their record is deleted.`)) return;
    act(request(DeleteWebhookMutation, { id: hook.id }), `The webhook to ${hook.url} was deleted.`);
  };
  return (
    <tr>
      <th scope="row"><Link to={`/webhooks/${hook.id}`} aria-label={`Deliveries of ${hook.url}`}>{hook.url}</Link></th>
      <td>{hook.types.join(", ")}</td>
      <td>{hook.description || "—"}</td>
      <td><span className={`badge ${hook.enabled ? "status-completed" : "status-cancelled"}`}>{hook.enabled ? "enabled" : "disabled"}</span></td>
      <td>{when(hook.createdAt)}</td>
      <td className="actions">
        <button type="button" onClick={() => act(request(UpdateWebhookMutation, { id: hook.id, enabled: !hook.enabled }), `The webhook to ${hook.url} is ${hook.enabled ? "disabled" : "enabled"}.`)}>
          {hook.enabled ? "Disable" : "Enable"}<span className="visually-hidden"> {hook.url}</span>
        </button>
        <button type="button" onClick={() => act(request(TestWebhookMutation, { id: hook.id }), `A calcgraph.webhook.test event is on its way to ${hook.url}.`)}>
          Send test<span className="visually-hidden"> to {hook.url}</span>
        </button>
        <button type="button" onClick={remove}>Delete<span className="visually-hidden"> {hook.url}</span></button>
      </td>
    </tr>
  );
}

export function WebhooksPage() {
  const pages = useCursorPages("webhooks");
  const { data, error, reload } = useAsync(() => request(WebhooksQuery, { cursor: pages.cursor }), `webhooks|${pages.cursor ?? ""}`);
  const [created, setCreated] = useState<Created | null>(null);
  const [note, setNote] = useState<Note>(null);
  const act = (work: Promise<unknown>, done: string) => {
    setNote(null);
    work.then(
      () => {
        setNote({ ok: true, text: done });
        reload();
      },
      (e: unknown) => setNote({ ok: false, text: message(e) }),
    );
  };
  const items = data?.webhooks.items ?? [];
  return (
    <Page title="Webhooks">
      <p>calcgraph POSTs each event of the chosen types to your URL, signed with the webhook's secret (Standard Webhooks), and retries for 24 hours until your receiver answers 2xx.</p>
      {created && <SecretOnce url={created.url} secret={created.secret} onDone={() => setCreated(null)} />}
      {note && <p role={note.ok ? "status" : "alert"} className={`message ${note.ok ? "ok" : "error"}`}>{note.text}</p>}
      {error && <ErrorBox error={error} />}
      {!data && !error && <Loading rows={3} />}
      {data && items.length === 0 && <Empty>No webhooks yet. Create one below to have calcgraph call your system when a run ends or a build is refused.</Empty>}
      {items.length > 0 && (
        <table>
          <caption>Your webhooks</caption>
          <thead><tr><th>URL</th><th>Event types</th><th>Description</th><th>State</th><th>Created</th><th>Actions</th></tr></thead>
          <tbody>{items.map((h) => <WebhookRow key={h.id} hook={h} act={act} />)}</tbody>
        </table>
      )}
      <Pager page={pages.page} nextCursor={data?.webhooks.nextCursor} onNext={pages.next} onPrevious={pages.previous} shown={items.length} noun="webhooks" />
      <CreateWebhook onCreated={(c) => { setCreated(c); setNote(null); reload(); }} />
    </Page>
  );
}

export function WebhookDeliveriesPage() {
  const { id = "" } = useParams();
  const pages = useCursorPages(id);
  const { data, error, loading, reload } = useAsync(() => request(WebhookDeliveriesQuery, { id, cursor: pages.cursor }), `${id}|${pages.cursor ?? ""}`);
  const items = data?.webhookDeliveries.items ?? [];
  const hook = data?.webhook;
  return (
    <Page title={hook ? `Deliveries to ${hook.url}` : "Webhook deliveries"} documentTitle="Webhook deliveries" actions={<button type="button" onClick={reload} disabled={loading}>Refresh</button>}>
      <p><Link to="/webhooks">All webhooks</Link></p>
      {hook && (
        <dl className="facts">
          <dt>Event types</dt><dd>{hook.types.join(", ")}</dd>
          <dt>State</dt><dd>{hook.enabled ? "enabled" : "disabled"}</dd>
          <dt>Description</dt><dd>{hook.description || "—"}</dd>
        </dl>
      )}
      {error && <ErrorBox error={error} />}
      {!data && !error && <Loading rows={4} />}
      {data && items.length === 0 && <Empty>No delivery yet. Send a test event from the webhooks list, then refresh.</Empty>}
      {items.length > 0 && (
        <table>
          <caption>Delivery attempts, newest first</caption>
          <thead><tr><th>Event type</th><th>Attempt</th><th>Status code</th><th>Error</th><th>Duration</th><th>State</th><th>Attempted</th><th>Next attempt</th></tr></thead>
          <tbody>
            {items.map((d) => (
              <tr key={d.id}>
                <th scope="row" title={`event ${d.eventId}`}>{d.type}</th>
                <td>{d.attempt}</td>
                <td>{d.statusCode ?? "—"}</td>
                <td className="error-message">{d.error ?? "—"}</td>
                <td>{d.durationMs === null ? "—" : `${d.durationMs} ms`}</td>
                <td><span className={`badge delivery-${d.state}`}>{d.state}</span></td>
                <td>{when(d.attemptedAt)}</td>
                <td>{when(d.nextAttemptAt)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <Pager page={pages.page} nextCursor={data?.webhookDeliveries.nextCursor} onNext={pages.next} onPrevious={pages.previous} shown={items.length} noun="deliveries" />
    </Page>
  );
}
