/**
 * The self-hosted runner end to end (real processes, real git host, real
 * Postgres): the fixture app (test/fixtures/apps/node-app: build and start
 * scripts, no dependencies) deployed from git and from an upload, answering on
 * its port, the project `live`, its variables (a secret included) visible to the
 * app and never in a log line or a table column in the clear; a failing build;
 * a second deploy replacing the first with no failed request; promote back
 * without a rebuild; a server restart bringing the app back; a hostile artifact.
 */
import { readdirSync } from "node:fs";
import { join } from "node:path";
import { eq } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { and } from "drizzle-orm";
import { insertDeployment } from "../../../functions/deployments/store";
import { environments, projects } from "../../../shared/db/schema";
import { dumpAllTables, expectStatus, seedTenant } from "../../support/harness";
import { processesOf, runnerClient, untilNoProcessOf } from "../../support/runner-client";
import { useRunnerServer } from "../../support/runner-harness";
import { gzip, tar } from "../../support/tar-fixtures";
import { TEST_SECRET_KEYS } from "../../support/test-keys";

const CANARY = "canary-secret-7c1e9b52d0";
const MASK = "••••••••";

const server = useRunnerServer({ prefix: "runner_e2e" });
const c = runnerClient(
  () => server,
  () => server.git,
);

describe("runner: deploy", () => {
  it("builds the app from a private git repository and runs it: ready, current, live, variables and secret visible to the app only", async () => {
    const t = await seedTenant(server);
    const { p, commit } = await c.gitProject(
      t,
      [
        { key: "APP_VERSION", value: "git-1" },
        { key: "SECRET_CANARY", value: CANARY, isSecret: true },
        { key: "BUILD_PRINT_SECRET", value: "1" },
      ],
      { private: true },
    );
    const queued = await c.deploy(t, p.id);
    expect(queued).toMatchObject({ status: "queued", commitSha: commit });
    const d = await c.waitFor(t, queued.id, ["ready", "failed"]);
    expect(d.failureReason).toBeNull();
    expect(d).toMatchObject({ status: "ready", current: true });
    expect(d.transitions.map((x) => x.status)).toEqual(["queued", "building", "deploying", "ready"]);
    const [project] = await server.db.select().from(projects).where(eq(projects.id, p.id));
    expect(project).toBeDefined();
    const view = await expectStatus<{ status: string }>(await c.call(t, `/api/projects/${p.id}`), 200);
    expect(view.status).toBe("live");

    const port = await c.currentPort(p.id);
    expect(port).toBeGreaterThan(0);
    const answer = await c.askApp(port!);
    expect(answer.version).toBe("git-1");
    expect(answer.env.SECRET_CANARY).toBe(CANARY);
    expect(answer.env.PORT).toBe(String(port));
    expect(answer.env.NODE_ENV).toBe("production");
    // Nothing of the server's own environment reaches the app.
    for (const key of ["SECRET_KEYS", "DATABASE_URL", "TEST_DATABASE_URL", "VITEST", "GIT_CONFIG_VALUE_0", "npm_lifecycle_event"]) {
      if (key !== "npm_lifecycle_event") expect(answer.env[key]).toBeUndefined();
    }
    expect(JSON.stringify(answer.env)).not.toContain(TEST_SECRET_KEYS);
    expect(JSON.stringify(answer.env)).not.toContain(server.git.token);

    const lines = await c.logsOf(d.id);
    const text = lines.map((l) => l.message).join("\n");
    expect(text).toContain(`@${commit}`);
    expect(text).toMatch(/Running npm install/);
    expect(text).toMatch(/Running npm run build/);
    expect(text).toMatch(/exit code 0 in \d/);
    expect(lines.some((l) => l.kind === "build" && l.stream === "stdout" && l.message.includes("build done"))).toBe(true);
    // The build and the app printed the secret: masked in the lines.
    expect(text).toContain(`the secret is ${MASK}`);
    await c.waitFor(t, d.id, ["ready"]);
    // Neither the secret nor the clone token in any table, in the clear.
    await new Promise((r) => setTimeout(r, 300));
    const dump = await dumpAllTables(server);
    expect(dump).not.toContain(CANARY);
    expect(dump).not.toContain(server.git.token);
    expect(server.logs.join("\n")).not.toContain(CANARY);
  });

  it("builds a deployment nobody queued (a push) from a private repository with the project's clone token", async () => {
    const t = await seedTenant(server);
    const { p, repo, commit } = await c.gitProject(t, [], { private: true });
    const [env] = await server.db
      .select()
      .from(environments)
      .where(and(eq(environments.projectId, p.id), eq(environments.name, "production")));
    const d = await server.db.transaction((tx) =>
      insertDeployment(
        tx,
        {
          orgId: t.orgId,
          projectId: p.id,
          environmentId: env!.id,
          createdBy: null,
          source: "git",
          gitProvider: "gitea",
          gitOwner: repo.owner,
          gitRepo: repo.repo,
          branch: "trunk",
          commitSha: commit,
        },
        new Date(),
      ),
    );
    server.node.services.wakeRunner?.();
    const done = await c.waitFor(t, d.id, ["ready", "failed"]);
    expect(done.failureReason).toBeNull();
    expect(done.status).toBe("ready");
  });

  it("builds an upload deployment the same way", async () => {
    const t = await seedTenant(server);
    const p = await expectStatus<{ id: string }>(await c.call(t, "/api/projects", { json: { name: "uploaded app" } }), 201);
    await c.setVars(t, p.id, [{ key: "APP_VERSION", value: "upload-1" }]);
    const queued = await c.uploadDeployment(t, p.id);
    const d = await c.waitFor(t, queued.id, ["ready", "failed"]);
    expect(d.failureReason).toBeNull();
    expect(d.status).toBe("ready");
    expect((await c.askApp((await c.currentPort(p.id))!)).version).toBe("upload-1");
    expect((await c.logsOf(d.id)).map((l) => l.message).join("\n")).toMatch(/Unpacked \d+ files/);
  });

  it("fails a build that exits non-zero: reason with the step, exit code, first error lines and last lines; build.failed; work directory removed", async () => {
    const t = await seedTenant(server);
    const { p } = await c.gitProject(t, [{ key: "FAIL_BUILD", value: "1" }]);
    const d = await c.waitFor(t, (await c.deploy(t, p.id)).id, ["ready", "failed"]);
    expect(d.status).toBe("failed");
    expect(d.failureReason).toMatch(/^build failed \(exit code 3\): npm run build; first error lines:\ncompile error 1\n/);
    expect(d.failureReason).toMatch(/\nlast lines:\n(.|\n)*compile error 12$/);
    expect(d.current).toBe(false);
    expect(d.transitions.map((x) => x.status)).toEqual(["queued", "building", "failed"]);
    const events = await c.eventsOnce(p.id, "build.failed");
    expect(events).toHaveLength(1);
    expect(events[0]!.message).toContain("exit code 3");
    expect(readdirSync(join(server.dataDir, "deployments"))).not.toContain(d.id);
    expect(await c.currentPort(p.id)).toBeNull();
  });

  it("a second deploy replaces the first with no failed request; promote brings the first back without a rebuild", async () => {
    const t = await seedTenant(server);
    const { p } = await c.gitProject(t, [{ key: "APP_VERSION", value: "v1" }]);
    const first = await c.waitFor(t, (await c.deploy(t, p.id)).id, ["ready", "failed"]);
    expect(first.status).toBe("ready");
    const v1 = await c.askApp((await c.currentPort(p.id))!);
    expect(v1.version).toBe("v1");

    await c.setVars(t, p.id, [{ key: "APP_VERSION", value: "v2" }]);
    const second = await c.deploy(t, p.id);
    // A client that keeps asking the current deployment (its port read from the database each time).
    let failures = 0;
    let requests = 0;
    const seen = new Set<string>();
    let done = false;
    const loop = (async () => {
      while (!done) {
        const port = await c.currentPort(p.id);
        try {
          const res = await fetch(`http://127.0.0.1:${port}/`);
          const body = (await res.json()) as { version: string };
          seen.add(body.version);
          if (res.status !== 200) failures++;
        } catch {
          failures++;
        }
        requests++;
      }
    })();
    const ready = await c.waitFor(t, second.id, ["ready", "failed"]);
    await new Promise((r) => setTimeout(r, 1500));
    done = true;
    await loop;
    expect(ready.status).toBe("ready");
    expect(failures).toBe(0);
    expect(requests).toBeGreaterThan(20);
    expect(seen).toEqual(new Set(["v1", "v2"]));
    // No process of the first deployment is left (its pid is its sandbox's own: asked of the host by its cgroup).
    expect(processesOf(first.id)).toEqual([]);
    expect((await c.read(t, first.id)).current).toBe(false);

    // Promote back: v1 runs again from its kept build (same build time), v2 stops.
    await expectStatus(await c.call(t, `/api/deployments/${first.id}/promote`, { json: {} }), 200);
    const deadline = Date.now() + 20_000;
    let back: Awaited<ReturnType<typeof c.askApp>> | undefined;
    while (Date.now() < deadline) {
      const port = await c.currentPort(p.id);
      if (port) {
        back = await c.askApp(port).catch(() => undefined);
        if (back?.version === "v1") break;
      }
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(back).toMatchObject({ version: "v1", builtAt: v1.builtAt });
    expect(back!.instance).not.toBe(v1.instance);
    expect(await untilNoProcessOf(second.id, 10_000)).toEqual([]);
    // No rebuild: the promoted deployment has no new build lines.
    expect((await c.logsOf(first.id)).filter((l) => l.message.startsWith("Running npm install"))).toHaveLength(1);
  });

  it("a server restart brings the current app back", async () => {
    const t = await seedTenant(server);
    const { p } = await c.gitProject(t, [{ key: "APP_VERSION", value: "restart" }]);
    const d = await c.waitFor(t, (await c.deploy(t, p.id)).id, ["ready", "failed"]);
    expect(d.status).toBe("ready");
    const before = await c.askApp((await c.currentPort(p.id))!);
    await server.close();
    expect(processesOf(d.id)).toEqual([]);
    await server.reopen();
    const deadline = Date.now() + 20_000;
    let after: Awaited<ReturnType<typeof c.askApp>> | undefined;
    while (Date.now() < deadline && !after) {
      const port = await c.currentPort(p.id);
      after = port ? await c.askApp(port).catch(() => undefined) : undefined;
      if (after?.instance === before.instance) after = undefined;
      if (!after) await new Promise((r) => setTimeout(r, 100));
    }
    expect(after).toMatchObject({ version: "restart", builtAt: before.builtAt });
    expect((await c.read(t, d.id)).status).toBe("ready");
  });

  it("refuses a hostile artifact: failed with the reason, nothing written outside the work directory", async () => {
    const t = await seedTenant(server);
    const p = await expectStatus<{ id: string }>(await c.call(t, "/api/projects", { json: { name: "hostile" } }), 201);
    const marker = `escaped-${Date.now()}.txt`;
    for (const entries of [
      [
        { name: "package.json", content: "{}" },
        { name: `../../${marker}`, content: "pwned" },
      ],
      [{ name: `/tmp/${marker}`, content: "pwned" }],
      [
        { name: "link", type: "2", linkname: "/tmp" },
        { name: `link/${marker}`, content: "pwned" },
      ],
    ]) {
      const queued = await c.uploadDeployment(t, p.id, await gzip(tar(entries)));
      const d = await c.waitFor(t, queued.id, ["ready", "failed"]);
      expect(d.status).toBe("failed");
      expect(d.failureReason).toMatch(/^The uploaded source was refused: .*(absolute path|'\.\.'|symbolic link)/);
      expect(readdirSync(server.dataDir)).not.toContain(marker);
      expect(readdirSync(join(server.dataDir, "deployments"))).not.toContain(marker);
      expect(readdirSync("/tmp")).not.toContain(marker);
    }
  });
});
