// The app itself, loaded by main.tsx once a run page's first read is on its way.
import { StrictMode } from "react";
import { createRoot } from "react-dom/client";
import { BrowserRouter } from "react-router";
import { QueryClientProvider } from "@tanstack/react-query";
import { App } from "./App";
import { invalidateOnMutations, queryClient } from "./lib/hooks";

const root = document.getElementById("root");
if (root) {
  invalidateOnMutations(queryClient);
  createRoot(root).render(
    <StrictMode>
      <QueryClientProvider client={queryClient}>
        <BrowserRouter basename="/ui">
          <App />
        </BrowserRouter>
      </QueryClientProvider>
    </StrictMode>,
  );
}
