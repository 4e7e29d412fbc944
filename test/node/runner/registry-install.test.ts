/**
 * Builds that install from the package registry work inside the sandbox: the
 * machine's npm configuration (its global npmrc: CA file, registry, proxy) is
 * visible read-only at /etc/npmrc and BUILD_ENV_PASSTHROUGH's variables reach
 * the build, so `npm install` of a real dependency succeeds where the registry
 * is reached through a proxy with a private CA (as on this project's machines).
 * Skipped, with the reason printed, only when the registry cannot be reached
 * from this machine at all.
 */
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { beforeAll, describe, expect, it } from "vitest";
import { newId } from "../../../shared/ids";
import { expectStatus, seedTenant } from "../../support/harness";
import { runnerClient } from "../../support/runner-client";
import { pushApp, REGISTRY_DEPENDENCY_PACKAGE, useRunnerServer } from "../../support/runner-harness";

const server = useRunnerServer({ prefix: "runner_registry", runner: { buildTimeoutMs: 150_000 } });
const c = runnerClient(
  () => server,
  () => server.git,
);

let unreachable: string | undefined;
beforeAll(async () => {
  try {
    await promisify(execFile)("npm", ["view", "is-number@7.0.0", "version"], { timeout: 60_000 });
  } catch (error) {
    unreachable = (error as Error).message.split("\n")[0];
    console.log(`registry-install: the npm registry is unreachable from this machine (${unreachable}): the case is skipped`);
  }
}, 90_000);

const APP = {
  ...REGISTRY_DEPENDENCY_PACKAGE,
  "server.js": `const http = require("node:http");
const isNumber = require("is-number");
http.createServer((req, res) => res.end(JSON.stringify({ isNumber: isNumber("42"), uid: process.getuid() })))
  .listen(Number(process.env.PORT), "127.0.0.1");
`,
};

describe("runner: a build that installs from the registry", () => {
  it("npm install of a real dependency succeeds in the sandbox, and the app uses it", async (ctx) => {
    if (unreachable) ctx.skip();
    const t = await seedTenant(server);
    const p = await expectStatus<{ id: string }>(await c.call(t, "/api/projects", { json: { name: `reg ${newId("x").slice(-6)}` } }), 201);
    const repo = await server.git.createRepo();
    await pushApp(server.git, repo.owner, repo.repo, "trunk", APP);
    await expectStatus(await c.call(t, `/api/projects/${p.id}/git/link`, { json: { provider: "gitea", owner: repo.owner, repo: repo.repo } }), 200);
    const d = await c.waitFor(t, (await c.deploy(t, p.id)).id, ["ready", "failed"], 170_000);
    expect(d.failureReason ?? null).toBeNull();
    expect(d.status).toBe("ready");
    const res = await fetch(`http://127.0.0.1:${await c.currentPort(p.id)}/`);
    const body = (await res.json()) as { isNumber: boolean; uid: number };
    expect(body.isNumber).toBe(true);
    // It ran as the project's sandbox uid, not as the server's.
    expect(body.uid).not.toBe(process.getuid?.());
    expect(body.uid).toBeGreaterThanOrEqual(200000);
  }, 180_000);
});
