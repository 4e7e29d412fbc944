/**
 * The deployments API: queue a deployment of a project's source, read one, cancel
 * it, promote an older ready one (rollback). The self-hosted runner moves them
 * past `queued`; an upload deployment's source is its own durable artifact (queue.ts),
 * and so is a local-folder project's snapshot (self-hosted: the injected
 * `localFolders` service packs it; this file imports no node:fs, it runs on the Worker too).
 *
 * A git deployment pins its commit when queued: the branch's head, read from the
 * host now. A given `commit` must be the head of a branch on the host (the given
 * branch, else any): git smart HTTP cannot tell whether an arbitrary older commit
 * exists without fetching the repository, so the API accepts only what it can check.
 */
import { z } from "@hono/zod-openapi";
import type { EnvironmentRow } from "../projects/environments-store";
import { HOST_502, listRepository, readFailure, repositoryOf } from "../projects/git-remote";
import { BranchName, EnvironmentName } from "../projects/schema";
import { findProject, type ProjectRow } from "../projects/store";
import type { AppContext } from "../../shared/http/context";
import { ApiError, badRequest } from "../../shared/http/errors";
import { pathId } from "../../shared/http/params";
import { defineRoute, jsonRequest, jsonResponse } from "../../shared/http/route";
import { callerOf, createRouter } from "../../shared/http/router";
import { DeploymentSchema, deploymentView } from "./schema";
import { PLACEMENTS } from "../../shared/db/schema";
import { recordAudit } from "../operations/audit/record";
import { Labels } from "../servers/schema";
import { dropForwardedCredential, storeForwardedCredential, sweepForwardedCredentials } from "../servers/job-credentials";
import { readSettings } from "../settings/store";
import type { PlacementChoice } from "./placement";
import { currentWaiting, placementFor } from "./placement-store";
import { disabledConflict, environmentFor, insertQueued, queueLocal, queueUpload } from "./queue";
import { discardArtifact, STORAGE_CAPS_DESCRIPTION } from "./artifacts";
import { cancelDeploymentFrom, type DeploymentRow, findDeployment, lastUpload, type NewDeployment, promoteDeployment, transitionsOf } from "./store";

const TAGS = ["Deployments"];

/** No control characters: the credential reaches git through its line-based credential-helper protocol. */
const credentialText = (max: number) =>
  z
    .string()
    .min(1)
    .max(max)
    .refine((v) => ![...v].some((ch) => ch.charCodeAt(0) < 0x20 || ch.charCodeAt(0) === 0x7f), "must not contain control characters (newlines included)");

const ForwardedGitCredential = z.strictObject({ username: credentialText(256), password: credentialText(4096) }).openapi("ForwardedGitCredential", {
  description:
    "Git identity forwarding (Settings `forwardGitToServer`): the caller's own git credential for the repository's host, as `git credential fill` answers it (`wsp deploy` sends it when the setting is on). Only for a project with a linked repository, and only when the caller's `forwardGitToServer` is on (400 naming `gitCredential` otherwise). Ephemeral: stored encrypted for this deployment only, handed to the runner holding its lease for its clone (in place of the project's or Settings clone token) and deleted when the clone starts, when the deployment leaves `queued`/`building`, or 30 minutes after it was sent, whichever is first. Never returned, never logged, never in a backup.",
});
const COMMIT = /^[0-9a-fA-F]{40}$/;

const CreateBody = z
  .strictObject({
    projectId: z.string().min(1).max(64),
    environment: EnvironmentName.optional().openapi({ description: "Omitted: the production environment" }),
    branch: BranchName.optional().openapi({
      description: "Git: the branch to deploy; omitted: the environment's branch (previews), else the project's deploy branch",
    }),
    commit: z
      .string()
      .refine((v) => COMMIT.test(v), "must be a 40-character hex commit SHA")
      .optional()
      .openapi({ description: "Git: a 40-hex commit; it must be the head of a branch on the host (the given branch, else any)" }),
    target: z.enum(PLACEMENTS).optional().openapi({
      description:
        "Where it builds and runs, winning over Settings: `local`: this self-hosted instance's runner (400 on the cloud, which has none); `server`: a build server. Omitted: `server` when `serverId` or `labels` is sent, else Settings decide (see the operation's description)",
    }),
    serverId: z.string().trim().min(1).max(64).optional().openapi({
      description: "The build server (`srv_…`) it must run on (implies `server`); 400 when it is not one of the organization's servers",
    }),
    labels: Labels.optional().openapi({
      description: "Without `serverId`: run on any online server of the organization carrying every one of these labels (implies `server`)",
    }),
    gitCredential: ForwardedGitCredential.optional(),
  })
  .openapi("DeploymentCreate");

const PLACEMENT_DOC = [
  "Placement (`placement`, `serverId`, `serverLabels` on the answer) is resolved now: the deploy's `target`/`serverId`/`labels` win (400 naming `target` for `local` on the cloud; `serverId` for a server that is not the organization's; `serverId` or `labels` with `target: local`; `labels` with `serverId`, which leaves nothing to match);",
  "else the caller's Settings: `defaultDeployTarget` `local` or `server` (with `defaultServerId`), else `buildMode` (`local`; `server`; `auto`: local when this self-hosted instance runs its runner, else a server).",
  "On the cloud every deployment goes to a server (a Settings `local` is ignored there). A server placement without a named server (per deploy or the Settings default) takes any online, non-draining server of the organization carrying every requested label.",
  "When no server can take it, it stays `queued` with `waitingFor` saying why; reads recompute it.",
].join(" ");

const IdParam = z.object({ id: pathId("id", "The deployment id (`dpl_…`)") });
const CONFLICT_409 = { description: "See the message: the deployment is not in a state that allows this" };

const create = defineRoute({
  method: "post",
  path: "/deployments",
  tags: TAGS,
  summary: "Queue a deployment of a project",
  description: [
    "Queues a deployment of one environment (`environment` omitted: production) from a source pinned now.",
    "A project with a linked repository deploys a commit: the head of `branch` (else the environment's branch for a preview, else the project's deploy branch), read from the host now with the project's clone token; `commit` pins a commit that must be the head of a branch on the host (the given branch, else any; an older commit cannot be checked without fetching the repository, so it is refused: 400 naming `commit`).",
    "An upload project redeploys its last uploaded folder (the newest scanned, unexpired upload session an ensure used for it, else the folder of its last upload deployment, copied from a deployment of that folder whose artifact is still stored), copied to the new deployment's own durable artifact (it outlives the session and every upload sweep), with the project's compose services (else the session's parsed ones). 409 when the uploaded folder is no longer stored (an artifact is removed once its deployment failed, was canceled or was pruned; an older folder is never deployed in its place).",
    "A local-folder project (self-hosted, POST /api/projects/import) snapshots its folder now: a gzipped tarball of its files honouring `.gitignore` (any depth) and the root `.dockerignore`, without `.git/`, symbolic links (never followed, wherever they point) or special files, stored as the deployment's own artifact (source `local`); 409 when the folder no longer exists, is no longer under an allowed root, has no files, or is over the upload limits; 409 on the cloud.",
    "400 naming `environment` when the project has no such environment, `branch` when the host has no such branch, `commit` when it is no branch head there; 404 for a project that is not the caller's; 409 when the project is disabled or has no source (no linked repository and no upload); 409 when the linked repository no longer answers; 502 when the host is unreachable.",
    STORAGE_CAPS_DESCRIPTION,
    PLACEMENT_DOC,
    "Answers 201 with the `queued` deployment; the self-hosted runner builds it.",
  ].join(" "),
  permission: "project:write",
  idempotent: true,
  request: { body: jsonRequest(CreateBody) },
  responses: {
    201: jsonResponse(DeploymentSchema, "The queued deployment"),
    409: { description: "See the message: the project is disabled or has no source, or the organization's storage is at a cap" },
    502: HOST_502,
  },
});

const read = defineRoute({
  method: "get",
  path: "/deployments/{id}",
  tags: TAGS,
  summary: "One deployment, with every transition",
  description:
    "Status, source, commit, `current`, failure reason and every transition with its time. Accepts a deployment-session token (`wsd_…`) of the deployment's project. 404 for a deployment that is not the caller organization's.",
  permission: "project:deployment:list",
  request: { params: IdParam },
  responses: { 200: jsonResponse(DeploymentSchema, "The deployment") },
});

const cancel = defineRoute({
  method: "post",
  path: "/deployments/{id}/cancel",
  tags: TAGS,
  summary: "Cancel a queued or building deployment",
  description:
    "A `queued` or `building` deployment becomes `canceled` (its runner kills the build's process group within seconds). Its artifact (upload, local) is removed: at once for a queued one, by its runner for a building one (with its work directory). 409 for any other state (deploying, ready, failed, canceled). No request body.",
  permission: "project:write",
  request: { params: IdParam },
  responses: { 200: jsonResponse(DeploymentSchema, "The canceled deployment"), 409: CONFLICT_409 },
});

const promote = defineRoute({
  method: "post",
  path: "/deployments/{id}/promote",
  tags: TAGS,
  summary: "Make a ready deployment its environment's current one (rollback)",
  description:
    "A `ready`, non-current deployment becomes its environment's current deployment without a rebuild; the previous current one stays `ready` with `current: false`. One switch at a time per environment: concurrent promotes leave exactly one current. Self-hosted: the runner starts it from its kept build, and the edge holds requests until it answers, then the previous app stops. 409 when the deployment is not ready, already current, crashed, or its build was pruned (the runner keeps the newest 3 superseded builds per environment). No request body.",
  permission: "project:write",
  request: { params: IdParam },
  responses: { 200: jsonResponse(DeploymentSchema, "The promoted deployment"), 409: CONFLICT_409 },
});

type Source = Pick<NewDeployment, "source" | "gitProvider" | "gitOwner" | "gitRepo" | "branch" | "commitSha">;

/** The git source pinned now: the branch's head on the host, or the given commit once the host shows it as a branch head. */
async function gitSource(c: AppContext, project: ProjectRow, env: EnvironmentRow, body: z.infer<typeof CreateBody>): Promise<Source | undefined> {
  const repository = repositoryOf(project);
  if (!repository) return undefined;
  // A forwarded credential reads the host too: the repository may be one only the caller can reach.
  const listing = await listRepository(c, project, repository, body.gitCredential);
  if (!listing.ok) throw readFailure(listing, repository);
  const wanted = body.branch ?? (env.kind === "preview" ? env.branch : null) ?? project.gitBranch ?? project.gitDefaultBranch ?? listing.headBranch;
  const commit = body.commit?.toLowerCase();
  let branch = wanted ? listing.branches.find((b) => b.name === wanted) : undefined;
  if (commit !== undefined) {
    if (branch?.commit !== commit) {
      if (body.branch !== undefined) throw badRequest("commit", `${commit} is not the head of ${body.branch} on the host`);
      branch = listing.branches.find((b) => b.commit === commit);
      if (!branch) throw badRequest("commit", `${commit} is not the head of any branch on the host (an older commit cannot be checked without fetching)`);
    }
  } else if (!branch) {
    if (body.branch !== undefined) throw badRequest("branch", `The repository has no branch ${body.branch}`);
    throw new ApiError(
      "conflict",
      wanted
        ? `The deploy branch ${wanted} no longer exists on the host: set another with POST /api/projects/{id}/branch`
        : "The repository has no branch to deploy",
    );
  }
  return {
    source: "git",
    gitProvider: repository.provider,
    gitOwner: repository.owner,
    gitRepo: repository.repo,
    branch: branch!.name,
    commitSha: branch!.commit,
  };
}

/** The per-deploy placement choice, checked against itself and the runtime (the server's organization is checked by placementFor). */
/** One audit row per queued deployment: where it goes, never its source's credentials. */
const auditCreated = (c: AppContext, row: DeploymentRow) =>
  recordAudit(c, {
    action: "deployment.created",
    target: { kind: "deployment", id: row.id },
    details: { projectId: row.projectId, environmentId: row.environmentId },
  });

function placementChoice(c: AppContext, body: z.infer<typeof CreateBody>): PlacementChoice {
  const { target, serverId, labels } = body;
  if (target === "local" && c.get("config").mode === "cloud") {
    throw badRequest("target", "The cloud has no local runner: every deployment goes to a build server (omit target, or send `server`)");
  }
  if (target === "local" && serverId !== undefined) throw badRequest("serverId", "serverId names a build server: send it with target `server` (or no target)");
  if (target === "local" && labels !== undefined) throw badRequest("labels", "labels choose a build server: send them with target `server` (or no target)");
  if (serverId !== undefined && labels !== undefined)
    throw badRequest("labels", "labels choose among servers; with serverId there is nothing to choose: send one or the other");
  return { target, serverId, labels };
}

/** A just-queued deployment's view (still `queued`), then the runner woken to claim it. */
export async function queuedView(c: AppContext, orgId: string, id: string) {
  const view = await viewOf(c, orgId, id);
  c.get("services").wakeRunner();
  return view;
}

export async function viewOf(c: AppContext, orgId: string, id: string) {
  const { d, environment } = await findDeployment(c.get("db"), orgId, id);
  const transitions = await transitionsOf(c.get("db"), [d.id]);
  const waiting = await currentWaiting(c.get("db"), orgId, [d], c.get("clock")());
  return deploymentView(d, environment, transitions.get(d.id)!, waiting.get(d.id)!);
}

export const deploymentRoutes = createRouter()
  .openapi(create, async (c) => {
    const caller = callerOf(c);
    const body = c.req.valid("json");
    const db = c.get("db");
    const project = await findProject(db, caller.orgId, body.projectId);
    if (project.disabledAt) throw disabledConflict();
    const env = await environmentFor(c, project, body.environment);
    // Before any source is read or copied: a refused placement writes nothing.
    const placed = await placementFor(c, caller.orgId, caller.userId, placementChoice(c, body));
    const forwarded = body.gitCredential;
    if (forwarded) {
      if (!repositoryOf(project)) throw badRequest("gitCredential", "A git credential is only taken for a project with a linked git repository");
      if (!(await readSettings(db, caller)).forwardGitToServer) {
        throw badRequest("gitCredential", "Git identity forwarding is off in your Settings (forwardGitToServer): no credential is taken");
      }
    }
    const git = await gitSource(c, project, env, body);
    let row: DeploymentRow;
    if (git) {
      const now = c.get("clock")();
      row = await insertQueued(
        c,
        caller.orgId,
        project.id,
        { orgId: caller.orgId, projectId: project.id, environmentId: env.id, createdBy: caller.userId, ...git, ...placed },
        undefined,
        // In the deployment's own transaction: a runner that claims it finds the credential.
        forwarded ? (tx, d) => storeForwardedCredential(tx, c.get("keyring"), d, forwarded, now) : undefined,
      );
      // Ended jobs' and expired credentials go with each new deployment too (and with each claim).
      await sweepForwardedCredentials(db, now);
    } else {
      if (body.branch !== undefined || body.commit !== undefined) {
        throw badRequest(body.commit !== undefined ? "commit" : "branch", "The project has no linked git repository");
      }
      const localPath = project.localPath;
      if (localPath !== null) {
        row = await queueLocal(c, { orgId: caller.orgId, userId: caller.userId, project: { ...project, localPath }, env, placed });
        await auditCreated(c, row);
        return c.json(await queuedView(c, caller.orgId, row.id), 201);
      }
      const upload = await lastUpload(db, project.id, c.get("clock")());
      if (!upload) {
        throw new ApiError(
          "conflict",
          "The project has no source to deploy: link a git repository (POST /api/projects/{id}/git/link) or upload a folder (wsp deploy)",
        );
      }
      row = await queueUpload(c, { orgId: caller.orgId, userId: caller.userId, project, env, ...upload, placed });
    }
    await auditCreated(c, row);
    return c.json(await queuedView(c, caller.orgId, row.id), 201);
  })
  .openapi(read, async (c) => c.json(await viewOf(c, callerOf(c).orgId, c.req.valid("param").id), 200))
  .openapi(cancel, async (c) => {
    const { orgId } = callerOf(c);
    const { row, from } = await cancelDeploymentFrom(c.get("db"), orgId, c.req.valid("param").id, c.get("clock")());
    // A queued deployment was never claimed: its artifact goes now (a building one's runner removes it once the build stopped).
    if (from === "queued") await discardArtifact({ db: c.get("db"), uploads: c.get("services").uploads, logger: c.get("logger") }, row.id);
    // A forwarded git credential goes with the job.
    await dropForwardedCredential(c.get("db"), row.id);
    c.get("services").wakeRunner();
    c.get("services").logFeed?.notify([row.projectId]);
    await recordAudit(c, { action: "deployment.canceled", target: { kind: "deployment", id: row.id }, details: { projectId: row.projectId, from } });
    return c.json(await viewOf(c, orgId, row.id), 200);
  })
  .openapi(promote, async (c) => {
    const { orgId } = callerOf(c);
    const row = await promoteDeployment(c.get("db"), orgId, c.req.valid("param").id, c.get("clock")());
    c.get("services").wakeRunner();
    await recordAudit(c, { action: "deployment.promoted", target: { kind: "deployment", id: row.id }, details: { projectId: row.projectId } });
    return c.json(await viewOf(c, orgId, row.id), 200);
  });
