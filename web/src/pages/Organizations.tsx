// Organizations: create one, open one by slug (or from the packages and workflows that name
// it), its members and their roles, its packages and their visibility. Who may do what is the
// server's decision: a refusal is shown as it answers.
import { useState } from "react";
import { Link, useNavigate, useParams } from "react-router";
import { Empty, ErrorBox, Loading, Page } from "../components/Status";
import { request } from "../lib/api";
import { when } from "../lib/format";
import { useAsync } from "../lib/hooks";
import { naturalSort } from "../lib/sort";
import type { MemberRole, Visibility } from "../gql/graphql";
import { AddMemberMutation, CreateOrganizationMutation, OrganizationQuery, RemoveMemberMutation, SetPackageVisibilityMutation } from "./Organizations.graphql";
import { PackagesQuery } from "./Packages.graphql";

const ROLES: MemberRole[] = ["member", "owner"];
const VISIBILITIES: Visibility[] = ["private", "internal", "public"];

function message(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

export function OrganizationsPage() {
  const navigate = useNavigate();
  const known = useAsync(async () => {
    const packages = await request(PackagesQuery, { cursor: null });
    const slugs = new Set<string>();
    for (const p of packages.packages.items) if (p.organizationSlug) slugs.add(p.organizationSlug);
    return naturalSort([...slugs], (s) => s);
  }, "organizations");
  const [slug, setSlug] = useState("");
  const [name, setName] = useState("");
  const [open, setOpen] = useState("");
  const [problem, setProblem] = useState<string | null>(null);
  return (
    <Page title="Organizations">
      <p>An organization owns packages and workflows together; its members see its internal ones, its owners manage members and visibility.</p>
      <h2>Organizations named by what you can see</h2>
      {known.error && <ErrorBox error={known.error} />}
      {!known.data && !known.error && <Loading rows={2} />}
      {known.data && known.data.length === 0 && <Empty>No package you can see belongs to an organization. Create one below, or open one you belong to by its slug.</Empty>}
      {known.data && known.data.length > 0 && (
        <ul>{known.data.map((s) => <li key={s}><Link to={`/organizations/${s}`}>{s}</Link></li>)}</ul>
      )}
      <form className="palette-form narrow" aria-label="Open an organization" onSubmit={(e) => { e.preventDefault(); if (open.trim()) navigate(`/organizations/${encodeURIComponent(open.trim())}`); }}>
        <h2>Open by slug</h2>
        <label>Slug <input value={open} onChange={(e) => setOpen(e.target.value)} /></label>
        <button type="submit">Open</button>
      </form>
      <form
        className="palette-form narrow"
        aria-label="Create an organization"
        onSubmit={(e) => {
          e.preventDefault();
          setProblem(null);
          request(CreateOrganizationMutation, { slug, name }).then(
            (r) => navigate(`/organizations/${r.createOrganization.slug}`),
            (err: unknown) => setProblem(message(err)),
          );
        }}
      >
        <h2>Create an organization</h2>
        <label>Slug <input value={slug} onChange={(e) => setSlug(e.target.value)} placeholder="structures-team" /></label>
        <label>Name <input value={name} onChange={(e) => setName(e.target.value)} placeholder="Structures team" /></label>
        <button type="submit">Create organization</button>
        {problem && <p role="alert" className="problem">{problem}</p>}
      </form>
    </Page>
  );
}

export function OrganizationPage() {
  const { slug = "" } = useParams();
  const { data, error, reload } = useAsync(() => request(OrganizationQuery, { slug }), `organization:${slug}`);
  const [username, setUsername] = useState("");
  const [role, setRole] = useState<MemberRole>("member");
  const [note, setNote] = useState<{ ok: boolean; text: string } | null>(null);
  if (error) return <ErrorBox error={error} />;
  if (!data) return <Loading />;
  const org = data.organization;
  const act = (work: Promise<unknown>, done: string) =>
    work.then(
      () => {
        setNote({ ok: true, text: done });
        reload();
      },
      (e: unknown) => setNote({ ok: false, text: message(e) }),
    );
  return (
    <Page title={`Organization ${org.name}`}>
      <dl className="facts"><dt>Slug</dt><dd>{org.slug}</dd><dt>Created</dt><dd>{when(org.createdAt)}</dd></dl>
      {note && <p role={note.ok ? "status" : "alert"} className={`message ${note.ok ? "ok" : "error"}`}>{note.text}</p>}
      <table>
        <caption>Members</caption>
        <thead><tr><th>Member</th><th>Role</th><th>Actions</th></tr></thead>
        <tbody>
          {naturalSort(org.members, (m) => m.username).map((m) => (
            <tr key={m.username}>
              <th scope="row">{m.username}</th>
              <td>
                <select aria-label={`Role of ${m.username}`} value={m.role} onChange={(e) => void act(request(AddMemberMutation, { slug, username: m.username, role: e.target.value as MemberRole }), `${m.username} is now ${e.target.value}.`)}>
                  {ROLES.map((r) => <option key={r} value={r}>{r}</option>)}
                </select>
              </td>
              <td><button type="button" onClick={() => void act(request(RemoveMemberMutation, { slug, username: m.username }), `${m.username} was removed.`)}>Remove {m.username}</button></td>
            </tr>
          ))}
        </tbody>
      </table>
      <form className="palette-form narrow" aria-label="Add a member" onSubmit={(e) => { e.preventDefault(); void act(request(AddMemberMutation, { slug, username, role }), `${username} added as ${role}.`); setUsername(""); }}>
        <h2>Add a member</h2>
        <label>Username <input value={username} onChange={(e) => setUsername(e.target.value)} /></label>
        <label>Role
          <select value={role} onChange={(e) => setRole(e.target.value as MemberRole)}>{ROLES.map((r) => <option key={r} value={r}>{r}</option>)}</select>
        </label>
        <button type="submit">Add member</button>
      </form>
      <h2>Packages</h2>
      {org.packages.length === 0 ? (
        <Empty>No packages yet: publish one with <code>calcgraph packages publish DIR --organization {org.slug}</code>.</Empty>
      ) : (
        <table>
          <thead><tr><th>Package</th><th>Version</th><th>Visibility</th></tr></thead>
          <tbody>
            {naturalSort(org.packages, (p) => p.name).map((p) => (
              <tr key={p.id}>
                <th scope="row"><Link to={`/packages/${p.id}`}>{p.name}</Link></th>
                <td>{p.currentVersion ?? "—"}</td>
                <td>
                  <select aria-label={`Visibility of ${p.name}`} value={p.visibility} onChange={(e) => void act(request(SetPackageVisibilityMutation, { package: p.id, visibility: e.target.value as Visibility }), `${p.name} is now ${e.target.value}.`)}>
                    {VISIBILITIES.map((v) => <option key={v} value={v}>{v}</option>)}
                  </select>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </Page>
  );
}
