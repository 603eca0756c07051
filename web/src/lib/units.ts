// Unit arithmetic for the forms: enough of pint's notation (`kN`, `N*m`, `kg/m**3`, `cm**3`,
// `MPa`, `N·m`, `m²`) to convert a typed quantity to the SI unit the catalog names and to refuse
// a wrong dimension before anything is sent. The server converts again and stays the judge.

// Dimension exponents: m, kg, s, A, K, mol, cd
type Dim = [number, number, number, number, number, number, number];
interface Unit {
  factor: number;
  dim: Dim;
}

const D = (m = 0, kg = 0, s = 0, A = 0, K = 0, mol = 0, cd = 0): Dim => [m, kg, s, A, K, mol, cd];
const N: Dim = D(1, 1, -2);
const BASE: Record<string, Unit> = {
  m: { factor: 1, dim: D(1) },
  g: { factor: 1e-3, dim: D(0, 1) },
  s: { factor: 1, dim: D(0, 0, 1) },
  A: { factor: 1, dim: D(0, 0, 0, 1) },
  K: { factor: 1, dim: D(0, 0, 0, 0, 1) },
  mol: { factor: 1, dim: D(0, 0, 0, 0, 0, 1) },
  cd: { factor: 1, dim: D(0, 0, 0, 0, 0, 0, 1) },
  N: { factor: 1, dim: N },
  Pa: { factor: 1, dim: D(-1, 1, -2) },
  J: { factor: 1, dim: D(2, 1, -2) },
  W: { factor: 1, dim: D(2, 1, -3) },
  Hz: { factor: 1, dim: D(0, 0, -1) },
  rad: { factor: 1, dim: D() },
  L: { factor: 1e-3, dim: D(3) },
  l: { factor: 1e-3, dim: D(3) },
  bar: { factor: 1e5, dim: D(-1, 1, -2) },
  t: { factor: 1e3, dim: D(0, 1) },
};
// Names that take no prefix (checked before prefixed forms: `min` is not milli-inch).
const WHOLE: Record<string, Unit> = {
  min: { factor: 60, dim: D(0, 0, 1) },
  h: { factor: 3600, dim: D(0, 0, 1) },
  hour: { factor: 3600, dim: D(0, 0, 1) },
  deg: { factor: Math.PI / 180, dim: D() },
  degree: { factor: Math.PI / 180, dim: D() },
  in: { factor: 0.0254, dim: D(1) },
  inch: { factor: 0.0254, dim: D(1) },
  ft: { factor: 0.3048, dim: D(1) },
  foot: { factor: 0.3048, dim: D(1) },
  lbf: { factor: 4.4482216152605, dim: N },
  kip: { factor: 4448.2216152605, dim: N },
  psi: { factor: 6894.757293168361, dim: D(-1, 1, -2) },
  ksi: { factor: 6894757.293168361, dim: D(-1, 1, -2) },
  meter: { factor: 1, dim: D(1) },
  metre: { factor: 1, dim: D(1) },
  newton: { factor: 1, dim: N },
  second: { factor: 1, dim: D(0, 0, 1) },
  "1": { factor: 1, dim: D() },
};
const PREFIX: Record<string, number> = {
  T: 1e12,
  G: 1e9,
  M: 1e6,
  k: 1e3,
  h: 1e2,
  da: 1e1,
  d: 1e-1,
  c: 1e-2,
  m: 1e-3,
  u: 1e-6,
  "µ": 1e-6,
  n: 1e-9,
  p: 1e-12,
};

export class UnitError extends Error {}

function lookup(name: string): Unit {
  const whole = WHOLE[name] ?? BASE[name];
  if (whole) return whole;
  for (const [prefix, scale] of Object.entries(PREFIX)) {
    if (name.startsWith(prefix)) {
      const base = BASE[name.slice(prefix.length)];
      if (base) return { factor: scale * base.factor, dim: base.dim };
    }
  }
  throw new UnitError(`unknown unit '${name}'`);
}

function power(u: Unit, n: number): Unit {
  return { factor: u.factor ** n, dim: u.dim.map((d) => d * n) as Dim };
}

function times(a: Unit, b: Unit): Unit {
  return { factor: a.factor * b.factor, dim: a.dim.map((d, i) => d + (b.dim[i] ?? 0)) as Dim };
}

const SUPERSCRIPT: Record<string, string> = { "²": "**2", "³": "**3", "⁴": "**4", "⁻¹": "**-1" };

/** Parse a unit text into its SI factor and dimension. */
export function parseUnit(text: string): Unit {
  let src = text.trim();
  for (const [sup, rep] of Object.entries(SUPERSCRIPT)) src = src.split(sup).join(rep);
  src = src.replace(/·/g, "*").replace(/\^/g, "**");
  const tokens = src.match(/\*\*|[A-Za-zµ_]+|-?\d+(?:\.\d+)?|[*/()]|\S/g) ?? [];
  let i = 0;
  const factor = (): Unit => {
    const tok = tokens[i++];
    if (tok === undefined) throw new UnitError(`incomplete unit '${text}'`);
    let unit: Unit;
    if (tok === "(") {
      unit = product();
      if (tokens[i++] !== ")") throw new UnitError(`unbalanced parentheses in '${text}'`);
    } else if (/^[A-Za-zµ_]+$/.test(tok) || tok === "1") {
      unit = lookup(tok);
    } else {
      throw new UnitError(`unexpected '${tok}' in unit '${text}'`);
    }
    if (tokens[i] === "**") {
      i++;
      const exp = Number(tokens[i++]);
      if (!Number.isFinite(exp)) throw new UnitError(`bad exponent in unit '${text}'`);
      unit = power(unit, exp);
    }
    return unit;
  };
  const product = (): Unit => {
    let unit = factor();
    while (i < tokens.length && tokens[i] !== ")") {
      if (tokens[i] === "*") {
        i++;
        unit = times(unit, factor());
      } else if (tokens[i] === "/") {
        i++;
        unit = times(unit, power(factor(), -1));
      } else {
        unit = times(unit, factor()); // juxtaposition: `kN m`
      }
    }
    return unit;
  };
  if (tokens.length === 0) throw new UnitError("no unit");
  const unit = product();
  if (i !== tokens.length) throw new UnitError(`unexpected text in unit '${text}'`);
  return unit;
}

export function sameDimension(a: Unit, b: Unit): boolean {
  return a.dim.every((d, i) => Math.abs(d - (b.dim[i] ?? 0)) < 1e-9);
}

export interface Quantity {
  value: number;
  unit: string | null; // null: a bare number, already in the SI unit
  si: number;
}

/** Read `12 kN` (or `12`, meaning the SI unit) as a quantity of the SI unit `siUnit`.
 * Temperatures in degC/°C are offsets and are converted here, as pint does. */
export function parseQuantity(text: string, siUnit: string, typeName: string): Quantity {
  const match = /^\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*(.*?)\s*$/.exec(text);
  if (!match || match[1] === undefined) {
    throw new UnitError(`enter a number and a unit, e.g. 12 ${siUnit}`);
  }
  const value = Number(match[1]);
  const unitText = match[2] ?? "";
  if (unitText === "") return { value, unit: null, si: value };
  if (/^(degC|°C|celsius)$/.test(unitText)) {
    if (siUnit !== "K") throw new UnitError(`${unitText} is not a ${typeName} unit (expected a unit convertible to ${siUnit})`);
    return { value, unit: "degC", si: value + 273.15 };
  }
  const unit = parseUnit(unitText);
  const target = parseUnit(siUnit);
  if (!sameDimension(unit, target)) {
    throw new UnitError(
      `${unitText} is not a ${typeName} unit (expected a unit convertible to ${siUnit})`,
    );
  }
  return { value, unit: unitText, si: (value * unit.factor) / target.factor };
}
