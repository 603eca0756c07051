// When the web app tries a request again by itself: the server said it was busy or that the
// caller must slow down, and named a short wait. A page then loads a moment later instead of
// showing "the database is busy; retry the request" to someone who can only press the button.
//
// A query is read-only, so any such answer may be tried again. A mutation is tried again only
// when the HTTP status says it was refused before its body was read (429 or 503: the rate limit,
// a quota's share, the admission queue): a GraphQL-level `Unavailable` may come after the
// mutation's unit of work committed (a use case that commits, then waits), and sending it again
// could do the work twice.

/** Error codes whose named wait is worth waiting out. */
const WAITABLE = new Set(["Unavailable", "RateLimited", "QuotaExceeded"]);
/** Tries after the first, and the longest wait the app sits through without the person. */
export const MAX_RETRIES = 3;
export const MAX_WAIT_S = 10;

export interface Refusal {
  /** The HTTP status of the answer. */
  status: number;
  /** The error's code (`extensions.code`, or the REST `detail` kind), if any. */
  code: string | null;
  /** Seconds the server asked for (`Retry-After`, `retry_after`), or null. */
  retryAfter: number | null;
  /** Whether the request was a mutation. */
  mutation: boolean;
}

/** Seconds to wait before trying `refusal`'s request again, or null to give up and show it.
 * `attempt`: the retries made so far. */
export function retryDelay(refusal: Refusal, attempt: number): number | null {
  if (attempt >= MAX_RETRIES || refusal.retryAfter === null) return null;
  if (refusal.retryAfter > MAX_WAIT_S) return null;
  const refusedBeforeReading = refusal.status === 429 || refusal.status === 503;
  if (refusal.mutation && !refusedBeforeReading) return null;
  if (!refusedBeforeReading && (refusal.code === null || !WAITABLE.has(refusal.code))) return null;
  return refusal.retryAfter;
}
