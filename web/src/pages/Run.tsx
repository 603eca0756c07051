// The run page: the plan as a laid-out graph with its edges and status colours, a timeline,
// the selected node (in the URL as ?node=, the failed node by default) and its values in units.
import { Background, ReactFlow, ReactFlowProvider, type ReactFlowProps } from "@xyflow/react";
import { useQuery } from "@tanstack/react-query";
import { useCallback, useEffect, useLayoutEffect, useMemo, useRef, useState } from "react";
import { Link, useParams, useSearchParams } from "react-router";
import { nodeTypes, plainEnds, ZoomLevel, type FlowNodeType } from "../components/FlowNode";
import { RunEdges, runEdgePath, type RunEdgeLine } from "../components/RunEdge";
import { GraphTools } from "../components/GraphTools";
import { ErrorView, Logs } from "../components/ErrorView";
import { RunControls } from "../components/RunControls";
import { ErrorBox, Loading, Page, StatusBadge } from "../components/Status";
import { Attempts, earlierAttempts } from "../components/Attempts";
import { Timeline } from "../components/Timeline";
import { request } from "../lib/api";
import { useCatalog } from "../lib/catalog";
import { useAsync } from "../lib/hooks";
import { duration, ports, when } from "../lib/format";
import type { GraphNode } from "../lib/graph";
import { planLinks, planNodes, type PlanLink } from "../lib/runGraph";
import { runLayout, RUN_NODE, type Position } from "../lib/runLayout";
import { fittedViewport } from "../lib/viewport";
import { displayUnitProblem, formatValue, prettyUnit, type DisplayUnits } from "../lib/quantity";
import { naturalCompare, naturalSort } from "../lib/sort";
import type { Catalog } from "../lib/typeexpr";
import { TERMINAL, useLiveRun, type LiveMode, type LiveRun, type RunPlan } from "../lib/liveRun";
import { JobOutputsQuery, RunNodeQuery } from "./Run.graphql";

const NODE_WIDTH = RUN_NODE.width;
const NODE_HEIGHT = RUN_NODE.height;
const FIT_VIEW = { padding: 0.05, minZoom: 0.01, maxZoom: 1 };
// Every run node's size and handles (none: the edges are the page's own, components/RunEdge),
// given to React Flow (as for server-side rendering): the first commit knows what is in view
// before React Flow has measured a node.
const MEASURED = { width: NODE_WIDTH, height: NODE_HEIGHT };
const HANDLES: NonNullable<FlowNodeType["handles"]> = [];

type Run = LiveRun;
type NodeState = Run["nodeStates"][number];
type FunctionVersion = Run["functionVersions"][number];

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

function liveLabel(mode: LiveMode, backoff: number | null): string {
  if (backoff !== null) return `server busy: next tick in ${Math.ceil(backoff)} s`;
  return mode === "live" ? "live" : mode === "polling" ? "ticking every 2 s" : "";
}

/** The edges of the laid-out plan, each with its curve (components/RunEdge): read, not clicked. */
function planEdges(links: readonly PlanLink[], positions: Map<string, Position> | null): RunEdgeLine[] {
  if (positions === null) return [];
  return links.map((l) => {
    const from = positions.get(l.source) ?? { x: 0, y: 0 };
    const to = positions.get(l.target) ?? { x: 0, y: 0 };
    const path = runEdgePath(plainEnds(from, NODE_WIDTH, NODE_HEIGHT).source, plainEnds(to, NODE_WIDTH, NODE_HEIGHT).target);
    return { id: `${l.source}->${l.target}:${l.label}`, label: `${l.source} to ${l.target} (${l.label})`, path };
  });
}

function useDisplayUnits(): [DisplayUnits, (u: DisplayUnits) => void] {
  const [units, setUnits] = useState<DisplayUnits>(() => {
    try {
      return JSON.parse(localStorage.getItem("calcgraph.displayUnits") ?? "{}") as DisplayUnits;
    } catch {
      return {};
    }
  });
  return [units, (u) => { localStorage.setItem("calcgraph.displayUnits", JSON.stringify(u)); setUnits(u); }];
}

function inputTypes(nodes: readonly GraphNode[]): Map<string, string> {
  return new Map(nodes.filter((n) => n.kind === "input").map((n) => [n.node_key, typeof n.input_spec?.type_expr === "string" ? n.input_spec.type_expr : ""]));
}

/** React Flow's nodes of the run, each object kept from the previous render while its node's
 * look (status, failed, selected) is unchanged: React Flow then skips it and FlowNode's memo
 * holds, so a live update redraws the nodes whose status moved, not all 1,000. */
function useStableFlowNodes(
  nodes: readonly GraphNode[],
  positions: Map<string, Position> | null,
  states: Map<string, NodeState>,
  failedKey: string | null,
  selected: string | null,
): FlowNodeType[] {
  const previous = useRef(new Map<string, FlowNodeType>());
  return useMemo(() => {
    if (positions === null) return [];
    const next = new Map<string, FlowNodeType>();
    const out = nodes.map((n) => {
      const status = n.kind === "input" ? undefined : (states.get(n.node_key)?.status ?? "pending");
      const failed = failedKey === n.node_key;
      const isSelected = selected === n.node_key;
      const position = positions.get(n.node_key) ?? { x: 0, y: 0 };
      const old = previous.current.get(n.node_key);
      const node: FlowNodeType =
        old && old.data.status === status && old.data.failed === failed && old.selected === isSelected && old.position === position
          ? old
          : {
              id: n.node_key,
              type: "calc",
              position,
              width: NODE_WIDTH,
              height: NODE_HEIGHT,
              measured: MEASURED,
              handles: HANDLES,
              data: {
                key: n.node_key,
                kind: n.kind,
                subtitle: n.kind === "function" ? (n.function ?? "") : n.kind === "extract" ? `${n.mode} ${n.pattern}` : "input",
                status,
                failed,
                inPorts: NO_PORTS,
                outPorts: NO_PORTS,
                plain: true,
              },
              selected: isSelected,
            };
      next.set(n.node_key, node);
      return node;
    });
    previous.current = next;
    return out;
  }, [nodes, positions, states, failedKey, selected]);
}

const NO_PORTS: FlowNodeType["data"]["inPorts"] = [];

/** The positions of the plan's boxes (lib/runLayout: laid out in a worker, started when the
 * plan was read), null until they are there; an error if the layout failed. */
function usePositions(plan: RunPlan | null): [Map<string, Position> | null, Error | null] {
  const [laid, setLaid] = useState<{ id: string; positions: Map<string, Position> | null; error: Error | null } | null>(null);
  useEffect(() => {
    if (!plan) return;
    let live = true;
    runLayout(plan).then(
      (positions) => live && setLaid({ id: plan.id, positions, error: null }),
      (e: unknown) => live && setLaid({ id: plan.id, positions: null, error: e instanceof Error ? e : new Error(String(e)) }),
    );
    return () => {
      live = false;
    };
  }, [plan]);
  return laid && plan && laid.id === plan.id ? [laid.positions, laid.error] : [null, null];
}

/** The size of the graph's pane, read once it is on the page (before it is painted). */
function usePaneSize(ready: boolean): [(el: HTMLDivElement | null) => void, { width: number; height: number } | null] {
  const [pane, setPane] = useState<HTMLDivElement | null>(null);
  const [size, setSize] = useState<{ width: number; height: number } | null>(null);
  useLayoutEffect(() => {
    if (ready && pane && size === null) setSize({ width: pane.clientWidth, height: pane.clientHeight });
  }, [ready, pane, size]);
  return [setPane, size];
}

/** The graph drawn at once as fit-to-view shows it: React Flow's store starts with the pane's
 * size and the fitted viewport (its documented server-side path: `initialWidth`,
 * `initialHeight` and `fitView` on the provider), not at 100 % zoom until its fitView runs after
 * the first draw. At 100 % a 1,000-node run drew every node whole (React Flow draws a node it
 * has not measured even outside the view), then again tiny once fitted. */
function RunFlow({ nodes, pane, ...flow }: ReactFlowProps<FlowNodeType> & { nodes: FlowNodeType[]; pane: { width: number; height: number } }) {
  // The same viewport as the store's first (React Flow's pan and zoom start from it).
  const [viewport] = useState(() => fittedViewport(nodes, pane, FIT_VIEW));
  return (
    <ReactFlowProvider initialNodes={nodes} initialWidth={pane.width} initialHeight={pane.height} fitView initialFitViewOptions={FIT_VIEW} initialMinZoom={FIT_VIEW.minZoom} initialMaxZoom={FIT_VIEW.maxZoom}>
      <ZoomLevel>
        <ReactFlow nodes={nodes} defaultViewport={viewport} minZoom={FIT_VIEW.minZoom} {...flow} />
      </ZoomLevel>
    </ReactFlowProvider>
  );
}

export function RunPage() {
  const { id = "" } = useParams();
  const { plan, run, error, mode, backoff, arrived, show, drawn } = useLiveRun(id);
  // The run's workflow (null when it is no longer visible to the caller): the editor's and the
  // runs filter's slug.
  const slug = run?.workflow?.slug;
  const catalog = useCatalog();
  const [display, setDisplay] = useDisplayUnits();
  const [params, setParams] = useSearchParams();
  const chosen = params.get("node");
  const selected = chosen ?? run?.firstFailedNodeKey ?? null;
  const select = useCallback((key: string | null) => setParams(key ? { node: key } : {}, { replace: true }), [setParams]);
  // A run's plan never changes (read once, not with the ticks): the plan, its edges and
  // its layout are keyed by the plan, not by the run's state.
  const nodes = useMemo(() => (plan ? planNodes(plan) : []), [plan]);
  const links = useMemo(() => planLinks(nodes), [nodes]);
  const [positions, layoutError] = usePositions(plan);
  const edges = useMemo(() => planEdges(links, positions), [links, positions]);
  const states = useMemo(() => new Map((run?.nodeStates ?? []).map((s) => [s.nodeKey, s])), [run]);
  const versions = useMemo(() => new Map((run?.functionVersions ?? []).map((v) => [v.id, v])), [run?.functionVersions]);
  const flowNodes = useStableFlowNodes(nodes, positions, states, run?.firstFailedNodeKey ?? null, selected);
  const onNodeClick = useCallback((_: unknown, node: FlowNodeType) => select(node.id), [select]);
  const onPaneClick = useCallback(() => select(null), [select]);
  const keys = useMemo(() => nodes.map((n) => n.node_key), [nodes]);
  const types = useMemo(() => inputTypes(nodes), [nodes]);
  const timelineItems = useMemo(
    () => (run?.nodeStates ?? []).map((s) => ({ key: s.nodeKey, status: s.status, attempt: s.attempt, startedAt: s.startedAt, finishedAt: s.finishedAt, earlier: earlierAttempts(s) })),
    [run?.nodeStates],
  );
  const [paneRef, pane] = usePaneSize(positions !== null);
  // The run is drawn when its graph is (its plan laid out, React Flow drawn in its pane).
  const firstDrawn = useRef(false);
  const graphDrawn = positions !== null && pane !== null;
  useLayoutEffect(() => {
    if (!run || !graphDrawn) return;
    const metrics = (window.__calcgraphRunMetrics ??= { firstRenderMs: null, updates: [] });
    const first = !firstDrawn.current;
    const since = arrived.current;
    firstDrawn.current = true;
    arrived.current = null;
    if (!first && since === null) return;
    // Drawn once painted, not once committed: what React Flow's effects do after the commit
    // (its store updates, their renders) and the browser's style, layout and paint of the graph
    // are part of drawing it. A task queued from the next animation frame runs after that frame
    // is painted.
    requestAnimationFrame(() => setTimeout(() => {
      const now = performance.now();
      if (first) metrics.firstRenderMs = now;
      else if (since !== null) metrics.updates.push(now - since);
    }, 0));
  }, [run, graphDrawn, arrived]);
  // Effects run once the page is painted: the run is on screen, ticks may go.
  useEffect(() => {
    if (run && graphDrawn) drawn();
  }, [run, graphDrawn, drawn]);
  if (error && !run) return <ErrorBox error={error} />;
  if (!run) return <Loading />;
  const big = nodes.length > 200;
  return (
    <Page
      title={<>Run {run.id.slice(0, 8)} <StatusBadge status={run.status} /></>}
      documentTitle={`Run ${run.id.slice(0, 8)} ${run.status}`}
      actions={<><RunControls run={run} terminal={TERMINAL.has(run.status)} slug={slug} onChanged={show} /><span className="live" aria-live="polite">{liveLabel(mode, backoff)}</span></>}
    >
      <dl className="facts">
        <dt>Workflow</dt>
        <dd>
          {slug ? <><Link to={`/workflows/${slug}`}>{slug}</Link> v{run.workflowVersion?.version} · <Link to={`/runs?workflow=${encodeURIComponent(slug)}`}>its runs</Link></> : <>v{run.workflowVersion?.version}</>}
        </dd>
        {run.rerunOf && (<><dt>Re-run of</dt><dd><Link to={`/runs/${run.rerunOf}`}>{run.rerunOf.slice(0, 8)}</Link></dd></>)}
        <dt>Started</dt><dd>{when(run.startedAt)}</dd>
        <dt>Duration</dt><dd>{duration(run.startedAt, run.completedAt)}</dd>
        {run.firstFailedNodeKey && (<><dt>Failed node</dt><dd className="problem"><button type="button" className="linkish" onClick={() => select(run.firstFailedNodeKey ?? null)}>{run.firstFailedNodeKey}</button></dd></>)}
        {run.errorMessage && (<><dt>Error</dt><dd className="problem run-error">{run.errorMessage}</dd></>)}
      </dl>
      {error && <ErrorBox error={error} />}
      <div className="run-body">
        <div className="flow" aria-label="Run graph" data-edges={links.length} ref={paneRef}>
          {layoutError ? <ErrorBox error={layoutError} /> : positions === null || pane === null ? <Loading /> : <RunFlow
            key={plan?.id}
            pane={pane}
            nodes={flowNodes}
            nodeTypes={nodeTypes}
            onlyRenderVisibleElements={big}
            nodesDraggable={false}
            nodesConnectable={false}
            onNodeClick={onNodeClick}
            onPaneClick={onPaneClick}
            proOptions={{ hideAttribution: true }}
          >
            <Background />
            <RunEdges edges={edges} />
            <GraphTools keys={keys} onFind={select} label="run graph" />
          </RunFlow>}
        </div>
        <aside className="details" aria-label="Node details">
          {selected ? (
            <NodeDetails runId={run.id} nodeKey={selected} state={states.get(selected)} versions={versions} catalog={catalog} display={display} inputValue={(run.inputs as Record<string, unknown>)[selected]} inputType={types.get(selected)} />
          ) : (
            <p className="empty">Click a node (or find it) to see its inputs, outputs and logs.</p>
          )}
        </aside>
      </div>
      <h2>Timeline</h2>
      <Timeline
        items={timelineItems}
        runStart={run.startedAt}
        runEnd={run.completedAt}
        selected={selected}
        onSelect={select}
      />
      <TerminalOutputs run={run} states={states} versions={versions} catalog={catalog} display={display} />
      <h2>Inputs</h2>
      <table>
        <thead><tr><th>Input</th><th>Value</th></tr></thead>
        <tbody>
          {naturalSort(Object.entries((run.inputs as Record<string, unknown>) ?? {}), ([k]) => k).map(([k, v]) => (
            <tr key={k}><th scope="row">{k}</th><td>{formatValue(v, types.get(k) ?? "", catalog, display)}</td></tr>
          ))}
        </tbody>
      </table>
      <DisplayUnitsForm run={run} catalog={catalog} display={display} onChange={setDisplay} />
    </Page>
  );
}

function schemaType(schema: unknown, port: string): string {
  return ports(schema).find(([n]) => n === port)?.[1].type ?? "";
}

function ValuesTable({ caption, values, typeOf, catalog, display }: { caption: string; values: Record<string, unknown>; typeOf: (port: string) => string; catalog: Catalog; display: DisplayUnits }) {
  return (
    <table>
      <caption>{caption}</caption>
      <tbody>
        {Object.entries(values).sort(([a], [b]) => naturalCompare(a, b)).map(([k, v]) => (
          <tr key={k}><th scope="row">{k}</th><td>{formatValue(v, typeOf(k), catalog, display)}</td></tr>
        ))}
      </tbody>
    </table>
  );
}

function NodeDetails({ runId, nodeKey, state, versions, catalog, display, inputValue, inputType }: { runId: string; nodeKey: string; state: NodeState | undefined; versions: Map<string, FunctionVersion>; catalog: Catalog; display: DisplayUnits; inputValue: unknown; inputType: string | undefined }) {
  if (!state) {
    return (
      <div className="node-details">
        <h2>{nodeKey}</h2>
        <p>{inputValue !== undefined ? <>Input node: {formatValue(inputValue, inputType ?? "", catalog, display)}</> : "Not started."}</p>
      </div>
    );
  }
  const fv = state.functionVersionId ? versions.get(state.functionVersionId) : undefined;
  return (
    <div className="node-details">
      <h2>{nodeKey} <StatusBadge status={state.status} /></h2>
      <dl className="facts">
        <dt>Function</dt><dd>{fv ? `${fv.function?.name ?? ""} ${fv.version}` : "—"}</dd>
        <dt>Job</dt><dd>{state.jobId ? <Link to={`/jobs/${state.jobId}`}>{state.jobId.slice(0, 8)}</Link> : "—"}</dd>
        <dt>Attempt</dt><dd>{state.attempt}</dd>
        {state.retryAt && (<><dt>Next attempt</dt><dd>{when(state.retryAt)}</dd></>)}
        {state.reused && (<><dt>Reused</dt><dd>yes, from the run this one re-runs</dd></>)}
        <dt>Started</dt><dd>{when(state.startedAt)}</dd>
        <dt>Took</dt><dd>{duration(state.startedAt, state.finishedAt)}</dd>
      </dl>
      <Attempts attempts={state.attempts} jobs={state.attemptJobs} current={{ attempt: state.attempt, jobId: state.jobId, status: state.status }} retryAt={state.retryAt} />
      <NodeValues runId={runId} nodeKey={nodeKey} state={state} fv={fv} catalog={catalog} display={display} />
    </div>
  );
}

/** The selected node's cache hit, error, inputs, outputs and logs: read for it alone, again
 * when its status, attempt or job moves (the run's answer carries none of them per node). */
function NodeValues({ runId, nodeKey, state, fv, catalog, display }: { runId: string; nodeKey: string; state: NodeState; fv: FunctionVersion | undefined; catalog: Catalog; display: DisplayUnits }) {
  const { data, error } = useQuery({
    queryKey: ["run-node", runId, nodeKey, state.status, state.attempt, state.jobId],
    queryFn: () => request(RunNodeQuery, { id: runId, key: nodeKey }),
    // The same node moved on: its previous values stay shown until the new ones arrive.
    placeholderData: (previous, query) => (query?.queryKey[2] === nodeKey ? previous : undefined),
  });
  if (error) return <ErrorBox error={error} />;
  const detail = data?.workflowRun.nodeState;
  if (!detail) return <Loading />;
  const job = detail.job;
  return (
    <>
      <dl className="facts">
        <dt>Cache hit</dt><dd>{job ? (job.cacheHit ? "yes" : "no") : "—"}</dd>
      </dl>
      {detail.error != null && <ErrorView error={detail.error} logs={job?.logs} />}
      {job?.inputsOmitted && <p className="hint">Inputs over 64 KiB are left out of the run: <Link to={`/jobs/${job.id}`}>the job</Link> shows them whole.</p>}
      {job?.inputs != null && <ValuesTable caption="Inputs" values={job.inputs as Record<string, unknown>} typeOf={(p) => schemaType(fv?.inputsSchema, p)} catalog={catalog} display={display} />}
      {detail.outputs != null && <ValuesTable caption="Outputs" values={detail.outputs as Record<string, unknown>} typeOf={(p) => schemaType(fv?.outputsSchema, p)} catalog={catalog} display={display} />}
      {detail.outputsOmitted && <OmittedOutputs key={nodeKey} jobId={state.jobId} typeOf={(p) => schemaType(fv?.outputsSchema, p)} catalog={catalog} display={display} />}
      <h3>Logs</h3>
      <Logs logs={job?.logs} />
    </>
  );
}

/** A node whose outputs the server left out of the run (over 64 KiB, or past what one answer
 * shows: contract 8b, `outputsOmitted`): said so, and read whole through the node's job on
 * request (GraphQL's `job(id)`, as `GET /jobs/{id}`), not with every tick of the run. */
function OmittedOutputs({ jobId, typeOf, catalog, display }: { jobId: string | null; typeOf: (port: string) => string; catalog: Catalog; display: DisplayUnits }) {
  const [reading, setReading] = useState(false);
  return (
    <div className="omitted-outputs">
      <p className="hint">
        Outputs left out of the run: too large to send with it (over 64 KiB, or past what one answer holds).
        {jobId && <> <Link to={`/jobs/${jobId}`}>The job</Link> shows them whole.</>}
      </p>
      {jobId && !reading && <button type="button" onClick={() => setReading(true)}>Read the whole outputs</button>}
      {jobId && reading && <WholeOutputs jobId={jobId} typeOf={typeOf} catalog={catalog} display={display} />}
    </div>
  );
}

function WholeOutputs({ jobId, typeOf, catalog, display }: { jobId: string; typeOf: (port: string) => string; catalog: Catalog; display: DisplayUnits }) {
  const { data, error, loading } = useAsync(() => request(JobOutputsQuery, { id: jobId }), `job-outputs:${jobId}`);
  if (error) return <ErrorBox error={error} />;
  if (loading || !data) return <Loading />;
  const outputs = data.job.outputs as Record<string, unknown> | null;
  if (outputs == null) return <p className="empty">The job has no outputs.</p>;
  return <ValuesTable caption="Outputs" values={outputs} typeOf={typeOf} catalog={catalog} display={display} />;
}

function TerminalOutputs({ run, states, versions, catalog, display }: { run: Run; states: Map<string, NodeState>; versions: Map<string, FunctionVersion>; catalog: Catalog; display: DisplayUnits }) {
  const outputs = (run.terminalOutputs ?? null) as Record<string, Record<string, unknown>> | null;
  if (!outputs || Object.keys(outputs).length === 0) return null;
  const schemaOf = (node: string) => {
    const id = states.get(node)?.functionVersionId;
    return id ? versions.get(id)?.outputsSchema : undefined;
  };
  return (
    <table className="terminal-outputs">
      <caption>Terminal outputs</caption>
      <thead><tr><th>Node</th><th>Output</th><th>Value</th></tr></thead>
      <tbody>
        {naturalSort(Object.entries(outputs), ([k]) => k).flatMap(([node, values]) =>
          Object.entries(values ?? {}).map(([port, value]) => (
            <tr key={`${node}.${port}`}>
              <td>{node}</td>
              <th scope="row">{port}</th>
              <td>{formatValue(value, schemaType(schemaOf(node), port), catalog, display)}</td>
            </tr>
          )),
        )}
      </tbody>
    </table>
  );
}

/** The SI units on this page and the unit each is shown in (kept for the next visit). */
function DisplayUnitsForm({ run, catalog, display, onChange }: { run: Run; catalog: Catalog; display: DisplayUnits; onChange: (u: DisplayUnits) => void }) {
  const units = useMemo(() => {
    const found = new Set<string>();
    for (const v of run.functionVersions) {
      for (const schema of [v.outputsSchema, v.inputsSchema]) {
        for (const [, p] of ports(schema)) {
          const u = catalog.get(p.type)?.unit;
          if (u) found.add(u);
        }
      }
    }
    return [...found].sort();
  }, [run.functionVersions, catalog]);
  const [drafts, setDrafts] = useState<DisplayUnits>(display);
  if (units.length === 0) return null;
  return (
    <details className="display-units">
      <summary>Display units</summary>
      <p>Values are shown with engineering prefixes (210 GPa); name a unit to use it instead, e.g. MPa or kN*m.</p>
      {units.map((u) => {
        const text = drafts[u] ?? "";
        const problem = text ? displayUnitProblem(text, u) : null;
        return (
          <label key={u} className="field">
            <span>Show {prettyUnit(u)} as</span>
            <input
              value={text}
              aria-invalid={problem ? true : undefined}
              aria-label={`Display unit for ${prettyUnit(u)}`}
              placeholder="automatic"
              onChange={(e) => {
                const next = Object.fromEntries(Object.entries({ ...drafts, [u]: e.target.value }).filter(([, v]) => v));
                setDrafts(next);
                if (!e.target.value || !displayUnitProblem(e.target.value, u)) onChange(next);
              }}
            />
            {problem && <span className="problem">{problem}</span>}
          </label>
        );
      })}
    </details>
  );
}
