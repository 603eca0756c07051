import type { CodegenConfig } from "@graphql-codegen/cli";

// Operation types come from the committed schema: a schema change that breaks a query in the
// app fails `npm run build`.
const config: CodegenConfig = {
  schema: "../schema.graphql",
  documents: ["src/**/*.{ts,tsx}", "!src/gql/**"],
  ignoreNoDocuments: false,
  generates: {
    "src/gql/": {
      preset: "client",
      config: {
        documentMode: "string",
        enumsAsTypes: true,
        useTypeImports: true,
        scalars: { JSON: "unknown", DateTime: "string" },
      },
      presetConfig: { fragmentMasking: false },
    },
  },
};
export default config;
