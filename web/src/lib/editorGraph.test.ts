import { describe, expect, it } from "vitest";
import { problemsByNode } from "./editorGraph";
import { deprecation } from "./format";

describe("problemsByNode", () => {
  it("draws problems on their nodes and leaves the deprecation notice out (contract 11)", () => {
    const byNode = problemsByNode({
      type_mismatches: [{ node_key: "f", port: "x", reason: "Force cannot connect to Length" }],
      missing_inputs: [{ node_key: null, reason: "no input" }],
      deprecated_functions: [{ node_key: "f", reason: "pkg/run is deprecated: use v2" }, { node_key: "g", reason: "pkg/old is deprecated" }],
    });
    expect(byNode.get("f")).toEqual(["type mismatches (x): Force cannot connect to Length"]);
    expect(byNode.get("(document)")).toEqual(["missing inputs: no input"]);
    expect(byNode.has("g")).toBe(false);
  });
});

describe("deprecation", () => {
  it("says what the version declares, and nothing for one not deprecated", () => {
    expect(deprecation({ deprecated: false, deprecatedMessage: "x" })).toBeNull();
    expect(deprecation({ deprecated: true })).toBe("Deprecated");
    expect(deprecation({ deprecated: true, deprecatedMessage: "use v2", removalVersion: "2.0.0" })).toBe("Deprecated: use v2 (removed in 2.0.0)");
    expect(deprecation({ deprecated: true, deprecatedMessage: null, removalVersion: "3.0.0" })).toBe("Deprecated (removed in 3.0.0)");
  });
});
