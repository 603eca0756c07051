import { useState } from "react";
import { Link, useParams } from "react-router";
import { SearchField, useFilterParams } from "../components/Filters";
import { Empty, ErrorBox, Loading, Page, StatusBadge } from "../components/Status";
import { InputsForm, type FormPort } from "../components/TypeForm";
import { request, ApiError } from "../lib/api";
import { useCatalog } from "../lib/catalog";
import { deprecation, ports, showValue, unitOf, when } from "../lib/format";
import { useAsync, useSessionState } from "../lib/hooks";
import { typeExprOf } from "../lib/typeexpr";
import type { Draft } from "../lib/values";
import { ExecuteMutation, FunctionQuery, FunctionsQuery } from "./Functions.graphql";

export function FunctionsPage() {
  const [params, set] = useFilterParams();
  const search = params.get("q") ?? "";
  const { data, error } = useAsync(() => request(FunctionsQuery, { cursor: null, search: search || null }), search ? `functions:${search}` : "functions");
  return (
    <Page title="Functions" actions={<Link to="/publish/function">Publish a function</Link>}>
      <form className="filters" role="search" aria-label="Search functions" onSubmit={(e) => e.preventDefault()}>
        <SearchField label="Name" value={search} placeholder="package/function" onSearch={(v) => set("q", v)} />
      </form>
      {error && <ErrorBox error={error} />}
      {!data && !error && <Loading />}
      {data && data.functions.items.length === 0 && (
        search
          ? <Empty>No function you can see matches "{search}".</Empty>
          : <Empty>No functions yet. <Link to="/publish/function">Publish a function</Link> or <Link to="/publish">a package</Link>.</Empty>
      )}
      {data && data.functions.items.length > 0 && (
        <table>
          <thead><tr><th>Function</th><th>Package</th><th>Version</th></tr></thead>
          <tbody>
            {data.functions.items.map((f) => (
              <tr key={f.id}>
                <td><Link to={`/functions/${f.id}`}>{f.name}</Link></td>
                <td><Link to={`/packages/${f.package.id}`}>{f.package.name}</Link></td>
                <td>{f.currentVersion ?? "—"}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </Page>
  );
}

export function PortsTable({ schema, caption }: { schema: unknown; caption: string }) {
  const catalog = useCatalog();
  const rows = ports(schema);
  return (
    <table>
      <caption>{caption}</caption>
      <thead><tr><th>Port</th><th>Type</th><th>SI unit</th><th>Description</th></tr></thead>
      <tbody>
        {rows.map(([name, p]) => (
          <tr key={name}>
            <th scope="row">{name}{p.required === false ? " (optional)" : ""}</th>
            <td><code>{p.type}</code></td>
            <td>{unitOf(p.type, catalog) || "—"}</td>
            <td>{p.description ?? ""}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

export function FunctionPage() {
  const { id = "" } = useParams();
  const { data, error } = useAsync(() => request(FunctionQuery, { ref: id }), `function:${id}`);
  const [drafts, setDrafts] = useSessionState<Record<string, Draft>>(`calcgraph.draft.function.${id}`, () => ({}));
  const [result, setResult] = useState<{ id: string; status: string; outputs: unknown; error: unknown } | null>(null);
  const [runError, setRunError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const catalog = useCatalog();
  if (error) return <ErrorBox error={error} />;
  if (!data) return <Loading />;
  const fv = data.resolveFunction;
  const fn = fv.function;
  let formPorts: FormPort[] = [];
  let formError: string | null = null;
  try {
    formPorts = ports(fv.inputsSchema).map(([name, p]) => ({ name, expr: typeExprOf(p.type), description: p.description }));
  } catch (e) {
    formError = e instanceof Error ? e.message : String(e);
  }
  const execute = (inputs: Record<string, unknown>) => {
    setBusy(true);
    setRunError(null);
    request(ExecuteMutation, { functionId: fv.id, inputs }).then(
      (r) => {
        setResult(r.executeFunction);
        setBusy(false);
      },
      (e: unknown) => {
        setRunError(e instanceof ApiError || e instanceof Error ? e.message : String(e));
        setBusy(false);
      },
    );
  };
  return (
    <Page title={`${fn?.package.name ?? ""}/${fn?.name ?? id} ${fv.version}`}>
      {fv.deprecated && (
        <p role="note" className="deprecated">
          {deprecation(fv)}
        </p>
      )}
      {fv.changelog && <p>{fv.changelog}</p>}
      <PortsTable schema={fv.inputsSchema} caption="Inputs" />
      <PortsTable schema={fv.outputsSchema} caption="Outputs" />
      <h2>Versions</h2>
      <ul>
        {(fn?.versions ?? []).map((v) => (
          <li key={v.id}>
            {v.version} — {when(v.deployedAt)} {v.deprecated && <span className="badge">deprecated</span>} {v.changelog}
          </li>
        ))}
      </ul>
      <h2>Run it</h2>
      {formError && <p className="problem">{formError}</p>}
      {catalog.size > 0 && (
        <InputsForm ports={formPorts} drafts={drafts} onDrafts={setDrafts} onSubmit={execute} submitLabel="Run function" busy={busy} />
      )}
      {runError && <p role="alert" className="problem">{runError}</p>}
      {result && (
        <div className="result" aria-live="polite">
          <h3>Job <Link to={`/jobs/${result.id}`}>{result.id.slice(0, 8)}</Link> <StatusBadge status={result.status} /></h3>
          {result.outputs != null && (
            <table>
              <tbody>
                {Object.entries(result.outputs as Record<string, unknown>).map(([k, v]) => {
                  const type = ports(fv.outputsSchema).find(([n]) => n === k)?.[1].type ?? "";
                  return (
                    <tr key={k}><th scope="row">{k}</th><td>{showValue(v)}</td><td>{unitOf(type, catalog)}</td></tr>
                  );
                })}
              </tbody>
            </table>
          )}
          {result.error != null && <pre className="problem">{JSON.stringify(result.error, null, 2)}</pre>}
        </div>
      )}
    </Page>
  );
}
