/**
 * `npm start`: runs the self-hosted server (functions/node.ts) from compiled
 * JavaScript, in this very process (so signals reach the server itself).
 *
 * The bundle lives in dist/node/ (gitignored) with a stamp: the SHA-256 of every
 * file under functions/, shared/ and migrations/ plus package.json and package-lock.json. When
 * the stamp differs (first start, a code change, a dependency update) the bundle
 * is rebuilt with esbuild before it is run, so a stale build never runs.
 * Dependencies stay in node_modules (imported, not bundled).
 *
 *   node functions/start.mjs                  build if stale, then serve
 *   node functions/start.mjs --build-only     build if stale, then exit
 *   node functions/start.mjs --build-only --force   rebuild whatever the stamp
 */
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { nodeBundleOptions } from "./node-bundle.mjs";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
// Two levels below the root, like the sources: paths the code builds from import.meta.url (migrations/) still resolve.
const OUT_DIR = join(ROOT, "dist", "node");
const BUNDLE = join(OUT_DIR, "server.mjs");
const STAMP = join(OUT_DIR, "stamp");
// migrations/: the journal is bundled (the migration level readiness and start-up compare against).
const INPUT_DIRS = ["functions", "shared", "migrations"];
const INPUT_FILES = ["package.json", "package-lock.json"];
/**
 * Dependencies are bundled too (resolving hundreds of small ES modules at every
 * start costs more than the code), except: PGlite (loads its wasm and data files
 * beside its modules), what is loaded only when configured (AWS SDK, nodemailer),
 * optional native add-ons, and the Worker's Text-module import of the docs script
 * (read from node_modules on Node, never loaded here).
 */

/** The stamp of the sources as they are now: a hash of every input file's path and content. */
function sourceStamp() {
  const hash = createHash("sha256");
  const files = [...INPUT_FILES];
  for (const dir of INPUT_DIRS) {
    // A checkout without one of them (a stripped-down copy) still stamps what it has.
    if (!existsSync(join(ROOT, dir))) continue;
    for (const entry of readdirSync(join(ROOT, dir), { recursive: true, withFileTypes: true })) {
      if (entry.isFile()) files.push(relative(ROOT, join(entry.parentPath, entry.name)));
    }
  }
  for (const file of files.sort()) {
    let content;
    try {
      content = readFileSync(join(ROOT, file));
    } catch {
      content = Buffer.alloc(0); // package-lock.json may be absent
    }
    hash.update(`${file}\0${content.length}\0`).update(content);
  }
  return hash.digest("hex");
}

function readStamp() {
  try {
    return readFileSync(STAMP, "utf8").trim();
  } catch {
    return undefined;
  }
}

/** Bundles functions/node.ts into dist/node/; every file is written aside then renamed, the stamp last. */
async function build(stamp) {
  const { build: esbuild, stop } = await import("esbuild");
  // esbuild's service process would otherwise stay a child of the server for its whole life.
  const result = await esbuild({ ...nodeBundleOptions({ server: join(ROOT, "functions", "node.ts") }, OUT_DIR), write: false }).finally(() => stop());
  mkdirSync(OUT_DIR, { recursive: true });
  const suffix = `.${process.pid}.tmp`;
  for (const file of result.outputFiles) writeFileSync(file.path + suffix, file.contents);
  for (const file of result.outputFiles) renameSync(file.path + suffix, file.path);
  writeFileSync(STAMP + suffix, `${stamp}\n`);
  renameSync(STAMP + suffix, STAMP);
}

const args = process.argv.slice(2);
const stamp = sourceStamp();
if (args.includes("--force") || readStamp() !== stamp) {
  try {
    await build(stamp);
  } catch (e) {
    rmSync(STAMP, { force: true });
    console.error(`Could not build the server into ${relative(ROOT, OUT_DIR)}/: ${e instanceof Error ? e.message : e}`);
    process.exit(1);
  }
}
if (!args.includes("--build-only")) await import(pathToFileURL(BUNDLE).href);
