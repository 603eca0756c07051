import { describe, expect, it } from "vitest";
import { parseQuantity } from "./units";

describe("quantities to SI", () => {
  it.each([
    ["12 kN", "N", 12000],
    ["210 GPa", "Pa", 210e9],
    ["557 cm**3", "m**3", 557e-6],
    ["5 kN*m", "N*m", 5000],
    ["5 kN·m", "N*m", 5000],
    ["2 m²", "m**2", 2],
    ["7850 kg/m**3", "kg/m**3", 7850],
    ["1 kip", "N", 4448.2216152605],
    ["90 deg", "rad", Math.PI / 2],
  ])("%s is %f in %s", (text, si, expected) => {
    expect(parseQuantity(text, si, "T").si).toBeCloseTo(expected, 6);
  });

  it("refuses another dimension", () => {
    expect(() => parseQuantity("3 MPa", "N", "Force")).toThrow("MPa is not a Force unit");
  });
});
