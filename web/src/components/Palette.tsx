// The editor's side panel: connect two ports, add input, function and extract nodes. Long
// lists (ports of a 200-node graph, every function) are sorted naturally and filtered by a search.
import type { Connection } from "@xyflow/react";
import { useState } from "react";
import type { GraphDocument, GraphNode } from "../lib/graph";
import { naturalSort } from "../lib/sort";

export type Port = { name: string; type: string };
export type PortsOf = Map<string, { inPorts: Port[]; outPorts: Port[] }>;

export function freeKey(graph: GraphDocument, base: string): string {
  const keys = new Set(graph.nodes.map((n) => n.node_key));
  let i = 1;
  while (keys.has(`${base}_${i}`)) i++;
  return `${base}_${i}`;
}

const matches = (filter: string) => (option: string) => !filter || option.toLowerCase().includes(filter.toLowerCase());

export function ConnectForm({ graph, portsOf, onConnect }: { graph: GraphDocument; portsOf: PortsOf; onConnect: (c: Connection) => void }) {
  const [filter, setFilter] = useState("");
  const keys = naturalSort(graph.nodes, (n) => n.node_key);
  const outs = keys.flatMap((n) => (portsOf.get(n.node_key)?.outPorts ?? []).map((p) => `${n.node_key}.${p.name}`));
  const ins = keys.flatMap((n) => (portsOf.get(n.node_key)?.inPorts ?? []).map((p) => `${n.node_key}.${p.name}`));
  const [from, setFrom] = useState("");
  const [to, setTo] = useState("");
  const split = (s: string) => {
    const i = s.lastIndexOf(".");
    return [s.slice(0, i), s.slice(i + 1)] as const;
  };
  const shown = (list: string[], chosen: string) => list.filter((o) => o === chosen || matches(filter)(o));
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
      <label>Filter ports <input type="search" aria-label="Filter ports" value={filter} placeholder="node or port" onChange={(e) => setFilter(e.target.value)} /></label>
      <label>From port
        <select aria-label="From port" value={from} onChange={(e) => setFrom(e.target.value)}>
          <option value="">(choose)</option>
          {shown(outs, from).map((o) => <option key={o} value={o}>{o}</option>)}
        </select>
      </label>
      <label>To port
        <select aria-label="To port" value={to} onChange={(e) => setTo(e.target.value)}>
          <option value="">(choose)</option>
          {shown(ins, to).map((o) => <option key={o} value={o}>{o}</option>)}
        </select>
      </label>
      <button type="submit">Connect</button>
    </form>
  );
}

export function AddInput({ graph, types, onAdd }: { graph: GraphDocument; types: string[]; onAdd: (n: GraphNode) => void }) {
  const [key, setKey] = useState("");
  const [type, setType] = useState("Force");
  return (
    <form className="palette-form" aria-label="Add an input node" onSubmit={(e) => { e.preventDefault(); onAdd({ node_key: key || freeKey(graph, "input"), kind: "input", input_spec: { type_expr: type } }); setKey(""); }}>
      <h2>Add input</h2>
      <label>Key <input aria-label="Key of the new input" value={key} onChange={(e) => setKey(e.target.value)} placeholder="load" /></label>
      <label>Type
        <input aria-label="Type of the new input" list="catalog-types" value={type} onChange={(e) => setType(e.target.value)} />
      </label>
      <datalist id="catalog-types">{naturalSort(types, (t) => t).map((t) => <option key={t} value={t} />)}</datalist>
      <button type="submit">Add input</button>
    </form>
  );
}

export function AddFunction({ graph, functions, onAdd }: { graph: GraphDocument; functions: string[]; onAdd: (n: GraphNode) => void }) {
  const [fn, setFn] = useState("");
  const [key, setKey] = useState("");
  const [filter, setFilter] = useState("");
  const shown = naturalSort(functions, (f) => f).filter((f) => f === fn || matches(filter)(f));
  return (
    <form className="palette-form" aria-label="Add a function node" onSubmit={(e) => { e.preventDefault(); if (fn) onAdd({ node_key: key || freeKey(graph, fn.split("/")[1] ?? "fn"), kind: "function", function: fn, input_bindings: {} }); setKey(""); }}>
      <h2>Add function</h2>
      <label>Search functions <input type="search" aria-label="Search functions" value={filter} onChange={(e) => setFilter(e.target.value)} /></label>
      <label>Function
        <select aria-label="Function to add" value={fn} onChange={(e) => setFn(e.target.value)}>
          <option value="">(choose)</option>
          {shown.map((f) => <option key={f} value={f}>{f}</option>)}
        </select>
      </label>
      <label>Key <input aria-label="Key of the new function" value={key} onChange={(e) => setKey(e.target.value)} /></label>
      <button type="submit">Add function</button>
    </form>
  );
}

export function AddExtract({ graph, onAdd }: { graph: GraphDocument; onAdd: (n: GraphNode) => void }) {
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
          {naturalSort(graph.nodes.filter((n) => n.kind !== "input"), (n) => n.node_key).map((n) => <option key={n.node_key} value={n.node_key}>{n.node_key}</option>)}
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
