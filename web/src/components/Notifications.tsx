// The header's notifications menu: the signed-in user's recent run, build, deployment and
// webhook events, newest first, with an unread count; live through the `events` subscription,
// which starts where the list was read (nothing missed between the two).
import { useEffect, useId, useRef, useState } from "react";
import { Link } from "react-router";
import { request, subscribe } from "../lib/api";
import { when } from "../lib/format";
import { KEEP, NOTIFY_TYPES, describe, lastSeen, markSeen, merge, unread, type Notice } from "../lib/notifications";
import { EventsSubscription, RecentEventsQuery } from "../queries";

const RETRY_MS = 30_000;

function useNotices(): { items: Notice[]; error: string | null } {
  const [items, setItems] = useState<Notice[]>([]);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    let live = true;
    let stop: (() => void) | null = null;
    let retry: ReturnType<typeof setTimeout> | null = null;
    const load = () => {
      request(RecentEventsQuery, { types: NOTIFY_TYPES, limit: KEEP }).then(
        (r) => {
          if (!live) return;
          setError(null);
          setItems((known) => merge(known, r.recentEvents.items));
          stop = subscribe(EventsSubscription, { types: NOTIFY_TYPES, after: r.recentEvents.nextCursor }, {
            next: (data) => live && setItems((known) => merge(known, [data.events])),
            error: (e) => live && setError(e.message),
            lost: () => {
              // Read the list again now and then; the subscription follows on from it.
              if (live) retry = setTimeout(load, RETRY_MS);
            },
            complete: () => undefined,
          });
        },
        (e: unknown) => {
          if (!live) return;
          setError(e instanceof Error ? e.message : String(e));
          retry = setTimeout(load, RETRY_MS);
        },
      );
    };
    load();
    return () => {
      live = false;
      stop?.();
      if (retry) clearTimeout(retry);
    };
  }, []);
  return { items, error };
}

export function Notifications({ username }: { username: string }) {
  const { items, error } = useNotices();
  const [open, setOpen] = useState(false);
  const [seen, setSeen] = useState<string | null>(() => lastSeen(username));
  const panelId = useId();
  const root = useRef<HTMLDivElement>(null);
  const count = unread(items, seen);
  const newest = items[0]?.time ?? null;
  useEffect(() => {
    if (!open) return;
    // Opened: everything listed is read (in every tab of this user).
    if (newest) {
      markSeen(username, newest);
      setSeen(newest);
    }
  }, [open, newest, username]);
  useEffect(() => {
    if (!open) return;
    const onKey = (e: KeyboardEvent) => e.key === "Escape" && setOpen(false);
    const onClick = (e: MouseEvent) => {
      if (root.current && !root.current.contains(e.target as Node)) setOpen(false);
    };
    document.addEventListener("keydown", onKey);
    document.addEventListener("mousedown", onClick);
    return () => {
      document.removeEventListener("keydown", onKey);
      document.removeEventListener("mousedown", onClick);
    };
  }, [open]);
  const label = count > 0 ? `Notifications, ${count} unread` : "Notifications";
  return (
    <div className="notifications" ref={root}>
      <button type="button" aria-label={label} aria-expanded={open} aria-controls={panelId} onClick={() => setOpen(!open)}>
        Notifications{count > 0 && <span className="unread" aria-hidden="true">{count}</span>}
      </button>
      {open && (
        <div id={panelId} className="notifications-panel" role="region" aria-label="Recent notifications">
          {error && <p role="alert" className="problem">{error}</p>}
          {items.length === 0 && !error && <p className="empty">Nothing yet: your finished runs, builds and deployments appear here as they happen.</p>}
          {items.length > 0 && (
            <ul>
              {items.map((e) => {
                const d = describe(e);
                return (
                  <li key={e.id} className={d.failed ? "notice failed" : "notice"}>
                    {d.href ? <Link to={d.href} onClick={() => setOpen(false)}>{d.text}</Link> : <span>{d.text}</span>}
                    <time dateTime={e.time}>{when(e.time)}</time>
                  </li>
                );
              })}
            </ul>
          )}
        </div>
      )}
    </div>
  );
}
