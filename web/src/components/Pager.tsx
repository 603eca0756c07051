// Cursor pagination with the API's nextCursor: "Next page" follows it, "Previous page" goes
// back to the cursor that led here (kept in a stack: a cursor only goes forward).
import { useState } from "react";

export function useCursorPages(resetKey: string) {
  const [state, setState] = useState<{ key: string; stack: (string | null)[] }>({ key: resetKey, stack: [null] });
  const stack = state.key === resetKey ? state.stack : [null];
  return {
    cursor: stack[stack.length - 1] ?? null,
    page: stack.length,
    next: (cursor: string) => setState({ key: resetKey, stack: [...stack, cursor] }),
    previous: () => setState({ key: resetKey, stack: stack.slice(0, -1) }),
  };
}

export function Pager({ page, nextCursor, onNext, onPrevious, shown, noun }: {
  page: number;
  nextCursor: string | null | undefined;
  onNext: (cursor: string) => void;
  onPrevious: () => void;
  shown: number;
  noun: string;
}) {
  if (page === 1 && !nextCursor) return null;
  return (
    <nav className="pager" aria-label={`Pages of ${noun}`}>
      <button type="button" onClick={onPrevious} disabled={page === 1}>Previous page</button>
      <span>Page {page} ({shown} {noun})</span>
      <button type="button" onClick={() => nextCursor && onNext(nextCursor)} disabled={!nextCursor}>Next page</button>
    </nav>
  );
}
