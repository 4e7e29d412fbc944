/** The exports of zod's `z` namespace, less what the Worker never uses (see ./index.ts). */
import { absent } from "./absent";
import * as core from "./core";

export * from "zod/v4";
// Local exports win over the same names from `export *`.
export { core };
export const locales = {};
export const compile = absent("compile");
export const withParser = absent("withParser");
export const INVALID = absent("INVALID");
export const ZodCompileAsyncError = absent("ZodCompileAsyncError");
export const ZodCompileUnsupportedError = absent("ZodCompileUnsupportedError");
export const fromJSONSchema = absent("fromJSONSchema");
/** `zod/v4` also exports `z` itself (the full namespace); zod's own `z` has no such member. */
export const z = undefined;
