/**
 * The health check a new app must pass (the project's healthCheckPath option),
 * with the real runner and sandbox on Postgres: with the option, a 2xx or 3xx
 * answer there is needed, so an app answering 503 on it fails its deployment
 * naming the path; one answering 200 there goes live; without the option any
 * answer to `/` passes (a 503 included).
 */
import { describe, expect, it } from "vitest";
import { useCleanups } from "../../support/cleanups";
import { seedTenant } from "../../support/harness";
import { sandboxApps, useSandboxServer } from "../../support/sandbox-apps";

/** Answers 503 on /healthz unless HEALTHY is set, and 503 on `/` too when SICK_ROOT is set; 200 elsewhere. */
const APP = `require("node:http").createServer((req, res) => {
  const sick = (req.url === "/healthz" && !process.env.HEALTHY) || (req.url === "/" && process.env.SICK_ROOT);
  res.statusCode = sick ? 503 : 200;
  res.end(sick ? "not yet" : "fine");
}).listen(Number(process.env.PORT), "127.0.0.1");`;

describe("health check (postgres, HEALTH_TIMEOUT=3s)", () => {
  const s = useSandboxServer({ kind: "postgres", prefix: "health_check", env: { HEALTH_TIMEOUT: "3s" } });
  const a = sandboxApps(s);
  const { cleanups } = useCleanups("ws-health-");

  it("with healthCheckPath needs a 2xx or 3xx answer there; without it any answer to / will do", { timeout: 120_000 }, async () => {
    const t = await seedTenant(s.server);
    const options = { startCommand: "node app.js", healthCheckPath: "/healthz" };
    const sick = await a.uploadDeploy(t, { "app.js": APP }, { options });
    cleanups.push(() => a.retire(t, sick.projectId));
    const failed = await a.settle(t, sick.deployment.id);
    expect(failed.status).toBe("failed");
    expect(failed.failureReason).toMatch(
      /^start failed: the app did not give a 2xx or 3xx answer to GET \/healthz \(the project.s healthCheckPath\) on PORT \d+ within 3 s/,
    );

    const healthy = await a.uploadDeploy(t, { "app.js": APP }, { options, vars: [{ key: "HEALTHY", value: "1" }] });
    cleanups.push(() => a.retire(t, healthy.projectId));
    expect((await a.settle(t, healthy.deployment.id)).status).toBe("ready");

    const anyAnswer = await a.uploadDeploy(t, { "app.js": APP }, { options: { startCommand: "node app.js" }, vars: [{ key: "SICK_ROOT", value: "1" }] });
    cleanups.push(() => a.retire(t, anyAnswer.projectId));
    expect((await a.settle(t, anyAnswer.deployment.id)).status).toBe("ready");
  });
});
