// What every graph canvas carries: a minimap, zoom controls, and a node search that selects
// the node it finds and brings it into view. Rendered inside <ReactFlow> (its store). The
// minimap comes once the graph is painted: it draws every node again, each a store subscription
// of its own, and on a 1,000-node run its mounting was about a fifth of the page's first draw.
import { Controls, MiniMap, Panel, useReactFlow } from "@xyflow/react";
import { useEffect, useState } from "react";
import type { FlowNodeType } from "./FlowNode";

const minimapColour = (n: FlowNodeType): string => {
  const status = n.data.status;
  if (n.data.failed || status === "failed") return "#c0262d";
  if (status === "success") return "#2e9a4c";
  if (status === "running" || status === "queued") return "#2f6fe0";
  return n.data.kind === "input" ? "#6b8fd6" : "#8893a3";
};

/** False until the frame after this component's first paint (a task queued from that frame's
 * animation callback runs once it is painted). */
function usePainted(): boolean {
  const [painted, setPainted] = useState(false);
  useEffect(() => {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const frame = requestAnimationFrame(() => {
      timer = setTimeout(() => setPainted(true), 0);
    });
    return () => {
      cancelAnimationFrame(frame);
      clearTimeout(timer);
    };
  }, []);
  return painted;
}

export function GraphTools({ keys, onFind, label }: { keys: readonly string[]; onFind: (key: string) => void; label: string }) {
  const flow = useReactFlow();
  const [text, setText] = useState("");
  const [problem, setProblem] = useState<string | null>(null);
  const painted = usePainted();
  const listId = `${label.replace(/\W+/g, "-")}-keys`;
  return (
    <>
      <Panel position="top-left">
        <form
          className="graph-search"
          role="search"
          aria-label={`Find a node in the ${label}`}
          onSubmit={(e) => {
            e.preventDefault();
            const wanted = text.trim();
            const key = keys.find((k) => k === wanted) ?? keys.find((k) => k.toLowerCase().includes(wanted.toLowerCase()));
            if (!wanted || !key) {
              setProblem(wanted ? `no node matches "${wanted}"` : null);
              return;
            }
            setProblem(null);
            onFind(key);
            void flow.fitView({ nodes: [{ id: key }], maxZoom: 1, duration: 200 });
          }}
        >
          <input aria-label="Find node" list={listId} value={text} placeholder="Find node…" onChange={(e) => setText(e.target.value)} />
          <datalist id={listId}>{keys.slice(0, 500).map((k) => <option key={k} value={k} />)}</datalist>
          <button type="submit">Find</button>
          {problem && <span className="problem" role="status">{problem}</span>}
        </form>
      </Panel>
      <Controls fitViewOptions={{ padding: 0.05, minZoom: 0.01 }} />
      {painted && <MiniMap<FlowNodeType> pannable zoomable nodeColor={minimapColour} ariaLabel={`Minimap of the ${label}`} />}
    </>
  );
}
