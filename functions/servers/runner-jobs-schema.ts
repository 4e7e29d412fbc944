/** Request and answer shapes of the runner protocol's job routes (./runner-jobs.ts): RunnerControl's data (functions/self-hosted/runner/control.ts) in JSON. */
import { z } from "@hono/zod-openapi";
import { DEPLOYMENT_SOURCES, DEPLOYMENT_STATUSES, LOG_KINDS, LOG_STREAMS } from "../../shared/db/schema";
import { pathId } from "../../shared/http/params";
import { MAX_LINE_CHARS } from "../logs/store";

/** The longest a claim waits for a job before answering 204. */
export const MAX_CLAIM_WAIT_S = 25;
/** Lines per log batch, and the batch's largest body. */
export const MAX_LOG_BATCH_LINES = 1000;
export const MAX_LOG_BATCH_BYTES = 1024 * 1024;

export const JobParam = z.object({ id: pathId("id", "The deployment id (`dpl_…`) the runner claimed") });

export const ClaimQuery = z.strictObject({
  wait: z.coerce
    .number()
    .int()
    .min(0)
    .max(MAX_CLAIM_WAIT_S)
    .default(MAX_CLAIM_WAIT_S)
    .openapi({ description: `Seconds to wait for a job when none is claimable now, 0-${MAX_CLAIM_WAIT_S} (default ${MAX_CLAIM_WAIT_S})` }),
});

const nullableText = z.string().nullable();

export const RunnerJobSchema = z
  .object({
    id: z.string(),
    orgId: z.string(),
    projectId: z.string(),
    environmentId: z.string(),
    status: z.enum(DEPLOYMENT_STATUSES),
    current: z.boolean(),
    source: z.enum(DEPLOYMENT_SOURCES),
    artifactKey: nullableText,
    gitProvider: nullableText,
    gitOwner: nullableText,
    gitRepo: nullableText,
    commitSha: nullableText,
    branch: nullableText,
    services: z.record(z.string(), z.unknown()).nullable(),
    createdBy: nullableText,
  })
  .openapi("RunnerJob");

export const JobContextSchema = z
  .object({
    d: RunnerJobSchema,
    project: z.object({
      id: z.string(),
      orgId: z.string(),
      name: z.string(),
      options: z.record(z.string(), z.unknown()),
      diskGb: z.number(),
      buildMemoryMb: z.number(),
      buildCpuCores: z.number(),
      productionMemoryMb: z.number(),
      productionCpuCores: z.number(),
    }),
    environment: z.object({ id: z.string(), name: z.string(), kind: z.string() }),
    env: z.record(z.string(), z.string()).openapi({ description: "The deployment's variables as pinned when queued, secrets decrypted" }),
    secrets: z.array(z.string()).openapi({ description: "The secret values among them, for masking log lines" }),
    serviceValues: z.record(z.string(), z.record(z.string(), z.string())),
  })
  .openapi("RunnerJobContext");

const WorkingStatus = z.enum(["building", "deploying"]);

export const AdvanceBody = z.strictObject({
  from: z.array(WorkingStatus).min(1).max(2).openapi({ description: "The states the job may be in now" }),
  to: z.enum(["building", "deploying", "failed", "canceled"]),
  failureReason: z.string().min(1).max(4000).optional().openapi({ description: "Why it failed (with `to: failed`)" }),
});

export const LeaseSchema = z.object({ leaseExpiresAt: z.string() }).openapi("RunnerLease");

export const RunnerLogLineSchema = z.strictObject({
  seq: z.number().int().min(1).max(Number.MAX_SAFE_INTEGER).openapi({ description: "The runner's sequence for this job, from 1, increasing" }),
  kind: z.enum(LOG_KINDS),
  stream: z.enum(LOG_STREAMS),
  at: z.iso.datetime({ offset: true }),
  message: z.string().max(MAX_LINE_CHARS),
});

export const LogBatchBody = z.strictObject({ lines: z.array(RunnerLogLineSchema).min(1).max(MAX_LOG_BATCH_LINES) });
export const LogBatchAnswerSchema = z
  .object({
    stored: z.number().int().openapi({ description: "Lines stored now (0 for a batch already stored)" }),
    lastSeq: z.number().int().openapi({ description: "The highest sequence stored for this job" }),
  })
  .openapi("RunnerLogBatchAnswer");

export const CloneCredentialSchema = z
  .object({
    token: z.string().nullable().openapi({ description: "The clone token (decrypted), null when the repository needs none or `forwarded` is given" }),
    forwarded: z.object({ username: z.string(), password: z.string() }).nullable().openapi({
      description:
        "Git identity forwarding: the user's own credential `wsp deploy` sent with the deployment, to clone with as it is (HTTP basic). Deleted on the control plane by this read (a second read answers null): keep it in memory for this clone only, never log it",
    }),
  })
  .openapi("RunnerCloneCredential");

export const ServingBody = z.strictObject({ port: z.number().int().min(1).max(65535) });
export const AsleepBody = z.strictObject({ cutoff: z.iso.datetime({ offset: true }).openapi({ description: "Asleep only when no request came since" }) });

/** How long a source download URL holds: long enough to start the download, short enough to be useless once the job moved on. */
export const SOURCE_URL_SECONDS = 300;

export const SourceLinkSchema = z
  .object({
    url: z.string().openapi({ description: "Where to GET the archive (a gzipped tarball)" }),
    requiresAuth: z
      .boolean()
      .openapi({ description: "true: send the runner token with the GET (the instance streams it); false: a presigned URL of the object store, no token" }),
    expiresAt: z
      .string()
      .nullable()
      .openapi({ description: "When a presigned URL stops working; null for the instance's own route (valid while the lease is)" }),
    sizeBytes: z.number().int().nullable(),
  })
  .openapi("RunnerSourceLink");
