import { useEffect } from "react";
import { Link, useLocation, useParams, useSearchParams } from "react-router";
import { DeploymentTab } from "../components/DeploymentTab";
import { SearchField, useFilterParams } from "../components/Filters";
import { Empty, ErrorBox, Loading, Page } from "../components/Status";
import { VersionDetails, versionAnchor } from "../components/VersionDetails";
import { request } from "../lib/api";
import { when } from "../lib/format";
import { useAsync } from "../lib/hooks";
import { PackageQuery, PackagesQuery } from "./Packages.graphql";

export function PackagesPage() {
  const [params, set] = useFilterParams();
  const search = params.get("q") ?? "";
  const { data, error } = useAsync(() => request(PackagesQuery, { cursor: null, search: search || null }), `packages:${search}`);
  return (
    <Page title="Packages" actions={<Link to="/publish">Publish a package or function</Link>}>
      <form className="filters" role="search" aria-label="Search packages" onSubmit={(e) => e.preventDefault()}>
        <SearchField label="Name" value={search} placeholder="part of a name" onSearch={(v) => set("q", v)} />
      </form>
      {error && <ErrorBox error={error} />}
      {!data && !error && <Loading />}
      {data && data.packages.items.length === 0 && (
        search
          ? <Empty>No package you can see matches "{search}".</Empty>
          : <Empty>No packages yet. <Link to="/publish">Publish a package</Link> from its calcgraph.yaml and modules.</Empty>
      )}
      {data && data.packages.items.length > 0 && (
        <table>
          <thead>
            <tr><th>Name</th><th>Version</th><th>Visibility</th><th>Owner</th><th>Description</th><th>Updated</th></tr>
          </thead>
          <tbody>
            {data.packages.items.map((p) => (
              <tr key={p.id}>
                <td><Link to={`/packages/${p.id}`}>{p.name}</Link></td>
                <td>{p.currentVersion ?? "—"}</td>
                <td>{p.visibility}</td>
                <td>{p.organizationSlug ?? p.owner}</td>
                <td>{p.description ?? ""}</td>
                <td>{when(p.updatedAt)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </Page>
  );
}

interface ChangeEntry {
  type?: string;
  description?: string;
  functions?: string[];
}

function Changelog({ changelog }: { changelog: unknown }) {
  if (!changelog || typeof changelog !== "object") return null;
  const log = changelog as { date?: string; changes?: ChangeEntry[] };
  return (
    <div className="changelog">
      {log.date && <p>Released {log.date}</p>}
      <ul>
        {(log.changes ?? []).map((c, i) => (
          <li key={i}>
            <strong>{c.type}</strong> {c.description}
            {c.functions && c.functions.length > 0 && <> ({c.functions.join(", ")})</>}
          </li>
        ))}
      </ul>
    </div>
  );
}

const TABS = [
  ["overview", "Overview"],
  ["deployment", "Deployment"],
] as const;

/** The package page's tabs, kept in the address (`?tab=deployment`) so a tab can be linked. */
function PackageTabs() {
  const [params, setParams] = useSearchParams();
  const current = params.get("tab") ?? "overview";
  return (
    <div role="tablist" aria-label="Package" className="tabs">
      {TABS.map(([key, label]) => (
        <button
          key={key}
          type="button"
          role="tab"
          id={`tab-${key}`}
          aria-selected={current === key}
          aria-controls={`panel-${key}`}
          className={current === key ? "tab active" : "tab"}
          onClick={() => setParams(key === "overview" ? {} : { tab: key }, { replace: true })}
        >
          {label}
        </button>
      ))}
    </div>
  );
}

export function PackagePage() {
  const { id = "" } = useParams();
  const [params] = useSearchParams();
  const tab = params.get("tab") ?? "overview";
  const { data, error } = useAsync(() => request(PackageQuery, { id }), `package:${id}`);
  const { hash } = useLocation();
  useEffect(() => {
    // A link to one version (a pinned dependency's) scrolls to it once the page is drawn.
    if (data && hash) document.getElementById(decodeURIComponent(hash.slice(1)))?.scrollIntoView();
  }, [data, hash]);
  if (error) return <ErrorBox error={error} />;
  if (!data) return <Loading />;
  const pkg = data.package;
  return (
    <Page title={`Package ${pkg.name}`}>
      <PackageTabs />
      {tab === "deployment" ? (
        <div role="tabpanel" id="panel-deployment" aria-labelledby="tab-deployment">
          <DeploymentTab pkg={pkg.id} />
        </div>
      ) : (
      <div role="tabpanel" id="panel-overview" aria-labelledby="tab-overview">
      <p>{pkg.description}</p>
      <dl className="facts">
        <dt>Current version</dt><dd>{pkg.currentVersion ?? "—"}</dd>
        <dt>Visibility</dt><dd>{pkg.visibility}</dd>
        <dt>Owner</dt><dd>{pkg.organizationSlug ?? pkg.owner}</dd>
      </dl>
      <h2>Functions</h2>
      <ul>
        {pkg.functions.map((f) => (
          <li key={f.id}>
            <Link to={`/functions/${f.id}`}>{f.name}</Link> {f.currentVersion}
          </li>
        ))}
      </ul>
      <h2>Versions and changelog</h2>
      {[...pkg.versions].reverse().map((v) => (
        <article key={v.id} className="version" id={versionAnchor(v.version)}>
          <h3>
            {v.version} {v.isLatest && <span className="badge">latest</span>}{" "}
            {v.isStable ? <span className="badge">stable</span> : <span className="badge">pre-release</span>}
          </h3>
          <p>{when(v.createdAt)}{v.gitRef ? ` · git ${v.gitRef} ${v.gitCommit?.slice(0, 10) ?? ""}` : ""}</p>
          <Changelog changelog={v.changelog} />
          <p>Functions: {v.functions.map((f) => `${f.name} ${f.version} (${f.status})`).join(", ")}</p>
          <VersionDetails
            key={`${v.id}${hash}`}
            packageId={pkg.id}
            version={v.version}
            open={v.isLatest || decodeURIComponent(hash) === `#${versionAnchor(v.version)}`}
          />
        </article>
      ))}
      </div>
      )}
    </Page>
  );
}
