/**
 * POST /api/projects/{id}/transfer/to-cloud and …/to-self-hosted (self-hosted
 * only; the cloud has no such routes: 404). A transfer reads the project as a
 * bundle on one side (this instance's store, or the cloud's export route),
 * applies it to the other through that side's public API (apply.ts), then moves
 * the project's home in this instance's database:
 * - to-cloud: the local project becomes a stub of the cloud project (hidden,
 *   disabled, its per-project routes forwarded); its deployments and logs stay here.
 * - to-self-hosted: the cloud project is disabled there (its history stays there)
 *   and marked brought back; the local copy is the project from then on. A project
 *   that came from this instance comes back into its own row (same id, history).
 * Every step is idempotent; the transfer row records the step and the target, so
 * running a failed or interrupted transfer again finishes it. The copy being made
 * stays disabled until the last step, which enables it and switches the home in
 * one go: a failure at any step leaves the project served where it was, and only
 * there (a failed last step is undone).
 */
import { z } from "@hono/zod-openapi";
import type { Context } from "hono";
import type { AppEnv } from "../../shared/http/context";
import { describeError } from "../../shared/http/error-log";
import { ApiError, notFound } from "../../shared/http/errors";
import { readBodyBytes } from "../../shared/http/json-body";
import { defineRoute, jsonResponse } from "../../shared/http/route";
import { callerOf, createRouter } from "../../shared/http/router";
import { newId } from "../../shared/ids";
import { MAX_UPLOAD_BYTES } from "../../shared/storage/limits";
import { artifactKeyFor } from "../../shared/storage/types";
import type { ProjectExport } from "../projects/export-schema";
import { readProjectExport } from "../projects/export-store";
import { ProjectIdParam, ProjectSchema, type ProjectView } from "../projects/schema";
import { findProject } from "../projects/store";
import { applyDomains, applyRest, type CreatedPushHook, createTarget, type TransferStep } from "./apply";
import { recordAudit } from "../operations/audit/record";
import { cloudTargetOf } from "./link-store";
import { linkCredentials } from "./link-service";
import { cloudSide, downloadTarball, type Side, SideRefused, SideUnreachable, selfSide } from "./sides";
import {
  claimTransfer,
  type Direction,
  earlierCloudCopy,
  endTransfer,
  existingLocal,
  otherDirectionRunning,
  hideAgain,
  type Lease,
  LostLease,
  localCopyOf,
  markReturned,
  moveToCloud,
  recordStep,
  recordTarget,
  TRANSFER_HEARTBEAT_MS,
  touchTransfer,
  type TransferRow,
  transferState,
  unhide,
} from "./transfer-store";

const TAGS = ["Transfer (self-hosted)"];
const NO_STORE = { "Cache-Control": { description: "Always `no-store` (the answer may carry a push hook secret)", schema: { type: "string" as const } } };

export const TransferResultSchema = z
  .object({
    direction: z.enum(["to-cloud", "to-self-hosted"]),
    sourceId: z.string().openapi({ description: "The project transferred (this instance's id for to-cloud, the cloud's for to-self-hosted)" }),
    projectId: z.string().openapi({ description: "The project where it now lives" }),
    project: ProjectSchema.nullable().openapi({
      description: "The project as its new home answers GET /api/projects/{id} (null when the cloud could not be read right after the transfer finished)",
    }),
    pushHook: z
      .object({
        url: z.string().openapi({ description: "Where the git host must now send pushes (the new home's push hook)" }),
        secret: z.string().openapi({ description: "The hook's signing secret, shown only in this answer" }),
      })
      .nullable()
      .openapi({
        description:
          "When auto-deploy is on and this transfer created the project's push hook at its new home: point the git host's webhook at `url`, signed with `secret` (shown ONCE, here, as POST /auto-deploy shows it). Null when the new home already had its hook (a round trip: the URL set there before still works) or auto-deploy is off.",
      }),
  })
  .openapi("TransferResult");

const MOVES =
  "What moves: the name, framework, git repository and deploy branch, auto-deploy, build options, resources and sleep mode, every environment with every env var (secret values decrypted on one side and re-encrypted by the other: they travel only inside the API request, never logged), connected domains (the primary stays primary), compose services with their values, the clone token, enabled/disabled, and the source: a git project keeps its repository link; an upload project's latest uploaded tarball (a local-folder project's snapshot, taken now) is uploaded through the other side's own folder-upload flow, so there it is an upload project. What stays: deployments, build and runtime logs, server logs and route rules stay where they were made (route rules are this instance's edge's); the webhook domain is per instance. The push hook is per side: with auto-deploy on, the new home has its own hook URL and secret (`pushHook` in the answer, the secret shown once there), to be set in the git host; a round trip finds the hook made there before.";
const RESUME =
  "Idempotent and resumable: every step sets the target to the source's value, and the transfer's step and target are recorded, so a transfer that failed or was interrupted at any step, run again, finishes without duplicates or lost variables (one running transfer per project, in either direction: a second call meanwhile is 409; a run not heard from for 2 minutes may be taken over, and a run taken over stops at its next step with 409 naming it, without moving the project). The copy is kept disabled until the last step (`finish`) enables it and moves the project, so a failure leaves the project fully usable where it was, served only there, and answers a problem naming the failed `step` (502 when the other side could not be reached or refused; 500 for an unexpected error). A domain the other side refuses (taken there) fails at step `domains`, right after the target is made and before anything else is copied; a target made by that transfer (not the project's earlier copy there) is deleted again. The caller needs `project:admin` here; the writes on this instance are made with the caller's own token and permissions, those on the cloud with the link's.";

const toCloud = defineRoute({
  method: "post",
  path: "/projects/{id}/transfer/to-cloud",
  tags: TAGS,
  summary: "Move a local project to the linked cloud organization",
  description: [
    "Creates the project in the cloud organization this organization is linked to (PUT /api/cloud/link) and copies it there; then the local project becomes a stub: hidden from this instance's lists, disabled (its apps stop, the edge stops serving it), and every per-project route called here with its id (or with the cloud id) is forwarded to the cloud. A project transferred to the cloud before and brought back is copied into the same cloud project again.",
    MOVES,
    RESUME,
    "409 when the organization is not linked. Self-hosted only (404 on the cloud).",
  ].join("\n\n"),
  permission: "project:admin",
  selfHostedOnly: true,
  request: { params: ProjectIdParam },
  responses: {
    200: { ...jsonResponse(TransferResultSchema, "Transferred: the project lives in the cloud"), headers: NO_STORE },
    409: { description: "Not linked; a transfer of this project is running; or a domain is taken in the cloud (`step: domains`)" },
    502: { description: "The cloud could not be reached or refused a step (`step` names it); the project is still usable here" },
  },
});

const toSelfHosted = defineRoute({
  method: "post",
  path: "/projects/{id}/transfer/to-self-hosted",
  tags: TAGS,
  summary: "Bring a cloud project to this instance",
  description: [
    "`id`: a cloud project this instance knows of (listed by GET /api/projects/home), or the local id of a project transferred to the cloud. The cloud's configuration is read with the cloud's POST /api/projects/{id}/export (the link's token needs `project:admin` there) and applied here; a project that came from this instance comes back into its own row (same id, its old deployments and logs), any other is created here. Then the cloud project is disabled in the cloud (it and its history stay there) and this instance stops forwarding its id.",
    MOVES,
    RESUME,
    "Self-hosted only (404 on the cloud).",
  ].join("\n\n"),
  permission: "project:admin",
  selfHostedOnly: true,
  request: { params: ProjectIdParam },
  responses: {
    200: { ...jsonResponse(TransferResultSchema, "Transferred: the project lives on this instance"), headers: NO_STORE },
    409: { description: "Not linked; a transfer of this project is running; or a domain is taken here (`step: domains`)" },
    502: { description: "The cloud could not be reached or refused a step (`step` names it); the project is still usable in the cloud" },
  },
});

interface Run {
  c: Context<AppEnv>;
  orgId: string;
  /** The row as this run claimed it, with the run id every bookkeeping write is conditioned on. */
  row: TransferRow & Lease;
  step: TransferStep;
}

async function enter(run: Run, step: TransferStep): Promise<void> {
  run.step = step;
  await recordStep(run.c.get("db"), run.row, step, run.c.get("clock")());
  await run.c.get("services").cloud?.beforeTransferStep?.(run.row.direction, step);
}

/** The problem a failed step answers, naming it; an unexpected error is logged here and answers 500 naming the step. */
function failure(c: Context<AppEnv>, e: unknown, step: TransferStep): ApiError {
  if (e instanceof ApiError) return new ApiError(e.code, e.message, { ...e.extra, step }, e.headers);
  if (e instanceof LostLease) {
    return new ApiError("conflict", `The transfer stopped at step '${step}': ${e.message}; this run did not move the project`, { step });
  }
  if (e instanceof SideUnreachable) return new ApiError("bad_gateway", `The transfer failed at step '${step}': ${e.message}`, { step });
  if (e instanceof SideRefused) {
    const detail = `The transfer failed at step '${step}': ${e.side} answered ${e.status}: ${e.message}`;
    if (step === "domains" && e.status === 409) return new ApiError("conflict", detail, { step, field: "domains" });
    if (e.status === 403) return new ApiError("forbidden", detail, { step });
    return new ApiError("bad_gateway", detail, { step });
  }
  c.get("logger").error("transfer failed", { requestId: c.get("requestId"), step, ...describeError(e) });
  return new ApiError(
    "internal",
    `The transfer failed at step '${step}' (an unexpected error; quote the requestId when reporting it); run it again to resume`,
    { step },
  );
}

/**
 * Claims the transfer. `sameProject`: every id the project has on either side
 * (this instance's, the cloud's), so a transfer in the other direction that is
 * running on it refuses this one (checked after claiming: of two that start at
 * once, neither runs).
 */
async function begin(c: Context<AppEnv>, direction: Direction, sourceId: string, sameProject: string[]) {
  const { orgId } = callerOf(c);
  const db = c.get("db");
  const link = await linkCredentials(db, c.get("keyring"), orgId);
  if (!link) throw new ApiError("conflict", "This organization is not linked to the cloud: link it first (PUT /api/cloud/link)");
  const running = "A transfer of this project is running; try again when it has finished";
  const row = await claimTransfer(db, orgId, direction, sourceId, c.get("clock")());
  if (!row) throw new ApiError("conflict", running);
  if (await otherDirectionRunning(db, orgId, direction, sameProject, c.get("clock")())) {
    await endTransfer(db, row, { state: "failed", error: "refused: a transfer in the other direction was running" }, c.get("clock")());
    throw new ApiError("conflict", running);
  }
  // The lease is renewed while this run lives, however long a step takes (a large upload); a run whose process died stops renewing it,
  // and one taken over stops too (its next bookkeeping write is refused).
  const beat = setInterval(
    () =>
      void touchTransfer(db, row, c.get("clock")())
        .then((holds) => holds || clearInterval(beat))
        .catch(() => {}),
    TRANSFER_HEARTBEAT_MS,
  );
  (beat as { unref?: () => void }).unref?.();
  return { run: { c, orgId, row, step: "read" } as Run, cloud: cloudSide(link), release: () => clearInterval(beat) };
}

/** Whether the run before this one got past `read` without recording its target (it may have made one). */
const mayHaveCreated = (row: TransferRow) => row.step !== "read" && row.targetId === null;

/**
 * After a failure: whether this run may still undo what it did on the sides and
 * end the transfer failed. A run that lost the transfer (a refused bookkeeping
 * write, or found so now) leaves the sides to the run holding it, which sets
 * every step again; only when that run ended failed (it undid only its own) does
 * this one undo its own too. It never ends the row: that is the holder's.
 */
async function mayUndo(run: Run, e: unknown): Promise<{ lost: boolean; undo: boolean }> {
  const db = run.c.get("db");
  const lost = e instanceof LostLease || !(await touchTransfer(db, run.row, run.c.get("clock")()).catch(() => true));
  if (!lost) return { lost, undo: true };
  return { lost, undo: (await transferState(db, run.row.id).catch(() => undefined)) === "failed" };
}

/** The project's own tarball for the other side: its latest upload, or a snapshot of its folder taken now. */
async function localTarball(
  c: Context<AppEnv>,
  orgId: string,
  bundle: { source: { kind: string }; latestArtifactKey: string | null },
  localPath: string | null,
) {
  const uploads = c.get("services").uploads;
  if (!uploads) return undefined;
  let key = bundle.source.kind === "upload" ? bundle.latestArtifactKey : null;
  let temporary = false;
  const folders = c.get("services").localFolders;
  if (bundle.source.kind === "local" && localPath && folders) {
    key = artifactKeyFor(orgId, newId("trf"));
    temporary = true;
    await folders.snapshot({ path: localPath, key, now: c.get("clock")() });
  }
  if (!key) return undefined;
  try {
    const stored = await uploads.open(key);
    return stored ? await readBodyBytes({ headers: new Headers(), body: stored.body }, MAX_UPLOAD_BYTES) : undefined;
  } finally {
    if (temporary) await uploads.remove(key);
  }
}

async function transferToCloud(c: Context<AppEnv>, id: string) {
  const db = c.get("db");
  const project = await findProject(db, callerOf(c).orgId, id);
  const earlier = await earlierCloudCopy(db, project.orgId, project.id);
  const { run, cloud, release } = await begin(c, "to-cloud", project.id, earlier ? [project.id, earlier] : [project.id]);
  const clock = c.get("clock");
  let target: string | undefined;
  /** What the last step has done so far, for undoing it when it fails half way. */
  let enabledThere = false;
  let moved = false;
  let pushHook: CreatedPushHook | null = null;
  try {
    await enter(run, "read");
    const { latestArtifactKey, ...read } = await readProjectExport(db, c.get("keyring"), run.orgId, project.id, clock());
    const tarball = await localTarball(c, run.orgId, { source: read.source, latestArtifactKey }, project.localPath);
    // The cloud has no local folders: a folder's snapshot arrives as an upload project. The bundle must say so, or the
    // `project` step (gitProvider from the source's kind) would undo the upload binding the `source` step made.
    const kind = read.source.kind === "local" && tarball ? "upload" : read.source.kind;
    const bundle: ProjectExport = { ...read, source: { kind, artifact: null } };

    await enter(run, "create");
    // The cloud project of an earlier round trip is the project's home there: copied into again, never deleted by this run.
    const home = await reusable(cloud, earlier);
    // A target an unfinished run recorded, while the cloud still has it (deleted there since: a new one is made).
    const recorded = run.row.targetId === home ? undefined : await reusable(cloud, run.row.targetId ?? undefined);
    target = home ?? recorded ?? (await createTarget(cloud, bundle, run.row.id, mayHaveCreated(run.row)));
    await recordTarget(db, run.row, target, clock());

    await enter(run, "domains");
    await applyDomainsOrUndo(cloud, target, bundle, target !== home, async () => recordTarget(db, run.row, null, clock()));

    // The cloud's copy stays disabled until the move: a transfer that fails leaves one project serving, this one.
    ({ pushHook } = await applyRest(cloud, target, { ...bundle, disabled: true }, tarball, { step: (s) => enter(run, s), created: async () => {} }));

    await enter(run, "finish");
    if (!bundle.disabled) {
      await cloud.call("POST", `api/projects/${target}/enable`);
      enabledThere = true;
    }
    // The move and the transfer's end are one transaction, made only while this run holds the transfer.
    await moveToCloud(db, run.row, run.orgId, project.id, target, bundle.name, clock());
    moved = true;
  } catch (e) {
    const { lost, undo } = await mayUndo(run, e);
    if (undo && enabledThere && !moved) await cloud.call("POST", `api/projects/${target}/disable`).catch(() => {});
    const error = e instanceof Error ? e.message : String(e);
    if (!lost && !moved) await endTransfer(db, run.row, { state: "failed", error }, clock()).catch(ignoreLost);
    throw failure(c, e, run.step);
  } finally {
    release();
  }
  const view = await cloud.call<ProjectView>("GET", `api/projects/${target}`).catch(() => null);
  return { direction: "to-cloud" as const, sourceId: project.id, projectId: target, project: view, pushHook };
}

/** Ending a failed run: refused when another run took the transfer over meanwhile, which is then that run's to end. */
function ignoreLost(e: unknown): void {
  if (!(e instanceof LostLease)) throw e;
}

/** A cloud project made by an earlier transfer, if the cloud still has it. */
async function reusable(cloud: Side, cloudId: string | undefined): Promise<string | undefined> {
  if (!cloudId) return undefined;
  try {
    await cloud.call("GET", `api/projects/${cloudId}`);
    return cloudId;
  } catch (e) {
    if (e instanceof SideRefused && e.status === 404) return undefined;
    throw e;
  }
}

/**
 * Domains first; refused (taken there), a target that is not the project's home
 * on that side (made by this transfer, in this run or an unfinished earlier one)
 * is deleted again, so nothing has moved.
 */
async function applyDomainsOrUndo(side: Side, target: string, bundle: ProjectExport, disposable: boolean, forget: () => Promise<void>) {
  try {
    await applyDomains(side, target, bundle);
  } catch (e) {
    if (disposable && e instanceof SideRefused && e.status === 409) {
      await side.call("DELETE", `api/projects/${target}`).catch(() => {});
      await forget();
    }
    throw e;
  }
}

async function transferToSelfHosted(c: Context<AppEnv>, id: string) {
  const db = c.get("db");
  const { orgId } = callerOf(c);
  const cloudId = await cloudTargetOf(db, orgId, id);
  // The usual 404, as for any unknown project (a cloud project becomes known here once GET /api/projects/home lists it).
  if (!cloudId) throw notFound("Project");
  const copy = await localCopyOf(db, orgId, cloudId);
  const { run, cloud, release } = await begin(c, "to-self-hosted", cloudId, copy ? [cloudId, copy] : [cloudId]);
  const self = selfSide(c);
  const clock = c.get("clock");
  let target: string | undefined;
  /** What the last step has done so far, for undoing it when it fails half way. */
  let cloudDisabled = false;
  let enabledHere = false;
  let returned = false;
  let pushHook: CreatedPushHook | null = null;
  try {
    await enter(run, "read");
    const bundle = await cloud.call<ProjectExport>("POST", `api/projects/${cloudId}/export`);
    const tarball = bundle.source.artifact ? await downloadTarball(bundle.source.artifact.url) : undefined;

    await enter(run, "create");
    // The local project this cloud project came from (or was brought back into before) is its home here.
    const home = await localCopyOf(db, orgId, cloudId);
    // A copy an unfinished run made and recorded, if it is still here.
    const recorded = run.row.targetId && run.row.targetId !== home ? await existingLocal(db, orgId, run.row.targetId) : undefined;
    target = home ?? recorded;
    if (target) await unhide(db, orgId, target, cloudId);
    else target = await createTarget(self, bundle, run.row.id, mayHaveCreated(run.row));
    await recordTarget(db, run.row, target, clock());

    await enter(run, "domains");
    await applyDomainsOrUndo(self, target, bundle, target !== home, async () => {
      await recordTarget(db, run.row, null, clock());
      target = undefined;
    });

    // The copy here stays disabled until the cloud's is: the two never serve at once.
    ({ pushHook } = await applyRest(self, target, { ...bundle, disabled: true }, tarball, { step: (s) => enter(run, s), created: async () => {} }));

    await enter(run, "finish");
    await cloud.call("POST", `api/projects/${cloudId}/disable`);
    cloudDisabled = !bundle.disabled;
    if (!bundle.disabled) {
      await self.call("POST", `api/projects/${target}/enable`);
      enabledHere = true;
    }
    // The switch and the transfer's end are one transaction, made only while this run holds the transfer.
    await markReturned(db, run.row, orgId, cloudId, target, bundle.name, clock());
    returned = true;
  } catch (e) {
    const { lost, undo } = await mayUndo(run, e);
    if (undo && !returned) {
      // Until a run finishes, the project is the cloud's: the partial copy goes back behind the stub (disabled), the cloud's is enabled again.
      if (enabledHere) await self.call("POST", `api/projects/${target}/disable`).catch(() => {});
      if (target) await hideAgain(db, orgId, target, cloudId);
      if (cloudDisabled) await cloud.call("POST", `api/projects/${cloudId}/enable`).catch(() => {});
    }
    const error = e instanceof Error ? e.message : String(e);
    if (!lost && !returned) await endTransfer(db, run.row, { state: "failed", error }, clock()).catch(ignoreLost);
    throw failure(c, e, run.step);
  } finally {
    release();
  }
  const view = await self.call<ProjectView>("GET", `api/projects/${target}`);
  return { direction: "to-self-hosted" as const, sourceId: cloudId, projectId: target, project: view, pushHook };
}

/** The answer may carry the new push hook's secret: never cached. */
function answer(c: Context<AppEnv>, result: z.infer<typeof TransferResultSchema>) {
  c.header("Cache-Control", "no-store");
  return result;
}

export const transferRouter = createRouter()
  .openapi(toCloud, async (c) =>
    c.json(answer(c, (await audited(c, await transferToCloud(c, c.req.valid("param").id))) as z.infer<typeof TransferResultSchema>), 200),
  )
  .openapi(toSelfHosted, async (c) =>
    c.json(answer(c, (await audited(c, await transferToSelfHosted(c, c.req.valid("param").id))) as z.infer<typeof TransferResultSchema>), 200),
  );

/** One audit row per finished transfer, on this instance (the source project's id and the target's). */
async function audited<R extends { direction: string; sourceId: string; projectId: string | undefined }>(c: Context<AppEnv>, result: R): Promise<R> {
  await recordAudit(c, {
    action: "project.transferred",
    target: { kind: "project", id: result.sourceId },
    details: { direction: result.direction, projectId: result.projectId ?? null },
  });
  return result;
}
