/**
 * Git identity forwarding end to end (issue 22, item 7): `wsp deploy` of a git project
 * (the CLI's deploy(), over HTTP) with Settings' forwardGitToServer on reads the local
 * credential with `git credential fill` (a `store` helper in a git config of the test's
 * own) and sends it; the in-process runner clones a private repository of the test git
 * host, which answers only that credential, and the build is ready. The canary (the git
 * host's only accepted password) is in no API answer, CLI output, server log line or
 * table in the clear, and job_credentials is empty after the clone. With the setting
 * off nothing is read or sent: the project's clone token clones.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { deploy } from "../../../functions/cli/deploy";
import { readGitCredential } from "../../../functions/cli/git-credential";
import { bindHttpServer } from "../../../functions/self-hosted/http-server";
import { jobCredentials, projects } from "../../../shared/db/schema";
import { dumpAllTables, expectStatus, seedTenant } from "../../support/harness";
import { type GitTestServer, startGitServer } from "../../support/git-server";
import { pushApp, type RunnerServer, runnerFixture, startRunnerServer } from "../../support/runner-harness";

/** A request's headers as a plain record. */
function headersOf(req: Request): Record<string, string> {
  const out: Record<string, string> = {};
  req.headers.forEach((value, name) => {
    out[name] = value;
  });
  return out;
}

const CANARY = `canary-git-password-${crypto.randomUUID()}`;

describe("git identity forwarding: wsp deploy clones with the local git credential", () => {
  let git: GitTestServer;
  let fixture: Awaited<ReturnType<typeof runnerFixture>>;
  let server: RunnerServer;
  let http: Awaited<ReturnType<typeof bindHttpServer>>;
  let api = "";
  let home = "";
  /** Every API answer's text and every POST /api/deployments body, as they crossed the wire. */
  const answers: string[] = [];
  const deployBodies: string[] = [];

  beforeAll(async () => {
    git = await startGitServer({ token: CANARY });
    fixture = await runnerFixture("git_forwarding");
    server = await startRunnerServer({ databaseUrl: fixture.db.url, dataDir: fixture.dataDir, gitUrl: git.url });
    http = await bindHttpServer({ port: 0, host: "127.0.0.1" });
    http.serve(async (req: Request) => {
      const url = new URL(req.url);
      const body = req.method === "GET" || req.method === "HEAD" ? undefined : await req.text();
      if (req.method === "POST" && url.pathname === "/api/deployments") deployBodies.push(body ?? "");
      const res = await server.request(url.pathname + url.search, { method: req.method, headers: headersOf(req), body });
      if ((res.headers.get("content-type") ?? "").includes("event-stream")) return res;
      const text = await res.text();
      answers.push(text);
      return new Response(text, { status: res.status, headers: res.headers });
    });
    api = `http://127.0.0.1:${http.port}`;
    // The user's git: a credential store holding the canary for the git host, in a config of its own.
    home = mkdtempSync(join(tmpdir(), "wsp-git-home-"));
    const store = join(home, "credentials");
    writeFileSync(store, `${new URL(git.url).protocol}//dev-user:${CANARY}@${new URL(git.url).host}\n`, { mode: 0o600 });
    writeFileSync(join(home, "gitconfig"), `[credential]\n\thelper = store --file=${store}\n`);
  }, 90_000);
  afterAll(async () => {
    await http?.close();
    await server?.close();
    await git?.close();
    await fixture?.drop();
    rmSync(home, { recursive: true, force: true });
  });

  const gitEnv = () => ({ PATH: process.env.PATH, HOME: home, GIT_CONFIG_GLOBAL: join(home, "gitconfig"), GIT_CONFIG_NOSYSTEM: "1" });

  async function privateProject(t: { token: string; orgId: string }) {
    const p = await expectStatus<{ id: string }>(
      await server.request("/api/projects", { token: t.token, org: t.orgId, json: { name: `fwd ${crypto.randomUUID().slice(0, 6)}` } }),
      201,
    );
    const repo = await git.createRepo({ private: true });
    await pushApp(git, repo.owner, repo.repo);
    // Linked without any clone token: only the forwarded credential can read the repository.
    await server.db.update(projects).set({ gitProvider: "gitea", gitOwner: repo.owner, gitRepo: repo.repo }).where(eq(projects.id, p.id));
    return p;
  }

  async function wspDeploy(t: { token: string; orgId: string }, projectId: string) {
    const folder = mkdtempSync(join(tmpdir(), "wsp-fwd-folder-"));
    const out: string[] = [];
    try {
      const result = await deploy({
        folder,
        api,
        token: t.token,
        org: t.orgId,
        projectId,
        log: (s) => out.push(s),
        line: (l) => out.push(l.message),
        gitEnv: gitEnv(),
      });
      return { result, out: out.join("") };
    } finally {
      rmSync(folder, { recursive: true, force: true });
    }
  }

  it("the store helper's credential is read without a prompt", async () => {
    const read = await readGitCredential(`${git.url}/o/r.git`, { env: gitEnv() });
    expect(read).toEqual({ credential: { username: "dev-user", password: CANARY } });
    // Another host: none, and no prompt (GIT_TERMINAL_PROMPT=0) even with no helper answering.
    expect(await readGitCredential("https://elsewhere.invalid/o/r.git", { env: gitEnv(), timeoutMs: 5000 })).toHaveProperty("none");
  });

  it("on: the clone succeeds with the forwarded credential; the canary is nowhere in clear; the row is gone", async () => {
    const t = await seedTenant(server);
    await expectStatus(await server.request("/api/settings/forward-git", { method: "PATCH", token: t.token, org: t.orgId, json: { enabled: true } }), 200);
    const p = await privateProject(t);
    const { result, out } = await wspDeploy(t, p.id);
    expect(result.end?.failureReason ?? null).toBeNull();
    expect(result.end?.status).toBe("ready");
    expect(out).toMatch(/Forwarding your git credential/);
    expect(deployBodies.at(-1)).toContain("gitCredential");
    expect(await server.db.select().from(jobCredentials)).toEqual([]);
    expect(out).not.toContain(CANARY);
    for (const a of answers) expect(a).not.toContain(CANARY);
    expect(server.logs.join("\n")).not.toContain(CANARY);
    expect(await dumpAllTables(server)).not.toContain(CANARY);
  }, 120_000);

  it("off: nothing is read or sent; the project's clone token clones", async () => {
    const t = await seedTenant(server);
    const p = await privateProject(t);
    await expectStatus(
      await server.request(`/api/projects/${p.id}/clone-token`, { method: "PATCH", token: t.token, org: t.orgId, json: { token: CANARY } }),
      200,
    );
    const sent = deployBodies.length;
    const { result, out } = await wspDeploy(t, p.id);
    expect(result.end?.status).toBe("ready");
    expect(out).not.toMatch(/Forwarding/);
    expect(deployBodies.slice(sent)).toHaveLength(1);
    expect(deployBodies.slice(sent)[0]).not.toContain("gitCredential");
    expect(await server.db.select().from(jobCredentials)).toEqual([]);
    expect(server.logs.join("\n")).not.toContain(CANARY);
    expect(await dumpAllTables(server)).not.toContain(CANARY);
  }, 120_000);
});
