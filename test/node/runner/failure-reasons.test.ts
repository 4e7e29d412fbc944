/**
 * Failure reasons and their events with the real runner (Postgres and PGlite):
 * a build printing a Vite-like syntax error in colour, then a long stack, fails
 * with a reason that names the step and exit code and quotes the `file:line:col`
 * line, without an escape byte; a member subscribed to "Deploy failed" only (a
 * webhook to a loopback receiver) hears of that broken build, once, and the
 * payload carries no escape (nor the secret the build printed) either. An app that dies before answering fails
 * with its own error line in the reason and a `deploy.failed`.
 */
import { describe, expect, it } from "vitest";
import { useCleanups } from "../../support/cleanups";
import { expectStatus, seedTenant, type Member } from "../../support/harness";
import { startHttpReceiver } from "../../support/receivers";
import { sandboxApps, sleep, useSandboxServer } from "../../support/sandbox-apps";

const ESC = "\u001b";
const CANARY = "canary-token-5f2a9c81e7";

/** What rolldown-vite prints for a syntax error in src/main.js (coloured), then 30 stack frames; exits 1. */
const VITE_LIKE_BUILD = `
const E = "\\u001b";
const red = (s) => E + "[31m" + s + E + "[39m";
console.log(E + "[36mvite v7.1.0 " + E + "[32mbuilding for production..." + E + "[39m");
console.log("transforming...");
console.log(E + "[32m✓" + E + "[39m 3 modules transformed.");
console.error(red("✗") + " Build failed in 41ms");
console.error(red("error during build:") + " (token " + process.env.API_TOKEN + ")");
console.error(red(E + "[1m[PARSE_ERROR]" + E + "[22m Unexpected token"));
console.error("   " + E + "[38;5;246m╭─[" + E + "[0m src/main.js:61:17 " + E + "[38;5;246m]" + E + "[0m");
console.error(E + "[38;5;246m61 │" + E + "[0m   const total = items.reduce((a, b) => a + b, 0;");
for (let i = 0; i < 30; i++) console.error("    at frame" + i + " (file:///app/node_modules/rolldown/dist/shared/src-" + i + ".mjs:" + (100 + i) + ":" + (i + 3) + ")");
process.exit(1);
`;

/** An app that cannot start: a coloured module error, then its stack, exit 1. */
const BROKEN_APP = `
const E = "\\u001b";
console.error(E + "[31mError: Cannot find module 'express'" + E + "[39m");
console.error("Require stack:");
for (let i = 0; i < 20; i++) console.error("    at Module._resolveFilename (node:internal/modules/cjs/loader:" + (1000 + i) + ":15)");
process.exit(1);
`;

const N = "/api/notifications";

describe.each(["postgres", "pglite"] as const)("failure reasons and events (%s)", (kind) => {
  const s = useSandboxServer({ kind, prefix: `fail_${kind}` });
  const a = sandboxApps(s);
  const { cleanups } = useCleanups("ws-fail-");

  /** A webhook channel to a loopback receiver, subscribed to "Deploy failed" only; the in-app channel's "Build failed" turned off. */
  async function deployFailedOnly(t: Member) {
    const receiver = await startHttpReceiver();
    cleanups.push(() => receiver.close());
    const call = (method: string, path: string, json?: unknown) => s.server.request(`${N}${path}`, { method, token: t.token, org: t.orgId, json });
    const channel = await expectStatus<{ id: string }>(
      await call("POST", "/channels", { kind: "webhook", label: "hook", config: { url: `${receiver.origin}/hook` } }),
      201,
    );
    await expectStatus(await call("PATCH", `/channels/${channel.id}`, { verified: true }), 200);
    await expectStatus(await call("PUT", "/subscriptions", { category: "deploy.failed", channelId: channel.id, enabled: true }), 200);
    const subs = (await expectStatus<{ items: Array<{ category: string; channelId: string }> }>(await call("GET", "/subscriptions?limit=100"), 200)).items;
    for (const sub of subs.filter((x) => x.category === "build.failed"))
      await expectStatus(await call("PUT", "/subscriptions", { category: "build.failed", channelId: sub.channelId, enabled: false }), 200);
    return receiver;
  }

  it("a Vite-like build error: the reason quotes file:line:col without escapes; a deploy.failed-only webhook receives it once", async () => {
    const t = await seedTenant(s.server);
    const receiver = await deployFailedOnly(t);
    const { projectId, deployment } = await a.uploadDeploy(
      t,
      { "build.js": VITE_LIKE_BUILD, "server.js": "require('node:http').createServer((q, r) => r.end('ok')).listen(process.env.PORT);" },
      { options: { buildCommand: "node build.js", startCommand: "node server.js" }, vars: [{ key: "API_TOKEN", value: CANARY, isSecret: true }] },
    );
    cleanups.push(() => a.retire(t, projectId));
    const d = await a.settle(t, deployment.id);
    expect(d.status).toBe("failed");
    const reason = d.failureReason!;
    expect(reason).toMatch(/^build failed \(exit code 1\): node build\.js; first error lines:\n/);
    expect(reason).toContain("[PARSE_ERROR] Unexpected token");
    expect(reason).toContain("src/main.js:61:17");
    expect(reason).not.toContain(ESC);
    expect(Buffer.byteLength(reason)).toBeLessThanOrEqual(1024);
    // A secret the build printed is masked in the lines quoted.
    expect(reason).toContain("error during build: (token ••••••••)");
    expect(reason).not.toContain(CANARY);
    // The stored log keeps the lines as printed.
    expect((await a.lines(d.id)).text).toContain(`${ESC}[1m[PARSE_ERROR]`);

    const deadline = Date.now() + 15_000;
    while (receiver.recorder.hits.length === 0 && Date.now() < deadline) await sleep(50);
    await sleep(500);
    expect(receiver.recorder.hits).toHaveLength(1);
    const body = receiver.recorder.hits[0]!.body;
    expect(body).not.toContain(ESC);
    expect(body).not.toMatch(/\\u001b/i);
    expect(body).not.toContain(CANARY);
    const payload = JSON.parse(body);
    expect(payload.type).toBe("build.failed");
    expect(payload.data.message).toContain("src/main.js:61:17");
    expect(payload.data.data).toMatchObject({ deploymentId: d.id, stage: "build" });
    // One event, told once in the feed as well.
    expect(await a.c.events(projectId, "build.failed")).toHaveLength(1);
    expect(await a.c.events(projectId, "deploy.failed")).toHaveLength(0);
  }, 90_000);

  it("an app that dies before answering: its error line in the reason, deploy.failed to the webhook", async () => {
    const t = await seedTenant(s.server);
    const receiver = await deployFailedOnly(t);
    const { projectId, deployment } = await a.uploadDeploy(t, { "server.js": BROKEN_APP }, { options: { startCommand: "node server.js" } });
    cleanups.push(() => a.retire(t, projectId));
    const d = await a.settle(t, deployment.id);
    expect(d.status).toBe("failed");
    const reason = d.failureReason!;
    expect(reason).toMatch(/^start failed: the app exited with code 1 before answering/);
    expect(reason).toContain("first error lines:\nError: Cannot find module 'express'");
    expect(reason).not.toContain(ESC);
    const deadline = Date.now() + 15_000;
    while (receiver.recorder.hits.length === 0 && Date.now() < deadline) await sleep(50);
    expect(receiver.recorder.hits).toHaveLength(1);
    const payload = JSON.parse(receiver.recorder.hits[0]!.body);
    expect(payload.type).toBe("deploy.failed");
    expect(payload.data.data).toMatchObject({ deploymentId: d.id, stage: "start" });
    expect(receiver.recorder.hits[0]!.body).not.toContain(ESC);
  }, 90_000);
});
