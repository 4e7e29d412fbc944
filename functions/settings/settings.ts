/**
 * Settings: the workspace preferences of the calling user in the active
 * organization. Every route answers the full read-only state.
 */
import { z } from "@hono/zod-openapi";
import type { AppContext } from "../../shared/http/context";
import { badRequest } from "../../shared/http/errors";
import { defineRoute, jsonRequest, jsonResponse } from "../../shared/http/route";
import { createRouter, ownerOf } from "../../shared/http/router";
import { BuildMode, CloneStrategy, DEPLOY_TARGETS, SettingsSchema } from "./schema";
import { serverExists } from "../servers/store";
import { type AuditEntry, withAudit } from "../operations/audit/record";
import { cloneTokenPatch, readSettings, writeSettings, type SettingsPatch } from "./store";

/** A literal list (not `.nullable()`) so an error's `allowed` names null too. */
const DeployTarget = z
  .literal([...DEPLOY_TARGETS, null])
  // The generator renders only the first literal of a list; state the enum in full.
  .openapi({ type: ["string", "null"], enum: [...DEPLOY_TARGETS, null] });

const BuildModeBody = z.strictObject({ buildMode: BuildMode });
const DeployDefaultsBody = z.strictObject({
  defaultDeployTarget: DeployTarget,
  defaultServerId: z.string().trim().min(1).max(200).nullable().optional(),
});
const CloneCredentialsBody = z.strictObject({
  token: z.string().min(1).max(4096).nullable().openapi({ description: "The git clone token; null clears it" }),
  asDefault: z.boolean().optional().openapi({ description: "Use it as the default for clones (default false)" }),
});
const ClonePreferenceBody = z.strictObject({ preference: CloneStrategy });
const ForwardGitBody = z.strictObject({ enabled: z.boolean() });

const ok = jsonResponse(SettingsSchema, "The settings (defaults when never written)");
/** What every write route shares: its tag, its permission and its answer. */
const writeRoute = { tags: ["Settings"], permission: "settings:write" as const, responses: { 200: ok } };

const get = defineRoute({
  method: "get",
  path: "/settings",
  tags: ["Settings"],
  summary: "Read the caller's workspace settings in the active organization",
  permission: "settings:read",
  responses: { 200: ok },
});

const put = defineRoute({
  ...writeRoute,
  method: "put",
  path: "/settings",
  summary: "Create or update the settings (only buildMode is accepted)",
  request: { body: jsonRequest(BuildModeBody) },
});

const setBuildMode = defineRoute({
  ...writeRoute,
  method: "patch",
  path: "/settings/build-mode",
  summary: "Set the default build mode",
  request: { body: jsonRequest(BuildModeBody) },
});

const setDeployDefaults = defineRoute({
  ...writeRoute,
  method: "patch",
  path: "/settings/deploy-defaults",
  summary: "Set or clear the default deploy target and server",
  description:
    "`server` requires `defaultServerId`, the id of a build server of the active organization (GET /api/servers; anything else is 400 naming `defaultServerId`); for `local`, `cloud` or null a sent server id is ignored and stored null (null clears it). An explicit per-deploy choice always wins over these defaults. A server deleted later leaves the setting pointing nowhere (it is not cleared): a deploy that would go to that default server stays `queued` with `waitingFor: server_deleted`, until another server is chosen per deploy or here.",
  request: { body: jsonRequest(DeployDefaultsBody) },
});

const setCloneCredentials = defineRoute({
  ...writeRoute,
  method: "patch",
  path: "/settings/clone-credentials",
  summary: "Set, replace or clear the saved git clone token",
  description: "The token is encrypted at rest and never returned; the response carries only hasToken, setAt and asDefault.",
  request: { body: jsonRequest(CloneCredentialsBody) },
});

const setClonePreference = defineRoute({
  ...writeRoute,
  method: "patch",
  path: "/settings/clone-strategy-preference",
  summary: "Save the first-time clone strategy choice",
  description: "Anything other than `prompt` stops the first-time-deploy nudge.",
  request: { body: jsonRequest(ClonePreferenceBody) },
});

const setForwardGit = defineRoute({
  ...writeRoute,
  method: "patch",
  path: "/settings/forward-git",
  summary: "Enable or disable forwarding the local git identity to build servers",
  description:
    "When on, `wsp deploy` of a git project reads your local git credential for the repository's host (`git credential fill`, never prompting) and sends it with the deployment (`gitCredential` on POST /api/deployments): held encrypted for that job only, used for its clone in place of the clone token, and deleted when the clone starts, the job ends, or after 30 minutes. Off: no credential is read or taken; the project's or your Settings clone token is used. Replaces the former per-deploy `forwardGitCredentials` flag.",
  request: { body: jsonRequest(ForwardGitBody) },
});

const save = async (c: AppContext, patch: SettingsPatch, audit?: Omit<AuditEntry, "db">) => {
  const settings = await withAudit(
    c,
    (tx) => writeSettings(tx, ownerOf(c), patch, c.get("clock")()),
    // Field names only: the clone token's patch holds its ciphertext.
    () => audit ?? { action: "settings.changed", target: { kind: "settings", id: ownerOf(c).userId }, details: { fields: Object.keys(patch) } },
  );
  return c.json(settings, 200);
};

export const workspaceSettingsRouter = createRouter()
  .openapi(get, async (c) => c.json(await readSettings(c.get("db"), ownerOf(c)), 200))
  .openapi(put, async (c) => save(c, { buildMode: c.req.valid("json").buildMode }))
  .openapi(setBuildMode, async (c) => save(c, { buildMode: c.req.valid("json").buildMode }))
  .openapi(setDeployDefaults, async (c) => {
    const { defaultDeployTarget, defaultServerId } = c.req.valid("json");
    if (defaultDeployTarget === "server" && !defaultServerId) {
      throw badRequest("defaultServerId", "defaultServerId is required when defaultDeployTarget is 'server'");
    }
    if (defaultDeployTarget === "server" && defaultServerId && !(await serverExists(c.get("db"), ownerOf(c).orgId, defaultServerId))) {
      throw badRequest("defaultServerId", "defaultServerId must name a build server of this organization (GET /api/servers)");
    }
    return save(c, { defaultDeployTarget, defaultServerId: defaultDeployTarget === "server" ? defaultServerId : null });
  })
  .openapi(setCloneCredentials, async (c) => {
    const { token, asDefault } = c.req.valid("json");
    return save(c, await cloneTokenPatch(c.get("keyring"), ownerOf(c), token, asDefault ?? false, c.get("clock")()), {
      action: "clone_token.changed",
      target: { kind: "settings", id: ownerOf(c).userId },
      details: { set: token !== null, asDefault: asDefault ?? false },
    });
  })
  .openapi(setClonePreference, async (c) => save(c, { cloneStrategyPreference: c.req.valid("json").preference }))
  .openapi(setForwardGit, async (c) => save(c, { forwardGitToServer: c.req.valid("json").enabled }));
