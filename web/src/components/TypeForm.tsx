// Input forms generated from type expressions and the server's type catalog.
import { useId, useState, type FormEvent } from "react";
import { useCatalog } from "../lib/catalog";
import { compositeShape, formatTypeExpr, type TypeExpr } from "../lib/typeexpr";
import { buildInputs, emptyDraft, leafProblem, type Draft, type FieldProblem, type Port } from "../lib/values";

interface FieldProps {
  expr: TypeExpr;
  label: string;
  draft: Draft;
  onChange: (draft: Draft) => void;
}

function LeafField({ name, label, draft, onChange }: { name: string; label: string; draft: Draft; onChange: (d: Draft) => void }) {
  const catalog = useCatalog();
  const id = useId();
  const entry = catalog.get(name);
  if (name === "Boolean") {
    return (
      <div className="field">
        <input id={id} type="checkbox" checked={draft === true} onChange={(e) => onChange(e.target.checked)} />
        <label htmlFor={id}>{label}</label>
      </div>
    );
  }
  const problem = leafProblem(name, draft, catalog);
  const text = typeof draft === "string" ? draft : "";
  const hint =
    entry?.kind === "physical"
      ? `${name}: a number and a unit, e.g. 12 ${entry.unit ?? ""} (a bare number is in ${entry.unit ?? "SI"})`
      : name;
  return (
    <div className="field">
      <label htmlFor={id}>
        {label} <span className="type">{name}{entry?.unit ? ` [${entry.unit}]` : ""}</span>
      </label>
      <input
        id={id}
        type="text"
        inputMode={entry?.kind === "physical" || name === "String" ? undefined : "decimal"}
        value={text}
        placeholder={entry?.kind === "physical" ? `12 ${entry.unit ?? ""}` : name === "String" ? "" : "0"}
        title={hint}
        aria-invalid={problem ? true : undefined}
        aria-describedby={problem ? `${id}-problem` : undefined}
        onChange={(e) => onChange(e.target.value)}
      />
      {problem && (
        <span id={`${id}-problem`} className="problem" role="alert">
          {problem}
        </span>
      )}
    </div>
  );
}

export function TypeField({ expr, label, draft, onChange }: FieldProps) {
  const catalog = useCatalog();
  switch (expr.kind) {
    case "named": {
      const entry = catalog.get(expr.name);
      if (entry?.kind === "composite") {
        const shape = compositeShape(entry);
        if (shape.kind === "triple") {
          const parts = Array.isArray(draft) ? draft : ["", "", ""];
          return (
            <fieldset className="composite">
              <legend>{label} <span className="type">{expr.name}</span></legend>
              {["x", "y", "z"].map((axis, i) => (
                <LeafField
                  key={axis}
                  name={shape.element}
                  label={axis}
                  draft={parts[i] ?? ""}
                  onChange={(d) => onChange(parts.map((p, j) => (j === i ? d : p)))}
                />
              ))}
            </fieldset>
          );
        }
        if (shape.kind === "struct") {
          return <TypeField expr={shape.expr} label={`${label} (${expr.name})`} draft={draft} onChange={onChange} />;
        }
        return <MatrixField label={label} draft={draft} onChange={onChange} />;
      }
      return <LeafField name={expr.name} label={label} draft={draft} onChange={onChange} />;
    }
    case "struct": {
      const fields = typeof draft === "object" && !Array.isArray(draft) ? draft : {};
      return (
        <fieldset className="struct">
          <legend>{label}</legend>
          {expr.fields.map(([name, fieldExpr]) => (
            <TypeField
              key={name}
              expr={fieldExpr}
              label={name}
              draft={fields[name] ?? emptyDraft(fieldExpr, catalog)}
              onChange={(d) => onChange({ ...fields, [name]: d })}
            />
          ))}
        </fieldset>
      );
    }
    case "list": {
      const items = Array.isArray(draft) ? draft : [];
      return (
        <fieldset className="list">
          <legend>{label} <span className="type">{formatTypeExpr(expr)}</span></legend>
          {items.map((item, i) => (
            <div className="item" key={i}>
              <TypeField
                expr={expr.item}
                label={`${label}[${i}]`}
                draft={item}
                onChange={(d) => onChange(items.map((x, j) => (j === i ? d : x)))}
              />
              <button type="button" aria-label={`Remove ${label}[${i}]`} onClick={() => onChange(items.filter((_, j) => j !== i))}>
                Remove
              </button>
            </div>
          ))}
          <button type="button" onClick={() => onChange([...items, emptyDraft(expr.item, catalog)])}>
            Add to {label}
          </button>
        </fieldset>
      );
    }
    case "dict": {
      const entries = (Array.isArray(draft) ? draft : []) as Draft[][];
      const update = (i: number, entry: Draft[]) => onChange(entries.map((e, j) => (j === i ? entry : e)));
      return (
        <fieldset className="dict">
          <legend>{label} <span className="type">{formatTypeExpr(expr)}</span></legend>
          {entries.map((entry, i) => (
            <div className="item" key={i}>
              <DictKey label={`${label} key ${i + 1}`} value={typeof entry[0] === "string" ? entry[0] : ""} onChange={(k) => update(i, [k, entry[1] ?? ""])} />
              <TypeField
                expr={expr.value}
                label={`${label}[${typeof entry[0] === "string" && entry[0] ? entry[0] : i + 1}]`}
                draft={entry[1] ?? emptyDraft(expr.value, catalog)}
                onChange={(d) => update(i, [entry[0] ?? "", d])}
              />
              <button type="button" aria-label={`Remove ${label} entry ${i + 1}`} onClick={() => onChange(entries.filter((_, j) => j !== i))}>
                Remove
              </button>
            </div>
          ))}
          <button type="button" onClick={() => onChange([...entries, ["", emptyDraft(expr.value, catalog)]])}>
            Add entry to {label}
          </button>
        </fieldset>
      );
    }
  }
}

function DictKey({ label, value, onChange }: { label: string; value: string; onChange: (v: string) => void }) {
  const id = useId();
  return (
    <div className="field">
      <label htmlFor={id}>{label}</label>
      <input id={id} type="text" value={value} onChange={(e) => onChange(e.target.value)} />
    </div>
  );
}

function MatrixField({ label, draft, onChange }: { label: string; draft: Draft; onChange: (d: Draft) => void }) {
  const id = useId();
  return (
    <div className="field">
      <label htmlFor={id}>
        {label} <span className="type">Matrix (rows separated by ';')</span>
      </label>
      <textarea id={id} rows={3} value={typeof draft === "string" ? draft : ""} placeholder="1 0; 0 1" onChange={(e) => onChange(e.target.value)} />
    </div>
  );
}

export interface FormPort extends Port {
  description?: string;
}

/** A whole input form: one field per port; `onSubmit` gets the inputs object, or nothing is
 * sent while a field is wrong. */
export function InputsForm({
  ports,
  drafts,
  onDrafts,
  onSubmit,
  submitLabel,
  busy,
}: {
  ports: readonly FormPort[];
  drafts: Record<string, Draft>;
  onDrafts: (d: Record<string, Draft>) => void;
  onSubmit: (inputs: Record<string, unknown>) => void;
  submitLabel: string;
  busy?: boolean;
}) {
  const catalog = useCatalog();
  const [problems, setProblems] = useState<FieldProblem[]>([]);
  const submit = (event: FormEvent) => {
    event.preventDefault();
    const built = buildInputs(ports, drafts, catalog);
    if (!built.ok) {
      setProblems(built.problems);
      return;
    }
    setProblems([]);
    onSubmit(built.inputs);
  };
  return (
    <form className="inputs-form" onSubmit={submit} noValidate>
      {ports.map((port) => (
        <div key={port.name} className="port">
          <TypeField
            expr={port.expr}
            label={port.name}
            draft={drafts[port.name] ?? emptyDraft(port.expr, catalog)}
            onChange={(d) => onDrafts({ ...drafts, [port.name]: d })}
          />
          {port.description && <p className="description">{port.description}</p>}
        </div>
      ))}
      {problems.length > 0 && (
        <ul className="problems" role="alert" aria-label="Problems in the form">
          {problems.map((p) => (
            <li key={p.path}>
              <code>{p.path}</code>: {p.message}
            </li>
          ))}
        </ul>
      )}
      <button type="submit" disabled={busy}>
        {submitLabel}
      </button>
    </form>
  );
}
