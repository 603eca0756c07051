// Values as a person reads them: SI numbers with their unit, in engineering prefixes (210 GPa,
// not 210000000000) or in a display unit the person chose (kN·m, MPa); a run's inputs as they
// were entered (`3 m`, not {"value":3,"unit":"m"}).
import { parseUnit, sameDimension, UnitError } from "./units";
import type { Catalog } from "./typeexpr";

/** Display unit per SI unit (`Pa` → `MPa`); absent: engineering prefixes. */
export type DisplayUnits = Record<string, string>;

const PREFIXES: [string, number][] = [
  ["G", 1e9],
  ["M", 1e6],
  ["k", 1e3],
  ["", 1],
  ["m", 1e-3],
  ["µ", 1e-6],
];
// Units shown with a prefix on their first factor (kN·m, MPa, mm); others stay SI.
const PREFIXED = new Set(["N", "Pa", "J", "W", "m", "Hz", "A", "V", "s"]);

export function number(value: number): string {
  if (!Number.isFinite(value)) return String(value);
  if (value === 0) return "0";
  const abs = Math.abs(value);
  if (abs >= 1e-3 && abs < 1e7) return String(Number(value.toPrecision(4)));
  return value.toExponential(3).replace(/\.?0+e/, "e");
}

/** `N*m` → `N·m`, `m**4` → `m⁴`. */
export function prettyUnit(unit: string): string {
  const sup: Record<string, string> = { "2": "²", "3": "³", "4": "⁴", "-1": "⁻¹", "-2": "⁻²" };
  return unit.replace(/\*\*(-?\d)/g, (m, d: string) => sup[d] ?? m).replace(/\*/g, "·");
}

function engineering(si: number, siUnit: string): string {
  const m = /^([A-Za-z]+)(.*)$/.exec(siUnit);
  const head = m?.[1] ?? "";
  const rest = m?.[2] ?? "";
  if (!m || !PREFIXED.has(head) || rest.startsWith("**") || si === 0 || !Number.isFinite(si)) {
    return `${number(si)} ${prettyUnit(siUnit)}`;
  }
  const allowed = head === "m" ? PREFIXES.filter(([p]) => p === "k" || p === "" || p === "m") : PREFIXES;
  const abs = Math.abs(si);
  const fit = allowed.find(([, f]) => abs / f >= 1) ?? allowed[allowed.length - 1] ?? ["", 1];
  return `${number(si / fit[1])} ${prettyUnit(fit[0] + head + rest)}`;
}

/** An SI number of `siUnit`, in the chosen display unit or in engineering prefixes. */
export function formatQuantity(si: number, siUnit: string, display: DisplayUnits = {}): string {
  if (!siUnit) return number(si);
  const chosen = display[siUnit];
  if (chosen) {
    try {
      const to = parseUnit(chosen);
      const from = parseUnit(siUnit);
      if (sameDimension(to, from)) return `${number((si * from.factor) / to.factor)} ${prettyUnit(chosen)}`;
    } catch (e) {
      if (!(e instanceof UnitError)) throw e;
    }
  }
  return engineering(si, siUnit);
}

/** Whether `unit` can show quantities of `siUnit` (the display-unit chooser's check). */
export function displayUnitProblem(unit: string, siUnit: string): string | null {
  try {
    return sameDimension(parseUnit(unit), parseUnit(siUnit)) ? null : `${unit} is not convertible to ${siUnit}`;
  } catch (e) {
    return e instanceof Error ? e.message : String(e);
  }
}

function isEntered(value: unknown): value is { value: unknown; unit: string } {
  return !!value && typeof value === "object" && !Array.isArray(value) && "value" in value && "unit" in value && typeof (value as { unit: unknown }).unit === "string";
}

/** Any value: a quantity as entered, an SI number with its type's unit, lists and records of them. */
export function formatValue(value: unknown, typeName: string, catalog: Catalog, display: DisplayUnits = {}): string {
  const unit = catalog.get(typeName)?.unit ?? "";
  if (isEntered(value)) return `${formatValue(value.value, "", catalog)} ${prettyUnit(value.unit)}`;
  if (typeof value === "number") return unit ? formatQuantity(value, unit, display) : number(value);
  if (typeof value === "string") return value;
  if (typeof value === "boolean") return value ? "true" : "false";
  if (value === null || value === undefined) return "—";
  if (Array.isArray(value)) {
    if (value.length > 12) return `[${value.slice(0, 12).map((v) => formatValue(v, typeName, catalog, display)).join(", ")}, … ${value.length} items]`;
    return `[${value.map((v) => formatValue(v, typeName, catalog, display)).join(", ")}]`;
  }
  if (typeof value === "object") {
    return `{ ${Object.entries(value as Record<string, unknown>).map(([k, v]) => `${k}: ${formatValue(v, "", catalog, display)}`).join(", ")} }`;
  }
  return JSON.stringify(value);
}
