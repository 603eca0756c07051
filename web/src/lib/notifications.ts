// The header's notifications: the signed-in user's run, build, deployment and webhook events,
// what each says and where it leads, and which are unread (newer than the last one seen, kept
// per user in localStorage: a notification read in one tab is read in the others).

export const NOTIFY_TYPES = [
  "calcgraph.run.completed",
  "calcgraph.run.failed",
  "calcgraph.run.cancelled",
  "calcgraph.build.*",
  "calcgraph.deployment.*",
  "calcgraph.webhook.disabled",
];
export const KEEP = 20;

export interface Notice {
  id: string;
  type: string;
  subject: string;
  time: string;
  data: unknown;
}

function field(data: unknown, name: string): string | null {
  if (typeof data !== "object" || data === null) return null;
  const value = (data as Record<string, unknown>)[name];
  return typeof value === "string" && value ? value : null;
}

/** What an event says, in a line, and the app's page about it. */
export function describe(event: Notice): { text: string; href: string | null; failed: boolean } {
  const kind = event.type.replace(/^calcgraph\./, "");
  switch (kind) {
    case "run.completed":
    case "run.failed":
    case "run.cancelled": {
      const run = field(event.data, "run_id") ?? event.subject;
      const workflow = field(event.data, "workflow");
      const node = field(event.data, "first_failed_node_key");
      const status = kind.slice("run.".length);
      const at = status === "failed" && node ? ` at ${node}` : "";
      return {
        text: `Run ${run.slice(0, 8)}${workflow ? ` of ${workflow}` : ""} ${status}${at}`,
        href: `/runs/${run}`,
        failed: status === "failed",
      };
    }
    case "build.ready":
    case "build.refused": {
      const fn = field(event.data, "function") ?? event.subject;
      const reason = field(event.data, "reason");
      const refused = kind === "build.refused";
      return {
        text: refused ? `Build refused${reason ? `: ${reason}` : ""}` : "Build ready",
        href: `/functions/${fn}`,
        failed: refused,
      };
    }
    case "deployment.promoted":
    case "deployment.rolled_back": {
      const pkg = field(event.data, "package") ?? "package";
      const version = field(event.data, "version");
      const verb = kind === "deployment.promoted" ? "promoted" : "rolled back";
      return {
        text: `${pkg}${version ? ` ${version}` : ""} ${verb}`,
        href: `/packages/${event.subject}`,
        failed: kind === "deployment.rolled_back",
      };
    }
    case "webhook.disabled":
      return {
        text: `Webhook disabled after failures: ${field(event.data, "url") ?? event.subject}`,
        href: "/webhooks",
        failed: true,
      };
    default:
      return { text: event.type, href: null, failed: false };
  }
}

/** `incoming` (newest first) before `known`, without repeats, at most `keep`. */
export function merge(known: readonly Notice[], incoming: readonly Notice[], keep = KEEP): Notice[] {
  const seen = new Set<string>();
  const out: Notice[] = [];
  for (const e of [...incoming, ...known]) {
    if (seen.has(e.id)) continue;
    seen.add(e.id);
    out.push(e);
  }
  return out.sort((a, b) => Date.parse(b.time) - Date.parse(a.time)).slice(0, keep);
}

/** How many are newer than the last one seen (`seen`: its time, or null: none seen yet). */
export function unread(items: readonly Notice[], seen: string | null): number {
  if (seen === null) return items.length;
  const last = Date.parse(seen);
  return items.filter((e) => Date.parse(e.time) > last).length;
}

const SEEN_KEY = "calcgraph.notifications.seen.";

export function lastSeen(username: string): string | null {
  try {
    return localStorage.getItem(SEEN_KEY + username);
  } catch {
    return null;
  }
}

export function markSeen(username: string, time: string): void {
  try {
    localStorage.setItem(SEEN_KEY + username, time);
  } catch {
    // storage disabled: unread again on the next page load
  }
}
