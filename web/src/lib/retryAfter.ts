// How long the server asked us to wait before trying again, from what it sent: the HTTP
// `Retry-After` header (delta-seconds or an HTTP date) on a 429/503, else `retry_after` in the
// REST body or in a GraphQL error's extensions (the GraphQL door's `Unavailable` on overload).

/** Seconds to wait (>= 0), or null when the server named no wait. */
export function retryAfterSeconds(
  header: string | null | undefined,
  fields: Record<string, unknown> | null | undefined,
  now: number = Date.now(),
): number | null {
  const value = header?.trim();
  if (value) {
    if (/^\d+(\.\d+)?$/.test(value)) return Number(value);
    const at = Date.parse(value);
    if (!Number.isNaN(at)) return Math.max(0, (at - now) / 1000);
  }
  const field = fields?.retry_after;
  if (typeof field === "number" && Number.isFinite(field) && field >= 0) return field;
  if (typeof field === "string" && /^\d+(\.\d+)?$/.test(field.trim())) return Number(field);
  return null;
}
