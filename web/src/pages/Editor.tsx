// The workflow editor: nodes from the catalog, edges checked with checkConnection before they
// are drawn, the validation report on the nodes it names, save as a new version.
import { Background, ReactFlow, ReactFlowProvider, useReactFlow, type Connection, type Edge, type EdgeChange, type NodeChange } from "@xyflow/react";
import { useCallback, useEffect, useLayoutEffect, useMemo, useRef, useState } from "react";
import { Link, useParams } from "react-router";
import { nodeTypes, ZoomLevel, type FlowNodeType } from "../components/FlowNode";
import { GraphTools } from "../components/GraphTools";
import { AddExtract, AddFunction, AddInput, ConnectForm } from "../components/Palette";
import { RetryPolicyForm, type RetryPolicy } from "../components/RetryPolicyForm";
import { ErrorBox, Loading, Page } from "../components/Status";
import { ApiError, request } from "../lib/api";
import { useCatalog } from "../lib/catalog";
import { deprecation, ports } from "../lib/format";
import { useEditorDocument } from "../lib/document";
import { cyclesOf, graphEdges, nodePorts, problemsByNode, without, type Schemas } from "../lib/editorGraph";
import { asGraph, sourceOf, type GraphDocument, type GraphNode } from "../lib/graph";
import { useAsync, useSessionState } from "../lib/hooks";
import { boxHeight } from "../lib/boxes";
import { layout } from "../lib/layout";
import { CheckConnectionQuery, UpdateWorkflowMutation, ValidateWorkflowQuery } from "./Editor.graphql";
import { FunctionQuery, FunctionsQuery } from "./Functions.graphql";
import { WorkflowQuery } from "./Workflows.graphql";

/** problemsByNode's text for the report's `invalid_retry_policies` entries. */
const RETRY_PROBLEMS = "invalid retry policies";

export function EditorPage() {
  const { slug = "" } = useParams();
  const { data, error } = useAsync(() => request(WorkflowQuery, { slug }), `workflow:${slug}`);
  if (error) return <ErrorBox error={error} />;
  if (!data) return <Loading />;
  const latest = data.workflow.latest;
  return (
    <ReactFlowProvider>
      <Editor
      key={slug}
      slug={slug}
      name={data.workflow.name}
      version={data.workflow.latestVersion}
      graph={asGraph(latest?.graph)}
      />
    </ReactFlowProvider>
  );
}

const NODE_WIDTH = 300;
// A small graph opens at a readable zoom (text >= 12 px); the fit button shows any graph whole.
const READABLE_ZOOM = 0.9;
const SMALL_GRAPH = 40;

declare global {
  interface Window {
    __calcgraphEditorMetrics?: { openMs: number; nodes: number };
  }
}

type Message = { kind: "ok" | "refused" | "error"; text: string };

function Editor({ slug, name, version, graph: saved }: { slug: string; name: string; version: number; graph: GraphDocument }) {
  const catalog = useCatalog();
  const flow = useReactFlow();
  const doc = useEditorDocument(slug, version, saved);
  const graph = doc.doc.graph;
  const [schemas, setSchemas] = useState<Schemas>({});
  const [message, setMessage] = useState<Message | null>(null);
  const [report, setReport] = useState<Map<string, string[]>>(new Map());
  const [positions, setPositions] = useSessionState<Record<string, { x: number; y: number }>>(`calcgraph.layout.${slug}`, () => ({}));
  const [dragging, setDragging] = useState<Record<string, { x: number; y: number }>>({});
  const [measured, setMeasured] = useState<Record<string, { width: number; height: number }>>({});
  const [selection, setSelection] = useState<{ nodes: string[]; edges: string[] }>({ nodes: [], edges: [] });
  const [pending, setPending] = useState<{ connection: Connection; text: string } | null>(null);
  const [layoutSeed, setLayoutSeed] = useState(0);
  const pane = useRef<HTMLDivElement>(null);
  const functions = useAsync(() => request(FunctionsQuery, { cursor: null }), "functions");

  const references = useMemo(() => [...new Set(graph.nodes.filter((n) => n.kind === "function").map((n) => n.function ?? ""))], [graph]);
  useEffect(() => {
    for (const ref of references) {
      if (schemas[ref]) continue;
      request(FunctionQuery, { ref }).then(
        (r) =>
          setSchemas((s) => ({
            ...s,
            [ref]: {
              inputs: ports(r.resolveFunction.inputsSchema).map(([n, p]) => ({ name: n, type: p.type })),
              outputs: ports(r.resolveFunction.outputsSchema).map(([n, p]) => ({ name: n, type: p.type })),
              deprecated: deprecation(r.resolveFunction),
            },
          })),
        (e: unknown) => setSchemas((s) => ({ ...s, [ref]: { error: e instanceof Error ? e.message : String(e) } })),
      );
    }
  }, [references, schemas]);
  const schemasReady = references.every((r) => schemas[r]);
  const deprecatedNodes = graph.nodes.flatMap((n) => {
    const s = schemas[n.function ?? ""];
    return n.kind === "function" && s && "inputs" in s && s.deprecated ? [`${n.node_key} (${n.function ?? ""}: ${s.deprecated})`] : [];
  });

  const portsOf = useMemo(() => new Map(graph.nodes.map((n) => [n.node_key, nodePorts(n, graph, schemas)])), [graph, schemas]);
  const edges: Edge[] = useMemo(() => graphEdges(graph).map((e) => ({ ...e, selected: selection.edges.includes(e.id) })), [graph, selection.edges]);
  // dagre places the graph once its ports are known, and again on "Arrange"; nodes added since
  // are placed where the person is looking, nodes moved by hand stay where they were put.
  const auto = useMemo(
    () =>
      layout(
        graph.nodes.map((n) => {
          const p = portsOf.get(n.node_key);
          return { id: n.node_key, width: NODE_WIDTH, height: boxHeight(Math.max(p?.inPorts.length ?? 0, p?.outPorts.length ?? 0)) };
        }),
        graphEdges(graph),
      ),
    [layoutSeed, schemasReady], // eslint-disable-line react-hooks/exhaustive-deps
  );
  // A new layout is shown whole (the first one is fitted by ReactFlow's fitView).
  const laidOut = useRef(auto);
  useEffect(() => {
    if (laidOut.current === auto) return;
    laidOut.current = auto;
    const minZoom = auto.size <= SMALL_GRAPH ? READABLE_ZOOM : 0.01;
    const frame = requestAnimationFrame(() => void flow.fitView({ padding: 0.05, minZoom, maxZoom: 1 }));
    return () => cancelAnimationFrame(frame);
  }, [auto, flow]);
  // Read by bench/bench_web.py: when the editor first drew the graph with every node's ports.
  const opened = useRef(false);
  useLayoutEffect(() => {
    if (opened.current || !schemasReady) return;
    opened.current = true;
    window.__calcgraphEditorMetrics = { openMs: performance.now(), nodes: graph.nodes.length };
  }, [schemasReady, graph.nodes.length]);
  const flowNodes: FlowNodeType[] = useMemo(
    () =>
      graph.nodes.map((n) => {
        const p = portsOf.get(n.node_key) ?? { inPorts: [], outPorts: [] };
        const schema = schemas[n.function ?? ""];
        const problems = [...(report.get(n.node_key) ?? []), ...(schema && "error" in schema ? [schema.error] : [])];
        return {
          id: n.node_key,
          type: "calc",
          position: dragging[n.node_key] ?? positions[n.node_key] ?? auto.get(n.node_key) ?? { x: 0, y: 0 },
          width: NODE_WIDTH,
          measured: measured[n.node_key],
          selected: selection.nodes.includes(n.node_key),
          data: {
            key: n.node_key,
            kind: n.kind,
            subtitle: n.kind === "function" ? (n.function ?? "") : n.kind === "extract" ? `${n.mode} ${n.pattern} of ${n.from_node_key ?? "(no node)"}` : "input",
            problems,
            deprecated: schema && "inputs" in schema ? (schema.deprecated ?? undefined) : undefined,
            ...p,
          },
        };
      }),
    [graph, portsOf, schemas, report, positions, dragging, auto, selection.nodes, measured],
  );

  const say = (kind: Message["kind"], text: string) => setMessage({ kind, text });
  const fail = (e: unknown) => say("error", e instanceof Error ? e.message : String(e));

  /** Ask the server before drawing: the edge appears only when checkConnection allows it and
   * the graph with it has no cycle (validateWorkflow's report). */
  const connect = async (c: Connection, replace = false) => {
    setPending(null);
    const source = graph.nodes.find((n) => n.node_key === c.source);
    const target = graph.nodes.find((n) => n.node_key === c.target);
    if (!source || !target || !c.targetHandle) return;
    const port = c.targetHandle;
    const fromPort = source.kind === "input" ? "value" : (c.sourceHandle ?? "");
    let candidate: GraphDocument;
    let label: string;
    let boundTo: string | undefined;
    let reason = "";
    if (target.kind === "extract") {
      boundTo = target.from_node_key && target.from_node_key !== source.node_key ? target.from_node_key : undefined;
      candidate = { ...graph, nodes: graph.nodes.map((n) => (n === target ? { ...n, from_node_key: source.node_key } : n)) };
      label = `${target.node_key} reads the outputs of ${source.node_key}`;
    } else {
      const sourceType = portsOf.get(source.node_key)?.outPorts.find((p) => p.name === fromPort)?.type;
      const targetType = portsOf.get(target.node_key)?.inPorts.find((p) => p.name === port)?.type;
      if (!sourceType || !targetType) return;
      label = `${source.node_key}.${fromPort} (${sourceType}) → ${target.node_key}.${port} (${targetType})`;
      try {
        const r = await request(CheckConnectionQuery, { source: sourceType, target: targetType });
        if (r.checkConnection.compatibility !== "ALLOWED") {
          say("refused", `Edge refused: ${label}: ${r.checkConnection.reason}`);
          return;
        }
        reason = ` (${r.checkConnection.reason})`;
      } catch (e) {
        fail(e);
        return;
      }
      const bound = target.input_bindings?.[port];
      if (bound && (sourceOf(bound) !== source.node_key || bound.from_port !== fromPort)) boundTo = `${sourceOf(bound)}.${bound.from_port}`;
      const binding =
        source.kind === "input"
          ? { source: "input_node" as const, input_key: source.node_key, from_port: "value" }
          : { source: "edge" as const, from_node_key: source.node_key, from_port: fromPort };
      candidate = {
        ...graph,
        nodes: graph.nodes.map((n) => (n === target ? { ...n, input_bindings: { ...(n.input_bindings ?? {}), [port]: binding } } : n)),
      };
    }
    if (boundTo && !replace) {
      setPending({ connection: c, text: `${target.node_key}.${port} is already bound to ${boundTo}. Replace that binding with ${source.node_key}.${fromPort}?` });
      return;
    }
    try {
      await request(ValidateWorkflowQuery, { graph: candidate });
    } catch (e) {
      const cycles = cyclesOf(e);
      if (cycles.length > 0) {
        say("refused", `Edge refused: ${label} would close a cycle: ${cycles.join("; ")}`);
        return;
      }
      if (!(e instanceof ApiError && e.extensions.report)) {
        fail(e);
        return;
      }
    }
    doc.edit(candidate);
    say("ok", target.kind === "extract" ? `${label}.` : `Edge drawn: ${label}${reason}`);
  };

  const remove = (edgeIds: string[], nodeKeys: string[]) => {
    if (edgeIds.length === 0 && nodeKeys.length === 0) return;
    doc.edit(without(graph, new Set(edgeIds), new Set(nodeKeys)));
    setSelection({ nodes: [], edges: [] });
    const parts = [nodeKeys.length ? `${nodeKeys.length} node(s)` : "", edgeIds.length ? `${edgeIds.length} edge(s)` : ""].filter(Boolean);
    say("ok", `Deleted ${parts.join(" and ")}. Undo with Ctrl+Z.`);
  };

  const add = (node: GraphNode) => {
    if (graph.nodes.some((n) => n.node_key === node.node_key)) {
      say("refused", `A node named ${node.node_key} is already in the graph: choose another key.`);
      return;
    }
    const rect = pane.current?.getBoundingClientRect();
    const added = graph.nodes.length % 5;
    const at = rect
      ? flow.screenToFlowPosition({ x: rect.left + rect.width / 2 - NODE_WIDTH / 2 + added * 24, y: rect.top + rect.height / 3 + added * 24 })
      : { x: 0, y: 0 };
    setPositions({ ...positions, [node.node_key]: at });
    doc.edit({ ...graph, nodes: [...graph.nodes, node] });
    setSelection({ nodes: [node.node_key], edges: [] });
    say("ok", `Added ${node.node_key}.`);
  };

  const validate = async (): Promise<boolean> => {
    try {
      const r = await request(ValidateWorkflowQuery, { graph });
      setReport(problemsByNode(r.validateWorkflow.report));
      say("ok", "The graph is valid.");
      return true;
    } catch (e) {
      if (e instanceof ApiError && e.extensions.report) {
        const byNode = problemsByNode(e.extensions.report);
        setReport(byNode);
        const count = [...byNode.values()].reduce((a, b) => a + b.length, 0);
        say("error", `The graph has ${count} problem(s); they are shown on their nodes.`);
      } else {
        fail(e);
      }
      return false;
    }
  };
  const saving = useRef(false);
  const save = async () => {
    if (saving.current) return;
    saving.current = true;
    try {
      const sent = graph;
      if (!(await validate())) return;
      const r = await request(UpdateWorkflowMutation, { slug, graph: sent });
      doc.markSaved(r.updateWorkflow.latestVersion, sent);
      say("ok", `Saved as version ${r.updateWorkflow.latestVersion}.`);
    } catch (e) {
      fail(e);
    } finally {
      saving.current = false;
    }
  };
  const discard = () => {
    doc.discard();
    setReport(new Map());
    say("ok", `Back to version ${doc.doc.baseVersion} as saved. Undo with Ctrl+Z.`);
  };

  const keys = useRef({ save, undo: doc.undo, redo: doc.redo });
  keys.current = { save, undo: doc.undo, redo: doc.redo };
  useEffect(() => {
    const onKey = (e: KeyboardEvent) => {
      if (!(e.ctrlKey || e.metaKey)) return;
      const typing = e.target instanceof HTMLElement && /^(INPUT|TEXTAREA|SELECT)$/.test(e.target.tagName);
      const k = e.key.toLowerCase();
      if (k === "s") {
        e.preventDefault();
        void keys.current.save();
      } else if (!typing && k === "z") {
        e.preventDefault();
        if (e.shiftKey) keys.current.redo();
        else keys.current.undo();
      } else if (!typing && k === "y") {
        e.preventDefault();
        keys.current.redo();
      }
    };
    window.addEventListener("keydown", onKey);
    return () => window.removeEventListener("keydown", onKey);
  }, []);

  const onNodesChange = useCallback(
    (changes: NodeChange<FlowNodeType>[]) => {
      for (const c of changes) {
        if (c.type === "dimensions" && c.dimensions) {
          const size = c.dimensions;
          setMeasured((m) => (m[c.id]?.width === size.width && m[c.id]?.height === size.height ? m : { ...m, [c.id]: size }));
        } else if (c.type === "select") {
          setSelection((s) => ({ ...s, nodes: c.selected ? [...new Set([...s.nodes, c.id])] : s.nodes.filter((k) => k !== c.id) }));
        } else if (c.type === "position") {
          const at = c.position;
          if (c.dragging && at) setDragging((d) => ({ ...d, [c.id]: at }));
          else if (!c.dragging) {
            setDragging((d) => {
              const final = at ?? d[c.id];
              if (final) setPositions({ ...positions, [c.id]: final });
              const { [c.id]: _, ...rest } = d; // eslint-disable-line @typescript-eslint/no-unused-vars
              return rest;
            });
          }
        }
      }
    },
    [positions, setPositions],
  );
  const onEdgesChange = useCallback((changes: EdgeChange[]) => {
    for (const c of changes) {
      if (c.type === "select") setSelection((s) => ({ ...s, edges: c.selected ? [...new Set([...s.edges, c.id])] : s.edges.filter((k) => k !== c.id) }));
    }
  }, []);

  const selectedCount = selection.nodes.length + selection.edges.length;
  const only = selection.nodes.length === 1 ? graph.nodes.find((n) => n.node_key === selection.nodes[0]) : undefined;
  const retryNode = only?.kind === "function" ? only : undefined;
  /** The node's retry policy into the document, then the server's report on it. */
  const applyRetry = async (key: string, policy: RetryPolicy | undefined) => {
    const candidate = {
      ...graph,
      nodes: graph.nodes.map((n) => {
        if (n.node_key !== key) return n;
        const { retry: _, ...rest } = n; // eslint-disable-line @typescript-eslint/no-unused-vars
        return policy ? { ...rest, retry: policy } : rest;
      }),
    };
    doc.edit(candidate);
    try {
      const r = await request(ValidateWorkflowQuery, { graph: candidate });
      setReport(problemsByNode(r.validateWorkflow.report));
      say("ok", policy ? `Retry policy of ${key} set; save to keep it.` : `${key} is not retried; save to keep it.`);
    } catch (e) {
      if (e instanceof ApiError && e.extensions.report) {
        const byNode = problemsByNode(e.extensions.report);
        setReport(byNode);
        const own = (byNode.get(key) ?? []).filter((p) => p.startsWith(RETRY_PROBLEMS));
        say(own.length ? "error" : "ok", own.length ? `The retry policy of ${key} has ${own.length} problem(s).` : `Retry policy of ${key} set; save to keep it.`);
      } else {
        fail(e);
      }
    }
  };
  return (
    <Page
      title={`${name} — editor`}
      actions={
        <div className="toolbar" role="toolbar" aria-label="Editor">
          <span data-testid="editor-version">Version {doc.doc.baseVersion}{doc.changed ? " (unsaved changes)" : ""}</span>
          <button type="button" onClick={doc.undo} disabled={!doc.canUndo} title="Ctrl+Z">Undo</button>
          <button type="button" onClick={doc.redo} disabled={!doc.canRedo} title="Ctrl+Shift+Z">Redo</button>
          <button type="button" onClick={() => remove(selection.edges, selection.nodes)} disabled={selectedCount === 0} title="Delete">Delete selected</button>
          <button type="button" onClick={() => { setPositions({}); setLayoutSeed((s) => s + 1); }}>Arrange</button>
          <button type="button" onClick={() => void validate()}>Validate</button>
          <button type="button" onClick={() => void save()} title="Ctrl+S">Save new version</button>
          <button type="button" onClick={discard} disabled={!doc.changed}>Discard changes</button>
          <Link to={`/workflows/${slug}/run`}>Start a run</Link>
        </div>
      }
    >
      {doc.stale !== null && (
        <p role="status" className="message refused">
          These unsaved changes were made on version {doc.stale}; the latest is version {doc.doc.baseVersion}. Saving publishes them as a new version; "Discard changes" goes back to version {doc.doc.baseVersion}.
        </p>
      )}
      {message && (
        <p role={message.kind === "ok" ? "status" : "alert"} className={`message ${message.kind}`} data-testid="editor-message">
          {message.text}
        </p>
      )}
      {pending && (
        <div role="alertdialog" aria-label="Replace binding" className="message refused confirm">
          <p>{pending.text}</p>
          <button type="button" onClick={() => void connect(pending.connection, true)}>Replace binding</button>{" "}
          <button type="button" onClick={() => setPending(null)}>Keep the current binding</button>
        </div>
      )}
      {deprecatedNodes.length > 0 && (
        <p role="note" className="deprecated" data-testid="editor-deprecated">
          {deprecatedNodes.length === 1 ? "A node runs a deprecated function" : `${deprecatedNodes.length} nodes run deprecated functions`}: {deprecatedNodes.join("; ")}. The graph stays valid; move to a newer function before its removal.
        </p>
      )}
      {report.get("(document)") && <ul className="problem">{report.get("(document)")?.map((p) => <li key={p}>{p}</li>)}</ul>}
      <div className="editor-body">
        <div className="flow" aria-label="Workflow graph" ref={pane}>
          <ZoomLevel>
            <ReactFlow
              nodes={flowNodes}
              edges={edges}
              nodeTypes={nodeTypes}
              fitView
              fitViewOptions={{ padding: 0.05, minZoom: graph.nodes.length <= SMALL_GRAPH ? READABLE_ZOOM : 0.01, maxZoom: 1 }}
              minZoom={0.01}
              onlyRenderVisibleElements={graph.nodes.length > 200}
              onNodesChange={onNodesChange}
              onEdgesChange={onEdgesChange}
              onConnect={(c) => void connect(c)}
              onDelete={({ nodes, edges: gone }) => remove(gone.map((e) => e.id), nodes.map((n) => n.id))}
              deleteKeyCode={["Delete", "Backspace"]}
              proOptions={{ hideAttribution: true }}
            >
              <Background />
              <GraphTools keys={graph.nodes.map((n) => n.node_key)} onFind={(k) => setSelection({ nodes: [k], edges: [] })} label="workflow graph" />
            </ReactFlow>
          </ZoomLevel>
        </div>
        <aside className="palette" aria-label="Add and connect">
          {retryNode && (
            <RetryPolicyForm
              key={retryNode.node_key}
              nodeKey={retryNode.node_key}
              policy={retryNode.retry as RetryPolicy | undefined}
              problems={(report.get(retryNode.node_key) ?? []).filter((p) => p.startsWith(RETRY_PROBLEMS))}
              onApply={(policy) => void applyRetry(retryNode.node_key, policy)}
            />
          )}
          <ConnectForm graph={graph} portsOf={portsOf} onConnect={(c) => void connect(c)} />
          <AddInput graph={graph} types={[...catalog.keys()]} onAdd={add} />
          <AddFunction graph={graph} functions={(functions.data?.functions.items ?? []).map((f) => `${f.package.name}/${f.name}`)} onAdd={add} />
          <AddExtract graph={graph} onAdd={add} />
        </aside>
      </div>
    </Page>
  );
}
