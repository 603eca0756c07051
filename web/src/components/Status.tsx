import type { ReactNode } from "react";

export function Loading() {
  return <p role="status">Loading…</p>;
}

export function ErrorBox({ error }: { error: Error }) {
  return (
    <p role="alert" className="problem">
      {error.message}
    </p>
  );
}

export function StatusBadge({ status }: { status: string }) {
  return <span className={`badge status-${status}`}>{status}</span>;
}

export function Page({ title, children, actions }: { title: ReactNode; children: ReactNode; actions?: ReactNode }) {
  return (
    <section className="page">
      <div className="page-head">
        <h1>{title}</h1>
        {actions}
      </div>
      {children}
    </section>
  );
}
