// Publishing from the browser: a package from its files (a dropped or picked folder, or a
// calcgraph.yaml with its modules) through `publishPackage`, and a single function from code
// through `submitFunction` (the build behind POST /functions). Every rule on the manifest, the
// code and the requirements is the server's: the page sends what was chosen and shows the
// server's answer (its report, or its refusal with each rule, line and finding).
import { useState, type DragEvent } from "react";
import { Link } from "react-router";
import { Page } from "../components/Status";
import { ApiError, request } from "../lib/api";
import { PublishPackageMutation, SubmitFunctionMutation } from "./Publish.graphql";
import type { PublishPackageMutation as PublishAnswer, SubmitFunctionMutation as SubmitAnswer, Visibility } from "../gql/graphql";

const MANIFEST = "calcgraph.yaml";
const VISIBILITIES: Visibility[] = ["private", "internal", "public"];

interface Picked {
  path: string;
  text: string;
}

/** The server's refusal, with what it says about each field (rule, line) and its findings. */
interface Refusal {
  message: string;
  fields: { loc: (string | number)[]; msg: string }[];
  vulnerabilities: unknown;
}

function refusalOf(e: unknown): Refusal {
  if (e instanceof ApiError) {
    const fields = Array.isArray(e.extensions.errors) ? (e.extensions.errors as Refusal["fields"]) : [];
    return { message: e.message, fields, vulnerabilities: e.extensions.vulnerabilities ?? null };
  }
  return { message: e instanceof Error ? e.message : String(e), fields: [], vulnerabilities: null };
}

function RefusalView({ refusal }: { refusal: Refusal }) {
  return (
    <div role="alert" className="problem">
      <p>{refusal.message}</p>
      {refusal.fields.length > 0 && (
        <ul aria-label="What the server refused">
          {refusal.fields.map((f, i) => <li key={i}><code>{f.loc.join(".")}</code>: {f.msg}</li>)}
        </ul>
      )}
      {refusal.vulnerabilities != null && <Findings findings={refusal.vulnerabilities} />}
    </div>
  );
}

function Findings({ findings }: { findings: unknown }) {
  if (!findings || typeof findings !== "object") return null;
  const f = findings as { critical?: number; high?: number; warnings?: string[] };
  return (
    <div className="findings">
      <p>Dependency scan: {f.critical ?? 0} critical, {f.high ?? 0} high.</p>
      {f.warnings && f.warnings.length > 0 && <ul aria-label="Scan findings">{f.warnings.map((w) => <li key={w}>{w}</li>)}</ul>}
    </div>
  );
}

// Folders a file manager or an editor leaves beside the sources (caches, version control):
// never part of what a person means to publish.
function leftBehind(path: string): boolean {
  return path.split("/").some((part) => part.startsWith(".") || part === "__pycache__" || part === "node_modules");
}

async function readEntry(entry: FileSystemEntry, into: File[], paths: string[]): Promise<void> {
  if (entry.isFile) {
    const file = await new Promise<File>((resolve, reject) => (entry as FileSystemFileEntry).file(resolve, reject));
    into.push(file);
    paths.push(entry.fullPath.replace(/^\//, ""));
  } else if (entry.isDirectory) {
    const reader = (entry as FileSystemDirectoryEntry).createReader();
    for (;;) {
      const batch = await new Promise<FileSystemEntry[]>((resolve, reject) => reader.readEntries(resolve, reject));
      if (batch.length === 0) break;
      for (const child of batch) await readEntry(child, into, paths);
    }
  }
}

/** The chosen files relative to the folder of their calcgraph.yaml (the shallowest one). */
async function collect(files: File[], paths: string[]): Promise<{ manifest: string | null; files: Picked[] }> {
  const pairs = files.map((file, i) => ({ file, path: paths[i] || file.name })).filter((p) => !leftBehind(p.path));
  const manifests = pairs.filter((p) => p.path === MANIFEST || p.path.endsWith(`/${MANIFEST}`));
  manifests.sort((a, b) => a.path.split("/").length - b.path.split("/").length);
  const root = manifests[0] ? manifests[0].path.slice(0, -MANIFEST.length) : "";
  const picked: Picked[] = [];
  let manifest: string | null = null;
  for (const { file, path } of pairs) {
    if (!path.startsWith(root)) continue;
    const relative = path.slice(root.length);
    const text = await file.text();
    if (relative === MANIFEST) manifest = text;
    else picked.push({ path: relative, text });
  }
  picked.sort((a, b) => a.path.localeCompare(b.path));
  return { manifest, files: picked };
}

export function PublishPackagePage() {
  const [manifest, setManifest] = useState<string | null>(null);
  const [files, setFiles] = useState<Picked[]>([]);
  const [visibility, setVisibility] = useState<Visibility>("private");
  const [over, setOver] = useState(false);
  const [busy, setBusy] = useState(false);
  const [refusal, setRefusal] = useState<Refusal | null>(null);
  const [report, setReport] = useState<PublishAnswer["publishPackage"] | null>(null);

  const take = async (chosen: File[], paths: string[]) => {
    const found = await collect(chosen, paths);
    setManifest(found.manifest);
    setFiles(found.files);
    setRefusal(null);
    setReport(null);
  };
  const onDrop = async (e: DragEvent<HTMLDivElement>) => {
    e.preventDefault();
    setOver(false);
    const chosen: File[] = [];
    const paths: string[] = [];
    const entries = [...e.dataTransfer.items].map((item) => item.webkitGetAsEntry()).filter((x): x is FileSystemEntry => x !== null);
    for (const entry of entries) await readEntry(entry, chosen, paths);
    await take(chosen, paths);
  };
  const publish = () => {
    if (manifest === null) return;
    setBusy(true);
    setRefusal(null);
    setReport(null);
    request(PublishPackageMutation, { manifest, files: Object.fromEntries(files.map((f) => [f.path, f.text])), visibility }).then(
      (answer) => {
        setReport(answer.publishPackage);
        setBusy(false);
      },
      (e: unknown) => {
        setRefusal(refusalOf(e));
        setBusy(false);
      },
    );
  };
  return (
    <Page title="Publish a package" actions={<Link to="/publish/function">Publish a single function instead</Link>}>
      <p>Drop the package's folder here, or pick its <code>calcgraph.yaml</code> and modules. The server checks the manifest and the code and answers with the deployment report or what it refused.</p>
      <div
        className={`dropzone${over ? " over" : ""}`}
        onDragOver={(e) => { e.preventDefault(); setOver(true); }}
        onDragLeave={() => setOver(false)}
        onDrop={(e) => void onDrop(e)}
      >
        <p>Drop a folder here</p>
        <label>Pick a folder <input type="file" multiple {...{ webkitdirectory: "" }} onChange={(e) => { const list = [...(e.target.files ?? [])]; void take(list, list.map((f) => f.webkitRelativePath || f.name)); }} /></label>
        <label>Or pick calcgraph.yaml and its modules <input type="file" multiple onChange={(e) => { const list = [...(e.target.files ?? [])]; void take(list, list.map((f) => f.name)); }} /></label>
      </div>
      {(manifest !== null || files.length > 0) && (
        <table>
          <caption>What will be sent</caption>
          <thead><tr><th>File</th><th>Size</th></tr></thead>
          <tbody>
            <tr><th scope="row">{MANIFEST}</th><td>{manifest === null ? "missing: pick or drop it too" : `${manifest.length} characters`}</td></tr>
            {files.map((f) => <tr key={f.path}><th scope="row">{f.path}</th><td>{f.text.length} characters</td></tr>)}
          </tbody>
        </table>
      )}
      <form className="palette-form narrow" aria-label="Publish the package" onSubmit={(e) => { e.preventDefault(); publish(); }}>
        <label>Visibility
          <select value={visibility} onChange={(e) => setVisibility(e.target.value as Visibility)}>
            {VISIBILITIES.map((v) => <option key={v} value={v}>{v}</option>)}
          </select>
        </label>
        <button type="submit" disabled={busy || manifest === null}>{busy ? "Publishing…" : "Publish package"}</button>
      </form>
      {refusal && <RefusalView refusal={refusal} />}
      {report && (
        <div role="status" className="message ok">
          <p>Published <Link to={`/packages/${report.packageId}`}>{report.package} {report.packageVersion}</Link>{report.isLatest ? " (latest)" : ""}.</p>
          <table>
            <caption>Functions</caption>
            <thead><tr><th>Function</th><th>Version</th><th>Change</th></tr></thead>
            <tbody>
              {report.functions.map((f) => (
                <tr key={f.id}><th scope="row"><Link to={`/functions/${f.id}`}>{f.name}</Link></th><td>{f.version}</td><td>{f.status}</td></tr>
              ))}
            </tbody>
          </table>
          {report.warnings.length > 0 && <ul aria-label="Warnings">{report.warnings.map((w) => <li key={w}>{w}</li>)}</ul>}
        </div>
      )}
    </Page>
  );
}

const STARTER = `def main(length, force):
    return {"moment": force * length}
`;
const STARTER_INPUTS = `{"length": {"type": "Length"}, "force": {"type": "Force"}}`;
const STARTER_OUTPUTS = `{"moment": {"type": "Moment"}}`;

/** The lines of the code the server's refusal names (`loc` body.code.line.N). */
function refusedLines(refusal: Refusal | null): Set<number> {
  const lines = new Set<number>();
  for (const f of refusal?.fields ?? []) {
    const at = f.loc.indexOf("line");
    if (f.loc.includes("code") && at >= 0 && typeof f.loc[at + 1] === "number") lines.add(f.loc[at + 1] as number);
  }
  return lines;
}

function parsePorts(text: string, name: string): unknown {
  if (!text.trim()) return null;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw new Error(`${name} is not JSON: write an object such as {"x": {"type": "Float"}}`);
  }
}

export function PublishFunctionPage() {
  const [name, setName] = useState("");
  const [code, setCode] = useState(STARTER);
  const [requirements, setRequirements] = useState("");
  const [inputs, setInputs] = useState(STARTER_INPUTS);
  const [outputs, setOutputs] = useState(STARTER_OUTPUTS);
  const [visibility, setVisibility] = useState<Visibility>("private");
  const [busy, setBusy] = useState(false);
  const [refusal, setRefusal] = useState<Refusal | null>(null);
  const [built, setBuilt] = useState<SubmitAnswer["submitFunction"] | null>(null);
  const marked = refusedLines(refusal);
  const submit = () => {
    setRefusal(null);
    setBuilt(null);
    let ports: { inputs: unknown; outputs: unknown };
    try {
      ports = { inputs: parsePorts(inputs, "Inputs"), outputs: parsePorts(outputs, "Outputs") };
    } catch (e) {
      setRefusal(refusalOf(e));
      return;
    }
    setBusy(true);
    const lines = requirements.split("\n").map((r) => r.trim()).filter(Boolean);
    request(SubmitFunctionMutation, { name, code, requirements: lines, ...ports, visibility }).then(
      (answer) => {
        setBuilt(answer.submitFunction);
        setBusy(false);
      },
      (e: unknown) => {
        setRefusal(refusalOf(e));
        setBusy(false);
      },
    );
  };
  return (
    <Page title="Publish a function" actions={<Link to="/publish">Publish a package from files instead</Link>}>
      <p>The code is module <code>main</code>; the handler is <code>main:main</code>. The server validates it, installs the requirements, scans them and answers with the build or what it refused, line by line.</p>
      <form className="publish-function" aria-label="Publish a function" onSubmit={(e) => { e.preventDefault(); submit(); }}>
        <label>Name <input value={name} onChange={(e) => setName(e.target.value)} placeholder="moment" required /></label>
        <label>Visibility
          <select value={visibility} onChange={(e) => setVisibility(e.target.value as Visibility)}>
            {VISIBILITIES.map((v) => <option key={v} value={v}>{v}</option>)}
          </select>
        </label>
        <div className="code-editor">
          <label htmlFor="function-code">Code (main.py)</label>
          <div className="code-lines">
            <ol aria-hidden="true">{code.split("\n").map((_, i) => <li key={i} className={marked.has(i + 1) ? "refused" : undefined}>{i + 1}</li>)}</ol>
            <textarea id="function-code" value={code} spellCheck={false} rows={Math.max(8, code.split("\n").length + 1)} onChange={(e) => setCode(e.target.value)} onKeyDown={(e) => {
              if (e.key !== "Tab") return;
              e.preventDefault();
              const t = e.currentTarget;
              const at = t.selectionStart;
              setCode(code.slice(0, at) + "    " + code.slice(t.selectionEnd));
              requestAnimationFrame(() => t.setSelectionRange(at + 4, at + 4));
            }} />
          </div>
          {marked.size > 0 && <p className="problem">Refused at line {[...marked].sort((a, b) => a - b).join(", ")}.</p>}
        </div>
        <label>Requirements, one per line <textarea value={requirements} rows={3} spellCheck={false} onChange={(e) => setRequirements(e.target.value)} placeholder="numpy==2.1.0" /></label>
        <label>Inputs (typed ports, JSON) <textarea value={inputs} rows={3} spellCheck={false} onChange={(e) => setInputs(e.target.value)} /></label>
        <label>Outputs (typed ports, JSON) <textarea value={outputs} rows={3} spellCheck={false} onChange={(e) => setOutputs(e.target.value)} /></label>
        <button type="submit" disabled={busy}>{busy ? "Building…" : "Build and publish"}</button>
      </form>
      {refusal && <RefusalView refusal={refusal} />}
      {built && (
        <div role="status" className="message ok">
          <p>Built <Link to={`/functions/${built.functionId}`}>{name} {built.version}</Link> ({built.versionStatus}, {built.status}).</p>
          <Findings findings={built.vulnerabilities} />
        </div>
      )}
    </Page>
  );
}
