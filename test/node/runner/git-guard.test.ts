/**
 * The runner's git fetch obeys the outbound rules of the API: the host's
 * addresses are checked by the outbound guard and git is pinned to the checked
 * one, and a redirect is never followed (the fetch, with the credential, must
 * not be sent to another host).
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, describe, expect, it } from "vitest";
import { guardedResolve } from "../../../functions/self-hosted/runner/git-source";
import { JobFailure } from "../../../functions/self-hosted/runner/step";
import { newId } from "../../../shared/ids";
import { expectStatus, seedTenant } from "../../support/harness";
import { runnerClient } from "../../support/runner-client";
import { pushApp, useRunnerServer } from "../../support/runner-harness";

/** Where a followed redirect would land: counts what reaches it. */
let trapHits = 0;
const trap = http.createServer((_req, res) => {
  trapHits++;
  res.writeHead(404).end();
});
await new Promise<void>((r) => trap.listen(0, "127.0.0.1", r));
const trapOrigin = `http://127.0.0.1:${(trap.address() as AddressInfo).port}`;

/**
 * The git host as the runner sees it: the API's own requests (its ls-remote, User-Agent
 * "… (workspace-service)") are passed to the test git server; the git program's are redirected to the trap.
 */
const front = http.createServer((req, res) => {
  const agent = req.headers["user-agent"] ?? "";
  if (agent.startsWith("git/") && !agent.includes("workspace-service")) {
    res.writeHead(302, { location: `${trapOrigin}${req.url}` }).end();
    return;
  }
  const target = new URL(req.url ?? "/", server.git.url);
  const upstream = http.request(target, { method: req.method, headers: { ...req.headers, host: target.host } }, (answer) => {
    res.writeHead(answer.statusCode ?? 502, answer.headers);
    answer.pipe(res);
  });
  upstream.on("error", () => res.destroy());
  req.pipe(upstream);
});
await new Promise<void>((r) => front.listen(0, "127.0.0.1", r));

const server = useRunnerServer({ prefix: "runner_git_guard", env: { GIT_GITEA_URL: `http://127.0.0.1:${(front.address() as AddressInfo).port}` } });
const c = runnerClient(
  () => server,
  () => server.git,
);
afterAll(() => {
  trap.close();
  front.close();
});

describe("runner: the git fetch through the outbound guard", () => {
  it("checks the host's addresses and pins git to the checked one", async () => {
    await expect(guardedResolve("http://127.0.0.1:3000/o/r.git", false)).rejects.toThrow(JobFailure);
    await expect(guardedResolve("http://127.0.0.1:3000/o/r.git", false)).rejects.toThrow("OUTBOUND_ALLOW_PRIVATE");
    await expect(guardedResolve("http://10.1.2.3/o/r.git", false)).rejects.toThrow("private");
    // Metadata and link-local stay refused even when private networks are allowed.
    await expect(guardedResolve("http://169.254.169.254/o/r.git", true)).rejects.toThrow("always refused");
    await expect(guardedResolve("http://[fd00:ec2::254]/o/r.git", true)).rejects.toThrow("always refused");
    expect(await guardedResolve("http://127.0.0.1:3000/o/r.git", true)).toBe("127.0.0.1:3000:127.0.0.1");
    expect(await guardedResolve("https://[::1]/o/r.git", true)).toBe("::1:443:[::1]");
    expect(await guardedResolve("http://localhost:8080/o/r.git", true)).toMatch(/^localhost:8080:(127\.0\.0\.1|\[::1\])$/);
    await expect(guardedResolve("http://localhost:8080/o/r.git", false)).rejects.toThrow("loopback");
  });

  it("never follows a redirect: the fetch fails and nothing reaches the other host", async () => {
    const t = await seedTenant(server);
    const p = await expectStatus<{ id: string }>(await c.call(t, "/api/projects", { json: { name: `guard ${newId("x").slice(-6)}` } }), 201);
    const repo = await server.git.createRepo();
    await pushApp(server.git, repo.owner, repo.repo);
    await expectStatus(await c.call(t, `/api/projects/${p.id}/git/link`, { json: { provider: "gitea", owner: repo.owner, repo: repo.repo } }), 200);
    trapHits = 0;
    const d = await c.waitFor(t, (await c.deploy(t, p.id)).id, ["ready", "failed"]);
    expect(d.status).toBe("failed");
    expect(d.failureReason).toMatch(/^clone failed/);
    expect(trapHits).toBe(0);
  }, 60_000);
});
