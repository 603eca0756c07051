// Filter controls of the lists, kept in the URL (a filtered list can be linked and comes back
// with the browser's Back). The server applies them (search, statuses, date ranges); the list
// sends what the person chose and shows the server's refusal when it refuses one.
import { useEffect, useState } from "react";
import { useSearchParams } from "react-router";

/** The URL's filter parameters, and a setter that keeps the others. */
export function useFilterParams(): [URLSearchParams, (key: string, value: string | string[]) => void] {
  const [params, setParams] = useSearchParams();
  const set = (key: string, value: string | string[]) => {
    const next = new URLSearchParams(params);
    next.delete(key);
    for (const v of Array.isArray(value) ? value : [value]) if (v) next.append(key, v);
    setParams(next, { replace: true });
  };
  return [params, set];
}

/** A search box that asks the server once typing pauses (300 ms), not at every key. */
export function SearchField({ label, value, onSearch, placeholder }: { label: string; value: string; onSearch: (value: string) => void; placeholder?: string }) {
  const [text, setText] = useState(value);
  useEffect(() => {
    if (text === value) return;
    const timer = setTimeout(() => onSearch(text), 300);
    return () => clearTimeout(timer);
  }, [text, value, onSearch]);
  return (
    <label>{label} <input type="search" value={text} placeholder={placeholder} onChange={(e) => setText(e.target.value)} onKeyDown={(e) => { if (e.key === "Enter") onSearch(text); }} /></label>
  );
}

/** From (inclusive) and before (exclusive) dates, as the server's `*After` / `*Before` take them. */
export function DateRange({ noun, after, before, onAfter, onBefore }: { noun: string; after: string; before: string; onAfter: (v: string) => void; onBefore: (v: string) => void }) {
  return (
    <>
      <label>{noun} on or after <input type="date" value={after} onChange={(e) => onAfter(e.target.value)} /></label>
      <label>{noun} before <input type="date" value={before} onChange={(e) => onBefore(e.target.value)} /></label>
    </>
  );
}
