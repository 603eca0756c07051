// The retry policy of a function node (contract 10) in the editor: the five settings as the
// graph document's node `retry`; an empty field leaves the server's default. Nothing is checked
// here: the server's validation report (`invalid_retry_policies`) names what is wrong.
import { useState, type FormEvent } from "react";

export type RetryPolicy = Record<string, unknown>;

const FIELDS: { key: string; label: string; hint: string }[] = [
  { key: "max_attempts", label: "Max attempts", hint: "attempts in all, the first included" },
  { key: "initial_interval_s", label: "Initial interval (s)", hint: "wait after the first failure" },
  { key: "backoff_coefficient", label: "Backoff coefficient", hint: "each wait is the previous one times this" },
  { key: "max_interval_s", label: "Max interval (s)", hint: "no wait is longer" },
];

function text(value: unknown): string {
  if (value === undefined || value === null) return "";
  if (Array.isArray(value)) return value.join(", ");
  return String(value);
}

/** A field as the document holds it: a number when it reads as one, else the text as typed
 * (the server reports it), nothing when empty. */
function parsed(value: string): unknown {
  const v = value.trim();
  if (v === "") return undefined;
  const n = Number(v);
  return Number.isFinite(n) ? n : v;
}

export function RetryPolicyForm({ nodeKey, policy, problems, onApply }: {
  nodeKey: string;
  policy: RetryPolicy | undefined;
  problems: readonly string[];
  onApply: (policy: RetryPolicy | undefined) => void;
}) {
  const [values, setValues] = useState<Record<string, string>>(() =>
    Object.fromEntries([...FIELDS.map((f) => f.key), "on"].map((k) => [k, text(policy?.[k])])),
  );
  const id = (k: string) => `retry-${nodeKey}-${k}`;
  const submit = (e: FormEvent) => {
    e.preventDefault();
    const next: RetryPolicy = {};
    for (const f of FIELDS) {
      const v = parsed(values[f.key] ?? "");
      if (v !== undefined) next[f.key] = v;
    }
    const on = (values.on ?? "").split(",").map((k) => k.trim()).filter(Boolean);
    if (on.length > 0) next.on = on;
    onApply(Object.keys(next).length > 0 ? next : undefined);
  };
  return (
    <form className="palette-form retry-policy" aria-label={`Retry policy of ${nodeKey}`} onSubmit={submit}>
      <h2>Retry policy of {nodeKey}</h2>
      <p className="hint">A failed job is tried again while attempts remain. Leave a field empty for the default; leave them all empty for no retry.</p>
      {FIELDS.map((f) => (
        <div key={f.key} className="field">
          <label htmlFor={id(f.key)}>{f.label}</label>
          <input id={id(f.key)} inputMode="decimal" value={values[f.key] ?? ""} title={f.hint} onChange={(e) => setValues({ ...values, [f.key]: e.target.value })} />
        </div>
      ))}
      <div className="field">
        <label htmlFor={id("on")}>On error kinds</label>
        <input id={id("on")} value={values.on ?? ""} placeholder="empty: the default kinds" title="comma separated, e.g. timeout, out_of_memory" onChange={(e) => setValues({ ...values, on: e.target.value })} />
      </div>
      {problems.length > 0 && (
        <div role="alert" aria-label={`Retry policy problems of ${nodeKey}`}>
          <ul className="problem">{problems.map((p) => <li key={p}>{p}</li>)}</ul>
        </div>
      )}
      <button type="submit">Apply retry policy</button>
    </form>
  );
}
