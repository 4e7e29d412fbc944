/**
 * A fresh embedded database from a template: PGlite's initdb costs ~2.5 s and
 * replaying every migration ~1 s more, on each new data directory. Both give the
 * same files every time for one PGlite version and one set of migrations, so the
 * first fresh start makes a migrated, empty data directory once (the template)
 * and every fresh data directory after it starts as a copy (~0.1 s).
 *
 * The template holds nothing of an instance: no row (the migrations insert only
 * rows derived from existing ones, and there are none), no key, no owner; the
 * keyring check value and the first owner are written after the copy, as on an
 * initdb'd database. It is keyed by the PGlite version and the code's migrations
 * (a template of other code is never used; an upgrade makes a new one). Where it
 * cannot be written (a read-only install), the data directory is initdb'd in
 * place as before.
 */
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { createHash } from "node:crypto";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import { CODE_MIGRATIONS } from "./migration-level";

/**
 * Templates sit under dist/ (build output, gitignored). Two levels below the root
 * from the sources (shared/db/) and from the bundle (dist/node/) alike.
 */
export const TEMPLATE_ROOT = fileURLToPath(new URL("../../dist/pglite-template/", import.meta.url));

/** A data directory PGlite has initialised holds PG_VERSION. */
export const isInitialised = (dataDir: string) => existsSync(join(dataDir, "PG_VERSION"));

function pgliteVersion(): string {
  const entry = createRequire(import.meta.url).resolve("@electric-sql/pglite");
  // dist/index.js → the package's own package.json (its exports do not list it).
  return (JSON.parse(readFileSync(join(dirname(entry), "..", "package.json"), "utf8")) as { version: string }).version;
}

/** What a template is valid for: the PGlite version and every migration of the code (tag and journal time). */
export function templateKey(): string {
  const migrations = CODE_MIGRATIONS.map((m) => `${m.tag}@${m.when}`).join(",");
  return createHash("sha256").update(`pglite ${pgliteVersion()}\0${migrations}`).digest("hex").slice(0, 16);
}

export type Seeded = "existing" | "template" | "initdb";

/**
 * Prepares `dataDir` for PGlite: an initialised one is left as it is; an empty
 * or missing one becomes a copy of the template, made first with `make` (which
 * initialises and migrates the directory it is given, then closes it) when there
 * is none for this key. "initdb": no template could be made; PGlite will create
 * the directory itself.
 */
export async function seedDataDir(dataDir: string, make: (dir: string) => Promise<void>, root = TEMPLATE_ROOT): Promise<Seeded> {
  if (isInitialised(dataDir)) return "existing";
  const key = templateKey();
  const template = join(root, key);
  try {
    if (!isInitialised(template)) await makeTemplate(template, make);
    mkdirSync(dataDir, { recursive: true, mode: 0o700 });
    cpSync(template, dataDir, { recursive: true });
    return "template";
  } catch {
    // A half-copied directory must not pass for an initialised one.
    if (existsSync(dataDir)) for (const entry of readdirSync(dataDir)) rmSync(join(dataDir, entry), { recursive: true, force: true });
    return "initdb";
  }
}

/**
 * Makes the template for this key when there is none (npm's postinstall, through
 * functions/self-hosted/prepare-template.ts), so that even the first start copies it.
 * "made" or "existing".
 */
export async function ensureTemplate(make: (dir: string) => Promise<void>, root = TEMPLATE_ROOT): Promise<"made" | "existing"> {
  const template = join(root, templateKey());
  if (isInitialised(template)) return "existing";
  await makeTemplate(template, make);
  return "made";
}

/** Made aside and renamed into place: a concurrent start, or one killed half-way, never sees a partial template. */
async function makeTemplate(template: string, make: (dir: string) => Promise<void>): Promise<void> {
  const root = dirname(template);
  const aside = `${template}.${process.pid}.${Date.now()}.tmp`;
  mkdirSync(root, { recursive: true });
  try {
    await make(aside);
    try {
      renameSync(aside, template);
    } catch (e) {
      // Another start renamed its own first: theirs is as good.
      if (!isInitialised(template)) throw e;
    }
  } finally {
    rmSync(aside, { recursive: true, force: true });
  }
  // Templates of other keys (an earlier PGlite or migration set) are not used again.
  for (const entry of readdirSync(root)) {
    if (entry !== template.slice(root.length + 1) && !entry.endsWith(".tmp")) rmSync(join(root, entry), { recursive: true, force: true });
  }
}
