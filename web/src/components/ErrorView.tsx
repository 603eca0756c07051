// A job's error as a person reads it: the kind and message first, the traceback folded.
const TRACEBACK = "Traceback (most recent call last):";

/** Split logs into what the function printed and the traceback the runner appended. */
export function splitTraceback(logs: string | null | undefined): { output: string; traceback: string | null } {
  const text = logs ?? "";
  const at = text.indexOf(TRACEBACK);
  if (at < 0) return { output: text, traceback: null };
  return { output: text.slice(0, at).trimEnd(), traceback: text.slice(at) };
}

export function ErrorView({ error, logs }: { error: unknown; logs?: string | null }) {
  const e = (error && typeof error === "object" ? error : { message: String(error) }) as Record<string, unknown>;
  const message = typeof e.message === "string" ? e.message : JSON.stringify(error);
  const kind = typeof e.kind === "string" ? e.kind.replace(/_/g, " ") : "error";
  const rest = Object.entries(e).filter(([k]) => k !== "message" && k !== "kind");
  const { traceback } = splitTraceback(logs);
  return (
    <div className="error-view" role="alert">
      <p className="problem"><strong>{kind}:</strong> <span className="error-message">{message}</span></p>
      {rest.length > 0 && (
        <dl className="facts">
          {rest.map(([k, v]) => (
            <div key={k} className="fact-row"><dt>{k}</dt><dd>{typeof v === "string" ? v : JSON.stringify(v)}</dd></div>
          ))}
        </dl>
      )}
      {traceback && (
        <details>
          <summary>Traceback</summary>
          <pre className="logs">{traceback}</pre>
        </details>
      )}
    </div>
  );
}

export function Logs({ logs }: { logs: string | null | undefined }) {
  const { output } = splitTraceback(logs);
  return <pre className="logs" tabIndex={0} aria-label="Logs">{output || "(no output)"}</pre>;
}
