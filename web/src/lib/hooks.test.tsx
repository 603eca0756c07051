import { QueryClientProvider, type QueryClient } from "@tanstack/react-query";
import { act, cleanup, render, screen, waitFor } from "@testing-library/react";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { TypedDocumentString } from "../gql/graphql";
import { request } from "./api";
import { invalidateOnMutations, newQueryClient, useAsync } from "./hooks";

// A loader that answers "<key> #<n>" on its n-th call, when the test releases it.
function counter() {
  let calls = 0;
  const waiting: (() => void)[] = [];
  const load = (key: string) => () => {
    calls += 1;
    const answer = `${key} #${calls}`;
    return new Promise<string>((resolve) => waiting.push(() => resolve(answer)));
  };
  return {
    load,
    calls: () => calls,
    release: () => act(async () => { for (const go of waiting.splice(0)) go(); }),
  };
}

function Show({ load, name }: { load: () => Promise<string>; name: string }) {
  const { data, loading, refreshing } = useAsync(load, name);
  return <p>{loading ? "loading" : `${data}${refreshing ? " (refreshing)" : ""}`}</p>;
}

let client: QueryClient;
let stop: () => void;

beforeEach(() => {
  client = newQueryClient();
  stop = invalidateOnMutations(client);
});

afterEach(() => {
  cleanup();
  stop();
  client.clear();
  vi.unstubAllGlobals();
});

function mount(ui: React.ReactNode) {
  return render(<QueryClientProvider client={client}>{ui}</QueryClientProvider>);
}

describe("useAsync over the query cache", () => {
  it("shows the cached answer at once when a page comes back, then revalidates it", async () => {
    const source = counter();
    const first = mount(<Show load={source.load("jobs")} name="jobs:page1" />);
    expect(screen.getByText("loading")).toBeTruthy();
    await source.release();
    await screen.findByText("jobs #1");
    first.unmount();

    // Back to the list: the previous answer shows with no loading state while it refetches.
    mount(<Show load={source.load("jobs")} name="jobs:page1" />);
    expect(screen.getByText("jobs #1 (refreshing)")).toBeTruthy();
    expect(source.calls()).toBe(2);
    await source.release();
    await screen.findByText("jobs #2");
  });

  it("keeps answers apart by key", async () => {
    const source = counter();
    mount(<><Show load={source.load("a")} name="job:a" /><Show load={source.load("b")} name="job:b" /></>);
    await source.release();
    await screen.findByText("a #1");
    await screen.findByText("b #2");
  });

  it("refetches when the window regains focus", async () => {
    const source = counter();
    mount(<Show load={source.load("runs")} name="runs" />);
    await source.release();
    await screen.findByText("runs #1");
    act(() => {
      window.dispatchEvent(new Event("visibilitychange"));
      window.dispatchEvent(new Event("focus"));
    });
    await waitFor(() => expect(source.calls()).toBe(2));
    await source.release();
    await screen.findByText("runs #2");
  });

  it("refetches what is on screen after a mutation the server accepted, not after a query", async () => {
    const source = counter();
    mount(<Show load={source.load("workflows")} name="workflows" />);
    await source.release();
    await screen.findByText("workflows #1");
    const fetch = vi.fn(async () => new Response(JSON.stringify({ data: { ok: true } }), { status: 200 }));
    vi.stubGlobal("fetch", fetch);

    await act(() => request(new TypedDocumentString<{ ok: boolean }, Record<string, never>>("query Ok { ok }")));
    expect(source.calls()).toBe(1);

    await act(() => request(new TypedDocumentString<{ ok: boolean }, Record<string, never>>("mutation Save { ok }")));
    await waitFor(() => expect(source.calls()).toBe(2));
    await source.release();
    await screen.findByText("workflows #2");
    expect(fetch).toHaveBeenCalledTimes(2);
  });
});
