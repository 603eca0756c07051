// The header's notifications menu: the signed-in user's recent run, build, deployment and
// webhook events, newest first, with an unread count; live through the `events` subscription,
// which starts where the list was read (nothing missed between the two).
import { useEffect, useId, useRef, useState } from "react";
import { Link } from "react-router";
import { request, subscribe } from "../lib/api";
import { when } from "../lib/format";
import { KEEP, NOTIFY_TYPES, describe, lastSeen, markSeen, merge, unread, type Notice } from "../lib/notifications";
import { EventsSubscription, RecentEventsQuery } from "./Notifications.graphql";

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
  // Closed after being open: everything it listed is read (in every tab of this user).
  const close = () => {
    setOpen(false);
    if (newest) {
      markSeen(username, newest);
      setSeen(newest);
    }
  };
  const closeRef = useRef(close);
  closeRef.current = close;
  useEffect(() => {
    if (!open) return;
    const onKey = (e: KeyboardEvent) => e.key === "Escape" && closeRef.current();
    const onClick = (e: MouseEvent) => {
      if (root.current && !root.current.contains(e.target as Node)) closeRef.current();
    };
    document.addEventListener("keydown", onKey);
    document.addEventListener("mousedown", onClick);
    return () => {
      document.removeEventListener("keydown", onKey);
      document.removeEventListener("mousedown", onClick);
    };
  }, [open]);
  return (
    <div className="notifications" ref={root}>
      {/* The name is what shows: "Notifications 2 unread" (the word read out, not drawn). */}
      <button type="button" aria-expanded={open} aria-controls={panelId} onClick={() => (open ? close() : setOpen(true))}>
        Notifications{count > 0 && <> <span className="unread">{count}</span><span className="visually-hidden"> unread</span></>}
      </button>
      {open && (
        <div id={panelId} className="notifications-panel" role="region" aria-label="Recent notifications">
          {error && <p role="alert" className="problem">{error}</p>}
          {items.length === 0 && !error && <p className="empty">Nothing yet: your finished runs, builds and deployments appear here as they happen.</p>}
          {items.length > 0 && (
            <ul>
              {items.map((e) => {
                const d = describe(e);
                const fresh = seen === null || Date.parse(e.time) > Date.parse(seen);
                return (
                  <li key={e.id} className={`notice${d.failed ? " failed" : ""}${fresh ? " fresh" : ""}`}>
                    {d.href ? <Link to={d.href} onClick={close}>{d.text}</Link> : <span>{d.text}</span>}
                    <time dateTime={e.time}>{fresh && <span className="new-mark">new · </span>}{when(e.time)}</time>
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
