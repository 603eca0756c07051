import { describe, expect, it } from "vitest";
import { formatQuantity, formatValue, number } from "./quantity";
import { naturalSort } from "./sort";
import type { Catalog } from "./typeexpr";

const catalog: Catalog = new Map([
  ["Stress", { name: "Stress", parent: null, kind: "physical", unit: "Pa", shape: null, description: "" }],
  ["Moment", { name: "Moment", parent: null, kind: "physical", unit: "N*m", shape: null, description: "" }],
  ["Length", { name: "Length", parent: null, kind: "physical", unit: "m", shape: null, description: "" }],
  ["SectionModulus", { name: "SectionModulus", parent: null, kind: "physical", unit: "m**3", shape: null, description: "" }],
]);

describe("values with units", () => {
  it("shows SI numbers in engineering prefixes, not raw", () => {
    expect(formatQuantity(210000000000, "Pa")).toBe("210 GPa");
    expect(formatQuantity(36000, "N*m")).toBe("36 kN·m");
    expect(formatQuantity(0.003, "m")).toBe("3 mm");
    expect(formatQuantity(5.57e-4, "m**3")).toBe("5.57e-4 m³");
  });
  it("converts to the display unit the person chose", () => {
    expect(formatQuantity(355e6, "Pa", { Pa: "MPa" })).toBe("355 MPa");
    expect(formatQuantity(36000, "N*m", { "N*m": "kN*m" })).toBe("36 kN·m");
    expect(formatQuantity(3, "m", { m: "kN" })).toBe("3 m"); // a wrong dimension is not used
  });
  it("shows a run's inputs as entered", () => {
    expect(formatValue({ value: 3, unit: "m" }, "", catalog)).toBe("3 m");
    expect(formatValue(210e9, "Stress", catalog)).toBe("210 GPa");
    expect(formatValue([1, 2], "Length", catalog)).toBe("[1 m, 2 m]");
  });
  it("keeps small and huge numbers readable", () => {
    expect(number(1234.5678)).toBe("1235");
    expect(number(1e-9)).toBe("1e-9");
  });
  it("sorts keys naturally", () => {
    expect(naturalSort(["b_0_10", "b_0_2", "a"], (s) => s)).toEqual(["a", "b_0_2", "b_0_10"]);
  });
});
