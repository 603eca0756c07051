// An edge of the run page: a plan's boxes never move, so its curve is drawn once from the
// layout (`data.path`, React Flow's own bezier between the boxes' handles), not again from the
// handles React Flow measures after the first draw: on a 1,000-node run that measuring pass gave
// every edge new coordinates (the handles read back at 5 % zoom differ in the last digits) and
// redrew all 999 curves for the same picture.
import { BaseEdge, getBezierPath, Position, type Edge, type EdgeProps } from "@xyflow/react";
import { memo } from "react";

export type RunEdgeType = Edge<{ path: string }, "run">;

/** The curve from a box's source handle (its right side) to the next box's target handle (its
 * left side), as React Flow's default edge draws it between those handles. */
export function runEdgePath(source: { x: number; y: number }, target: { x: number; y: number }): string {
  const [path] = getBezierPath({ sourceX: source.x, sourceY: source.y, sourcePosition: Position.Right, targetX: target.x, targetY: target.y, targetPosition: Position.Left });
  return path;
}

function RunEdgeView({ data }: EdgeProps<RunEdgeType>) {
  return data ? <BaseEdge path={data.path} interactionWidth={0} /> : null;
}

/** Redrawn when its curve changes, not when React Flow's measured coordinates do. */
export const RunEdge = memo(RunEdgeView, (a, b) => a.data === b.data);
export const runEdgeTypes = { run: RunEdge };
