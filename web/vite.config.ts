import { resolve } from "node:path";
import react from "@vitejs/plugin-react";
import { defineConfig } from "vitest/config";

// Built into the Python package so `pip install calcgraph` serves the app at /ui/ and
// GraphiQL at /graphql, with every asset from the server itself (contract 4b).
export default defineConfig({
  base: "/ui/",
  plugins: [react()],
  build: {
    outDir: resolve(__dirname, "../calcgraph/webui/dist"),
    emptyOutDir: true,
    chunkSizeWarningLimit: 6000,
    rollupOptions: {
      input: {
        app: resolve(__dirname, "index.html"),
        graphiql: resolve(__dirname, "graphiql.html"),
      },
    },
  },
  test: {
    environment: "jsdom",
    include: ["src/**/*.test.{ts,tsx}"],
  },
});
