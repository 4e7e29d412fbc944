/** The exports of zod's `z` namespace, with the translations left out (see ./index.ts). */
import * as core from "./core";

export * from "zod/v4";
// Local exports win over the same names from `export *`.
export { core };
export const locales = {};
/** `zod/v4` also exports `z` itself (the full namespace); zod's own `z` has no such member. */
export const z = undefined;
