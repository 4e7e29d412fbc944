/**
 * `npm start`: runs the self-hosted server (functions/node.ts) from compiled
 * JavaScript, in this very process (so signals reach the server itself).
 *
 * The bundle lives in dist/node/ (gitignored) with a stamp: the SHA-256 of every
 * file under functions/, shared/ and migrations/ plus package.json and package-lock.json. When
 * the stamp differs (first start, a code change, a dependency update) the bundle
 * is rebuilt with esbuild before it is run, so a stale build never runs.
 * Reading and hashing those ~3 MB costs ~70 ms of every start, so the stamp is
 * kept with a quick one beside it (every input's path, size and modification
 * time, ~5 ms): when the quick one matches, no input was written since the last
 * stamp and the content hash is skipped; otherwise the content decides.
 * Dependencies stay in node_modules (imported, not bundled).
 *
 *   node functions/start.mjs                  build if stale, then serve
 *   node functions/start.mjs --build-only     build if stale, then exit
 *   node functions/start.mjs --build-only --force   rebuild whatever the stamp
 *   node functions/start.mjs --build-only --template   build if stale, then make the
 *       embedded database's template (npm's postinstall: never fails the install)
 */
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { nodeBundleOptions } from "./node-bundle.mjs";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
// Two levels below the root, like the sources: paths the code builds from import.meta.url (migrations/) still resolve.
const OUT_DIR = join(ROOT, "dist", "node");
const BUNDLE = join(OUT_DIR, "server.mjs");
const TEMPLATE_ENTRY = join(OUT_DIR, "prepare-template.mjs");
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

/** Every input file, relative to the root, sorted. */
function inputFiles() {
  const files = [...INPUT_FILES];
  for (const dir of INPUT_DIRS) {
    // A checkout without one of them (a stripped-down copy) still stamps what it has.
    if (!existsSync(join(ROOT, dir))) continue;
    for (const entry of readdirSync(join(ROOT, dir), { recursive: true, withFileTypes: true })) {
      if (entry.isFile()) files.push(relative(ROOT, join(entry.parentPath, entry.name)));
    }
  }
  return files.sort();
}

/** The stamp of the sources as they are now: a hash of every input file's path and content. */
function sourceStamp(files) {
  const hash = createHash("sha256");
  for (const file of files) {
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

/** A hash of every input file's path, size and modification time (nanoseconds): changes whenever a file is written. */
function quickStamp(files) {
  const hash = createHash("sha256");
  for (const file of files) {
    const st = statSync(join(ROOT, file), { bigint: true, throwIfNoEntry: false });
    hash.update(`${file}\0${st ? `${st.size}\0${st.mtimeNs}` : "-"}\n`);
  }
  return hash.digest("hex");
}

function readStamp() {
  try {
    const [stamp, quick] = readFileSync(STAMP, "utf8").trim().split("\n");
    return { stamp, quick };
  } catch {
    return {};
  }
}

function writeStamp(stamp, quick) {
  const suffix = `.${process.pid}.tmp`;
  writeFileSync(STAMP + suffix, `${stamp}\n${quick}\n`);
  renameSync(STAMP + suffix, STAMP);
}

/** The server, and the install-time template maker where the checkout has it. */
function entryPoints() {
  const entries = { server: join(ROOT, "functions", "node.ts") };
  const template = join(ROOT, "functions", "self-hosted", "prepare-template.ts");
  if (existsSync(template)) entries["prepare-template"] = template;
  return entries;
}

/** Bundles functions/node.ts into dist/node/; every file is written aside then renamed, the stamp last. */
async function build(stamp, quick) {
  const { build: esbuild, stop } = await import("esbuild");
  // esbuild's service process would otherwise stay a child of the server for its whole life.
  const result = await esbuild({
    ...nodeBundleOptions(entryPoints(), OUT_DIR),
    write: false,
  }).finally(() => stop());
  mkdirSync(OUT_DIR, { recursive: true });
  const suffix = `.${process.pid}.tmp`;
  for (const file of result.outputFiles) writeFileSync(file.path + suffix, file.contents);
  for (const file of result.outputFiles) renameSync(file.path + suffix, file.path);
  writeStamp(stamp, quick);
}

const args = process.argv.slice(2);
const files = inputFiles();
const quick = quickStamp(files);
const last = readStamp();
if (args.includes("--force") || last.quick !== quick) {
  const stamp = sourceStamp(files);
  try {
    if (args.includes("--force") || last.stamp !== stamp) await build(stamp, quick);
    // Written again but not changed (a checkout, a touch): the same build, under the new quick stamp.
    else writeStamp(stamp, quick);
  } catch (e) {
    rmSync(STAMP, { force: true });
    console.error(`Could not build the server into ${relative(ROOT, OUT_DIR)}/: ${e instanceof Error ? e.message : e}`);
    // At install time a failed build is not the install's failure: the first start builds again and says why.
    process.exit(args.includes("--template") ? 0 : 1);
  }
}
if (args.includes("--template") && existsSync(TEMPLATE_ENTRY)) await import(pathToFileURL(TEMPLATE_ENTRY).href);
if (!args.includes("--build-only")) await import(pathToFileURL(BUNDLE).href);
