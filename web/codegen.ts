import type { CodegenConfig } from "@graphql-codegen/cli";

// Operation types come from the committed schema: a schema change that breaks a query in the
// app fails `npm run build`. Each operation lives beside the component that sends it, in a
// `<Component>.graphql.ts` file (as Dagster's UI keeps its `*.graphql` documents).
const config: CodegenConfig = {
  schema: "../schema.graphql",
  documents: ["src/**/*.graphql.ts"],
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
