/**
 * Git identity forwarding over the HTTP runner protocol (issue 22, item 7): a real
 * `wsp runner` attached to a self-hosted instance (RUNNER=off there) builds a git
 * deployment of a private repository that only the user's own credential can read;
 * `wsp deploy --project` (a child process whose git config holds the credential in a
 * `store` helper, Settings' forwardGitToServer on) sends it, the runner takes it through
 * GET …/clone-credential for its clone, and the build is ready. The canary is in no
 * output of either process nor any table in the clear; job_credentials is empty after.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { loadNodeConfig } from "../../../functions/self-hosted/config";
import { type RunningServer, startSelfHosted } from "../../../functions/self-hosted/start";
import { openPostgres, type PostgresDatabase } from "../../../shared/db/postgres";
import { deployments, jobCredentials, projects } from "../../../shared/db/schema";
import { freshDatabase } from "../../support/fresh-database";
import { type GitTestServer, startGitServer } from "../../support/git-server";
import { dumpAllTables, type Harness, seedTenant } from "../../support/harness";
import { pushApp } from "../../support/runner-harness";

const WSP = join(process.cwd(), "functions/cli/wsp.mjs");
const CANARY = `canary-remote-git-${crypto.randomUUID()}`;

let server: RunningServer;
let db: PostgresDatabase;
let git: GitTestServer;
let dataDir: string;
let home: string;
let work: string;
let dropDatabase: () => Promise<void>;
let runner: ChildProcess | undefined;

beforeAll(async () => {
  git = await startGitServer({ token: CANARY });
  const own = await freshDatabase(inject("pgUrl"), "ws_remote_git_fwd", { migrate: true });
  dropDatabase = () => own.drop();
  dataDir = mkdtempSync(join(tmpdir(), "ws-remote-git-data-"));
  work = mkdtempSync(join(tmpdir(), "ws-remote-git-work-"));
  server = await startSelfHosted(
    loadNodeConfig({
      PORT: "0",
      HOST: "127.0.0.1",
      LOG_LEVEL: "silent",
      DATA_DIR: dataDir,
      DATABASE_URL: own.url,
      SHARED_DOMAIN: "apps.test",
      RUNNER: "off",
      OUTBOUND_ALLOW_PRIVATE: "true",
      GIT_GITEA_URL: git.url,
    }),
    () => {},
  );
  db = await openPostgres(own.url, { migrate: false, max: 2 });
  home = mkdtempSync(join(tmpdir(), "ws-remote-git-home-"));
  const store = join(home, "credentials");
  writeFileSync(store, `http://dev-user:${CANARY}@${new URL(git.url).host}\n`, { mode: 0o600 });
  writeFileSync(join(home, "gitconfig"), `[credential]\n\thelper = store --file=${store}\n`);
}, 60_000);
afterAll(async () => {
  runner?.kill("SIGKILL");
  await server?.close();
  await db?.close();
  await git?.close();
  await dropDatabase?.();
  for (const dir of [dataDir, home, work]) if (dir) rmSync(dir, { recursive: true, force: true });
});

function run(args: string[], env: Record<string, string | undefined>): Promise<{ code: number | null; out: string }> {
  const child = spawn(process.execPath, [WSP, ...args], { env });
  let out = "";
  child.stdout.on("data", (d) => (out += d));
  child.stderr.on("data", (d) => (out += d));
  return new Promise((resolve) => child.on("close", (code) => resolve({ code, out })));
}

describe("git identity forwarding through wsp runner", () => {
  it("the remote runner clones the private repository with the forwarded credential; the canary is nowhere in clear", { timeout: 180_000 }, async () => {
    const t = await seedTenant({ db: db.db } as unknown as Harness);
    const call = async (path: string, init: { method?: string; json?: unknown } = {}, expected = 200) => {
      const res = await fetch(`${server.url}${path}`, {
        method: init.method ?? (init.json ? "POST" : "GET"),
        headers: { authorization: `Bearer ${t.token}`, "content-type": "application/json" },
        body: init.json ? JSON.stringify(init.json) : undefined,
      });
      const text = await res.text();
      expect(res.status, text).toBe(expected);
      expect(text).not.toContain(CANARY);
      return text ? JSON.parse(text) : undefined;
    };
    await call("/api/settings/forward-git", { method: "PATCH", json: { enabled: true } });
    const s = (await call("/api/servers", { json: { name: "remote-git" } }, 201)) as { id: string; token: string };
    const p = (await call("/api/projects", { json: { name: "remote git forwarding" } }, 201)) as { id: string };
    const repo = await git.createRepo({ private: true });
    await pushApp(git, repo.owner, repo.repo);
    // Linked without a clone token: only the forwarded credential reads the repository.
    await db.db.update(projects).set({ gitProvider: "gitea", gitOwner: repo.owner, gitRepo: repo.repo }).where(eq(projects.id, p.id));

    let runnerOut = "";
    runner = spawn(process.execPath, [WSP, "runner", "--api", server.url, "--work-dir", work], {
      env: {
        PATH: process.env.PATH,
        HOME: process.env.HOME,
        WORKSPACE_RUNNER_TOKEN: s.token,
        BUILD_TIMEOUT: "60s",
        HEALTH_TIMEOUT: "20s",
        STOP_GRACE: "1s",
        SMOKE_WINDOW: "0s",
        OUTBOUND_ALLOW_PRIVATE: "true",
        // The runner clones from the git host itself: its own setting, as on the instance.
        GIT_GITEA_URL: git.url,
      },
    });
    runner.stdout!.on("data", (d) => (runnerOut += d));
    runner.stderr!.on("data", (d) => (runnerOut += d));

    const folder = mkdtempSync(join(tmpdir(), "ws-remote-git-folder-"));
    try {
      const deployed = await run(["deploy", folder, "--api", server.url, "--token", t.token, "--project", p.id], {
        PATH: process.env.PATH,
        HOME: home,
        GIT_CONFIG_GLOBAL: join(home, "gitconfig"),
        GIT_CONFIG_NOSYSTEM: "1",
      });
      expect(deployed.code, `${deployed.out}\n${runnerOut}`).toBe(0);
      expect(deployed.out).toMatch(/Forwarding your git credential/);
      const id = /Queued deployment (dpl_[0-9a-z]+)/.exec(deployed.out)?.[1];
      const [d] = await db.db.select().from(deployments).where(eq(deployments.id, id!));
      expect(d).toMatchObject({ status: "ready", placement: "server", servedBy: s.id });
      expect(await db.db.select().from(jobCredentials)).toEqual([]);
      expect(deployed.out).not.toContain(CANARY);
      expect(runnerOut).not.toContain(CANARY);
      expect(await dumpAllTables({ db: db.db } as unknown as Harness)).not.toContain(CANARY);
    } finally {
      runner.kill("SIGKILL");
      rmSync(folder, { recursive: true, force: true });
    }
  });
});
