// The run page's edges: a plan's boxes never move, so every edge is a curve drawn once from the
// layout (React Flow's own bezier between the boxes' sides), all in one SVG in React Flow's
// viewport (its `ViewportPortal`: panned and zoomed with the nodes), not React Flow edges. On a
// 1,000-node run React Flow's 999 edges were a store subscription each, their position computed
// again on every store update of the first draw (its pane's size, its measuring pass), about a
// third of the page's first render.
import { getBezierPath, Position, ViewportPortal } from "@xyflow/react";
import { memo } from "react";

export interface RunEdgeLine {
  id: string;
  /** Read by assistive technology, as React Flow's edge label. */
  label: string;
  path: string;
}

/** The curve from a box's source side (its right) to the next box's target side (its left), as
 * React Flow's default edge draws it between those handles. */
export function runEdgePath(source: { x: number; y: number }, target: { x: number; y: number }): string {
  const [path] = getBezierPath({ sourceX: source.x, sourceY: source.y, sourcePosition: Position.Right, targetX: target.x, targetY: target.y, targetPosition: Position.Left });
  return path;
}

/** Every edge of the run, under the nodes; drawn again only when the edges change (once a run). */
export const RunEdges = memo(function RunEdges({ edges }: { edges: readonly RunEdgeLine[] }) {
  return (
    <ViewportPortal>
      <svg className="run-edges">
        {edges.map((e) => (
          <path key={e.id} className="react-flow__edge-path run-edge" d={e.path} role="img" aria-roledescription="edge" aria-label={e.label} />
        ))}
      </svg>
    </ViewportPortal>
  );
});
