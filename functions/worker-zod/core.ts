/** `zod/v4/core`, for `z.core`, less what the Worker never uses (see ./index.ts). */
import { absent } from "./absent";

export * from "zod/v4/core";
// Local exports win over the same names from `export *`.
export const locales = {};
export const compile = absent("compile");
export const compileFn = absent("compileFn");
export const withParser = absent("withParser");
export const INVALID = absent("INVALID");
export const ZodCompileAsyncError = absent("ZodCompileAsyncError");
export const ZodCompileUnsupportedError = absent("ZodCompileUnsupportedError");
