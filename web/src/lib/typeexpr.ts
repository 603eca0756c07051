// Type expressions as the server reads them (contract 6): a catalog name, `list[T]`,
// `dict[str, T]`, or an inline struct `{field: T}` (also as JSON text or a JSON object).
// The catalog itself (names, units, shapes) always comes from the server's `types` query.

export type TypeExpr =
  | { kind: "named"; name: string }
  | { kind: "list"; item: TypeExpr }
  | { kind: "dict"; value: TypeExpr }
  | { kind: "struct"; fields: [string, TypeExpr][] };

export interface CatalogEntry {
  name: string;
  parent: string | null;
  kind: string; // scalar | physical | composite
  unit: string | null;
  shape: string | null;
  description: string;
}

export type Catalog = Map<string, CatalogEntry>;

export class TypeExprError extends Error {}

class Parser {
  private pos = 0;
  constructor(private readonly text: string) {}

  parse(): TypeExpr {
    const expr = this.expr();
    this.skip();
    if (this.pos !== this.text.length) throw this.error("unexpected text");
    return expr;
  }

  private error(what: string): TypeExprError {
    return new TypeExprError(`${what} at position ${this.pos} of ${JSON.stringify(this.text)}`);
  }

  private skip(): void {
    while (this.pos < this.text.length && /\s/.test(this.text[this.pos] ?? "")) this.pos++;
  }

  private peek(): string {
    this.skip();
    return this.text[this.pos] ?? "";
  }

  private expect(char: string): void {
    if (this.peek() !== char) throw this.error(`expected '${char}'`);
    this.pos++;
  }

  private ident(): string {
    this.skip();
    const match = /^[A-Za-z_][A-Za-z0-9_]*|^"[^"]*"/.exec(this.text.slice(this.pos));
    if (!match) throw this.error("expected a name");
    this.pos += match[0].length;
    return match[0].replace(/^"|"$/g, "");
  }

  private expr(): TypeExpr {
    if (this.peek() === "{") return this.struct();
    if (this.peek() === '"') return { kind: "named", name: this.ident() };
    const name = this.ident();
    if (name === "list" && this.peek() === "[") {
      this.expect("[");
      const item = this.expr();
      this.expect("]");
      return { kind: "list", item };
    }
    if (name === "dict" && this.peek() === "[") {
      this.expect("[");
      const key = this.ident();
      if (key !== "str") throw this.error("dict keys must be str");
      this.expect(",");
      const value = this.expr();
      this.expect("]");
      return { kind: "dict", value };
    }
    return { kind: "named", name };
  }

  private struct(): TypeExpr {
    this.expect("{");
    const fields: [string, TypeExpr][] = [];
    while (this.peek() !== "}") {
      const name = this.ident();
      this.expect(":");
      let value: TypeExpr;
      if (this.peek() === '"') {
        // JSON text: the field's expression is itself a string
        value = parseTypeExpr(this.ident());
      } else {
        value = this.expr();
      }
      fields.push([name, value]);
      if (this.peek() === ",") this.pos++;
      else break;
    }
    this.expect("}");
    return { kind: "struct", fields };
  }
}

export function parseTypeExpr(text: string): TypeExpr {
  return new Parser(text).parse();
}

/** A type expression as the graph document or a function schema carries it. */
export function typeExprOf(value: unknown): TypeExpr {
  if (typeof value === "string") return parseTypeExpr(value);
  if (value !== null && typeof value === "object" && !Array.isArray(value)) {
    const fields = Object.entries(value as Record<string, unknown>).map(
      ([name, inner]): [string, TypeExpr] => [name, typeExprOf(inner)],
    );
    return { kind: "struct", fields };
  }
  throw new TypeExprError(`not a type expression: ${JSON.stringify(value)}`);
}

export function formatTypeExpr(expr: TypeExpr): string {
  switch (expr.kind) {
    case "named":
      return expr.name;
    case "list":
      return `list[${formatTypeExpr(expr.item)}]`;
    case "dict":
      return `dict[str, ${formatTypeExpr(expr.value)}]`;
    case "struct":
      return `{${expr.fields.map(([k, v]) => `${k}: ${formatTypeExpr(v)}`).join(", ")}}`;
  }
}

/** How a composite of the catalog is entered, read from its `shape` text: `[x, y, z], three
 * Force` is a triple of Force; `{force: Force3, moment: Moment3}` is a struct; `2D array` is a
 * matrix of Float. */
export type CompositeShape =
  | { kind: "triple"; element: string }
  | { kind: "struct"; expr: TypeExpr }
  | { kind: "matrix" };

export function compositeShape(entry: CatalogEntry): CompositeShape {
  const shape = entry.shape ?? "";
  const triple = /three\s+([A-Za-z_]\w*)/.exec(shape);
  if (triple?.[1]) return { kind: "triple", element: triple[1] };
  if (shape.trim().startsWith("{")) return { kind: "struct", expr: parseTypeExpr(shape) };
  return { kind: "matrix" };
}

export function catalogFrom(entries: readonly CatalogEntry[]): Catalog {
  return new Map(entries.map((e) => [e.name, e]));
}
