// One node of a workflow graph, on the run page and in the editor. Below 40 % zoom a node
// draws only its key and status (ports stay as handles, so edges still attach). Below 20 % a
// run page's node (no ports) is a box filled with its status colour: its text would be under
// 3 px there, and a 1,000-node run shown whole draws a fifth of the elements.
import { Handle, Position, useStore, type Node, type NodeProps } from "@xyflow/react";
import { createContext, memo, useContext, type ReactNode } from "react";

export interface FlowNodeData extends Record<string, unknown> {
  key: string;
  kind: string;
  subtitle: string;
  status?: string;
  failed?: boolean;
  problems?: string[];
  /** The deprecation note of the node's function version (contract 11); absent when it is not. */
  deprecated?: string;
  inPorts: { name: string; type: string }[];
  outPorts: { name: string; type: string }[];
  /** No ports, no React Flow handles (the run page: its edges are its own, components/RunEdge,
   * joining boxes, not ports): a handle each side drawn by CSS. */
  plain?: boolean;
}

export type FlowNodeType = Node<FlowNodeData, "calc">;

/** The handle's box in app.css (`.react-flow__handle`: 12 px and a 2 px border, content-box); a
 * plain node draws its two as CSS (`.calc-node.plain`), centred on its sides as React Flow's. */
const HANDLE = 16;

/** Where a plain node's edges start (its source handle's outer side, the right) and end (its
 * target handle's, the left), at a box of `width` x `height` placed at `at`. */
export function plainEnds(at: { x: number; y: number }, width: number, height: number): { source: { x: number; y: number }; target: { x: number; y: number } } {
  const y = at.y + height / 2;
  return { source: { x: at.x + width + HANDLE / 2, y }, target: { x: at.x - HANDLE / 2, y } };
}

type Zoomed = "full" | "compact" | "tiny";
const zoomSelector = (s: { transform: [number, number, number] }): Zoomed =>
  s.transform[2] < 0.2 ? "tiny" : s.transform[2] < 0.4 ? "compact" : "full";
const ZoomContext = createContext<Zoomed>("full");

/** How near the graph is (`Zoomed`), read from React Flow's store once for all its nodes and
 * given to them as a context: a store subscription in every node was run again on every store
 * update (1,000 of them on a 1,000-node run, its first draw has several). Around `<ReactFlow>`,
 * inside its provider. */
export function ZoomLevel({ children }: { children: ReactNode }) {
  const zoomed = useStore(zoomSelector);
  return <ZoomContext.Provider value={zoomed}>{children}</ZoomContext.Provider>;
}

function FlowNodeView({ data, selected }: NodeProps<FlowNodeType>) {
  const zoomed = useContext(ZoomContext);
  const compact = zoomed !== "full";
  const tiny = zoomed === "tiny" && data.plain === true;
  const classes = ["calc-node", `kind-${data.kind}`];
  if (data.status) classes.push(`status-${data.status}`);
  if (data.failed) classes.push("failed");
  if (data.problems && data.problems.length > 0) classes.push("invalid");
  if (data.deprecated) classes.push("deprecated-node");
  if (selected) classes.push("selected");
  if (compact) classes.push("compact");
  if (data.plain) classes.push("plain");
  if (tiny) {
    classes.push("tiny");
    return <div className={classes.join(" ")} data-node-key={data.key} data-status={data.status} title={data.status ? `${data.key}: ${data.status}` : data.key} />;
  }
  return (
    <div className={classes.join(" ")} data-node-key={data.key} data-status={data.status}>
      <div className="calc-node-head">
        <strong>{data.key}</strong>
        {data.status && <span className={`badge status-${data.status}`}>{data.status}</span>}
        {data.deprecated && <span className="badge badge-deprecated" title={data.deprecated}>deprecated</span>}
      </div>
      {!compact && <div className="calc-node-sub">{data.subtitle}</div>}
      {!compact && data.deprecated && (
        <p role="note" className="node-deprecated" aria-label={`${data.key} is deprecated`}>
          {data.deprecated}
        </p>
      )}
      <div className="calc-node-ports">
        <div>
          {data.inPorts.map((p) => (
            <div className="port in" key={p.name} title={`${p.name}: ${p.type}`}>
              <Handle type="target" position={Position.Left} id={p.name} />
              {!compact && <>{p.name} <span className="type">{p.type}</span></>}
            </div>
          ))}
        </div>
        <div>
          {data.outPorts.map((p) => (
            <div className="port out" key={p.name} title={`${p.name}: ${p.type}`}>
              {!compact && <>{p.name} <span className="type">{p.type}</span></>}
              <Handle type="source" position={Position.Right} id={p.name} />
            </div>
          ))}
        </div>
      </div>
      {!compact && data.problems && data.problems.length > 0 && (
        <ul className="node-problems" aria-label={`Problems of ${data.key}`}>
          {data.problems.map((p, i) => (
            <li key={i}>{p}</li>
          ))}
        </ul>
      )}
    </div>
  );
}

export const FlowNode = memo(FlowNodeView);
export const nodeTypes = { calc: FlowNode };
