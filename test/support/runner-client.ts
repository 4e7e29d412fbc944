/** The runner suites' calls: projects from the fixture app on the git test server or as an upload, deploys, waits, the app's answers. */
import { readdirSync, readFileSync } from "node:fs";
import { and, eq, sql } from "drizzle-orm";
import { expect } from "vitest";
import { DeploymentSchema } from "../../functions/deployments/schema";
import { insertDeployment } from "../../functions/deployments/store";
import { deployments, environments, logLines } from "../../shared/db/schema";
import { newId } from "../../shared/ids";
import { objectKeyFor } from "../../shared/storage/limits";
import type { GitTestServer } from "./git-server";
import { expectBody, expectStatus, type Member } from "./harness";
import { appTarball, pushApp, type RunnerServer } from "./runner-harness";

export type Deployment = ReturnType<typeof DeploymentSchema.parse>;

export function runnerClient(h: () => RunnerServer, git: () => GitTestServer) {
  const call = (t: Member, path: string, init: { method?: string; json?: unknown } = {}) =>
    h().request(path, { method: init.method ?? (init.json ? "POST" : "GET"), token: t.token, org: t.orgId, json: init.json });

  /** A project linked to a fresh repository holding the fixture app, with environment variables. */
  async function gitProject(t: Member, vars: Array<{ key: string; value: string; isSecret?: boolean }> = [], opts: { private?: boolean } = {}) {
    const p = await expectStatus<{ id: string; name: string }>(await call(t, "/api/projects", { json: { name: `app ${newId("x").slice(-6)}` } }), 201);
    const repo = await git().createRepo({ private: opts.private });
    const commit = await pushApp(git(), repo.owner, repo.repo);
    if (opts.private) await expectStatus(await call(t, `/api/projects/${p.id}/clone-token`, { method: "PATCH", json: { token: git().token } }), 200);
    await expectStatus(await call(t, `/api/projects/${p.id}/git/link`, { json: { provider: "gitea", owner: repo.owner, repo: repo.repo } }), 200);
    if (vars.length) await setVars(t, p.id, vars);
    return { p, repo, commit };
  }

  const setVars = async (t: Member, projectId: string, upserts: Array<{ key: string; value: string; isSecret?: boolean }>) =>
    expectStatus(await call(t, `/api/projects/${projectId}/env`, { method: "PATCH", json: { upserts } }), 200);

  const deploy = async (t: Member, projectId: string) => expectBody(await call(t, "/api/deployments", { json: { projectId } }), 201, DeploymentSchema);

  const read = async (t: Member, id: string) => expectBody(await call(t, `/api/deployments/${id}`), 200, DeploymentSchema);

  /** Polls the deployment until its status is one of `statuses`. */
  async function waitFor(t: Member, id: string, statuses: string[], timeoutMs = 60_000): Promise<Deployment> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const d = await read(t, id);
      if (statuses.includes(d.status)) return d;
      if (Date.now() > deadline) throw new Error(`deployment ${id} is ${d.status} after ${timeoutMs} ms (${d.failureReason ?? ""})`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  const row = async (id: string) => (await h().db.select().from(deployments).where(eq(deployments.id, id)))[0]!;

  /** The port the current deployment of the project's production environment listens on, read from the database (what a proxy reads). */
  async function currentPort(projectId: string): Promise<number | null> {
    const [r] = await h()
      .db.select({ port: deployments.port })
      .from(deployments)
      .innerJoin(environments, eq(environments.id, deployments.environmentId))
      .where(and(eq(deployments.projectId, projectId), eq(deployments.current, true), eq(environments.name, "production")));
    return r?.port ?? null;
  }

  /** The app's answer on a port; `instance` is new at every start of the app (its `pid` is its sandbox's own: the same small number every time). */
  async function askApp(port: number, path = "/"): Promise<{ version: string; builtAt: number; pid: number; instance: string; env: Record<string, string> }> {
    const res = await fetch(`http://127.0.0.1:${port}${path}`);
    expect(res.status).toBe(200);
    return (await res.json()) as never;
  }

  /** Every log line of a deployment, in order. */
  const logsOf = async (id: string) =>
    (await h().db.select().from(logLines).where(eq(logLines.deploymentId, id)).orderBy(logLines.seq)).map((l) => ({
      kind: l.kind,
      stream: l.stream,
      message: l.message,
    }));

  /** An upload deployment of the fixture app: the tarball put in the upload store, the deployment queued through the store (as build/access does). */
  async function uploadDeployment(t: Member, projectId: string, tarball?: Uint8Array) {
    const bytes = tarball ?? (await appTarball());
    const key = objectKeyFor(t.orgId, newId("ups"));
    const uploads = h().node.services.uploads!;
    if (uploads.kind !== "relay") throw new Error("the runner suites use the relay store");
    await uploads.receive(key, new Blob([bytes as Uint8Array<ArrayBuffer>]).stream(), 64 * 1024 * 1024);
    const [env] = await h()
      .db.select()
      .from(environments)
      .where(and(eq(environments.projectId, projectId), eq(environments.name, "production")));
    const d = await h().db.transaction((tx) =>
      insertDeployment(tx, { orgId: t.orgId, projectId, environmentId: env!.id, source: "upload", artifactKey: key, createdBy: t.userId }, new Date()),
    );
    h().node.services.wakeRunner?.();
    return d;
  }

  /** Notification events of a category for the project. */
  const events = async (projectId: string, category: string) =>
    (
      (await h().db.execute(
        sql`select category, title, message, data from notification_events where project_id = ${projectId} and category = ${category}`,
      )) as unknown as {
        rows: Array<{ category: string; title: string; message: string; data: Record<string, unknown> }>;
      }
    ).rows;

  /**
   * The events of a category once at least `count` are there (or after 10 s): the runner
   * records a state, then emits its event, so a reader that saw the state may be early.
   */
  async function eventsOnce(projectId: string, category: string, count = 1) {
    const deadline = Date.now() + 10_000;
    for (;;) {
      const found = await events(projectId, category);
      if (found.length >= count || Date.now() > deadline) return found;
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  return { call, gitProject, setVars, deploy, read, waitFor, row, currentPort, askApp, logsOf, uploadDeployment, events, eventsOnce };
}

/** A live host process of a deployment: its host pid, its command name (/proc/<pid>/comm) and its cgroup's name (`<deploymentId>.web.3`: one per start). */
export interface DeploymentProcess {
  pid: number;
  name: string;
  group: string;
}

/**
 * The live (not zombie) host processes of a deployment, found by their cgroup:
 * the runner puts every build step in `<...>/wsp-<key>/<deploymentId>.<n>` and
 * every app process in `<deploymentId>.<process>.<n>` (sandbox/cgroups.ts), and
 * nothing a step or app starts leaves its group (fork, setsid and double forks
 * included). The pid an app reports is its sandbox's own (a small number in its
 * pid namespace), so liveness is asked of the host this way. One pass over
 * /proc: linear in the number of processes, each cgroup file read once.
 */
export function processesOf(deploymentId: string): DeploymentProcess[] {
  const prefix = `${deploymentId}.`;
  const found: DeploymentProcess[] = [];
  let names: string[];
  try {
    names = readdirSync("/proc");
  } catch {
    return found;
  }
  for (const name of names) {
    const code = name.charCodeAt(0);
    if (code < 48 || code > 57) continue;
    try {
      const cgroups = readFileSync(`/proc/${name}/cgroup`, "utf8");
      // "<id>:<controllers>:<path>" per line; a path segment names the group.
      let group: string | undefined;
      for (const line of cgroups.split("\n")) {
        group ??= line
          .slice(line.indexOf(":", line.indexOf(":") + 1) + 1)
          .split("/")
          .find((segment) => segment.startsWith(prefix));
      }
      if (group === undefined) continue;
      const stat = readFileSync(`/proc/${name}/stat`, "utf8");
      if (stat.slice(stat.lastIndexOf(")") + 2)[0] === "Z") continue;
      found.push({ pid: Number(name), name: readFileSync(`/proc/${name}/comm`, "utf8").trim(), group });
    } catch {
      // exited while we looked
    }
  }
  return found;
}

/** Waits (polling every 50 ms, at most `timeoutMs`) until no process of the deployment is left; returns what is left then (empty: none). */
export async function untilNoProcessOf(deploymentId: string, timeoutMs = 10_000): Promise<DeploymentProcess[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const left = processesOf(deploymentId);
    if (left.length === 0 || Date.now() > deadline) return left;
    await new Promise((r) => setTimeout(r, 50));
  }
}
