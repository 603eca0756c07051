// A new workflow: from scratch (an empty graph, to build in the editor) or as a copy of the
// latest version of one you can see. The server judges the slug and the graph.
import { useState } from "react";
import { useNavigate } from "react-router";
import { Page } from "../components/Status";
import { request } from "../lib/api";
import { useAsync } from "../lib/hooks";
import { naturalSort } from "../lib/sort";
import { CreateWorkflowMutation } from "./NewWorkflow.graphql";
import { WorkflowsQuery } from "./Runs.graphql";
import { WorkflowQuery } from "./Workflows.graphql";

export function NewWorkflowPage() {
  const navigate = useNavigate();
  const workflows = useAsync(() => request(WorkflowsQuery, { cursor: null }), "workflows");
  const [slug, setSlug] = useState("");
  const [name, setName] = useState("");
  const [from, setFrom] = useState("");
  const [organization, setOrganization] = useState("");
  const [problem, setProblem] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const create = async () => {
    setBusy(true);
    setProblem(null);
    try {
      const graph = from ? ((await request(WorkflowQuery, { slug: from })).workflow.latest?.graph ?? { nodes: [] }) : { nodes: [] };
      const r = await request(CreateWorkflowMutation, { slug, name: name || slug, graph, organization: organization || null });
      navigate(`/workflows/${r.createWorkflow.slug}`);
    } catch (e) {
      setProblem(e instanceof Error ? e.message : String(e));
      setBusy(false);
    }
  };
  return (
    <Page title="New workflow">
      <form className="palette-form narrow" aria-label="New workflow" onSubmit={(e) => { e.preventDefault(); void create(); }}>
        <label>Slug (its address) <input required value={slug} onChange={(e) => setSlug(e.target.value)} placeholder="beam-check" /></label>
        <label>Name <input value={name} onChange={(e) => setName(e.target.value)} placeholder="Beam check" /></label>
        <label>Start from
          <select value={from} onChange={(e) => setFrom(e.target.value)}>
            <option value="">an empty graph</option>
            {naturalSort(workflows.data?.workflows.items ?? [], (w) => w.slug).map((w) => <option key={w.id} value={w.slug}>a copy of {w.slug} (v{w.latestVersion})</option>)}
          </select>
        </label>
        <label>Organization (optional) <input value={organization} onChange={(e) => setOrganization(e.target.value)} placeholder="its slug" /></label>
        <button type="submit" disabled={busy}>Create workflow</button>
        {problem && <p role="alert" className="problem">{problem}</p>}
      </form>
    </Page>
  );
}
