// A new webhook's signing secret: shown once, with a copy button and a plain warning.
import { useId, useRef, useState } from "react";

export function SecretOnce({ url, secret, onDone }: { url: string; secret: string; onDone: () => void }) {
  const [copied, setCopied] = useState<string | null>(null);
  const field = useRef<HTMLInputElement>(null);
  const id = useId();
  const copy = () => {
    const done = () => setCopied("Copied to the clipboard.");
    if (navigator.clipboard?.writeText) {
      navigator.clipboard.writeText(secret).then(done, () => {
        field.current?.select();
        setCopied("Selected: press Ctrl+C to copy.");
      });
    } else {
      field.current?.select();
      setCopied("Selected: press Ctrl+C to copy.");
    }
  };
  return (
    <section className="secret-once" aria-labelledby={`${id}-title`}>
      <h2 id={`${id}-title`}>Signing secret of {url}</h2>
      <p><strong>Shown only now.</strong> Copy it and keep it where your receiver reads it: it verifies the <code>webhook-signature</code> of each delivery, and calcgraph cannot show it again (delete the webhook and create another to get a new one).</p>
      <div className="secret-row">
        <label htmlFor={id} className="visually-hidden">Signing secret</label>
        <input id={id} ref={field} readOnly value={secret} size={52} onFocus={(e) => e.target.select()} />
        <button type="button" onClick={copy}>Copy secret</button>
        <button type="button" onClick={onDone}>I have stored it</button>
      </div>
      <p role="status" className="copied">{copied ?? ""}</p>
    </section>
  );
}
