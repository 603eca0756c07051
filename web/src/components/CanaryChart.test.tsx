import { cleanup, render, screen } from "@testing-library/react";
import { afterEach, describe, expect, it } from "vitest";
import { CanaryChart, type CanaryFigures } from "./CanaryChart";

const FIGURES: CanaryFigures = {
  split: { "1.0.0": 90, "2.0.0": 10 },
  routed: { "1.0.0": 908, "2.0.0": 92 },
  jobs: 92,
  failed: 3,
  errorRate: 3 / 92,
  latencyP95Ms: 277.4,
  errorRateMax: 0.02,
  latencyP95MaxMs: 800,
};

afterEach(cleanup);

describe("CanaryChart", () => {
  it("names every figure the server sent in its accessible name", () => {
    render(<CanaryChart figures={FIGURES} candidate="2.0.0" />);
    const chart = screen.getByRole("img");
    const name = chart.getAttribute("aria-label") ?? "";
    expect(name).toContain("3 of 92 finished jobs failed, error rate 3.3% (max 2.0%)");
    expect(name).toContain("p95 277 ms (max 800 ms)");
    expect(name).toContain("1.0.0: 90% asked, 908 of 1000 calls");
    // An error rate above its maximum is drawn as such; the p95 below its maximum is not.
    expect(chart.querySelectorAll(".chart-bad")).toHaveLength(1);
  });

  it("says when nothing finished yet, and how many versions it left out", () => {
    const many = Object.fromEntries(Array.from({ length: 100 }, (_, i) => [`1.${i}.0`, 1]));
    render(
      <CanaryChart
        figures={{ ...FIGURES, split: many, routed: {}, jobs: 0, failed: 0, errorRate: null, latencyP95Ms: null }}
        candidate="1.99.0"
      />,
    );
    expect(screen.getByRole("img").getAttribute("aria-label")).toContain("error rate no job yet");
    expect(screen.getByText(/94 more versions not drawn/)).toBeTruthy();
  });
});
