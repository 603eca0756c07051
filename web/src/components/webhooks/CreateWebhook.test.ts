import { describe, expect, it } from "vitest";
import { parseTypes } from "./CreateWebhook";

describe("parseTypes", () => {
  it("splits on commas and spaces and drops blanks", () => {
    expect(parseTypes("calcgraph.run.*, calcgraph.job.failed")).toEqual(["calcgraph.run.*", "calcgraph.job.failed"]);
    expect(parseTypes(" calcgraph.build.refused\n,, ")).toEqual(["calcgraph.build.refused"]);
    expect(parseTypes("")).toEqual([]);
  });
});
