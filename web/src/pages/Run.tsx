import { Background, Controls, ReactFlow, type Edge } from "@xyflow/react";
import { useEffect, useLayoutEffect, useMemo, useRef, useState } from "react";
import { Link, useParams } from "react-router";
import { nodeTypes, type FlowNodeType } from "../components/FlowNode";
import { ErrorBox, Loading, Page, StatusBadge } from "../components/Status";
import { request, subscribe } from "../lib/api";
import { useCatalog } from "../lib/catalog";
import { duration, ports, showValue, unitOf, when } from "../lib/format";
import { levels, sourceOf, type GraphNode } from "../lib/graph";
import type { RunFieldsFragment } from "../gql/graphql";
import { RunQuery, RunUpdatesSubscription, TickMutation } from "../queries";

const TERMINAL = new Set(["completed", "failed", "cancelled"]);
const POLL_MS = 2000; // the specification's polling period of the run page

type Run = RunFieldsFragment;
type NodeState = Run["nodeStates"][number];

// Read by bench/bench_web.py: when the page first drew the run, and how long each live update
// took from arrival to the drawn page.
interface RunMetrics {
  firstRenderMs: number | null;
  updates: number[];
}
declare global {
  interface Window {
    __calcgraphRunMetrics?: RunMetrics;
  }
}

/** The run, live: graphql-ws `runUpdates`, or a tick every 2 s when the socket is unavailable. */
function useLiveRun(id: string) {
  const [run, setRun] = useState<Run | null>(null);
  const [error, setError] = useState<Error | null>(null);
  const [mode, setMode] = useState<"socket" | "polling" | "idle">("idle");
  const arrived = useRef<number | null>(null);
  const apply = (next: Run) => {
    arrived.current = performance.now();
    setRun((prev) => (prev && prev.revision > next.revision && prev.id === next.id ? prev : next));
  };
  useEffect(() => {
    let live = true;
    let stop: (() => void) | null = null;
    let timer: ReturnType<typeof setTimeout> | null = null;
    const poll = () => {
      setMode("polling");
      const step = () => {
        request(TickMutation, { id }).then(
          (r) => {
            if (!live) return;
            apply(r.tickRun);
            if (!TERMINAL.has(r.tickRun.status)) timer = setTimeout(step, POLL_MS);
            else setMode("idle");
          },
          (e: unknown) => live && setError(e instanceof Error ? e : new Error(String(e))),
        );
      };
      timer = setTimeout(step, 0);
    };
    request(RunQuery, { id }).then(
      (r) => {
        if (!live) return;
        apply(r.workflowRun);
        if (TERMINAL.has(r.workflowRun.status)) return;
        setMode("socket");
        stop = subscribe(RunUpdatesSubscription, { id }, {
          next: (data) => live && apply(data.runUpdates),
          error: (e) => live && setError(e),
          unavailable: () => live && poll(),
          complete: () => live && setMode("idle"),
        });
      },
      (e: unknown) => live && setError(e instanceof Error ? e : new Error(String(e))),
    );
    return () => {
      live = false;
      stop?.();
      if (timer) clearTimeout(timer);
    };
  }, [id]);
  return { run, error, mode, arrived };
}

function planNodes(run: Run): GraphNode[] {
  const nodes = ((run.planSnapshot as { nodes?: GraphNode[] }).nodes ?? []).filter((n) => n.kind !== "input");
  const inputKeys = new Set<string>(Object.keys((run.inputs as Record<string, unknown>) ?? {}));
  for (const n of nodes) {
    for (const b of Object.values(n.input_bindings ?? {})) if (b.source === "input_node" && b.input_key) inputKeys.add(b.input_key);
  }
  return [...[...inputKeys].map((k): GraphNode => ({ node_key: k, kind: "input" })), ...nodes];
}

export function RunPage() {
  const { id = "" } = useParams();
  const { run, error, mode, arrived } = useLiveRun(id);
  const catalog = useCatalog();
  const [selected, setSelected] = useState<string | null>(null);
  const nodes = useMemo(() => (run ? planNodes(run) : []), [run?.planSnapshot]); // eslint-disable-line react-hooks/exhaustive-deps
  const states = useMemo(() => new Map((run?.nodeStates ?? []).map((s) => [s.nodeKey, s])), [run]);
  const layout = useMemo(() => {
    const level = levels(nodes);
    const rows = new Map<number, number>();
    return new Map(
      nodes.map((n) => {
        const l = level.get(n.node_key) ?? 0;
        const row = rows.get(l) ?? 0;
        rows.set(l, row + 1);
        return [n.node_key, { x: l * 280, y: row * 110 }];
      }),
    );
  }, [nodes]);
  const flowNodes: FlowNodeType[] = useMemo(
    () =>
      nodes.map((n) => {
        const state = states.get(n.node_key);
        return {
          id: n.node_key,
          type: "calc",
          position: layout.get(n.node_key) ?? { x: 0, y: 0 },
          data: {
            key: n.node_key,
            kind: n.kind,
            subtitle: n.kind === "function" ? (n.function ?? "") : n.kind === "extract" ? `${n.mode} ${n.pattern}` : "input",
            status: n.kind === "input" ? undefined : (state?.status ?? "pending"),
            failed: run?.firstFailedNodeKey === n.node_key,
            inPorts: [],
            outPorts: [],
          },
          selected: selected === n.node_key,
        };
      }),
    [nodes, states, layout, run?.firstFailedNodeKey, selected],
  );
  const edges: Edge[] = useMemo(
    () =>
      nodes.flatMap((n) => {
        const from = Object.entries(n.input_bindings ?? {}).map(([port, b]) => ({ source: sourceOf(b), label: `${b.from_port}→${port}` }));
        if (n.kind === "extract" && n.from_node_key) from.push({ source: n.from_node_key, label: "bundle" });
        return from.map((e) => ({ id: `${e.source}->${n.node_key}:${e.label}`, source: e.source, target: n.node_key, label: nodes.length < 200 ? e.label : undefined }));
      }),
    [nodes],
  );
  const firstDrawn = useRef(false);
  useLayoutEffect(() => {
    if (!run) return;
    const metrics = (window.__calcgraphRunMetrics ??= { firstRenderMs: null, updates: [] });
    const drawn = performance.now();
    if (!firstDrawn.current) {
      firstDrawn.current = true;
      metrics.firstRenderMs = drawn;
    } else if (arrived.current !== null) {
      metrics.updates.push(drawn - arrived.current);
    }
    arrived.current = null;
  }, [run, arrived]);
  if (error && !run) return <ErrorBox error={error} />;
  if (!run) return <Loading />;
  const big = nodes.length > 200;
  const selectedState = selected ? states.get(selected) : undefined;
  return (
    <Page
      title={<>Run {run.id.slice(0, 8)} <StatusBadge status={run.status} /></>}
      actions={<span className="live" aria-live="polite">{mode === "socket" ? "live" : mode === "polling" ? "ticking every 2 s" : ""}</span>}
    >
      <dl className="facts">
        <dt>Workflow version</dt><dd>v{run.workflowVersion?.version}</dd>
        <dt>Started</dt><dd>{when(run.startedAt)}</dd>
        <dt>Duration</dt><dd>{duration(run.startedAt, run.completedAt)}</dd>
        {run.firstFailedNodeKey && (<><dt>Failed node</dt><dd className="problem">{run.firstFailedNodeKey}</dd></>)}
        {run.errorMessage && (<><dt>Error</dt><dd className="problem">{run.errorMessage}</dd></>)}
      </dl>
      {error && <ErrorBox error={error} />}
      <div className="run-body">
        <div className="flow" aria-label="Run graph">
          <ReactFlow
            nodes={flowNodes}
            edges={edges}
            nodeTypes={nodeTypes}
            onlyRenderVisibleElements={big}
            fitView={!big}
            minZoom={0.05}
            nodesDraggable={false}
            nodesConnectable={false}
            onNodeClick={(_, node) => setSelected(node.id)}
            proOptions={{ hideAttribution: true }}
          >
            <Background />
            <Controls />
          </ReactFlow>
        </div>
        <aside className="details" aria-label="Node details">
          <label>
            Node{" "}
            <select aria-label="Node" value={selected ?? ""} onChange={(e) => setSelected(e.target.value || null)}>
              <option value="">(choose a node)</option>
              {nodes.filter((n) => n.kind !== "input").map((n) => (
                <option key={n.node_key} value={n.node_key}>{n.node_key} — {states.get(n.node_key)?.status ?? "pending"}</option>
              ))}
            </select>
          </label>
          {selected && <NodeDetails nodeKey={selected} state={selectedState} catalogUnits={(t) => unitOf(t, catalog)} />}
        </aside>
      </div>
      <TerminalOutputs run={run} units={(t) => unitOf(t, catalog)} />
      <h2>Inputs</h2>
      <table>
        <tbody>
          {Object.entries((run.inputs as Record<string, unknown>) ?? {}).map(([k, v]) => (
            <tr key={k}><th scope="row">{k}</th><td>{showValue(v)}</td></tr>
          ))}
        </tbody>
      </table>
    </Page>
  );
}

function outputType(state: NodeState | undefined, port: string): string {
  return ports(state?.functionVersion?.outputsSchema).find(([n]) => n === port)?.[1].type ?? "";
}

function NodeDetails({ nodeKey, state, catalogUnits }: { nodeKey: string; state: NodeState | undefined; catalogUnits: (t: string) => string }) {
  if (!state) return <p>{nodeKey}: input node</p>;
  const job = state.job;
  return (
    <div className="node-details">
      <h2>{nodeKey} <StatusBadge status={state.status} /></h2>
      <dl className="facts">
        <dt>Function</dt><dd>{state.functionVersion ? `${state.functionVersion.function?.name ?? ""} ${state.functionVersion.version}` : "—"}</dd>
        <dt>Job</dt><dd>{state.jobId ? <Link to={`/jobs/${state.jobId}`}>{state.jobId.slice(0, 8)}</Link> : "—"}</dd>
        <dt>Attempt</dt><dd>{state.attempt}</dd>
        <dt>Cache hit</dt><dd>{job ? (job.cacheHit ? "yes" : "no") : "—"}</dd>
        <dt>Started</dt><dd>{when(state.startedAt)}</dd>
        <dt>Finished</dt><dd>{when(state.finishedAt)}</dd>
        <dt>Took</dt><dd>{duration(state.startedAt, state.finishedAt)}</dd>
      </dl>
      {job?.inputs != null && (
        <table>
          <caption>Inputs</caption>
          <tbody>
            {Object.entries(job.inputs as Record<string, unknown>).map(([k, v]) => (
              <tr key={k}><th scope="row">{k}</th><td>{showValue(v)}</td></tr>
            ))}
          </tbody>
        </table>
      )}
      {state.outputs != null && (
        <table>
          <caption>Outputs</caption>
          <tbody>
            {Object.entries(state.outputs as Record<string, unknown>).map(([k, v]) => (
              <tr key={k}><th scope="row">{k}</th><td>{showValue(v)}</td><td>{catalogUnits(outputType(state, k))}</td></tr>
            ))}
          </tbody>
        </table>
      )}
      {state.error != null && <pre className="problem" role="alert">{JSON.stringify(state.error, null, 2)}</pre>}
      <h3>Logs</h3>
      <pre className="logs">{job?.logs || "(no output)"}</pre>
    </div>
  );
}

function TerminalOutputs({ run, units }: { run: Run; units: (t: string) => string }) {
  const outputs = (run.terminalOutputs ?? null) as Record<string, Record<string, unknown>> | null;
  if (!outputs || Object.keys(outputs).length === 0) return null;
  const states = new Map(run.nodeStates.map((s) => [s.nodeKey, s]));
  return (
    <table className="terminal-outputs">
      <caption>Terminal outputs</caption>
      <thead><tr><th>Node</th><th>Output</th><th>Value</th><th>Unit</th></tr></thead>
      <tbody>
        {Object.entries(outputs).flatMap(([node, values]) =>
          Object.entries(values ?? {}).map(([port, value]) => (
            <tr key={`${node}.${port}`}>
              <td>{node}</td>
              <th scope="row">{port}</th>
              <td>{showValue(value)}</td>
              <td>{units(outputType(states.get(node), port))}</td>
            </tr>
          )),
        )}
      </tbody>
    </table>
  );
}
