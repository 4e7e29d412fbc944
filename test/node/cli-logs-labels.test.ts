/**
 * `wsp logs` tells where each runtime line comes from (functions/cli/logs.ts): the
 * label `[<environment> dpl_…<last 4>]` on every line, from the page and from the
 * followed stream, for a project whose production and preview write at once
 * (against the real server, lines played through the store on its own Postgres
 * database); a build log stays bare. `--env` narrows the page and the followed stream to one
 * environment.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { and, eq } from "drizzle-orm";
import { describe, expect, inject, it } from "vitest";
import { formatRuntimeLine, sourceLabel } from "../../functions/cli/logs";
import { main } from "../../functions/cli/main";
import { appendLogLines, type NewLogLine } from "../../functions/logs/store";
import { loadNodeConfig } from "../../functions/self-hosted/config";
import { startSelfHosted } from "../../functions/self-hosted/start";
import { deployments, environments } from "../../shared/db/schema";
import { openPostgres } from "../../shared/db/postgres";
import { newId } from "../../shared/ids";
import { useCleanups } from "../support/cleanups";
import { freshDatabase } from "../support/fresh-database";

const { cleanups, tempDir } = useCleanups("ws-cli-labels-");
const line = { id: "7", timestamp: "2030-01-01T00:00:00.000Z", stream: "stdout", message: "hi" };

describe("wsp logs: the label", () => {
  it("names the environment and the end of the deployment id; without either, what there is", () => {
    const id = "dpl_01hx2k3m4n5p6q7r8s9t0va1b2";
    expect(sourceLabel({ ...line, deploymentId: id, environment: "production" })).toBe("[production dpl_…a1b2]");
    expect(sourceLabel({ ...line, deploymentId: id, environment: "preview-x" })).toBe("[preview-x dpl_…a1b2]");
    // A server older than the field sends no environment.
    expect(sourceLabel({ ...line, deploymentId: id })).toBe("[dpl_…a1b2]");
    expect(sourceLabel({ ...line, deploymentId: null, environment: null })).toBe("[-]");
    expect(formatRuntimeLine({ ...line, deploymentId: id, environment: "preview-x", stream: "stderr", message: "oops" })).toBe(
      "2030-01-01T00:00:00.000Z [preview-x dpl_…a1b2] [stderr] oops\n",
    );
  });
});

const postgres = it.runIf(inject("pgKind") === "postgres");

/**
 * A project with production and a preview-x environment, a ready deployment in each, behind the
 * real server on its own Postgres database; lines are written through the store as the runner does.
 */
async function twoEnvironments() {
  const own = await freshDatabase(inject("pgUrl"), "ws_cli_labels", { migrate: true });
  cleanups.push(() => own.drop());
  const db = await openPostgres(own.url, { migrate: false, max: 2 });
  cleanups.push(() => db.close());
  const dir = tempDir();
  const server = await startSelfHosted(loadNodeConfig({ PORT: "0", LOG_LEVEL: "silent", DATA_DIR: dir, RUNNER: "off", DATABASE_URL: own.url }), () => {});
  cleanups.push(() => server.close());
  const token = readFileSync(join(dir, "owner-token"), "utf8").trim();
  const api = async (path: string, body: unknown) => {
    const res = await fetch(`${server.url}${path}`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    expect(res.status, await res.clone().text()).toBe(201);
    return (await res.json()) as { id: string; orgId: string };
  };
  const project = await api("/api/projects", { name: "Two environments" });
  await api(`/api/projects/${project.id}/environments`, { name: "preview-x", branch: "feature-x" });
  const deploymentOf = async (name: string) => {
    const [env] = await db.db
      .select()
      .from(environments)
      .where(and(eq(environments.projectId, project.id), eq(environments.name, name)));
    const [row] = await db.db
      .insert(deployments)
      .values({ id: newId("dpl"), orgId: env!.orgId, projectId: project.id, environmentId: env!.id, status: "ready", branch: "main" })
      .returning();
    return row!;
  };
  const prod = await deploymentOf("production");
  const preview = await deploymentOf("preview-x");
  type Deployment = typeof prod;
  const write = (d: Deployment, message: string, kind: NewLogLine["kind"] = "runtime") =>
    appendLogLines(db.db, [{ orgId: d.orgId, projectId: d.projectId, deploymentId: d.id, kind, stream: "stdout", at: new Date(), message }]);
  const label = (d: Deployment, env: string) => `[${env} dpl_…${d.id.slice(-4)}]`;
  /** `wsp <argv>` against the server: its exit code, and what it printed so far (stdout, stderr). */
  const cli = (argv: string[], signal?: AbortSignal) => {
    let out = "";
    let err = "";
    const done = main([...argv, "--api", server.url], {
      out: (t) => (out += t),
      err: (t) => (err += t),
      env: { WORKSPACE_TOKEN: token },
      tty: false,
      signal,
    });
    return { done, live: () => out, err: () => err };
  };
  /** Waits until a followed command has printed `text`. */
  const until = async (running: { live: () => string }, text: string) => {
    const deadline = Date.now() + 20_000;
    while (!running.live().includes(text)) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${text}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  };
  return { project, prod, preview, write, label, cli, until };
}

/** Printed lines without their timestamps. */
const printed = (out: string) =>
  out
    .trim()
    .split("\n")
    .map((l) => l.replace(/^\S+ /, ""));

describe("wsp logs: production and a preview of one project", () => {
  postgres(
    "every printed runtime line, paged and followed, carries its environment and deployment; the build log does not",
    async () => {
      const { project, prod, preview, write, label, cli, until } = await twoEnvironments();
      await write(prod, "prod up");
      await write(preview, "preview up");
      await write(preview, "$ npm run build", "build");

      const page = cli(["logs", project.id]);
      expect(await page.done).toBe(0);
      expect(printed(page.live())).toEqual([`${label(prod, "production")} prod up`, `${label(preview, "preview-x")} preview up`]);

      const stop = new AbortController();
      const following = cli(["logs", project.id, "--follow"], stop.signal);
      await until(following, "preview up");
      await write(preview, "preview later");
      await write(prod, "prod later");
      await until(following, "prod later");
      stop.abort();
      expect(await following.done).toBe(0);
      expect(printed(following.live()).slice(-2)).toEqual([`${label(preview, "preview-x")} preview later`, `${label(prod, "production")} prod later`]);

      const build = cli(["logs", project.id, "--deployment", preview.id]);
      expect(await build.done).toBe(0);
      expect(build.live()).toBe("$ npm run build\n");
    },
    60_000,
  );

  postgres(
    "--env prints one environment's lines, paged and followed; an unknown one is refused by the API, and with --deployment by the command",
    async () => {
      const { project, prod, preview, write, label, cli, until } = await twoEnvironments();
      await write(prod, "prod up");
      await write(preview, "preview up");
      await write(prod, "prod again");

      const page = cli(["logs", project.id, "--env", "preview-x"]);
      expect(await page.done).toBe(0);
      expect(printed(page.live())).toEqual([`${label(preview, "preview-x")} preview up`]);
      const production = cli(["logs", project.id, "--env", "production"]);
      expect(await production.done).toBe(0);
      expect(printed(production.live())).toEqual([`${label(prod, "production")} prod up`, `${label(prod, "production")} prod again`]);

      // Followed: the stream is narrowed as the page was; production's lines written meanwhile never show.
      const stop = new AbortController();
      const following = cli(["logs", project.id, "--env", "preview-x", "--follow"], stop.signal);
      await until(following, "preview up");
      await write(prod, "prod later");
      await write(preview, "preview later");
      await write(prod, "prod last");
      await write(preview, "preview last");
      await until(following, "preview last");
      stop.abort();
      expect(await following.done).toBe(0);
      expect(printed(following.live())).toEqual([
        `${label(preview, "preview-x")} preview up`,
        `${label(preview, "preview-x")} preview later`,
        `${label(preview, "preview-x")} preview last`,
      ]);

      const unknown = cli(["logs", project.id, "--env", "nope"]);
      expect(await unknown.done).toBe(1);
      expect(unknown.err()).toMatch(/^Error: GET \/api\/projects\/prj_\w+\/logs\?limit=100&environment=nope: 400 .*environment/);
      expect(unknown.live()).toBe("");

      const both = cli(["logs", project.id, "--env", "preview-x", "--deployment", preview.id]);
      expect(await both.done).toBe(2);
      expect(both.err()).toMatch(/^--env narrows the runtime logs; a build log \(--deployment\) is one deployment's\n/);
    },
    60_000,
  );
});
