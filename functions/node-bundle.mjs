/**
 * How the self-hosted server is compiled for Node: one set of esbuild options,
 * used by `npm start` (functions/start.mjs builds functions/node.ts into dist/node/)
 * and by the benchmarks that must measure the code as `npm start` runs it
 * (bench/edge.ts builds its server process the same way: no loader, no helpers a
 * transpile-on-the-fly loader adds to every function).
 *
 * The output directory must sit two levels below the root, like the sources:
 * paths the code builds from import.meta.url (migrations/) still resolve.
 */

/** Loaded when first used or not bundled at all (native or optional modules). */
export const EXTERNAL = ["@electric-sql/pglite", "@aws-sdk/*", "nodemailer", "pg-native", "bufferutil", "utf-8-validate", "*/standalone.js"];

/**
 * esbuild options for `entryPoints` (name → source file) written to `outdir`.
 * @param {Record<string, string>} entryPoints
 * @param {string} outdir
 * @returns {import("esbuild").BuildOptions}
 */
export function nodeBundleOptions(entryPoints, outdir) {
  return {
    entryPoints,
    // Code split at dynamic imports: what is loaded only when used (shared/storage/s3-sdk.ts and the
    // AWS SDK it imports) stays out of start-up. Chunks sit beside the entry, at the same depth.
    outdir,
    splitting: true,
    chunkNames: "[name]-[hash]",
    outExtension: { ".js": ".mjs" },
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node22",
    external: EXTERNAL,
    // CommonJS dependencies bundled into this ES module still call require().
    banner: { js: 'import { createRequire as __createRequire } from "node:module"; const require = __createRequire(import.meta.url);' },
    sourcemap: "linked",
    logLevel: "error",
  };
}
