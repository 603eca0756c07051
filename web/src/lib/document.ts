// The editor's one source of truth: the saved version (number and graph) and the local edits
// on top of it, with undo and redo. Kept in sessionStorage, so a reload or a sign-in round trip
// brings the edits back; "Discard" goes back to the saved version, whichever was saved last.
import { useCallback, useState } from "react";
import type { GraphDocument } from "./graph";

export interface EditorDocument {
  /** The version the edits are made on, and its graph as the server has it. */
  baseVersion: number;
  base: GraphDocument;
  /** The graph with the local edits. */
  graph: GraphDocument;
}

const HISTORY = 100;

function same(a: GraphDocument, b: GraphDocument): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

function stored(key: string): EditorDocument | null {
  try {
    const raw = sessionStorage.getItem(key);
    if (!raw) return null;
    const d = JSON.parse(raw) as Partial<EditorDocument>;
    if (typeof d.baseVersion !== "number" || !d.graph || !Array.isArray(d.graph.nodes)) return null;
    return { baseVersion: d.baseVersion, base: d.base ?? d.graph, graph: d.graph };
  } catch {
    return null;
  }
}

interface State {
  doc: EditorDocument;
  stale: number | null;
  past: GraphDocument[];
  future: GraphDocument[];
}

export function useEditorDocument(slug: string, version: number, saved: GraphDocument) {
  const key = `calcgraph.draft.editor.${slug}`;
  const [state, setState] = useState<State>(() => {
    const draft = stored(key);
    const fresh = { baseVersion: version, base: saved, graph: saved };
    if (!draft || same(draft.graph, draft.base)) return { doc: fresh, stale: null, past: [], future: [] };
    // Edits made on the latest version carry on; edits made on an older one are kept, on the
    // latest as base, and the page says so (saving them publishes them over the latest).
    const stale = draft.baseVersion === version ? null : draft.baseVersion;
    return { doc: { ...fresh, graph: draft.graph }, stale, past: [], future: [] };
  });
  const update = useCallback(
    (next: (s: State) => State) =>
      setState((s) => {
        const n = next(s);
        if (n.doc !== s.doc) {
          if (same(n.doc.graph, n.doc.base)) sessionStorage.removeItem(key);
          else sessionStorage.setItem(key, JSON.stringify(n.doc));
        }
        return n;
      }),
    [key],
  );
  /** A local edit: undoable. */
  const edit = useCallback(
    (graph: GraphDocument) =>
      update((s) =>
        same(graph, s.doc.graph)
          ? s
          : { ...s, doc: { ...s.doc, graph }, past: [...s.past.slice(-HISTORY + 1), s.doc.graph], future: [] },
      ),
    [update],
  );
  const undo = useCallback(
    () =>
      update((s) => {
        const previous = s.past[s.past.length - 1];
        if (!previous) return s;
        return { ...s, doc: { ...s.doc, graph: previous }, past: s.past.slice(0, -1), future: [s.doc.graph, ...s.future] };
      }),
    [update],
  );
  const redo = useCallback(
    () =>
      update((s) => {
        const next = s.future[0];
        if (!next) return s;
        return { ...s, doc: { ...s.doc, graph: next }, past: [...s.past, s.doc.graph], future: s.future.slice(1) };
      }),
    [update],
  );
  /** Back to the saved version, whichever was saved last (undoable). */
  const discard = useCallback(
    () =>
      update((s) =>
        same(s.doc.base, s.doc.graph)
          ? { ...s, stale: null }
          : { ...s, stale: null, doc: { ...s.doc, graph: s.doc.base }, past: [...s.past, s.doc.graph], future: [] },
      ),
    [update],
  );
  /** The server saved `graph` as `savedVersion`: it is the new base (edits made meanwhile stay). */
  const markSaved = useCallback(
    (savedVersion: number, graph: GraphDocument) =>
      update((s) => ({ ...s, stale: null, doc: { baseVersion: savedVersion, base: graph, graph: s.doc.graph } })),
    [update],
  );
  return {
    doc: state.doc,
    changed: !same(state.doc.graph, state.doc.base),
    stale: state.stale,
    canUndo: state.past.length > 0,
    canRedo: state.future.length > 0,
    edit,
    undo,
    redo,
    discard,
    markSaved,
  };
}
