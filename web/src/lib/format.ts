import type { Catalog } from "./typeexpr";

export function when(iso: string | null | undefined): string {
  if (!iso) return "—";
  return new Date(iso).toLocaleString();
}

export function duration(start: string | null | undefined, end: string | null | undefined): string {
  if (!start || !end) return "—";
  const ms = new Date(end).getTime() - new Date(start).getTime();
  return ms < 1000 ? `${ms} ms` : `${(ms / 1000).toFixed(2)} s`;
}

/** A port's type as text, with its SI unit when the catalog names one. */
export function portType(schema: unknown): string {
  if (schema && typeof schema === "object" && "type" in schema) {
    const t = (schema as { type: unknown }).type;
    return typeof t === "string" ? t : JSON.stringify(t);
  }
  return typeof schema === "string" ? schema : JSON.stringify(schema);
}

export function unitOf(typeName: string, catalog: Catalog): string {
  return catalog.get(typeName)?.unit ?? "";
}

/** What a deprecated function version says of itself (contract 11), as the function page's
 * banner and an editor node's note show it; null when it is not deprecated. */
export function deprecation(v: { deprecated: boolean; deprecatedMessage?: string | null; removalVersion?: string | null }): string | null {
  if (!v.deprecated) return null;
  return `Deprecated${v.deprecatedMessage ? `: ${v.deprecatedMessage}` : ""}${v.removalVersion ? ` (removed in ${v.removalVersion})` : ""}`;
}

export function showValue(value: unknown): string {
  if (typeof value === "number") return Number.isInteger(value) ? String(value) : value.toPrecision(6);
  if (typeof value === "string") return value;
  return JSON.stringify(value);
}

export function ports(schema: unknown): [string, { type: string; description?: string; required?: boolean }][] {
  if (!schema || typeof schema !== "object") return [];
  return Object.entries(schema as Record<string, unknown>).map(([name, spec]) => {
    const s = (spec && typeof spec === "object" ? spec : { type: spec }) as {
      type: unknown;
      description?: string;
      required?: boolean;
    };
    return [name, { type: portType(s), description: s.description, required: s.required }];
  });
}
