/** `zod/v4/core` without its translations, for `z.core` (see ./index.ts). */
export * from "zod/v4/core";
// A local export wins over the same name from `export *`.
export const locales = {};
