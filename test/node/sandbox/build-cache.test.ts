/**
 * A project's build cache (functions/self-hosted/runner/build-cache.ts), with
 * the sandbox on, on Postgres and PGlite: what one build of a project leaves in
 * ~/.cache (npm's cache, Node's compile cache) is there for its next build and
 * for its app, never for another project; on the host it is the project's
 * uid's, 0700; a cache over half of diskGb is emptied before a build; the
 * caches of deleted projects go when the runner starts.
 */
import { mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { cacheDirOf, readyCache, sweepCaches } from "../../../functions/self-hosted/runner/build-cache";
import { useCleanups } from "../../support/cleanups";
import { newId } from "../../../shared/ids";
import { expectStatus, seedTenant } from "../../support/harness";
import { hostileFiles, sandboxApps, useSandboxServer } from "../../support/sandbox-apps";

/** A build that counts its runs in the cache and says what it found; an app that says what the cache holds. */
const COUNTING_BUILD =
  'n=$(cat "$HOME/.cache/builds" 2>/dev/null || echo 0); n=$((n + 1)); echo "$n" > "$HOME/.cache/builds"; echo "build number $n"; echo "compile cache at $NODE_COMPILE_CACHE, npm cache at $npm_config_cache"';
const CACHE_APP = `require("node:http").createServer((_q, res) => res.end(require("node:fs").readFileSync(process.env.HOME + "/.cache/builds", "utf8").trim())).listen(Number(process.env.PORT), "127.0.0.1");`;

for (const kind of ["postgres", "pglite"] as const) {
  describe(`build cache (${kind})`, () => {
    const s = useSandboxServer({ kind, prefix: `sbx_cache_${kind}` });
    const a = sandboxApps(s);
    const { cleanups } = useCleanups("ws-sbx-cache-");

    it("a project's next build and its app find what its last build cached; another project's build starts from an empty cache", async () => {
      const t = await seedTenant(s.server);
      const setup = { options: { buildCommand: COUNTING_BUILD, startCommand: "node cache-app.js" } };
      const files = hostileFiles({ "cache-app.js": CACHE_APP });
      const first = await a.uploadDeploy(t, files, setup);
      cleanups.push(() => a.retire(t, first.projectId));
      expect((await a.settle(t, first.deployment.id)).status).toBe("ready");
      expect((await a.lines(first.deployment.id)).text).toContain("build number 1");

      const second = await a.deploy(t, first.projectId);
      const d = await a.settle(t, second.id);
      expect(d.failureReason).toBeNull();
      const { text } = await a.lines(second.id);
      expect(text).toContain("build number 2");
      expect(text).toContain("compile cache at /home/app/.cache/node-compile-cache, npm cache at /home/app/.cache/npm");
      // The app sees the same cache.
      expect((await a.ask(first.projectId)).body).toBe("2");

      // On the host: the project's uid's alone.
      const dir = cacheDirOf(s.dataDir, first.projectId);
      const info = statSync(dir);
      expect(info.uid).toBe(await a.uidOf(first.projectId));
      expect(info.mode & 0o777).toBe(0o700);

      const other = await a.uploadDeploy(t, files, setup);
      cleanups.push(() => a.retire(t, other.projectId));
      expect((await a.settle(t, other.deployment.id)).status).toBe("ready");
      expect((await a.lines(other.deployment.id)).text).toContain("build number 1");
      expect((await a.ask(other.projectId)).body).toBe("1");
    }, 120_000);
  });
}

describe("build cache: bounds and sweep", () => {
  const { cleanups } = useCleanups("ws-cache-unit-");

  it("a cache over its cap is emptied (and its size reported), one under it is kept, and either is left owned by the given uid", async () => {
    const root = mkdtempSync(join(tmpdir(), "ws-cache-"));
    cleanups.push(() => rmSync(root, { recursive: true, force: true }));
    const dir = join(root, "prj_a");
    expect(await readyCache(dir, 1024 * 1024, undefined)).toBeUndefined();
    writeFileSync(join(dir, "small"), Buffer.alloc(64 * 1024, 1));
    expect(await readyCache(dir, 1024 * 1024, 4242)).toBeUndefined();
    expect(statSync(join(dir, "small")).size).toBe(64 * 1024);
    expect(statSync(dir).uid).toBe(4242);

    mkdirSync(join(dir, "npm"));
    writeFileSync(join(dir, "npm", "big"), Buffer.alloc(2 * 1024 * 1024, 1));
    const cleared = await readyCache(dir, 1024 * 1024, 4242);
    expect(cleared).toBeGreaterThan(2 * 1024 * 1024);
    expect(statSync(join(dir, "small"), { throwIfNoEntry: false })).toBeUndefined();
    expect(statSync(dir).isDirectory()).toBe(true);
    expect(statSync(dir).uid).toBe(4242);
  });
});

describe("build cache: sweep (postgres)", () => {
  const s = useSandboxServer({ kind: "postgres", prefix: "sbx_cache_sweep" });
  const a = sandboxApps(s);

  it("removes the caches of projects that no longer exist and keeps the others", async () => {
    const t = await seedTenant(s.server);
    const { id } = await expectStatus<{ id: string }>(await a.call(t, "/api/projects", { json: { name: "kept" } }), 201);
    const kept = cacheDirOf(s.dataDir, id);
    const gone = cacheDirOf(s.dataDir, newId("prj"));
    for (const dir of [kept, gone]) {
      mkdirSync(dir, { recursive: true });
      writeFileSync(join(dir, "x"), "x");
    }
    await sweepCaches(s.server.db, s.dataDir);
    expect(statSync(join(kept, "x")).isFile()).toBe(true);
    expect(statSync(gone, { throwIfNoEntry: false })).toBeUndefined();
  });
});
