import { useEffect, type ReactNode } from "react";

export function Loading({ rows = 4 }: { rows?: number }) {
  return (
    <div role="status" aria-label="Loading" className="skeleton">
      <span className="visually-hidden">Loading…</span>
      {Array.from({ length: rows }, (_, i) => <div key={i} className="skeleton-row" />)}
    </div>
  );
}

export function ErrorBox({ error }: { error: Error }) {
  useTitle("Error");
  return (
    <p role="alert" className="problem">
      {error.message}
    </p>
  );
}

/** An empty list that says what to do next. */
export function Empty({ children }: { children: ReactNode }) {
  return <p className="empty">{children}</p>;
}

export function StatusBadge({ status }: { status: string }) {
  return <span className={`badge status-${status}`}>{status}</span>;
}

export function useTitle(title: string | null) {
  useEffect(() => {
    if (title) document.title = `${title} · calcgraph`;
  }, [title]);
}

export function Page({ title, children, actions, documentTitle }: { title: ReactNode; children: ReactNode; actions?: ReactNode; documentTitle?: string }) {
  useTitle(documentTitle ?? (typeof title === "string" ? title : null));
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
