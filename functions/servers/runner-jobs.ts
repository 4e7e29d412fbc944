/**
 * The runner protocol's job routes: RunnerControl (functions/self-hosted/runner/control.ts)
 * over HTTP, for a build server's runner (`wsp runner`) with its runner token. Each route is a
 * thin face of one control method and calls the store function the in-process control
 * (db-control.ts) calls, so there is one way to claim, renew, move, log and read a job.
 *
 * What every job route guarantees (control.ts's header): another organization's deployment
 * answers 404 like an unknown id; a write the server may no longer make (the lease is not its
 * own: canceled, finished, taken over) answers 409, the "not yours" the runner stops on and never
 * retries; every write is safe to repeat.
 */
import { z } from "@hono/zod-openapi";
import type { Context } from "hono";
import type { AppContext } from "../../shared/http/context";
import { ApiError, notFound } from "../../shared/http/errors";
import { defineRoute, jsonRequest, jsonResponse } from "../../shared/http/route";
import { createRouter } from "../../shared/http/router";
import type { DeploymentRow } from "../deployments/store";
import { markReadyIfHeld } from "../deployments/store";
import { cloneCredentialOf, jobContext, runnerDeployment } from "../self-hosted/runner/job-context";
import { cloneCredentialOfJob, sweepForwardedCredentials } from "./job-credentials";
import {
  advance,
  clearServing,
  deploymentsToServe,
  forgetPorts as forgetPortsOf,
  LEASE_MS,
  recordDown,
  releaseJob,
  renewLease,
  setAsleep,
  setCrashed,
  setServing,
} from "../self-hosted/runner/store";
import { TOO_MANY_CLAIMS, TOO_MANY_JOB_CALLS, takeClaim, takeJobCall } from "./limits";
import { appendRunnerLogs, claimForServer, deploymentOfOrg, holdsLease, serves } from "./runner-jobs-store";
import {
  AdvanceBody,
  AsleepBody,
  ClaimQuery,
  CloneCredentialSchema,
  JobContextSchema,
  JobParam,
  LeaseSchema,
  LogBatchAnswerSchema,
  LogBatchBody,
  MAX_CLAIM_WAIT_S,
  MAX_LOG_BATCH_BYTES,
  MAX_LOG_BATCH_LINES,
  RunnerJobSchema,
  SOURCE_URL_SECONDS,
  ServingBody,
  SourceLinkSchema,
} from "./runner-jobs-schema";
import { findServer, recordHeartbeat } from "./store";
import { JOBS_QUEUED } from "../../shared/wake-feed";

const TAGS = ["Runner protocol"];
/** How often a waiting claim looks again: a job queued meanwhile is claimed within this (plus the query). */
const CLAIM_POLL_MS = 300;
/**
 * Where a job feed wakes claims (the Node adapter: a deployment this process queues), the poll only covers what
 * other processes queued and leases that ran out: every idle runner's claim then costs the API a query a second,
 * not three.
 */
const CLAIM_POLL_WITH_FEED_MS = 1000;

export const NOT_YOURS = {
  description: "Not this server's (anymore): the lease is another's, or the job was canceled or finished. The runner stops working on it; do not retry.",
};
export const NOT_FOUND = { description: "No such deployment in the server's organization" };

/** The calling server (the guard set it on every `runner` route). */
export function runnerOf(c: AppContext | Context) {
  const runner = (c as AppContext).get("runner");
  if (!runner) throw new Error("runnerOf used on a route without the runner permission");
  return runner;
}

export const notYours = () =>
  new ApiError("conflict", "This job is not this server's: its lease is another's, or it was canceled or finished. Stop working on it.");

/** The job of the calling server's organization (404 otherwise), after the server's job-call limit. */
export async function jobOf(c: AppContext, id: string): Promise<{ d: DeploymentRow; serverId: string }> {
  const { serverId, orgId } = runnerOf(c);
  await takeJobCall(c, serverId, c.get("clock")());
  const d = await deploymentOfOrg(c.get("db"), orgId, id);
  if (!d) throw notFound("Deployment");
  return { d, serverId };
}

/** Holds while the server holds the job's lease (claimed, building or deploying). */
async function leasedJob(c: AppContext, id: string) {
  const job = await jobOf(c, id);
  if (!holdsLease(job.d, job.serverId)) throw notYours();
  return job;
}

/** Holds while the server holds the lease or serves the job's app. */
async function ownJob(c: AppContext, id: string) {
  const job = await jobOf(c, id);
  if (!holdsLease(job.d, job.serverId) && !serves(job.d, job.serverId)) throw notYours();
  return job;
}

/** Holds while the server serves the job's app. */
export async function servedJob(c: AppContext, id: string) {
  const job = await jobOf(c, id);
  if (!serves(job.d, job.serverId)) throw notYours();
  return job;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export const jobRoute = <M extends "get" | "post" | "put" | "delete">(method: M, suffix: string) => ({
  method,
  path: `/runner/jobs/{id}${suffix}`,
  tags: TAGS,
  permission: "runner" as const,
});

const claim = defineRoute({
  method: "post",
  path: "/runner/claim",
  tags: TAGS,
  summary: "Claim one job (long poll)",
  description: `Runner token only. Claims the oldest deployment this server may build: placed on a server (\`placement: server\`), of its organization, and either placed on this server (\`serverId\`) or on any server whose labels include all of the deployment's \`serverLabels\`. A deployment whose lease ran out (its server died) is taken over. Nothing while the server is draining. Waits up to \`wait\` seconds (at most ${MAX_CLAIM_WAIT_S}) for one, looking again every ${CLAIM_POLL_MS} ms (on a self-hosted instance: at once when it queues a deployment, and every ${CLAIM_POLL_WITH_FEED_MS} ms for what another process queued); 204 when none came. The claimed job is \`building\` under a ${LEASE_MS / 1000} s lease held by this server (\`claimedBy\` = its id): renew it every ${LEASE_MS / 3000} s. Two servers claiming at once never get the same job; a job whose answer was lost is claimable again when its lease runs out. Records the time like a heartbeat.`,
  permission: "runner",
  request: { query: ClaimQuery },
  responses: {
    200: jsonResponse(RunnerJobSchema, "The claimed job, now `building`"),
    204: { description: "No job (none claimable, or the server is draining)" },
    429: TOO_MANY_CLAIMS,
  },
});

const renew = defineRoute({
  ...jobRoute("post", "/renew"),
  summary: "Renew a job's lease",
  description: `Pushes the lease ${LEASE_MS / 1000} s on from now. Idempotent. 409 when the job is no longer this server's: it aborts.`,
  request: { params: JobParam },
  responses: { 200: jsonResponse(LeaseSchema, "Renewed"), 404: NOT_FOUND, 409: NOT_YOURS, 429: TOO_MANY_JOB_CALLS },
});

const advanceRoute = defineRoute({
  ...jobRoute("post", "/advance"),
  summary: "Move a job to its next state",
  description:
    "Moves the job from one of `from` to `to` (recorded in its transitions, with `failureReason` when failed). 409 when it is no longer this server's or in none of `from` (canceled meanwhile, or this move was already made): the runner stops.",
  bodyLimit: 16 * 1024,
  request: { params: JobParam, body: jsonRequest(AdvanceBody) },
  responses: { 200: jsonResponse(RunnerJobSchema, "Moved"), 404: NOT_FOUND, 409: NOT_YOURS, 429: TOO_MANY_JOB_CALLS },
});

const ready = defineRoute({
  ...jobRoute("post", "/ready"),
  summary: "The job's app answers: ready and current",
  description:
    "The `deploying` job becomes `ready` and its environment's current deployment (the previous one no longer is). Report where the app listens (PUT …/serving) first. A repeat after it was made ready answers the same job.",
  request: { params: JobParam },
  responses: { 200: jsonResponse(RunnerJobSchema, "Ready and current"), 404: NOT_FOUND, 409: NOT_YOURS, 429: TOO_MANY_JOB_CALLS },
});

const release = defineRoute({
  ...jobRoute("post", "/release"),
  summary: "Hand an unfinished job back to the queue",
  description: "The runner stops (SIGTERM): the job goes back to `queued` (recorded) with no lease, for any eligible server to claim.",
  request: { params: JobParam },
  responses: { 204: { description: "Back in the queue" }, 404: NOT_FOUND, 409: NOT_YOURS, 429: TOO_MANY_JOB_CALLS },
});

const logs = defineRoute({
  ...jobRoute("post", "/logs"),
  summary: "Append a batch of log lines",
  description: `Build and runtime lines of the job, each with the runner's own \`seq\` (from 1, increasing per job): only lines above the highest sequence stored for the job are stored, in order, so a retried batch is stored once. At most ${MAX_LOG_BATCH_LINES} lines and ${MAX_LOG_BATCH_BYTES / 1024 / 1024} MiB per batch (400 naming \`lines\`, 413). Mask secrets before sending. While the server holds the lease or serves the app; the lines are read through the deployment's and the project's log routes.`,
  bodyLimit: MAX_LOG_BATCH_BYTES,
  request: { params: JobParam, body: jsonRequest(LogBatchBody) },
  responses: { 200: jsonResponse(LogBatchAnswerSchema, "Stored (or already stored)"), 404: NOT_FOUND, 409: NOT_YOURS, 429: TOO_MANY_JOB_CALLS },
});

const context = defineRoute({
  ...jobRoute("get", ""),
  summary: "Read the job: its pinned project and decrypted environment",
  description:
    "The deployment, its project's resources and options as pinned when queued, its environment, and its variables with secrets decrypted (`secrets` lists their values for masking). Only for the server holding the job's lease or serving its app (restarting it); never logged. Keep it in memory only.",
  request: { params: JobParam },
  responses: { 200: jsonResponse(JobContextSchema, "The job's context"), 404: NOT_FOUND, 409: NOT_YOURS, 429: TOO_MANY_JOB_CALLS },
});

const cloneCredential = defineRoute({
  ...jobRoute("get", "/clone-credential"),
  summary: "Read the clone credential of a git job",
  description:
    "What to clone the job's repository with: `forwarded`, the queuing user's own git credential when `wsp deploy` forwarded it (Settings `forwardGitToServer`; deleted by this read), else `token`, the project's clone token or the Settings token of the user who queued it, or neither. Only while this server holds the job's lease (409 after it ends); never logged. Use it for this clone only.",
  request: { params: JobParam },
  responses: { 200: jsonResponse(CloneCredentialSchema, "The clone credential"), 404: NOT_FOUND, 409: NOT_YOURS, 429: TOO_MANY_JOB_CALLS },
});

const source = defineRoute({
  ...jobRoute("get", "/source"),
  summary: "Where to download an upload or local job's source archive",
  description: `Only while this server holds the job's lease (409 after). With object storage (the cloud, or a self-hosted instance with S3_*): a presigned GET URL valid ${SOURCE_URL_SECONDS / 60} minutes, fetched without a token. On a self-hosted instance storing uploads on disk: the URL of GET …/source/archive, fetched with the runner token. 404 naming the reason when the job has no archive (a git job, or its archive is gone: fail the job).`,
  request: { params: JobParam },
  responses: { 200: jsonResponse(SourceLinkSchema, "The download"), 404: NOT_FOUND, 409: NOT_YOURS, 429: TOO_MANY_JOB_CALLS },
});

const sourceArchive = defineRoute({
  ...jobRoute("get", "/source/archive"),
  summary: "Download an upload or local job's source archive (instances storing uploads on disk)",
  description:
    "The gzipped tarball, streamed. Only while this server holds the job's lease (409 after). 404 when the job has no archive, or the instance keeps uploads in object storage (use the presigned URL GET …/source answers).",
  request: { params: JobParam },
  responses: {
    200: { description: "The archive", content: { "application/gzip": { schema: z.string().openapi({ format: "binary" }) } } },
    404: NOT_FOUND,
    409: NOT_YOURS,
    429: TOO_MANY_JOB_CALLS,
  },
});

const toServe = defineRoute({
  method: "get",
  path: "/runner/serving",
  tags: TAGS,
  summary: "The apps this server must run",
  description:
    "Current, ready, not crashed, awake deployments served by this server (at its start, after a promote or a wake): what must run here. Runner token only; this server's own, nothing else.",
  permission: "runner",
  responses: { 200: jsonResponse(z.object({ items: z.array(RunnerJobSchema) }).openapi("RunnerServing"), "What to run"), 429: TOO_MANY_JOB_CALLS },
});

const forgetPorts = defineRoute({
  method: "post",
  path: "/runner/forget-ports",
  tags: TAGS,
  summary: "The runner (re)started: its recorded ports are forgotten",
  description:
    "The apps of its previous run are gone: every port recorded for an app this server serves is cleared, so edges hold their requests until PUT …/serving reports each one up again. Idempotent.",
  permission: "runner",
  responses: { 204: { description: "Forgotten" }, 429: TOO_MANY_JOB_CALLS },
});

/** The archive key of the server's leased upload or local job; 404 naming why there is none. */
async function archiveOf(c: AppContext, id: string) {
  const { d } = await leasedJob(c, id);
  if (d.source === "git" || !d.artifactKey) throw new ApiError("not_found", "This job has no source archive (a git job, or its archive is gone)");
  const uploads = c.get("services").uploads;
  if (!uploads) throw new ApiError("not_found", "This instance has no upload store: the job's archive cannot be read");
  return { d, key: d.artifactKey, uploads };
}

const putServing = defineRoute({
  ...jobRoute("put", "/serving"),
  summary: "The job's app answers on a port of this server",
  description:
    "Recorded before the job is made ready, so a reader of the current deployment always finds where it listens. While the server holds the lease or serves the app. Idempotent.",
  bodyLimit: 1024,
  request: { params: JobParam, body: jsonRequest(ServingBody) },
  responses: { 204: { description: "Recorded" }, 404: NOT_FOUND, 409: NOT_YOURS, 429: TOO_MANY_JOB_CALLS },
});

const deleteServing = defineRoute({
  ...jobRoute("delete", "/serving"),
  summary: "The job's app stopped on this server",
  description: "Its port is cleared when it is not the current deployment. Only for an app this server serves. Idempotent.",
  request: { params: JobParam },
  responses: { 204: { description: "Recorded" }, 404: NOT_FOUND, 409: NOT_YOURS, 429: TOO_MANY_JOB_CALLS },
});

const down = defineRoute({
  ...jobRoute("post", "/down"),
  summary: "The job's app crashed and is restarting",
  description: "No port until PUT …/serving again, so edges hold its requests. Only for an app this server serves. Idempotent.",
  request: { params: JobParam },
  responses: { 204: { description: "Recorded" }, 404: NOT_FOUND, 409: NOT_YOURS, 429: TOO_MANY_JOB_CALLS },
});

const crashed = defineRoute({
  ...jobRoute("post", "/crashed"),
  summary: "The job's app was given up",
  description: "Crash loop, disk limit, or it could not be restored: it stays the record but no longer serves. Only for an app this server serves.",
  request: { params: JobParam },
  responses: { 200: jsonResponse(RunnerJobSchema, "Recorded"), 404: NOT_FOUND, 409: NOT_YOURS, 429: TOO_MANY_JOB_CALLS },
});

const asleep = defineRoute({
  ...jobRoute("post", "/asleep"),
  summary: "The job's idle app goes to sleep",
  description:
    "If no request came since `cutoff` (one meanwhile keeps it awake: 204, keep it running). Asleep, edges hold its requests and wake it. Only for an app this server serves.",
  bodyLimit: 1024,
  request: { params: JobParam, body: jsonRequest(AsleepBody) },
  responses: {
    200: jsonResponse(RunnerJobSchema, "Asleep: stop the app"),
    204: { description: "Stayed awake" },
    404: NOT_FOUND,
    409: NOT_YOURS,
    429: TOO_MANY_JOB_CALLS,
  },
});

export const runnerJobsRouter = createRouter()
  .openapi(claim, async (c) => {
    const { serverId, orgId } = runnerOf(c);
    const db = c.get("db");
    const clock = c.get("clock");
    await takeClaim(c, serverId, clock());
    // Forwarded git credentials of ended or expired jobs go with each claim (runners poll: none outlives its job for long).
    await sweepForwardedCredentials(db, clock()).catch((error) =>
      c.get("logger").error("job_credentials_sweep_failed", { requestId: c.get("requestId"), error: (error as Error).message }),
    );
    const deadline = Date.now() + c.req.valid("query").wait * 1000;
    let server = await recordHeartbeat(db, serverId, {}, clock());
    for (;;) {
      // Deleted meanwhile: the token is revoked.
      if (!server) throw new ApiError("unauthorized", "Invalid, expired or revoked token");
      if (server.draining) return c.body(null, 204);
      const d = await claimForServer(db, server, clock());
      if (d) return c.json(runnerDeployment(d), 200);
      const left = deadline - Date.now();
      if (left <= 0 || c.req.raw.signal?.aborted) return c.body(null, 204);
      const feed = c.get("services").jobFeed;
      if (feed) await feed.wait(JOBS_QUEUED, Math.min(CLAIM_POLL_WITH_FEED_MS, left), c.req.raw.signal);
      else await sleep(Math.min(CLAIM_POLL_MS, left));
      server = await findServer(db, orgId, serverId);
    }
  })
  .openapi(renew, async (c) => {
    const { d, serverId } = await jobOf(c, c.req.valid("param").id);
    const now = c.get("clock")();
    if (!(await renewLease(c.get("db"), d.id, serverId, now))) throw notYours();
    return c.json({ leaseExpiresAt: new Date(now.getTime() + LEASE_MS).toISOString() }, 200);
  })
  .openapi(advanceRoute, async (c) => {
    const { d, serverId } = await jobOf(c, c.req.valid("param").id);
    const { from, to, failureReason } = c.req.valid("json");
    const moved = await advance(c.get("db"), d.id, serverId, from, to, c.get("clock")(), failureReason);
    if (!moved) throw notYours();
    // A finished deployment ends its build-log streams now (the CLI's `wsp deploy` waits for that end).
    c.get("services").logFeed?.notify([d.projectId]);
    return c.json(runnerDeployment(moved), 200);
  })
  .openapi(ready, async (c) => {
    const { d, serverId } = await jobOf(c, c.req.valid("param").id);
    // A repeat after the answer was lost: already ready and current, served here (a finished job keeps no claim).
    if (d.status === "ready" && d.current && serves(d, serverId)) return c.json(runnerDeployment(d), 200);
    const made = await markReadyIfHeld(c.get("db"), d.id, serverId, c.get("clock")());
    if (!made) throw notYours();
    c.get("services").logFeed?.notify([d.projectId]);
    return c.json(runnerDeployment(made), 200);
  })
  .openapi(release, async (c) => {
    const { d, serverId } = await leasedJob(c, c.req.valid("param").id);
    await releaseJob(c.get("db"), d.id, serverId, c.get("clock")());
    c.get("services").wakeRunner();
    return c.body(null, 204);
  })
  .openapi(logs, async (c) => {
    const { d } = await ownJob(c, c.req.valid("param").id);
    const answer = await appendRunnerLogs(c.get("db"), d, c.req.valid("json").lines);
    if (answer.stored > 0) c.get("services").logFeed?.notify([d.projectId]);
    return c.json(answer, 200);
  })
  .openapi(context, async (c) => {
    const { d } = await ownJob(c, c.req.valid("param").id);
    const job = await jobContext(c.get("db"), c.get("keyring"), d.id);
    if (!job) throw notFound("Deployment");
    return c.json(job, 200);
  })
  .openapi(cloneCredential, async (c) => {
    const { d } = await leasedJob(c, c.req.valid("param").id);
    const db = c.get("db");
    // Scoped to the runner's organization (jobOf found d there): another organization's deployment id never reaches this.
    const credential = await cloneCredentialOfJob(db, c.get("keyring"), d.id, d.orgId, c.get("clock")(), () => cloneCredentialOf(db, c.get("keyring"), d.id));
    if (credential && !("token" in credential)) return c.json({ token: null, forwarded: credential }, 200);
    return c.json({ token: credential?.token ?? null, forwarded: null }, 200);
  })
  .openapi(toServe, async (c) => {
    const { serverId } = runnerOf(c);
    await takeJobCall(c, serverId, c.get("clock")());
    return c.json({ items: (await deploymentsToServe(c.get("db"), serverId)).map(runnerDeployment) }, 200);
  })
  .openapi(forgetPorts, async (c) => {
    const { serverId } = runnerOf(c);
    await takeJobCall(c, serverId, c.get("clock")());
    await forgetPortsOf(c.get("db"), serverId);
    return c.body(null, 204);
  })
  .openapi(source, async (c) => {
    const { d, key, uploads } = await archiveOf(c, c.req.valid("param").id);
    if (uploads.kind === "presigned") {
      const link = await uploads.presignGet({ key, now: c.get("clock")(), expiresInSeconds: SOURCE_URL_SECONDS });
      if (!link) throw new ApiError("not_found", "The job's source archive is gone");
      return c.json({ url: link.url, requiresAuth: false, expiresAt: link.expiresAt.toISOString(), sizeBytes: link.sizeBytes }, 200);
    }
    const sizeBytes = await uploads.size(key);
    if (sizeBytes === null) throw new ApiError("not_found", "The job's source archive is gone");
    const base = uploads.publicUrl ?? new URL(c.req.url).origin;
    return c.json({ url: `${base}/api/runner/jobs/${d.id}/source/archive`, requiresAuth: true, expiresAt: null, sizeBytes }, 200);
  })
  .openapi(sourceArchive, async (c) => {
    const { key, uploads } = await archiveOf(c, c.req.valid("param").id);
    if (uploads.kind === "presigned") throw new ApiError("not_found", "This instance serves source archives by presigned URL: GET …/source");
    const opened = await uploads.open(key);
    if (!opened) throw new ApiError("not_found", "The job's source archive is gone");
    return c.body(opened.body, 200, { "content-type": "application/gzip", "content-length": String(opened.size) });
  })
  .openapi(putServing, async (c) => {
    const { d, serverId } = await ownJob(c, c.req.valid("param").id);
    await setServing(c.get("db"), d.id, serverId, c.req.valid("json").port, c.get("clock")());
    return c.body(null, 204);
  })
  .openapi(deleteServing, async (c) => {
    const { d, serverId } = await servedJob(c, c.req.valid("param").id);
    await clearServing(c.get("db"), d.id, serverId);
    return c.body(null, 204);
  })
  .openapi(down, async (c) => {
    const { d, serverId } = await servedJob(c, c.req.valid("param").id);
    await recordDown(c.get("db"), d.id, serverId);
    return c.body(null, 204);
  })
  .openapi(crashed, async (c) => {
    const { d } = await servedJob(c, c.req.valid("param").id);
    const row = await setCrashed(c.get("db"), d.id, c.get("clock")());
    if (!row) throw notFound("Deployment");
    return c.json(runnerDeployment(row), 200);
  })
  .openapi(asleep, async (c) => {
    const { d, serverId } = await servedJob(c, c.req.valid("param").id);
    const now = c.get("clock")();
    const row = await setAsleep(c.get("db"), d.id, serverId, new Date(c.req.valid("json").cutoff), now);
    return row ? c.json(runnerDeployment(row), 200) : c.body(null, 204);
  });
