// The form that creates a webhook. What the server refuses (a private address, a bad type, the
// 21st webhook) is shown as the server says it: the rules are its own.
import { useState } from "react";
import { request } from "../../lib/api";
import { CreateWebhookMutation } from "./CreateWebhook.graphql";

export interface Created {
  url: string;
  secret: string;
}

/** "calcgraph.run.*, calcgraph.job.failed" -> the list the server is sent. */
export function parseTypes(text: string): string[] {
  return text.split(/[\s,]+/).map((t) => t.trim()).filter(Boolean);
}

export function CreateWebhook({ onCreated }: { onCreated: (created: Created) => void }) {
  const [url, setUrl] = useState("");
  const [types, setTypes] = useState("calcgraph.run.*");
  const [description, setDescription] = useState("");
  const [busy, setBusy] = useState(false);
  const [problem, setProblem] = useState<string | null>(null);
  return (
    <form
      className="palette-form narrow"
      aria-label="Create a webhook"
      onSubmit={(e) => {
        e.preventDefault();
        setBusy(true);
        setProblem(null);
        request(CreateWebhookMutation, { url: url.trim(), types: parseTypes(types), description })
          .then(
            (r) => {
              onCreated({ url: r.createWebhook.webhook.url, secret: r.createWebhook.secret });
              setUrl("");
              setDescription("");
            },
            (err: unknown) => setProblem(err instanceof Error ? err.message : String(err)),
          )
          .finally(() => setBusy(false));
      }}
    >
      <h2>Create a webhook</h2>
      <label>URL <input type="url" required value={url} onChange={(e) => setUrl(e.target.value)} placeholder="https://hooks.example.com/calcgraph" /></label>
      <label>Event types (separated by commas; a trailing * matches a prefix)
        <input required value={types} onChange={(e) => setTypes(e.target.value)} />
      </label>
      <label>Description <input value={description} onChange={(e) => setDescription(e.target.value)} placeholder="run failures to the ops channel" /></label>
      <button type="submit" disabled={busy}>Create webhook</button>
      {problem && <p role="alert" className="message error">{problem}</p>}
    </form>
  );
}
