import { createContext, useContext } from "react";
import type { Catalog } from "./typeexpr";

export const CatalogContext = createContext<Catalog>(new Map());

export function useCatalog(): Catalog {
  return useContext(CatalogContext);
}
