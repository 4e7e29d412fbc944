/**
 * `node functions/start.mjs --build-only --template` (run by npm's postinstall):
 * makes the embedded database's template (shared/db/pglite-template.ts) at install
 * time, so that the first `npm start` on a fresh data directory copies it (~0.1 s)
 * instead of running PGlite's initdb and every migration (~3.5 s). A failure here
 * never fails the install: the first fresh start makes the template instead.
 */
import { ensurePgliteTemplate } from "../../shared/db/pglite";

const started = performance.now();
try {
  const result = await ensurePgliteTemplate();
  if (result === "made") console.log(`Embedded database template made in ${((performance.now() - started) / 1000).toFixed(1)} s (dist/pglite-template/).`);
} catch (e) {
  console.log(`Embedded database template not made (${e instanceof Error ? e.message : e}); the first start on a fresh data directory makes it.`);
}
