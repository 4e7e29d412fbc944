/**
 * No path escapes, end to end, on Postgres and PGlite: git repositories whose
 * output directory, root directory or static files are symbolic links to the
 * data directory (committed, or made by the build), deployed through the API.
 * The static server never serves the file (404, or the deployment fails naming
 * the option); a linked rootDirectory fails the deployment naming it; the
 * canaries in DATA_DIR show up in no answer and no line. (Unit-level path checks
 * and the local-folder swap race are other suites'.)
 */
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { useCleanups } from "../../support/cleanups";
import { type Member, seedTenant } from "../../support/harness";
import { hostileFiles, sandboxApps, useSandboxServer } from "../../support/sandbox-apps";

const INDEX = "<!doctype html><title>site</title><h1>a static site</h1>\n";

for (const kind of ["postgres", "pglite"] as const) {
  describe(`sandbox (${kind}): no path leads out of the work directory`, () => {
    const s = useSandboxServer({ kind, prefix: `sbx_paths_${kind}` });
    const a = sandboxApps(s);
    const { cleanups } = useCleanups("ws-sbx-paths-");

    /** Deploys a git project of `files` and `links` with `options`; settles. */
    async function deployRepo(t: Member, files: Record<string, string>, links: Record<string, string>, options: Record<string, string>) {
      const { projectId } = await a.gitProject(t, files, links, { options });
      cleanups.push(() => a.retire(t, projectId));
      const d = await a.settle(t, (await a.deploy(t, projectId)).id);
      return { projectId, d };
    }

    /** Every canary of the data directory is absent from the texts. */
    const noCanary = (...texts: string[]) => {
      for (const text of texts) for (const secret of [s.canaries.ownerToken, s.canaries.secretKeys]) expect(text).not.toContain(secret);
    };

    /** What a request for each path gets from the deployment's static server: never 200 for a linked one. */
    async function served(projectId: string, paths: string[]) {
      const out: Record<string, { status: number; body: string }> = {};
      for (const path of paths) out[path] = await a.ask(projectId, path);
      return out;
    }

    it("an outputDirectory committed as a link to DATA_DIR: refused naming outputDirectory, or served as 404, never the file", async () => {
      const t = await seedTenant(s.server);
      const { projectId, d } = await deployRepo(t, { "index.html": INDEX }, { dist: s.dataDir }, { outputDirectory: "dist" });
      const { text } = await a.lines(d.id);
      console.log(`committed outputDirectory link (${kind}): ${d.status} ${d.failureReason ?? ""}`);
      noCanary(text, d.failureReason ?? "");
      if (d.status === "failed") expect(d.failureReason).toContain("outputDirectory");
      else {
        const answers = await served(projectId, ["/owner-token", "/secret-keys", "/"]);
        noCanary(JSON.stringify(answers));
        expect(answers["/owner-token"]!.status).toBe(404);
        expect(answers["/secret-keys"]!.status).toBe(404);
      }
    }, 60_000);

    it("an outputDirectory the build makes a link to DATA_DIR: never served", async () => {
      const t = await seedTenant(s.server);
      const { projectId, d } = await deployRepo(t, { "index.html": INDEX }, {}, { buildCommand: `ln -s ${s.dataDir} dist`, outputDirectory: "dist" });
      const { text } = await a.lines(d.id);
      console.log(`outputDirectory linked by the build (${kind}): ${d.status} ${d.failureReason ?? ""}`);
      noCanary(text, d.failureReason ?? "");
      if (d.status === "failed") expect(d.failureReason).toMatch(/output directory|outputDirectory/);
      else {
        const answers = await served(projectId, ["/owner-token", "/secret-keys", "/"]);
        noCanary(JSON.stringify(answers));
        expect(answers["/owner-token"]!.status).toBe(404);
      }
    }, 60_000);

    it("static files linked to DATA_DIR (committed, and made by the build) are 404; the site's own files are served", async () => {
      const t = await seedTenant(s.server);
      const { projectId, d } = await deployRepo(
        t,
        { "public/index.html": INDEX, "public/assets/app.css": "h1 { color: red }\n" },
        {
          "public/token.txt": join(s.dataDir, "owner-token"),
          "public/data": s.dataDir,
          "public/assets/keys": join(s.dataDir, "secret-keys"),
          "public/passwd.txt": "/etc/passwd",
          "public/up": "..",
        },
        { buildCommand: `ln -s ${join(s.dataDir, "owner-token")} public/late.txt && ln -s ${s.dataDir} public/late-dir`, outputDirectory: "public" },
      );
      expect(d.failureReason).toBeNull();
      expect(d.status).toBe("ready");
      const answers = await served(projectId, [
        "/",
        "/assets/app.css",
        "/token.txt",
        "/data/owner-token",
        "/data/secret-keys",
        "/data/",
        "/assets/keys",
        "/passwd.txt",
        "/up/public/index.html",
        "/late.txt",
        "/late-dir/owner-token",
        "/%2e%2e/owner-token",
        "/..%2fowner-token",
      ]);
      expect(answers["/"]).toEqual({ status: 200, body: INDEX });
      expect(answers["/assets/app.css"]!.status).toBe(200);
      for (const [path, answer] of Object.entries(answers)) if (path !== "/" && path !== "/assets/app.css") expect(answer.status, path).toBe(404);
      noCanary(JSON.stringify(answers), (await a.lines(d.id)).text);
      expect(JSON.stringify(answers)).not.toContain("root:x:0:0");
    }, 60_000);

    it("a rootDirectory that is, or passes through, a link to DATA_DIR fails the deployment naming rootDirectory", async () => {
      const t = await seedTenant(s.server);
      for (const [links, root] of [
        [{ sub: s.dataDir }, "sub"],
        [{ nested: s.dataDir }, "nested/deployments"],
      ] as const) {
        const { d } = await deployRepo(t, hostileFiles(), links, { rootDirectory: root, startCommand: "node hello.js" });
        expect(d.status, root).toBe("failed");
        expect(d.failureReason, root).toContain("rootDirectory");
        noCanary((await a.lines(d.id)).text, d.failureReason ?? "");
      }
    }, 60_000);
  });
}
