/**
 * Applies a transfer bundle (POST /api/projects/{id}/export's shape) to a side
 * through its public API, step by step. Every step sets the target to the
 * bundle's value (PATCH, PUT-like POSTs, an env merge that also deletes keys the
 * bundle lacks), so running the steps again after an interruption converges on
 * the same project: no duplicates, nothing lost.
 */
import type { ProjectExport } from "../projects/export-schema";
import { type Side, SideRefused } from "./sides";

/** Steps in order; a failure names the one that failed. `read` and `finish` are the transfer's own (transfer.ts). */
export const TRANSFER_STEPS = [
  "read",
  "create",
  "domains",
  "source",
  "project",
  "options",
  "resources",
  "environments",
  "env",
  "clone-token",
  "auto-deploy",
  "state",
  "finish",
] as const;
export type TransferStep = (typeof TRANSFER_STEPS)[number];

/** The env merge route's per-request cap on upserts and on deletes. */
const ENV_BATCH = 200;

export interface ApplyHooks {
  /** Called as each step starts (the transfer records it; tests stop a side here). */
  step(step: TransferStep): Promise<void>;
  /** Called once the target project exists, before anything else is copied into it. */
  created(targetId: string): Promise<void>;
}

interface Project {
  id: string;
  name: string;
  framework: string;
}

const gitFields = (b: ProjectExport) => ({
  gitProvider: b.source.kind === "upload" ? "upload" : (b.git?.provider ?? null),
  gitOwner: b.git?.owner ?? null,
  gitRepo: b.git?.repo ?? null,
  gitBranch: b.git?.branch ?? null,
});

/**
 * The framework a transfer creates its target with until the `project` step sets the
 * real one: `transfer.<transfer id>`. It tells the project this transfer made from
 * any other on that side, however named or whenever made, so a retry never adopts
 * someone else's; and unlike a marked name it leaves the free-route slug alone (the
 * slug comes from the name at creation and never changes).
 */
export const transferMarker = (transferId: string) => `transfer.${transferId}`;

/**
 * Creates the target project with the transfer's marker (or, `retried`, finds the
 * one an interrupted run created with it) and returns its id.
 */
export async function createTarget(side: Side, bundle: ProjectExport, transferId: string, retried: boolean): Promise<string> {
  const marker = transferMarker(transferId);
  if (retried) {
    // A run interrupted between the side creating the project and us recording its id: the project is there with this transfer's marker.
    const found = await findMarked(side, marker);
    if (found) return found;
  }
  const git = gitFields(bundle);
  const created = await side.call<Project>("POST", "api/projects", {
    name: bundle.name,
    framework: marker,
    ...(git.gitProvider && git.gitProvider !== "upload" ? { gitProvider: git.gitProvider, gitOwner: git.gitOwner, gitRepo: git.gitRepo } : {}),
    ...(git.gitBranch ? { gitBranch: git.gitBranch } : {}),
  });
  return created.id;
}

/** The project carrying `marker` as its framework (only that transfer creates it); the newest if ever more than one. */
async function findMarked(side: Side, marker: string): Promise<string | undefined> {
  let cursor: string | null = null;
  let newest: string | undefined;
  do {
    const query: string = `api/projects?limit=100${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`;
    const page: { items: Project[]; nextCursor: string | null } = await side.call("GET", query);
    // The list is oldest first, so the last match over all pages is the newest.
    const match = page.items.filter((p) => p.framework === marker).pop();
    if (match) newest = match.id;
    cursor = page.nextCursor;
  } while (cursor);
  return newest;
}

/**
 * Connects the bundle's domains (the primary last, so it ends primary) and removes
 * the target's others. Runs right after create: a hostname the side refuses (409,
 * taken) fails the transfer before anything else was copied.
 */
export async function applyDomains(side: Side, target: string, bundle: ProjectExport): Promise<void> {
  const base = `api/projects/${target}`;
  for (const d of bundle.domains) await side.call("POST", `${base}/connect`, { domain: d.hostname });
  const current = await side.call<{ items: Array<{ hostname: string }> }>("GET", `${base}/domains`);
  const wanted = new Set(bundle.domains.map((d) => d.hostname));
  for (const d of current.items) if (!wanted.has(d.hostname)) await side.call("DELETE", `${base}/domains/${encodeURIComponent(d.hostname)}`);
}

/** The push hook an auto-deploy step created on the target (its secret is shown only then). */
export interface CreatedPushHook {
  url: string;
  secret: string;
}

/**
 * Every step after domains, in order. `tarball`: an upload project's latest, sent
 * through the side's folder-upload flow. Answers the push hook the auto-deploy
 * step created, if it created one.
 */
export async function applyRest(
  side: Side,
  target: string,
  bundle: ProjectExport,
  tarball: Uint8Array<ArrayBuffer> | undefined,
  hooks: ApplyHooks,
): Promise<{ pushHook: CreatedPushHook | null }> {
  const base = `api/projects/${target}`;
  const git = gitFields(bundle);

  await hooks.step("source");
  const uploadSessionId = tarball ? await side.upload(tarball, bundle.name) : undefined;
  if (uploadSessionId || bundle.services.length > 0 || (await side.call<{ items: unknown[] }>("GET", `${base}/services`)).items.length > 0) {
    await side.call("POST", "api/projects/ensure", {
      projectId: target,
      name: bundle.name,
      ...(uploadSessionId ? { uploadSessionId, gitProvider: "upload" } : {}),
      services: bundle.services,
    });
  }

  await hooks.step("project");
  await side.call("PATCH", base, { name: bundle.name, framework: bundle.framework, ...git });

  await hooks.step("options");
  await side.call("POST", `${base}/options`, bundle.options);

  await hooks.step("resources");
  await side.call("PATCH", `${base}/resources`, bundle.resources);

  await hooks.step("environments");
  for (const env of bundle.environments) {
    if (env.kind === "production") continue;
    try {
      await side.call("POST", `${base}/environments`, { name: env.name, branch: env.branch });
    } catch (e) {
      if (!(e instanceof SideRefused && e.status === 409)) throw e; // already there (an earlier run, or a round trip)
    }
  }

  await hooks.step("env");
  for (const env of bundle.environments) await applyEnv(side, base, env);

  await hooks.step("clone-token");
  await side.call("PATCH", `${base}/clone-token`, { token: bundle.cloneToken });

  await hooks.step("auto-deploy");
  let pushHook: CreatedPushHook | null = null;
  if (bundle.git) {
    const answer = await side.call<{ webhookUrl: string | null; webhookSecret: string | null }>("POST", `${base}/auto-deploy`, {
      enabled: bundle.git.autoDeploy,
    });
    if (answer?.webhookUrl && answer.webhookSecret) pushHook = { url: answer.webhookUrl, secret: answer.webhookSecret };
  }

  await hooks.step("state");
  await side.call("POST", `${base}/${bundle.disabled ? "disable" : "enable"}`);
  return { pushHook };
}

/** The environment's variables become exactly the bundle's: upserts of every one, deletes of the others. */
async function applyEnv(side: Side, base: string, env: ProjectExport["environments"][number]): Promise<void> {
  const present: string[] = [];
  let cursor: string | null = null;
  do {
    const query: string = `${base}/env?environment=${encodeURIComponent(env.name)}&limit=100${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`;
    const page: { items: Array<{ key: string }>; nextCursor: string | null } = await side.call("GET", query);
    present.push(...page.items.map((v) => v.key));
    cursor = page.nextCursor;
  } while (cursor);
  const wanted = new Set(env.env.map((v) => v.key));
  const deletes = present.filter((k) => !wanted.has(k));
  const upserts = env.env.map((v) => ({ key: v.key, value: v.value, isSecret: v.isSecret }));
  for (let i = 0; i < Math.max(upserts.length, deletes.length, 1); i += ENV_BATCH) {
    const batch = { environment: env.name, upserts: upserts.slice(i, i + ENV_BATCH), deletes: deletes.slice(i, i + ENV_BATCH) };
    if (batch.upserts.length || batch.deletes.length) await side.call("PATCH", `${base}/env`, batch);
  }
}
