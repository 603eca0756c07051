import { resolve } from "node:path";
import react from "@vitejs/plugin-react";
import { defineConfig } from "vitest/config";

const here = import.meta.dirname;

// Built into the Python package so `pip install calcgraph` serves the app at /ui/ and
// GraphiQL at /graphql, with every asset from the server itself (contract 4b).
export default defineConfig({
  base: "/ui/",
  plugins: [react()],
  build: {
    outDir: resolve(here, "../calcgraph/webui/dist"),
    emptyOutDir: true,
    chunkSizeWarningLimit: 6000,
    rolldownOptions: {
      // The share of build time spent in plugins is a figure for Vite's authors; on a busy
      // machine it prints a notice in every `make run` that no user can act on.
      checks: { bundlerTimings: false },
      input: {
        app: resolve(here, "index.html"),
        graphiql: resolve(here, "graphiql.html"),
      },
      onwarn(warning, warn) {
        // graphiql's react-compiler-runtime opens with "use no memo", a directive for the React
        // Compiler that bundling drops on purpose: nothing of ours to act on.
        if (warning.code === "MODULE_LEVEL_DIRECTIVE" && warning.id?.includes("/node_modules/")) {
          return;
        }
        warn(warning);
      },
    },
  },
  test: {
    environment: "jsdom",
    include: ["src/**/*.test.{ts,tsx}"],
  },
});
