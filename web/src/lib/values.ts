// Form drafts (what the person typed) and the JSON values they become. A draft keeps the text
// of every field, so a half-typed form survives a re-render, a sign-in round trip (drafts live
// in sessionStorage) and an error.
import { compositeShape, type Catalog, type TypeExpr } from "./typeexpr";
import { parseQuantity, UnitError } from "./units";

export type Draft = string | boolean | Draft[] | { [field: string]: Draft };

export interface FieldProblem {
  path: string;
  message: string;
}

export function emptyDraft(expr: TypeExpr, catalog: Catalog): Draft {
  switch (expr.kind) {
    case "list":
    case "dict":
      return [];
    case "struct":
      return Object.fromEntries(expr.fields.map(([k, v]) => [k, emptyDraft(v, catalog)]));
    case "named": {
      const entry = catalog.get(expr.name);
      if (expr.name === "Boolean") return false;
      if (entry?.kind === "composite") {
        const shape = compositeShape(entry);
        if (shape.kind === "triple") return ["", "", ""];
        if (shape.kind === "struct") return emptyDraft(shape.expr, catalog);
      }
      return "";
    }
  }
}

type Built = { ok: true; value: unknown } | { ok: false };

class Builder {
  problems: FieldProblem[] = [];
  constructor(private readonly catalog: Catalog) {}

  fail(path: string, message: string): Built {
    this.problems.push({ path, message });
    return { ok: false };
  }

  build(expr: TypeExpr, draft: Draft, path: string): Built {
    switch (expr.kind) {
      case "list": {
        const items = Array.isArray(draft) ? draft : [];
        const out = items.map((item, i) => this.build(expr.item, item, `${path}[${i}]`));
        return collect(out);
      }
      case "dict": {
        const entries = Array.isArray(draft) ? draft : [];
        const result: Record<string, unknown> = {};
        let ok = true;
        entries.forEach((entry, i) => {
          const [key, value] = Array.isArray(entry) ? entry : ["", ""];
          if (typeof key !== "string" || key.trim() === "") {
            this.fail(`${path}[${i}]`, "every entry needs a key");
            ok = false;
            return;
          }
          if (key in result) {
            this.fail(`${path}.${key}`, `the key '${key}' appears twice`);
            ok = false;
            return;
          }
          const built = this.build(expr.value, value ?? "", `${path}.${key}`);
          if (built.ok) result[key] = built.value;
          else ok = false;
        });
        return ok ? { ok: true, value: result } : { ok: false };
      }
      case "struct": {
        const fields = isRecord(draft) ? draft : {};
        const result: Record<string, unknown> = {};
        let ok = true;
        for (const [name, fieldExpr] of expr.fields) {
          const built = this.build(fieldExpr, fields[name] ?? "", `${path}.${name}`);
          if (built.ok) result[name] = built.value;
          else ok = false;
        }
        return ok ? { ok: true, value: result } : { ok: false };
      }
      case "named":
        return this.named(expr.name, draft, path);
    }
  }

  named(name: string, draft: Draft, path: string): Built {
    const entry = this.catalog.get(name);
    if (!entry) return this.fail(path, `unknown type ${name}`);
    if (entry.kind === "physical" && entry.unit) {
      const text = typeof draft === "string" ? draft : "";
      if (text.trim() === "") return this.fail(path, `enter a ${name}, e.g. 12 ${entry.unit}`);
      try {
        const q = parseQuantity(text, entry.unit, name);
        // The unit travels as typed, so the run echoes what the person entered (contract 6).
        return { ok: true, value: q.unit === null ? q.value : { value: q.value, unit: q.unit } };
      } catch (error) {
        if (error instanceof UnitError) return this.fail(path, error.message);
        throw error;
      }
    }
    if (entry.kind === "composite") {
      const shape = compositeShape(entry);
      if (shape.kind === "triple") {
        const parts = Array.isArray(draft) ? draft : ["", "", ""];
        return collect(
          ["x", "y", "z"].map((axis, i) => this.named(shape.element, parts[i] ?? "", `${path}.${axis}`)),
        );
      }
      if (shape.kind === "struct") return this.build(shape.expr, draft, path);
      return this.matrix(typeof draft === "string" ? draft : "", path);
    }
    if (name === "Boolean") return { ok: true, value: draft === true };
    if (name === "String") return { ok: true, value: typeof draft === "string" ? draft : "" };
    const text = typeof draft === "string" ? draft.trim() : "";
    const number = Number(text);
    if (text === "" || !Number.isFinite(number)) return this.fail(path, `enter a number (${name})`);
    if (name === "Integer" && !Number.isInteger(number)) {
      return this.fail(path, "enter a whole number (Integer)");
    }
    return { ok: true, value: number };
  }

  matrix(text: string, path: string): Built {
    const rows = text
      .split(/[;\n]/)
      .map((row) => row.trim())
      .filter((row) => row !== "")
      .map((row) => row.split(/[\s,]+/).map(Number));
    if (rows.length === 0) return this.fail(path, "enter rows of numbers, e.g. 1 2; 3 4");
    if (rows.some((row) => row.some((n) => !Number.isFinite(n)))) {
      return this.fail(path, "every entry of a matrix is a number");
    }
    if (rows.some((row) => row.length !== rows[0]?.length)) {
      return this.fail(path, "every row of a matrix has the same length");
    }
    return { ok: true, value: rows };
  }
}

function collect(items: Built[]): Built {
  if (items.some((b) => !b.ok)) return { ok: false };
  return { ok: true, value: items.map((b) => (b.ok ? b.value : null)) };
}

function isRecord(draft: Draft): draft is { [field: string]: Draft } {
  return typeof draft === "object" && !Array.isArray(draft);
}

export interface Port {
  name: string;
  expr: TypeExpr;
}

/** The inputs object of a form, or the problems that keep it from being sent. */
export function buildInputs(
  ports: readonly Port[],
  drafts: Record<string, Draft>,
  catalog: Catalog,
): { ok: true; inputs: Record<string, unknown> } | { ok: false; problems: FieldProblem[] } {
  const builder = new Builder(catalog);
  const inputs: Record<string, unknown> = {};
  for (const port of ports) {
    const built = builder.build(port.expr, drafts[port.name] ?? emptyDraft(port.expr, catalog), port.name);
    if (built.ok) inputs[port.name] = built.value;
  }
  if (builder.problems.length > 0) return { ok: false, problems: builder.problems };
  return { ok: true, inputs };
}

/** The problem of one leaf field, for showing next to it while the person types. */
export function leafProblem(name: string, draft: Draft, catalog: Catalog): string | null {
  if (typeof draft === "string" && draft.trim() === "") return null;
  const builder = new Builder(catalog);
  builder.named(name, draft, "");
  return builder.problems[0]?.message ?? null;
}

/** The draft that builds `value` again: a run's inputs back into the start form ("Run again"). */
export function draftOf(expr: TypeExpr, value: unknown, catalog: Catalog): Draft {
  switch (expr.kind) {
    case "list":
      return Array.isArray(value) ? value.map((item) => draftOf(expr.item, item, catalog)) : [];
    case "dict":
      return isObject(value) ? Object.entries(value).map(([k, v]) => [k, draftOf(expr.value, v, catalog)]) : [];
    case "struct": {
      const fields = isObject(value) ? value : {};
      return Object.fromEntries(expr.fields.map(([k, v]) => [k, draftOf(v, fields[k], catalog)]));
    }
    case "named": {
      const entry = catalog.get(expr.name);
      if (expr.name === "Boolean") return value === true;
      if (entry?.kind === "composite") {
        const shape = compositeShape(entry);
        if (shape.kind === "triple") {
          const parts = Array.isArray(value) ? value : [];
          return [0, 1, 2].map((i) => draftOf({ kind: "named", name: shape.element }, parts[i], catalog));
        }
        if (shape.kind === "struct") return draftOf(shape.expr, value, catalog);
        return Array.isArray(value) ? value.map((row) => (Array.isArray(row) ? row.join(" ") : "")).join("; ") : "";
      }
      // A quantity with its unit as typed ({value, unit}) or a bare number (in SI units).
      if (isObject(value) && typeof value.value === "number") {
        return typeof value.unit === "string" ? `${value.value} ${value.unit}` : String(value.value);
      }
      return typeof value === "number" || typeof value === "string" ? String(value) : emptyDraft(expr, catalog);
    }
  }
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
