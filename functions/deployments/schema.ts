/** The deployment's read form, shared by GET /api/deployments/:id and the project's deployment list. */
import { z } from "@hono/zod-openapi";
import { type ConfigSnapshot, DEPLOYMENT_SOURCES, DEPLOYMENT_STATUSES, PLACEMENTS } from "../../shared/db/schema";
import { WAITING_DOC, WAITING_REASONS, type WaitingFor, waitingMessage } from "./placement";
import { OptionsSchema, optionsView } from "../projects/schema";
import type { DeploymentRow, Transition } from "./store";

export const DeploymentStatusSchema = z.enum(DEPLOYMENT_STATUSES).openapi({
  description:
    "queued → building → deploying → ready, or failed / canceled. A runner moves it (the self-hosted adapter runs one; a deployment placed on a build server waits in the queue for that server's runner: see `placement` and `waitingFor`)",
});

const DeploymentServiceSchema = z
  .object({
    name: z.string(),
    image: z.string().nullable(),
    build: z.object({ context: z.string(), dockerfile: z.string().nullable() }).nullable(),
    command: z.string().nullable(),
    ports: z.array(z.string()),
    dependsOn: z.array(z.string()),
  })
  .openapi("DeploymentService");

const Allotment = z.object({ cpuCores: z.number(), memoryMb: z.number() });

const PinnedConfigSchema = z
  .object({
    resources: z.object({ production: Allotment, build: Allotment, diskGb: z.number(), port: z.number() }),
    options: OptionsSchema,
  })
  .openapi("DeploymentConfig", {
    description:
      "The resources and options pinned when it was queued (with the environment's variables, stored encrypted and never returned): what it builds and runs with, also when promoted again. Null for a deployment queued before deployments pinned their configuration (it runs the live one)",
  });

const configView = (c: ConfigSnapshot | null) =>
  c && {
    resources: {
      production: { cpuCores: c.resources.productionCpuCores, memoryMb: c.resources.productionMemoryMb },
      build: { cpuCores: c.resources.buildCpuCores, memoryMb: c.resources.buildMemoryMb },
      diskGb: c.resources.diskGb,
      port: c.resources.port,
    },
    options: optionsView(c.options),
  };

const TransitionSchema = z.object({ status: DeploymentStatusSchema, at: z.string() }).openapi("DeploymentTransition");

export const DeploymentSchema = z
  .object({
    id: z.string(),
    projectId: z.string(),
    environment: z.string(),
    status: DeploymentStatusSchema,
    current: z.boolean().openapi({ description: "The one ready deployment of its environment that serves; an older ready one is `false` and can be promoted" }),
    source: z
      .enum(DEPLOYMENT_SOURCES)
      .openapi({ description: "`git`: a pinned commit of the linked repository; `upload`: an uploaded folder's tarball; `local` (self-hosted)" }),
    gitProvider: z.string().nullable(),
    gitOwner: z.string().nullable(),
    gitRepo: z.string().nullable(),
    branch: z.string().nullable(),
    commitSha: z.string().nullable().openapi({ description: "The commit pinned when queued (git)" }),
    uploadSessionId: z.string().nullable().openapi({ description: "The upload session the tarball came from (upload)" }),
    failureReason: z.string().nullable(),
    createdBy: z.string().nullable().openapi({ description: "The user who queued it; null for a push (auto-deploy) or a removed user" }),
    services: z.array(DeploymentServiceSchema).nullable().openapi({
      description:
        "Upload: the compose services deployed with it (the ensure's, else the scan's), by name; their environment values are stored encrypted and never returned. Null without services",
    }),
    config: PinnedConfigSchema.nullable(),
    createdAt: z.string(),
    startedAt: z.string().nullable().openapi({ description: "When its build started (its first `building` transition); null before" }),
    finishedAt: z.string().nullable().openapi({ description: "When it became ready, failed or canceled" }),
    crashedAt: z.string().nullable().openapi({
      description: "Set when its app crashed more often than the restart policy allows (5 times in 10 minutes): it no longer serves; deploy again",
    }),
    prunedAt: z.string().nullable().openapi({
      description: "Set when the runner removed its kept build (it keeps the newest 3 superseded ones per environment): it can no longer be promoted",
    }),
    transitions: z.array(TransitionSchema).openapi({ description: "Every status it went through, oldest first, with its time (`queued` first)" }),
    placement: z.enum(PLACEMENTS).openapi({
      description:
        "Where it builds and runs, resolved when queued: `local`: the self-hosted instance's in-process runner; `server`: a build server (always on the cloud). Deployments queued before placement existed are `local`",
    }),
    serverId: z.string().nullable().openapi({
      description:
        "`server`: the one server it must run on (the deploy's `serverId`, else Settings' `defaultServerId`); null: any eligible server of the organization",
    }),
    serverLabels: z
      .array(z.string())
      .openapi({ description: "`server` without a required server: the labels an eligible server must all carry (the deploy's `labels`)" }),
    waitingFor: z.enum(WAITING_REASONS).nullable().openapi({ description: WAITING_DOC }),
    waitingMessage: z.string().nullable().openapi({ description: "`waitingFor` in a sentence, with what to do; null when it does not wait" }),
  })
  .openapi("Deployment");

export type DeploymentView = z.infer<typeof DeploymentSchema>;

/** `waiting`: the reason as of now (placement-store.ts currentWaiting); only a queued deployment waits. */
export function deploymentView(d: DeploymentRow, environment: string, transitions: Transition[], waiting: WaitingFor | null): DeploymentView {
  return {
    id: d.id,
    projectId: d.projectId,
    environment,
    status: d.status,
    current: d.current,
    source: d.source,
    gitProvider: d.gitProvider,
    gitOwner: d.gitOwner,
    gitRepo: d.gitRepo,
    branch: d.branch,
    commitSha: d.commitSha,
    uploadSessionId: d.uploadSessionId,
    failureReason: d.failureReason,
    createdBy: d.createdBy,
    services: d.services
      ? Object.entries(d.services)
          .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
          .map(([name, spec]) => ({ name, image: spec.image, build: spec.build, command: spec.command, ports: spec.ports, dependsOn: spec.dependsOn }))
      : null,
    config: configView(d.configSnapshot),
    createdAt: d.createdAt.toISOString(),
    startedAt: transitions.find((t) => t.status === "building")?.at.toISOString() ?? null,
    finishedAt: d.finishedAt?.toISOString() ?? null,
    crashedAt: d.crashedAt?.toISOString() ?? null,
    prunedAt: d.prunedAt?.toISOString() ?? null,
    transitions: transitions.map((t) => ({ status: t.status, at: t.at.toISOString() })),
    placement: d.placement,
    serverId: d.serverId,
    serverLabels: d.serverLabels,
    waitingFor: waiting,
    waitingMessage: waitingMessage(waiting),
  };
}
