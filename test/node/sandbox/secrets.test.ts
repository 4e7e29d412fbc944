/**
 * The server's secrets never reach a build or an app, on Postgres and PGlite:
 * SECRET_KEYS, DATABASE_URL, WORKSPACE_OWNER_TOKEN and CLOUD_TOKEN (canaries,
 * set in the server's configuration and in its process environment) are in no
 * build or app environment, in no line they print, and /proc/1 inside is the
 * sandbox's, not the server's. And the clone token of a private repository is
 * in no /proc/<pid>/environ or cmdline while the fetch runs (held at the git
 * host: checked from the host side, on every process of the deployment's
 * cgroups and of the whole machine), in no file of the work directory, and in
 * no stored line.
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { DEFAULT_BUILD_ENV_PASSTHROUGH } from "../../../functions/self-hosted/config";
import { useCleanups } from "../../support/cleanups";
import { seedTenant } from "../../support/harness";
import { allHostPids, hostileFiles, hostPidsOf, procText, sandboxApps, useSandboxServer } from "../../support/sandbox-apps";
import { TEST_SECRET_KEYS } from "../../support/test-keys";

const CANARY = {
  WORKSPACE_OWNER_TOKEN: `owner-token-canary-${"9".repeat(12)}-${Math.random().toString(36).slice(2, 14)}`,
  CLOUD_TOKEN: `cloud-token-canary-${Math.random().toString(36).slice(2, 14)}`,
  DATABASE_URL: `postgres://canary:db-password-canary-${Math.random().toString(36).slice(2, 10)}@127.0.0.1:9/none`,
  SECRET_KEYS: TEST_SECRET_KEYS,
};
// The server's own process environment holds them too (as `npm start` would have them): nothing may pass them on.
const saved = Object.fromEntries(Object.keys(CANARY).map((k) => [k, process.env[k]]));
Object.assign(process.env, CANARY);
afterAll(() => {
  for (const [k, v] of Object.entries(saved)) {
    if (v === undefined) delete process.env[k];
    else process.env[k] = v;
  }
});

const SERVER_ENV = { WORKSPACE_OWNER_TOKEN: CANARY.WORKSPACE_OWNER_TOKEN, CLOUD_API_URL: "http://127.0.0.1:9", CLOUD_TOKEN: CANARY.CLOUD_TOKEN };

/** What a build or an app may find in its environment: the runner's base, npm's quiet settings, the passthrough, the project's variables, what the shell adds. */
const ALLOWED = new Set([
  "PATH",
  "HOME",
  "LANG",
  "PORT",
  "NODE_ENV",
  "npm_config_update_notifier",
  "npm_config_globalconfig",
  "npm_config_fund",
  "npm_config_audit",
  // The project's build cache (build-cache.ts).
  "npm_config_cache",
  "NODE_COMPILE_CACHE",
  "CI",
  "PWD",
  "SHLVL",
  "_",
  "OLDPWD",
  // What BUILD_ENV_PASSTHROUGH lets through by default (the server's values, where it has them).
  ...DEFAULT_BUILD_ENV_PASSTHROUGH,
  "PROBE_PATHS",
  "SERVER_PID",
]);

for (const kind of ["postgres", "pglite"] as const) {
  describe(`sandbox (${kind}): the server's secrets never reach a child`, () => {
    const s = useSandboxServer({ kind, prefix: `sbx_secrets_${kind}`, env: SERVER_ENV });
    const a = sandboxApps(s);
    const { cleanups } = useCleanups("ws-sbx-secrets-");

    it("a build and an app that print their whole environment and every /proc they see show none of SECRET_KEYS, DATABASE_URL, WORKSPACE_OWNER_TOKEN, CLOUD_TOKEN", async () => {
      const t = await seedTenant(s.server);
      const serverEnviron = readFileSync("/proc/self/environ", "latin1");
      const { projectId, deployment } = await a.uploadDeploy(t, hostileFiles(), {
        options: { buildCommand: "node print-env.js", startCommand: "node probe.js" },
        vars: [
          { key: "SERVER_PID", value: String(process.pid) },
          { key: "PROBE_PATHS", value: JSON.stringify([`/proc/${process.pid}/environ`, "/proc/1/environ"]) },
        ],
      });
      cleanups.push(() => a.retire(t, projectId));
      const d = await a.settle(t, deployment.id);
      expect(d.failureReason).toBeNull();
      expect(d.status).toBe("ready");
      const answer = await a.ask(projectId);
      const report = JSON.parse(answer.body) as { env: Record<string, string>; reads: Array<{ path: string; ok: boolean; head?: string }> };
      const { rows, text } = await a.lines(d.id);
      const all = `${answer.body}\n${text}`;

      for (const [name, value] of Object.entries(CANARY)) expect(all, name).not.toContain(value);
      // The database the server really uses (Postgres: its URL; PGlite: none).
      if (s.databaseUrl) expect(all).not.toContain(s.databaseUrl);
      // The app's environment: nothing but what the runner gives.
      for (const key of Object.keys(report.env)) expect(ALLOWED.has(key), `the app got ${key}`).toBe(true);
      // The build's: every line `build env KEY=…` names an allowed key.
      const buildKeys = rows.filter((r) => r.kind === "build" && r.message.startsWith("build env ")).map((r) => r.message.slice(10).split("=")[0]!);
      expect(buildKeys).toContain("PATH");
      for (const key of buildKeys) expect(ALLOWED.has(key), `the build got ${key}`).toBe(true);
      // /proc/1 inside is the sandbox's init (root's, unreadable), never the server; the server's pid is not there.
      const proc1 = report.reads.find((r) => r.path === "/proc/1/environ")!;
      if (proc1.ok) expect(proc1.head).not.toBe(serverEnviron.slice(0, 8192));
      expect(report.reads.find((r) => r.path === `/proc/${process.pid}/environ`)?.ok).toBe(false);
      expect(rows.some((r) => r.message.startsWith("build proc 1 environ: ") && !r.message.endsWith("EACCES") && !r.message.endsWith("ENOENT"))).toBe(false);
    }, 60_000);

    it.skipIf(kind === "pglite")(
      "the clone token is in no process's environ or cmdline during the fetch, in no file of the work directory, in no stored line",
      async () => {
        const t = await seedTenant(s.server);
        const { projectId } = await a.gitProject(t, hostileFiles(), {}, { options: { startCommand: "node hello.js" } }, { private: true });
        cleanups.push(() => a.retire(t, projectId));
        // The runner's fetch (not the API's ls-remote while queueing) is held at the host.
        const held = s.proxy.holdNextFetch();
        const queued = await a.deploy(t, projectId);
        cleanups.push(() => s.proxy.release());
        await Promise.race([held, new Promise((_, reject) => setTimeout(() => reject(new Error("the fetch never reached the git host")), 30_000))]);

        const token = s.cloneToken;
        const inDeployment = hostPidsOf(s, queued.id);
        const cmdlines = inDeployment.map((pid) => procText(pid, "cmdline") ?? "");
        // The fetch is what runs now (bwrap, setpriv's shell, git, its http helper).
        expect(
          cmdlines.some((c) => c.includes("fetch")),
          cmdlines.join("\n"),
        ).toBe(true);
        expect(
          cmdlines.some((c) => c.includes("remote-http")),
          cmdlines.join("\n"),
        ).toBe(true);
        for (const pid of inDeployment) {
          for (const file of ["environ", "cmdline"] as const) expect(procText(pid, file) ?? "", `${pid} ${file}`).not.toContain(token);
        }
        // No process of the machine has it in its environment or arguments.
        const exposed = allHostPids().filter((pid) => (procText(pid, "environ") ?? "").includes(token) || (procText(pid, "cmdline") ?? "").includes(token));
        expect(exposed.map((pid) => `${pid}: ${procText(pid, "cmdline")}`)).toEqual([]);
        // Nor any file of the work directory (git's config, a credential store).
        const files: string[] = [];
        const walk = (dir: string) => {
          for (const name of readdirSync(dir)) {
            const path = join(dir, name);
            const info = statSync(path, { throwIfNoEntry: false });
            if (info?.isDirectory()) walk(path);
            else if (info?.isFile() && info.size < 1024 * 1024) files.push(path);
          }
        };
        walk(a.workDirOf(queued.id));
        expect(files.length).toBeGreaterThan(0);
        for (const file of files) expect(readFileSync(file, "latin1"), file).not.toContain(token);

        s.proxy.release();
        const d = await a.settle(t, queued.id);
        expect(d.failureReason).toBeNull();
        expect(d.status).toBe("ready");
        expect((await a.ask(projectId)).body).toBe("hello");
        const { text } = await a.lines(d.id);
        expect(text).toContain("git fetch");
        expect(text).not.toContain(token);
      },
      60_000,
    );
  });
}
