import { useEffect, useState } from "react";
import { Link, useLocation, useNavigate, useParams } from "react-router";
import { Pager, useCursorPages } from "../components/Pager";
import { SearchField, useFilterParams } from "../components/Filters";
import { Empty, ErrorBox, Loading, Page, StatusBadge } from "../components/Status";
import { InputsForm, type FormPort } from "../components/TypeForm";
import { request } from "../lib/api";
import { useCatalog } from "../lib/catalog";
import { when } from "../lib/format";
import { asGraph } from "../lib/graph";
import { useAsync, useSessionState } from "../lib/hooks";
import { naturalSort } from "../lib/sort";
import { typeExprOf } from "../lib/typeexpr";
import { draftOf, type Draft } from "../lib/values";
import { CreateRunMutation, WorkflowQuery, WorkflowsWithLastRunQuery } from "./Workflows.graphql";

export function WorkflowsPage() {
  const [params, set] = useFilterParams();
  const search = params.get("q") ?? "";
  const pages = useCursorPages(`workflows:${search}`);
  const loaded = useAsync(
    () => request(WorkflowsWithLastRunQuery, { cursor: pages.cursor, search: search || null }),
    `workflows+last:${search}:${pages.cursor ?? ""}`,
  );
  const { error, data } = loaded;
  const items = naturalSort(data?.workflows.items ?? [], (w) => w.slug);
  return (
    <Page title="Workflows" actions={<Link to="/workflows/new">New workflow</Link>}>
      <form className="filters" role="search" aria-label="Filter workflows" onSubmit={(e) => e.preventDefault()}>
        <SearchField label="Search" value={search} placeholder="slug or name" onSearch={(v) => set("q", v)} />
      </form>
      {error && <ErrorBox error={error} />}
      {!data && !error && <Loading rows={6} />}
      {data && items.length === 0 && pages.page === 1 && (
        search
          ? <Empty>No workflow matches "{search}".</Empty>
          : <Empty>No workflows yet. <Link to="/workflows/new">Create a workflow</Link> and add the functions of your packages to it in the editor.</Empty>
      )}
      {items.length > 0 && (
        <table>
          <thead><tr><th>Workflow</th><th>Name</th><th>Version</th><th>Visibility</th><th>Owner</th><th>Updated</th><th>Last run</th><th>Actions</th></tr></thead>
          <tbody>
            {items.map((w) => (
              <tr key={w.id}>
                <td><Link to={`/workflows/${w.slug}`}>{w.slug}</Link></td>
                <td>{w.name}</td>
                <td>v{w.latestVersion}</td>
                <td>{w.visibility}</td>
                <td>{w.owner}</td>
                <td>{when(w.updatedAt)}</td>
                <td>{w.lastRun ? <Link to={`/runs/${w.lastRun.id}`} aria-label={`Last run of ${w.slug}: ${w.lastRun.status}, ${when(w.lastRun.startedAt)}`}><StatusBadge status={w.lastRun.status} /> {when(w.lastRun.startedAt)}</Link> : "never run"}</td>
                <td>
                  <Link to={`/workflows/${w.slug}/run`} aria-label={`Start a run of ${w.slug}`}>Start a run</Link>{" · "}
                  <Link to={`/runs?workflow=${encodeURIComponent(w.slug)}`} aria-label={`Runs of ${w.slug}`}>Runs</Link>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {data && <Pager page={pages.page} nextCursor={data.workflows.nextCursor} onNext={pages.next} onPrevious={pages.previous} shown={data.workflows.items.length} noun="workflows" />}
    </Page>
  );
}

export function StartRunPage() {
  const { slug = "" } = useParams();
  const navigate = useNavigate();
  const catalog = useCatalog();
  const { data, error } = useAsync(() => request(WorkflowQuery, { slug }), `workflow:${slug}`);
  const [drafts, setDrafts] = useSessionState<Record<string, Draft>>(`calcgraph.draft.run.${slug}`, () => ({}));
  const [problem, setProblem] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  // "Run again" on a run page brings that run's inputs: they become the form's drafts once, and
  // the history entry forgets them so a reload keeps what the person changed since.
  const location = useLocation();
  const prefill = (location.state as { inputs?: unknown } | null)?.inputs;
  useEffect(() => {
    if (!data || catalog.size === 0 || typeof prefill !== "object" || prefill === null) return;
    const given = prefill as Record<string, unknown>;
    const filled: Record<string, Draft> = {};
    for (const n of asGraph(data.workflow.latest?.graph).nodes) {
      if (n.kind !== "input" || !(n.node_key in given)) continue;
      try {
        filled[n.node_key] = draftOf(typeExprOf(n.input_spec?.type_expr), given[n.node_key], catalog);
      } catch {
        // a type the form cannot show: the form below says so
      }
    }
    setDrafts(filled);
    void navigate(location.pathname, { replace: true, state: null });
  }, [data, catalog, prefill, setDrafts, navigate, location.pathname]);
  if (error) return <ErrorBox error={error} />;
  if (!data || catalog.size === 0) return <Loading />;
  const graph = asGraph(data.workflow.latest?.graph);
  let formPorts: FormPort[];
  try {
    formPorts = graph.nodes
      .filter((n) => n.kind === "input")
      .map((n) => ({ name: n.node_key, expr: typeExprOf(n.input_spec?.type_expr) }));
  } catch (e) {
    return <p className="problem">{e instanceof Error ? e.message : String(e)}</p>;
  }
  const start = (inputs: Record<string, unknown>) => {
    setBusy(true);
    setProblem(null);
    request(CreateRunMutation, { workflow: slug, inputs }).then(
      (r) => navigate(`/runs/${r.createWorkflowRun.id}`),
      (e: unknown) => {
        setProblem(e instanceof Error ? e.message : String(e));
        setBusy(false);
      },
    );
  };
  return (
    <Page title={`Start a run of ${data.workflow.name}`} actions={<Link to={`/workflows/${slug}`}>Open in the editor</Link>}>
      <p>Version {data.workflow.latestVersion}. Physical inputs take a number and a unit, e.g. <code>12 kN</code>.</p>
      <InputsForm ports={formPorts} drafts={drafts} onDrafts={setDrafts} onSubmit={start} submitLabel="Start run" busy={busy} />
      {problem && <p role="alert" className="problem">{problem}</p>}
    </Page>
  );
}
