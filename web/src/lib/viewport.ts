// The viewport a graph is first drawn at (the run page draws a run fitted from its first commit).
import { getNodesBounds, getViewportForBounds, type Node, type Viewport } from "@xyflow/react";

/** What fit-to-view shows of `nodes` (laid out, with their sizes) in a pane of this size: React
 * Flow's own computation (`getViewportForBounds`, as its fitView), for a graph drawn fitted from
 * its first commit. */
export function fittedViewport(
  nodes: readonly Node[],
  pane: { width: number; height: number },
  fit: { padding: number; minZoom: number; maxZoom: number },
): Viewport {
  return getViewportForBounds(getNodesBounds([...nodes]), pane.width, pane.height, fit.minZoom, fit.maxZoom, fit.padding);
}
