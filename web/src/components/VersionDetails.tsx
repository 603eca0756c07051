import { useState } from "react";
import { Link } from "react-router";
import { request } from "../lib/api";
import { useAsync } from "../lib/hooks";
import { PackageVersionQuery } from "./VersionDetails.graphql";
import { ErrorBox, Loading } from "./Status";

/** The anchor of one version on its package's page: where a pinned dependency links to. */
export function versionAnchor(version: string): string {
  return `v-${version}`;
}

interface Pinned {
  name: string;
  version: string;
  packageId: string;
  direct: boolean;
  range?: string | null;
}

function Dependencies({ pinned }: { pinned: Pinned[] }) {
  if (pinned.length === 0) return <p>No dependencies.</p>;
  return (
    <table>
      <caption>Dependencies as pinned at deployment</caption>
      <thead>
        <tr><th scope="col">Package</th><th scope="col">Pinned version</th><th scope="col">Declared</th></tr>
      </thead>
      <tbody>
        {pinned.map((d) => (
          <tr key={d.packageId}>
            <td>{d.name}</td>
            <td>
              <Link to={`/packages/${d.packageId}#${versionAnchor(d.version)}`}>
                {d.name} {d.version}
              </Link>
            </td>
            <td>{d.direct ? <code>{d.range}</code> : "brought along by a dependency"}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

function Compatibility({ compatibility }: { compatibility: unknown }) {
  const c = (compatibility ?? {}) as { compatible_with?: string[]; breaking_changes_from?: string };
  if (!c.compatible_with?.length && !c.breaking_changes_from) return <p>No compatibility declared.</p>;
  return (
    <dl className="facts">
      {c.compatible_with && c.compatible_with.length > 0 && (
        <><dt>Compatible with</dt><dd>{c.compatible_with.map((r) => <code key={r}>{r} </code>)}</dd></>
      )}
      {c.breaking_changes_from && <><dt>Breaking changes from</dt><dd>{c.breaking_changes_from}</dd></>}
    </dl>
  );
}

function MigrationGuide({ guide }: { guide: unknown }) {
  if (guide === null || guide === undefined || guide === "") return <p>No migration guide.</p>;
  if (typeof guide === "string") return <p className="prewrap">{guide}</p>;
  return (
    <dl className="facts">
      {Object.entries(guide as Record<string, string>).map(([version, text]) => (
        <div key={version}><dt>{version}</dt><dd className="prewrap">{text}</dd></div>
      ))}
    </dl>
  );
}

function Loaded({ packageId, version }: { packageId: string; version: string }) {
  const { data, error } = useAsync(
    () => request(PackageVersionQuery, { package: packageId, version }),
    `${packageId}@${version}`,
  );
  if (error) return <ErrorBox error={error} />;
  if (!data) return <Loading />;
  const detail = data.packageVersion;
  return (
    <>
      <h4>Dependencies</h4>
      <Dependencies pinned={detail.pinnedDependencies} />
      <h4>Compatibility</h4>
      <Compatibility compatibility={detail.compatibility} />
      <h4>Migration guide</h4>
      <MigrationGuide guide={detail.migrationGuide} />
    </>
  );
}

/** A version's dependencies, compatibility and migration guide, loaded when opened. */
export function VersionDetails(props: { packageId: string; version: string; open: boolean }) {
  const [open, setOpen] = useState(props.open);
  return (
    <details open={open} onToggle={(e) => setOpen(e.currentTarget.open)}>
      <summary>Dependencies, compatibility and migration guide of {props.version}</summary>
      {open && <Loaded packageId={props.packageId} version={props.version} />}
    </details>
  );
}
