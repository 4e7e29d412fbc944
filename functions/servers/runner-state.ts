/**
 * The rest of the runner protocol (./runner-jobs.ts has the claim, the lease and the job's own
 * reports): events, a job's leftovers (its source archive, its kept build's size and pruning),
 * autoRollback (an environment, its rollback target, the promote) and the reconcile loop's reads.
 * With these every RunnerControl method (functions/self-hosted/runner/control.ts) has one route,
 * each a thin face of the store function the in-process control (db-control.ts) calls.
 *
 * Scope: the runner's organization only (another organization's deployment, environment or
 * project answers 404 like an unknown id; batch reads leave such ids out); a write names a
 * deployment the server holds or serves (or, for a failed job's event and archive, one that just
 * failed where it could have built it: workedOn), else 409 ("not yours", never retried).
 */
import { z } from "@hono/zod-openapi";
import { discardArtifact, recordWorkDirBytes } from "../deployments/artifacts";
import { promoteDeployment } from "../deployments/store";
import { emitNotificationEvent } from "../notifications/fanout";
import { autoRollbackOf } from "../projects/environments-store";
import { runnerDeployment } from "../self-hosted/runner/job-context";
import { sandboxUidOf } from "../self-hosted/runner/sandbox/uids";
import {
  currentOf,
  deploymentStatuses,
  idleDeployments,
  markPruned,
  rollbackTarget,
  stillServing,
  supersededBeyond,
  wakeAlwaysOn,
} from "../self-hosted/runner/store";
import type { AppContext } from "../../shared/http/context";
import { notFound } from "../../shared/http/errors";
import { pathId } from "../../shared/http/params";
import { defineRoute, jsonRequest, jsonResponse } from "../../shared/http/route";
import { createRouter } from "../../shared/http/router";
import { TOO_MANY_JOB_CALLS, takeJobCall } from "./limits";
import { jobOf, jobRoute, NOT_FOUND, NOT_YOURS, notYours, runnerOf, servedJob } from "./runner-jobs";
import { RunnerJobSchema, JobParam } from "./runner-jobs-schema";
import { deploymentIdsOfOrg, environmentOfOrg, projectIdsOfOrg, projectWorkedOn, workedOn } from "./runner-jobs-store";

const TAGS = ["Runner protocol"];
/** Ids per batch read: a runner asks about the apps and work directories it has, never thousands. */
const MAX_IDS = 1000;
const IdList = z.array(z.string().min(1).max(64)).max(MAX_IDS);
const IdsBody = z.strictObject({ ids: IdList });
const IdsSchema = z.object({ ids: z.array(z.string()) }).openapi("RunnerIds");
const MaybeJobSchema = z.object({ deployment: RunnerJobSchema.nullable() }).openapi("RunnerMaybeJob");
const BATCH_LIMIT = 64 * 1024;

/** The runner's events: the four a deployment's life raises (runner.ts). */
const RUNNER_EVENTS = ["deploy.succeeded", "build.failed", "deploy.failed", "service.crashed"] as const;
const EventBody = z.strictObject({
  category: z.enum(RUNNER_EVENTS),
  title: z.string().min(1).max(200),
  message: z.string().max(8000),
  data: z.record(z.string(), z.unknown()).default({}),
});

const EnvParam = z.object({ id: pathId("id", "The environment id (`env_…`)") });
const ProjectParam = z.object({ id: pathId("id", "The project id (`prj_…`)") });

/** The calling server's job call, counted (the routes naming no job). */
async function counted(c: AppContext) {
  const runner = runnerOf(c);
  await takeJobCall(c, runner.serverId, c.get("clock")());
  return runner;
}

/** A job the server holds, serves, or that just failed where it could have built it (workedOn); 409 otherwise. */
async function workedJob(c: AppContext, id: string) {
  const job = await jobOf(c, id);
  if (!workedOn(job.d, job.serverId, c.get("clock")())) throw notYours();
  return job;
}

async function envOf(c: AppContext, id: string) {
  const { orgId, serverId } = await counted(c);
  const env = await environmentOfOrg(c.get("db"), orgId, id);
  if (!env) throw notFound("Environment");
  return { env, serverId };
}

const runnerRoute = <M extends "get" | "post">(method: M, path: string) => ({ method, path, tags: TAGS, permission: "runner" as const });
const ENV_NOT_FOUND = { description: "No such environment in the server's organization" };

const events = defineRoute({
  ...jobRoute("post", "/events"),
  summary: "Record a notification event about the job",
  description: `One of ${RUNNER_EVENTS.map((e) => `\`${e}\``).join(", ")}, for a job this server claimed or serves; the organization, project and deployment are the job's (\`data.deploymentId\` and \`data.environmentId\` are set from it). Delivered to the organization's subscriptions like the in-process runner's.`,
  bodyLimit: 32 * 1024,
  request: { params: JobParam, body: jsonRequest(EventBody) },
  responses: { 204: { description: "Recorded" }, 404: NOT_FOUND, 409: NOT_YOURS, 429: TOO_MANY_JOB_CALLS },
});

const discardSource = defineRoute({
  ...jobRoute("delete", "/source"),
  summary: "The job's source archive is no longer needed",
  description:
    "The job failed, was canceled or its build was pruned: its upload archive is removed from the store (a ready, kept one stays). For a job this server claimed or serves. Idempotent.",
  request: { params: JobParam },
  responses: { 204: { description: "Removed (or nothing to remove)" }, 404: NOT_FOUND, 409: NOT_YOURS, 429: TOO_MANY_JOB_CALLS },
});

const workDirBytes = defineRoute({
  ...jobRoute("put", "/work-dir-bytes"),
  summary: "The size of the job's kept build on this server",
  description:
    "Counted against the organization's storage quota while the deployment is ready and not pruned. The last value holds. For a job this server claimed or serves.",
  bodyLimit: 1024,
  request: { params: JobParam, body: jsonRequest(z.strictObject({ bytes: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER) })) },
  responses: { 204: { description: "Recorded" }, 404: NOT_FOUND, 409: NOT_YOURS, 429: TOO_MANY_JOB_CALLS },
});

const pruned = defineRoute({
  ...jobRoute("post", "/pruned"),
  summary: "The job's kept build is being removed",
  description: "It can no longer be promoted (a promote asks for a redeploy). Only for a deployment this server serves. Idempotent.",
  request: { params: JobParam },
  responses: { 204: { description: "Recorded" }, 404: NOT_FOUND, 409: NOT_YOURS, 429: TOO_MANY_JOB_CALLS },
});

const rollbackTargetRoute = defineRoute({
  ...jobRoute("get", "/rollback-target"),
  summary: "Where a given-up app's environment rolls back to",
  description:
    "The newest ready deployment of the environment older than this one, kept on this server, that never crashed; null when there is none. Only for a deployment this server serves.",
  request: { params: JobParam },
  responses: { 200: jsonResponse(MaybeJobSchema, "The target, or null"), 404: NOT_FOUND, 409: NOT_YOURS, 429: TOO_MANY_JOB_CALLS },
});

const promote = defineRoute({
  ...jobRoute("post", "/promote"),
  summary: "Make a kept ready deployment current again (autoRollback)",
  description:
    "The same promote as POST /api/deployments/{id}/promote, for a deployment this server serves (its rollback target). 409 naming the reason when it cannot be promoted (not ready, pruned), or when it is not this server's.",
  request: { params: JobParam },
  responses: { 200: jsonResponse(RunnerJobSchema, "Current again"), 404: NOT_FOUND, 409: NOT_YOURS, 429: TOO_MANY_JOB_CALLS },
});

const environment = defineRoute({
  ...runnerRoute("get", "/runner/environments/{id}"),
  summary: "An environment's name and whether it rolls back on its own",
  request: { params: EnvParam },
  responses: {
    200: jsonResponse(z.object({ name: z.string(), autoRollback: z.boolean() }).openapi("RunnerEnvironment"), "The environment"),
    404: ENV_NOT_FOUND,
    429: TOO_MANY_JOB_CALLS,
  },
});

const current = defineRoute({
  ...runnerRoute("get", "/runner/environments/{id}/current"),
  summary: "The environment's current deployment",
  description: "The one a new deployment replaces (the runner stops its app after the switch when it runs here); null when none.",
  request: { params: EnvParam },
  responses: { 200: jsonResponse(MaybeJobSchema, "The current deployment, or null"), 404: ENV_NOT_FOUND, 429: TOO_MANY_JOB_CALLS },
});

const superseded = defineRoute({
  ...runnerRoute("get", "/runner/environments/{id}/superseded"),
  summary: "Kept builds of the environment beyond the newest `keep`",
  description:
    "Ready, not current deployments of the environment this server serves, beyond the newest `keep`: their builds may be removed here (report each with POST …/pruned first).",
  request: { params: EnvParam, query: z.strictObject({ keep: z.coerce.number().int().min(0).max(100) }) },
  responses: { 200: jsonResponse(IdsSchema, "Deployment ids, at most 100"), 404: ENV_NOT_FOUND, 429: TOO_MANY_JOB_CALLS },
});

const sandboxUid = defineRoute({
  ...runnerRoute("get", "/runner/projects/{id}/sandbox-uid"),
  summary: "The sandbox uid of a project",
  description:
    "Allocated at the project's first deployment within the server's range (`first`-`last`, its RUNNER_UID_RANGE), the same uid on every later call. Only for a project this server has claimed or serves a deployment of (409 otherwise).",
  request: {
    params: ProjectParam,
    query: z.strictObject({
      first: z.coerce
        .number()
        .int()
        .min(1000)
        .max(2 ** 31 - 2),
      last: z.coerce
        .number()
        .int()
        .min(1000)
        .max(2 ** 31 - 2),
    }),
  },
  responses: {
    200: jsonResponse(z.object({ uid: z.number().int() }).openapi("RunnerSandboxUid"), "The uid"),
    404: { description: "No such project in the server's organization" },
    409: { description: "This server has no job or app of the project" },
    429: TOO_MANY_JOB_CALLS,
  },
});

const projectsAlive = defineRoute({
  ...runnerRoute("post", "/runner/projects/alive"),
  summary: "Which projects still exist",
  description: `Of \`ids\` (at most ${MAX_IDS}), the projects of the server's organization that still exist: the build caches of the others are removed.`,
  bodyLimit: BATCH_LIMIT,
  request: { body: jsonRequest(IdsBody) },
  responses: { 200: jsonResponse(IdsSchema, "The ones that exist"), 429: TOO_MANY_JOB_CALLS },
});

const wake = defineRoute({
  ...runnerRoute("post", "/runner/wake-always-on"),
  summary: "Wake the sleeping apps of always-on projects served here",
  description: "A project's sleep mode changed to `always_on`: its sleeping deployment served by this server wakes (the runner then launches it). Idempotent.",
  responses: { 200: jsonResponse(z.object({ woken: z.number().int() }).openapi("RunnerWoken"), "How many woke"), 429: TOO_MANY_JOB_CALLS },
});

const stillServingRoute = defineRoute({
  ...runnerRoute("post", "/runner/deployments/still-serving"),
  summary: "Which running apps should keep running",
  description: `Of \`ids\` (at most ${MAX_IDS}; apps running on this server), the deployments of the organization still current and not crashed: the others are stopped.`,
  bodyLimit: BATCH_LIMIT,
  request: { body: jsonRequest(IdsBody) },
  responses: { 200: jsonResponse(IdsSchema, "The ones to keep"), 429: TOO_MANY_JOB_CALLS },
});

const idle = defineRoute({
  ...runnerRoute("post", "/runner/deployments/idle"),
  summary: "Which running apps are idle",
  description: `Of \`ids\` (at most ${MAX_IDS}), current deployments of \`auto_sleep\` projects with no request and no start since \`cutoff\`.`,
  bodyLimit: BATCH_LIMIT,
  request: { body: jsonRequest(z.strictObject({ ids: IdList, cutoff: z.iso.datetime({ offset: true }) })) },
  responses: { 200: jsonResponse(IdsSchema, "The idle ones"), 429: TOO_MANY_JOB_CALLS },
});

const statuses = defineRoute({
  ...runnerRoute("post", "/runner/deployments/statuses"),
  summary: "The status of each deployment that exists",
  description: `Of \`ids\` (at most ${MAX_IDS}; work directories on this server), the status of each deployment of the organization that exists: the work directories of the others, and of failed or canceled ones, are removed.`,
  bodyLimit: BATCH_LIMIT,
  request: { body: jsonRequest(IdsBody) },
  responses: {
    200: jsonResponse(z.object({ statuses: z.record(z.string(), z.string()) }).openapi("RunnerStatuses"), "Status per id"),
    429: TOO_MANY_JOB_CALLS,
  },
});

export const runnerStateRouter = createRouter()
  .openapi(events, async (c) => {
    const { d } = await workedJob(c, c.req.valid("param").id);
    const body = c.req.valid("json");
    const event = {
      orgId: d.orgId,
      projectId: d.projectId,
      category: body.category,
      title: body.title,
      message: body.message,
      data: { ...body.data, deploymentId: d.id, environmentId: d.environmentId },
    };
    await emitNotificationEvent(c.get("db"), event, c.get("clock")());
    c.get("services").wakeDeliveries();
    return c.body(null, 204);
  })
  .openapi(discardSource, async (c) => {
    const { d } = await workedJob(c, c.req.valid("param").id);
    await discardArtifact({ db: c.get("db"), uploads: c.get("services").uploads, logger: c.get("logger") }, d.id);
    return c.body(null, 204);
  })
  .openapi(workDirBytes, async (c) => {
    const { d } = await workedJob(c, c.req.valid("param").id);
    await recordWorkDirBytes(c.get("db"), d.id, c.req.valid("json").bytes);
    return c.body(null, 204);
  })
  .openapi(pruned, async (c) => {
    const { d } = await servedJob(c, c.req.valid("param").id);
    await markPruned(c.get("db"), d.id, c.get("clock")());
    return c.body(null, 204);
  })
  .openapi(rollbackTargetRoute, async (c) => {
    const { d, serverId } = await servedJob(c, c.req.valid("param").id);
    const target = await rollbackTarget(c.get("db"), d, serverId);
    return c.json({ deployment: target ? runnerDeployment(target) : null }, 200);
  })
  .openapi(promote, async (c) => {
    const { d } = await servedJob(c, c.req.valid("param").id);
    return c.json(runnerDeployment(await promoteDeployment(c.get("db"), d.orgId, d.id, c.get("clock")())), 200);
  })
  .openapi(environment, async (c) => {
    const { env } = await envOf(c, c.req.valid("param").id);
    return c.json({ name: env.name, autoRollback: autoRollbackOf(env) }, 200);
  })
  .openapi(current, async (c) => {
    const { env } = await envOf(c, c.req.valid("param").id);
    const d = await currentOf(c.get("db"), env.id);
    return c.json({ deployment: d ? runnerDeployment(d) : null }, 200);
  })
  .openapi(superseded, async (c) => {
    const { env, serverId } = await envOf(c, c.req.valid("param").id);
    return c.json({ ids: await supersededBeyond(c.get("db"), env.id, serverId, c.req.valid("query").keep) }, 200);
  })
  .openapi(sandboxUid, async (c) => {
    const { orgId, serverId } = await counted(c);
    const { id } = c.req.valid("param");
    const range = c.req.valid("query");
    const seen = await projectWorkedOn(c.get("db"), orgId, id, serverId);
    if (!seen.found) throw notFound("Project");
    if (!seen.worked) throw notYours();
    return c.json({ uid: await sandboxUidOf(c.get("db"), { id, orgId }, range) }, 200);
  })
  .openapi(projectsAlive, async (c) => {
    const { orgId } = await counted(c);
    return c.json({ ids: await projectIdsOfOrg(c.get("db"), orgId, c.req.valid("json").ids) }, 200);
  })
  .openapi(wake, async (c) => {
    const { serverId } = await counted(c);
    return c.json({ woken: await wakeAlwaysOn(c.get("db"), serverId) }, 200);
  })
  .openapi(stillServingRoute, async (c) => {
    const { orgId } = await counted(c);
    const ids = await deploymentIdsOfOrg(c.get("db"), orgId, c.req.valid("json").ids);
    return c.json({ ids: [...(await stillServing(c.get("db"), ids))] }, 200);
  })
  .openapi(idle, async (c) => {
    const { orgId } = await counted(c);
    const body = c.req.valid("json");
    const ids = await deploymentIdsOfOrg(c.get("db"), orgId, body.ids);
    return c.json({ ids: await idleDeployments(c.get("db"), ids, new Date(body.cutoff)) }, 200);
  })
  .openapi(statuses, async (c) => {
    const { orgId } = await counted(c);
    const ids = await deploymentIdsOfOrg(c.get("db"), orgId, c.req.valid("json").ids);
    return c.json({ statuses: Object.fromEntries(await deploymentStatuses(c.get("db"), ids)) }, 200);
  });
