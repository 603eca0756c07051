import { cleanup, fireEvent, render, screen } from "@testing-library/react";
import { useState } from "react";
import { afterEach, describe, expect, it, vi } from "vitest";
import { CatalogContext } from "../lib/catalog";
import { catalogFrom, parseTypeExpr, type CatalogEntry } from "../lib/typeexpr";
import { buildInputs, draftOf, type Draft } from "../lib/values";
import { InputsForm, type FormPort } from "./TypeForm";

// The catalog as the server's `types` query answers it (calcgraph/domain/types/catalog.py).
const ENTRIES: CatalogEntry[] = [
  { name: "Numeric", parent: null, kind: "scalar", unit: null, shape: null, description: "" },
  { name: "Integer", parent: "Numeric", kind: "scalar", unit: null, shape: null, description: "" },
  { name: "Float", parent: "Numeric", kind: "scalar", unit: null, shape: null, description: "" },
  { name: "Boolean", parent: null, kind: "scalar", unit: null, shape: null, description: "" },
  { name: "String", parent: null, kind: "scalar", unit: null, shape: null, description: "" },
  { name: "Length", parent: "Float", kind: "physical", unit: "m", shape: null, description: "" },
  { name: "Volume", parent: "Float", kind: "physical", unit: "m**3", shape: null, description: "" },
  { name: "Force", parent: "Float", kind: "physical", unit: "N", shape: null, description: "" },
  { name: "Moment", parent: "Float", kind: "physical", unit: "N*m", shape: null, description: "" },
  { name: "Pressure", parent: "Float", kind: "physical", unit: "Pa", shape: null, description: "" },
  { name: "Temperature", parent: "Float", kind: "physical", unit: "K", shape: null, description: "" },
  { name: "Vector3", parent: null, kind: "composite", unit: null, shape: "[x, y, z], three Float", description: "" },
  { name: "Force3", parent: "Vector3", kind: "composite", unit: null, shape: "[x, y, z], three Force", description: "" },
  { name: "Moment3", parent: "Vector3", kind: "composite", unit: null, shape: "[x, y, z], three Moment", description: "" },
  { name: "Torsor", parent: null, kind: "composite", unit: null, shape: "{force: Force3, moment: Moment3}", description: "" },
  { name: "Matrix", parent: null, kind: "composite", unit: null, shape: "2D array of Float (rows of equal length)", description: "" },
];
const catalog = catalogFrom(ENTRIES);

function port(name: string, type: string): FormPort {
  return { name, expr: parseTypeExpr(type) };
}

function Harness({ ports, onSubmit }: { ports: FormPort[]; onSubmit: (inputs: Record<string, unknown>) => void }) {
  const [drafts, setDrafts] = useState<Record<string, Draft>>({});
  return (
    <CatalogContext.Provider value={catalog}>
      <InputsForm ports={ports} drafts={drafts} onDrafts={setDrafts} onSubmit={onSubmit} submitLabel="Send" />
    </CatalogContext.Provider>
  );
}

function type(label: RegExp | string, value: string) {
  fireEvent.change(screen.getByLabelText(label), { target: { value } });
}

afterEach(cleanup);

describe("forms from types", () => {
  it("sends a physical scalar as typed, with its unit", () => {
    const onSubmit = vi.fn();
    render(<Harness ports={[port("load", "Force")]} onSubmit={onSubmit} />);
    type(/^load/, "12 kN");
    fireEvent.click(screen.getByRole("button", { name: "Send" }));
    expect(onSubmit).toHaveBeenCalledWith({ load: { value: 12, unit: "kN" } });
  });

  it("refuses a wrong dimension before sending, naming the expected unit", () => {
    const onSubmit = vi.fn();
    render(<Harness ports={[port("load", "Force")]} onSubmit={onSubmit} />);
    type(/^load/, "12 m");
    expect(screen.getByRole("alert").textContent).toContain("m is not a Force unit (expected a unit convertible to N)");
    fireEvent.click(screen.getByRole("button", { name: "Send" }));
    expect(onSubmit).not.toHaveBeenCalled();
    expect(screen.getByLabelText("Problems in the form").textContent).toContain("load");
  });

  it("takes a bare number as the SI unit, and compound units", () => {
    const onSubmit = vi.fn();
    render(<Harness ports={[port("span", "Length"), port("m", "Moment"), port("w", "Volume")]} onSubmit={onSubmit} />);
    type(/^span/, "3");
    type(/^m /, "5 kN*m");
    type(/^w /, "557 cm**3");
    fireEvent.click(screen.getByRole("button", { name: "Send" }));
    expect(onSubmit).toHaveBeenCalledWith({ span: 3, m: { value: 5, unit: "kN*m" }, w: { value: 557, unit: "cm**3" } });
  });

  it("gives a Torsor two triples of Force and Moment", () => {
    const onSubmit = vi.fn();
    render(<Harness ports={[port("t", "Torsor")]} onSubmit={onSubmit} />);
    const inputs = screen.getAllByRole("textbox");
    expect(inputs).toHaveLength(6);
    ["1 kN", "0", "0", "0", "2 kN*m", "0"].forEach((v, i) => fireEvent.change(inputs[i] as HTMLElement, { target: { value: v } }));
    fireEvent.click(screen.getByRole("button", { name: "Send" }));
    expect(onSubmit).toHaveBeenCalledWith({
      t: { force: [{ value: 1, unit: "kN" }, 0, 0], moment: [0, { value: 2, unit: "kN*m" }, 0] },
    });
  });

  it("grows a list and a dict[str, T], and refuses a dict entry without a key", () => {
    const onSubmit = vi.fn();
    render(<Harness ports={[port("spans", "list[Length]"), port("loads", "dict[str, Force]")]} onSubmit={onSubmit} />);
    fireEvent.click(screen.getByRole("button", { name: "Add to spans" }));
    fireEvent.click(screen.getByRole("button", { name: "Add to spans" }));
    type(/^spans\[0\]/, "2 m");
    type(/^spans\[1\]/, "300 mm");
    fireEvent.click(screen.getByRole("button", { name: "Add entry to loads" }));
    type(/^loads\[1\]/, "5 kN");
    fireEvent.click(screen.getByRole("button", { name: "Send" }));
    expect(onSubmit).not.toHaveBeenCalled();
    expect(screen.getByLabelText("Problems in the form").textContent).toContain("every entry needs a key");
    type("loads key 1", "dead");
    fireEvent.click(screen.getByRole("button", { name: "Send" }));
    expect(onSubmit).toHaveBeenCalledWith({
      spans: [{ value: 2, unit: "m" }, { value: 300, unit: "mm" }],
      loads: { dead: { value: 5, unit: "kN" } },
    });
  });

  it("fills an inline struct field by field, with Integer, Boolean and String", () => {
    const onSubmit = vi.fn();
    render(<Harness ports={[port("s", "{count: Integer, ok: Boolean, name: String, at: Vector3}")]} onSubmit={onSubmit} />);
    type(/^count/, "2.5");
    fireEvent.click(screen.getByRole("button", { name: "Send" }));
    expect(onSubmit).not.toHaveBeenCalled();
    type(/^count/, "2");
    fireEvent.click(screen.getByLabelText("ok"));
    type(/^name/, "beam A");
    type(/^x /, "1");
    type(/^y /, "2");
    type(/^z /, "3");
    fireEvent.click(screen.getByRole("button", { name: "Send" }));
    expect(onSubmit).toHaveBeenCalledWith({ s: { count: 2, ok: true, name: "beam A", at: [1, 2, 3] } });
  });
});

describe("values from drafts", () => {
  it("reads a matrix of equal rows and refuses ragged ones", () => {
    const ports = [port("k", "Matrix")];
    expect(buildInputs(ports, { k: "1 0; 0 1" }, catalog)).toEqual({ ok: true, inputs: { k: [[1, 0], [0, 1]] } });
    const ragged = buildInputs(ports, { k: "1 0; 1" }, catalog);
    expect(ragged.ok).toBe(false);
  });

  it("converts degC as an offset and refuses an unknown unit", () => {
    expect(buildInputs([port("t", "Temperature")], { t: "20 degC" }, catalog)).toEqual({
      ok: true,
      inputs: { t: { value: 20, unit: "degC" } },
    });
    const unknown = buildInputs([port("f", "Force")], { f: "3 furlongs" }, catalog);
    expect(unknown.ok ? [] : unknown.problems.map((p) => p.message)).toEqual(["unknown unit 'furlongs'"]);
  });

  it("reads a struct written as JSON text", () => {
    const expr = parseTypeExpr('{"force": "Force3", "moment": "Moment3"}');
    expect(expr).toEqual(parseTypeExpr("{force: Force3, moment: Moment3}"));
  });
});

describe("draftOf (Run again fills the start form with a run's inputs)", () => {
  it("gives back drafts that build the same inputs", () => {
    const ports = [
      port("span", "Length"),
      port("bare", "Force"),
      port("n", "Integer"),
      port("flag", "Boolean"),
      port("name", "String"),
      port("loads", "list[Force3]"),
      port("torsor", "Torsor"),
      port("m", "Matrix"),
      port("table", "dict[str, Pressure]"),
    ];
    const inputs: Record<string, unknown> = {
      span: { value: 3, unit: "m" },
      bare: 12000,
      n: 4,
      flag: true,
      name: "beam A",
      loads: [[1, { value: 2, unit: "kN" }, 3]],
      torsor: { force: [1, 2, 3], moment: [4, 5, 6] },
      m: [[1, 2], [3, 4]],
      table: { a: { value: 355, unit: "MPa" } },
    };
    const drafts = Object.fromEntries(ports.map((p) => [p.name, draftOf(p.expr, inputs[p.name], catalog)]));
    expect(drafts.span).toBe("3 m");
    expect(buildInputs(ports, drafts, catalog)).toEqual({ ok: true, inputs });
  });

  it("leaves a field empty when the run has no usable value for it", () => {
    expect(draftOf(parseTypeExpr("Length"), null, catalog)).toBe("");
    expect(draftOf(parseTypeExpr("list[Float]"), "not a list", catalog)).toEqual([]);
  });
});
