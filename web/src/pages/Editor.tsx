// The workflow editor: nodes from the catalog, edges checked with checkConnection before they
// are drawn, the validation report on the nodes it names, save as a new version.
import { Background, Controls, ReactFlow, type Connection, type Edge } from "@xyflow/react";
import { useEffect, useMemo, useState } from "react";
import { Link, useParams } from "react-router";
import { nodeTypes, type FlowNodeType } from "../components/FlowNode";
import { ErrorBox, Loading, Page } from "../components/Status";
import { ApiError, request } from "../lib/api";
import { useCatalog } from "../lib/catalog";
import { ports } from "../lib/format";
import { asGraph, globMatch, levels, sourceOf, type GraphDocument, type GraphNode } from "../lib/graph";
import { useAsync, useSessionState } from "../lib/hooks";
import { formatTypeExpr, typeExprOf } from "../lib/typeexpr";
import { CheckConnectionQuery, FunctionQuery, FunctionsQuery, UpdateWorkflowMutation, ValidateWorkflowQuery, WorkflowQuery } from "../queries";

type Port = { name: string; type: string };
type Schemas = Record<string, { inputs: Port[]; outputs: Port[] } | { error: string }>;

interface Draft {
  baseVersion: number;
  graph: GraphDocument;
}

function typeText(value: unknown): string {
  try {
    return formatTypeExpr(typeExprOf(value));
  } catch {
    return JSON.stringify(value);
  }
}

/** The ports of every node: function ports from their resolved versions, extract ports from the
 * outputs their pattern matches. */
function nodePorts(node: GraphNode, graph: GraphDocument, schemas: Schemas): { inPorts: Port[]; outPorts: Port[] } {
  if (node.kind === "input") return { inPorts: [], outPorts: [{ name: "value", type: typeText(node.input_spec?.type_expr) }] };
  if (node.kind === "function") {
    const s = schemas[node.function ?? ""];
    return s && "inputs" in s ? { inPorts: s.inputs, outPorts: s.outputs } : { inPorts: [], outPorts: [] };
  }
  const from = graph.nodes.find((n) => n.node_key === node.from_node_key);
  const upstream = from ? nodePorts(from, graph, schemas).outPorts : [];
  const matched = upstream.filter((p) => globMatch(node.pattern ?? "*", p.name));
  const outPorts = node.mode === "filter" ? matched : [{ name: "value", type: matched[0]?.type ?? "Numeric" }];
  return { inPorts: [{ name: "bundle", type: "outputs" }], outPorts };
}

function problemsByNode(report: unknown): Map<string, string[]> {
  const out = new Map<string, string[]>();
  if (!report || typeof report !== "object") return out;
  for (const [category, entries] of Object.entries(report as Record<string, unknown>)) {
    if (!Array.isArray(entries)) continue;
    for (const e of entries as { node_key?: string | null; port?: string; reason?: string }[]) {
      const key = e.node_key ?? "(document)";
      const list = out.get(key) ?? [];
      list.push(`${category.replace(/_/g, " ")}${e.port ? ` (${e.port})` : ""}: ${e.reason ?? ""}`);
      out.set(key, list);
    }
  }
  return out;
}

export function EditorPage() {
  const { slug = "" } = useParams();
  const { data, error } = useAsync(() => request(WorkflowQuery, { slug }), slug);
  if (error) return <ErrorBox error={error} />;
  if (!data) return <Loading />;
  const latest = data.workflow.latest;
  return (
    <Editor
      slug={slug}
      name={data.workflow.name}
      version={data.workflow.latestVersion}
      graph={asGraph(latest?.graph)}
    />
  );
}

function Editor({ slug, name, version, graph: saved }: { slug: string; name: string; version: number; graph: GraphDocument }) {
  const catalog = useCatalog();
  const [draft, setDraft] = useSessionState<Draft>(`calcgraph.draft.editor.${slug}`, () => ({ baseVersion: version, graph: saved }));
  const graph = draft.graph;
  const setGraph = (g: GraphDocument) => setDraft({ ...draft, graph: g });
  const [schemas, setSchemas] = useState<Schemas>({});
  const [message, setMessage] = useState<{ kind: "ok" | "refused" | "error"; text: string } | null>(null);
  const [report, setReport] = useState<Map<string, string[]>>(new Map());
  const [currentVersion, setCurrentVersion] = useState(version);
  const [positions, setPositions] = useSessionState<Record<string, { x: number; y: number }>>(`calcgraph.layout.${slug}`, () => ({}));
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
            },
          })),
        (e: unknown) => setSchemas((s) => ({ ...s, [ref]: { error: e instanceof Error ? e.message : String(e) } })),
      );
    }
  }, [references, schemas]);

  const portsOf = useMemo(() => new Map(graph.nodes.map((n) => [n.node_key, nodePorts(n, graph, schemas)])), [graph, schemas]);
  const level = useMemo(() => levels(graph.nodes), [graph]);
  const flowNodes: FlowNodeType[] = useMemo(() => {
    const rows = new Map<number, number>();
    return graph.nodes.map((n) => {
      const l = level.get(n.node_key) ?? 0;
      const row = rows.get(l) ?? 0;
      rows.set(l, row + 1);
      const p = portsOf.get(n.node_key) ?? { inPorts: [], outPorts: [] };
      const schema = schemas[n.function ?? ""];
      const problems = [...(report.get(n.node_key) ?? []), ...(schema && "error" in schema ? [schema.error] : [])];
      return {
        id: n.node_key,
        type: "calc",
        position: positions[n.node_key] ?? { x: l * 320, y: row * 190 },
        data: {
          key: n.node_key,
          kind: n.kind,
          subtitle: n.kind === "function" ? (n.function ?? "") : n.kind === "extract" ? `${n.mode} ${n.pattern} of ${n.from_node_key}` : "input",
          problems,
          ...p,
        },
      };
    });
  }, [graph, level, portsOf, schemas, report, positions]);
  const edges: Edge[] = useMemo(
    () =>
      graph.nodes.flatMap((n) => {
        const list: Edge[] = Object.entries(n.input_bindings ?? {}).map(([port, b]) => ({
          id: `${sourceOf(b)}.${b.from_port}->${n.node_key}.${port}`,
          source: sourceOf(b),
          sourceHandle: b.from_port,
          target: n.node_key,
          targetHandle: port,
        }));
        if (n.kind === "extract" && n.from_node_key) {
          list.push({ id: `${n.from_node_key}->${n.node_key}.bundle`, source: n.from_node_key, target: n.node_key, targetHandle: "bundle", animated: true });
        }
        return list;
      }),
    [graph],
  );

  /** Ask the server before drawing: the edge appears only when checkConnection allows it. */
  const connect = async (c: Connection) => {
    const source = graph.nodes.find((n) => n.node_key === c.source);
    const target = graph.nodes.find((n) => n.node_key === c.target);
    if (!source || !target || !c.sourceHandle || !c.targetHandle) return;
    if (target.kind === "extract") {
      setGraph({ nodes: graph.nodes.map((n) => (n === target ? { ...n, from_node_key: source.node_key } : n)) });
      setMessage({ kind: "ok", text: `${target.node_key} now reads the outputs of ${source.node_key}` });
      return;
    }
    const sourceType = portsOf.get(source.node_key)?.outPorts.find((p) => p.name === c.sourceHandle)?.type;
    const targetType = portsOf.get(target.node_key)?.inPorts.find((p) => p.name === c.targetHandle)?.type;
    if (!sourceType || !targetType) return;
    const label = `${source.node_key}.${c.sourceHandle} (${sourceType}) → ${target.node_key}.${c.targetHandle} (${targetType})`;
    try {
      const r = await request(CheckConnectionQuery, { source: sourceType, target: targetType });
      if (r.checkConnection.compatibility !== "ALLOWED") {
        setMessage({ kind: "refused", text: `Edge refused: ${label}: ${r.checkConnection.reason}` });
        return;
      }
      const binding =
        source.kind === "input"
          ? { source: "input_node" as const, input_key: source.node_key, from_port: "value" }
          : { source: "edge" as const, from_node_key: source.node_key, from_port: c.sourceHandle };
      setGraph({
        nodes: graph.nodes.map((n) => (n === target ? { ...n, input_bindings: { ...(n.input_bindings ?? {}), [c.targetHandle ?? ""]: binding } } : n)),
      });
      setMessage({ kind: "ok", text: `Edge drawn: ${label} (${r.checkConnection.reason})` });
    } catch (e) {
      setMessage({ kind: "error", text: e instanceof Error ? e.message : String(e) });
    }
  };

  const removeEdges = (removed: Edge[]) => {
    const gone = new Set(removed.map((e) => e.id));
    setGraph({
      nodes: graph.nodes.map((n) => ({
        ...n,
        input_bindings: n.input_bindings
          ? Object.fromEntries(Object.entries(n.input_bindings).filter(([port, b]) => !gone.has(`${sourceOf(b)}.${b.from_port}->${n.node_key}.${port}`)))
          : undefined,
      })),
    });
  };
  const removeNodes = (keys: string[]) => setGraph({ nodes: graph.nodes.filter((n) => !keys.includes(n.node_key)) });

  const validate = async (): Promise<boolean> => {
    try {
      const r = await request(ValidateWorkflowQuery, { graph });
      setReport(problemsByNode(r.validateWorkflow.report));
      setMessage({ kind: "ok", text: "The graph is valid." });
      return true;
    } catch (e) {
      if (e instanceof ApiError && e.extensions.report) {
        const byNode = problemsByNode(e.extensions.report);
        setReport(byNode);
        const count = [...byNode.values()].reduce((a, b) => a + b.length, 0);
        setMessage({ kind: "error", text: `The graph has ${count} problem(s); they are shown on their nodes.` });
      } else {
        setMessage({ kind: "error", text: e instanceof Error ? e.message : String(e) });
      }
      return false;
    }
  };
  const save = async () => {
    if (!(await validate())) return;
    try {
      const r = await request(UpdateWorkflowMutation, { slug, graph });
      setCurrentVersion(r.updateWorkflow.latestVersion);
      setDraft({ baseVersion: r.updateWorkflow.latestVersion, graph });
      setMessage({ kind: "ok", text: `Saved as version ${r.updateWorkflow.latestVersion}.` });
    } catch (e) {
      setMessage({ kind: "error", text: e instanceof Error ? e.message : String(e) });
    }
  };

  const changed = JSON.stringify(graph) !== JSON.stringify(saved) && draft.baseVersion === version;
  return (
    <Page
      title={`${name} — editor`}
      actions={
        <div className="toolbar">
          <span>Version {currentVersion}{changed ? " (unsaved changes)" : ""}</span>
          <button type="button" onClick={() => void validate()}>Validate</button>
          <button type="button" onClick={() => void save()}>Save new version</button>
          <button type="button" onClick={() => { setDraft({ baseVersion: version, graph: saved }); setReport(new Map()); }}>Discard changes</button>
          <Link to={`/workflows/${slug}/run`}>Start a run</Link>
        </div>
      }
    >
      {message && (
        <p role={message.kind === "ok" ? "status" : "alert"} className={`message ${message.kind}`} data-testid="editor-message">
          {message.text}
        </p>
      )}
      {report.get("(document)") && <ul className="problem">{report.get("(document)")?.map((p) => <li key={p}>{p}</li>)}</ul>}
      <div className="editor-body">
        <div className="flow" aria-label="Workflow graph">
          <ReactFlow
            nodes={flowNodes}
            edges={edges}
            nodeTypes={nodeTypes}
            fitView
            onConnect={(c) => void connect(c)}
            onEdgesDelete={removeEdges}
            onNodesDelete={(ns) => removeNodes(ns.map((n) => n.id))}
            onNodeDragStop={(_, node) => setPositions({ ...positions, [node.id]: node.position })}
            deleteKeyCode={["Delete", "Backspace"]}
            proOptions={{ hideAttribution: true }}
          >
            <Background />
            <Controls />
          </ReactFlow>
        </div>
        <aside className="palette" aria-label="Add and connect">
          <ConnectForm graph={graph} portsOf={portsOf} onConnect={(c) => void connect(c)} />
          <AddInput graph={graph} types={[...catalog.keys()]} onAdd={(n) => setGraph({ nodes: [...graph.nodes, n] })} />
          <AddFunction graph={graph} functions={(functions.data?.functions.items ?? []).map((f) => `${f.package.name}/${f.name}`)} onAdd={(n) => setGraph({ nodes: [...graph.nodes, n] })} />
          <AddExtract graph={graph} onAdd={(n) => setGraph({ nodes: [...graph.nodes, n] })} />
        </aside>
      </div>
    </Page>
  );
}

function freeKey(graph: GraphDocument, base: string): string {
  const keys = new Set(graph.nodes.map((n) => n.node_key));
  let i = 1;
  while (keys.has(`${base}_${i}`)) i++;
  return `${base}_${i}`;
}

function ConnectForm({ graph, portsOf, onConnect }: { graph: GraphDocument; portsOf: Map<string, { inPorts: Port[]; outPorts: Port[] }>; onConnect: (c: Connection) => void }) {
  const outs = graph.nodes.flatMap((n) => (portsOf.get(n.node_key)?.outPorts ?? []).map((p) => `${n.node_key}.${p.name}`));
  const ins = graph.nodes.flatMap((n) => (portsOf.get(n.node_key)?.inPorts ?? []).map((p) => `${n.node_key}.${p.name}`));
  const [from, setFrom] = useState("");
  const [to, setTo] = useState("");
  const split = (s: string) => {
    const i = s.lastIndexOf(".");
    return [s.slice(0, i), s.slice(i + 1)] as const;
  };
  return (
    <form
      className="palette-form"
      aria-label="Connect ports"
      onSubmit={(e) => {
        e.preventDefault();
        if (!from || !to) return;
        const [source, sourceHandle] = split(from);
        const [target, targetHandle] = split(to);
        onConnect({ source, sourceHandle, target, targetHandle });
      }}
    >
      <h2>Connect</h2>
      <label>From port
        <select aria-label="From port" value={from} onChange={(e) => setFrom(e.target.value)}>
          <option value="">(choose)</option>
          {outs.map((o) => <option key={o} value={o}>{o}</option>)}
        </select>
      </label>
      <label>To port
        <select aria-label="To port" value={to} onChange={(e) => setTo(e.target.value)}>
          <option value="">(choose)</option>
          {ins.map((o) => <option key={o} value={o}>{o}</option>)}
        </select>
      </label>
      <button type="submit">Connect</button>
    </form>
  );
}

function AddInput({ graph, types, onAdd }: { graph: GraphDocument; types: string[]; onAdd: (n: GraphNode) => void }) {
  const [key, setKey] = useState("");
  const [type, setType] = useState("Force");
  return (
    <form className="palette-form" aria-label="Add an input node" onSubmit={(e) => { e.preventDefault(); onAdd({ node_key: key || freeKey(graph, "input"), kind: "input", input_spec: { type_expr: type } }); setKey(""); }}>
      <h2>Add input</h2>
      <label>Key <input aria-label="Key of the new input" value={key} onChange={(e) => setKey(e.target.value)} placeholder="load" /></label>
      <label>Type
        <input aria-label="Type of the new input" list="catalog-types" value={type} onChange={(e) => setType(e.target.value)} />
      </label>
      <datalist id="catalog-types">{types.map((t) => <option key={t} value={t} />)}</datalist>
      <button type="submit">Add input</button>
    </form>
  );
}

function AddFunction({ graph, functions, onAdd }: { graph: GraphDocument; functions: string[]; onAdd: (n: GraphNode) => void }) {
  const [fn, setFn] = useState("");
  const [key, setKey] = useState("");
  return (
    <form className="palette-form" aria-label="Add a function node" onSubmit={(e) => { e.preventDefault(); if (fn) onAdd({ node_key: key || freeKey(graph, fn.split("/")[1] ?? "fn"), kind: "function", function: fn, input_bindings: {} }); setKey(""); }}>
      <h2>Add function</h2>
      <label>Function
        <select aria-label="Function to add" value={fn} onChange={(e) => setFn(e.target.value)}>
          <option value="">(choose)</option>
          {functions.map((f) => <option key={f} value={f}>{f}</option>)}
        </select>
      </label>
      <label>Key <input aria-label="Key of the new function" value={key} onChange={(e) => setKey(e.target.value)} /></label>
      <button type="submit">Add function</button>
    </form>
  );
}

function AddExtract({ graph, onAdd }: { graph: GraphDocument; onAdd: (n: GraphNode) => void }) {
  const [from, setFrom] = useState("");
  const [pattern, setPattern] = useState("*");
  const [mode, setMode] = useState<"pick" | "filter">("pick");
  const [key, setKey] = useState("");
  return (
    <form className="palette-form" aria-label="Add an extract node" onSubmit={(e) => { e.preventDefault(); if (from) onAdd({ node_key: key || freeKey(graph, "extract"), kind: "extract", mode, from_node_key: from, pattern }); setKey(""); }}>
      <h2>Add extract</h2>
      <label>From node
        <select aria-label="Extract from node" value={from} onChange={(e) => setFrom(e.target.value)}>
          <option value="">(choose)</option>
          {graph.nodes.filter((n) => n.kind !== "input").map((n) => <option key={n.node_key} value={n.node_key}>{n.node_key}</option>)}
        </select>
      </label>
      <label>Pattern <input aria-label="Extract pattern" value={pattern} onChange={(e) => setPattern(e.target.value)} /></label>
      <label>Mode
        <select aria-label="Extract mode" value={mode} onChange={(e) => setMode(e.target.value === "filter" ? "filter" : "pick")}>
          <option value="pick">pick</option>
          <option value="filter">filter</option>
        </select>
      </label>
      <label>Key <input aria-label="Key of the new extract" value={key} onChange={(e) => setKey(e.target.value)} /></label>
      <button type="submit">Add extract</button>
    </form>
  );
}
