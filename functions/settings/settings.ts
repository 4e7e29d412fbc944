/**
 * Settings: the workspace preferences of the calling user in the active
 * organization. Every route answers the full read-only state.
 */
import type { z } from "@hono/zod-openapi";
import { badRequest } from "../../shared/http/errors";
import { defineRoute, jsonRequest, jsonResponse } from "../../shared/http/route";
import { createRouter, ownerOf } from "../../shared/http/router";
import type { AppContext } from "../../shared/http/context";
import {
  BuildModeBody,
  CloneCredentialsBody,
  ClonePreferenceBody,
  DeployDefaultsBody,
  ForwardGitBody,
  SettingsSchema,
} from "./schema";
import { cloneTokenPatch, readSettings, writeSettings, type SettingsPatch } from "./store";

const ok = jsonResponse(SettingsSchema, "The settings (defaults when never written)");

function write<B extends z.ZodType>(path: string, method: "put" | "patch", summary: string, body: B, description?: string) {
  return defineRoute({
    method,
    path,
    tags: ["Settings"],
    summary,
    ...(description ? { description } : {}),
    permission: "settings:write",
    request: { body: jsonRequest(body) },
    responses: { 200: ok },
  });
}

const get = defineRoute({
  method: "get",
  path: "/settings",
  tags: ["Settings"],
  summary: "Read the caller's workspace settings in the active organization",
  permission: "settings:read",
  responses: { 200: ok },
});

const save = async (c: AppContext, patch: SettingsPatch) => c.json(await writeSettings(c.get("db"), ownerOf(c), patch, c.get("clock")()), 200);

export const settingsRouter = createRouter()
  .openapi(get, async (c) => c.json(await readSettings(c.get("db"), ownerOf(c)), 200))
  .openapi(write("/settings", "put", "Create or update the settings (only buildMode is accepted)", BuildModeBody), async (c) =>
    save(c, { buildMode: c.req.valid("json").buildMode }),
  )
  .openapi(write("/settings/build-mode", "patch", "Set the default build mode", BuildModeBody), async (c) =>
    save(c, { buildMode: c.req.valid("json").buildMode }),
  )
  .openapi(
    write(
      "/settings/deploy-defaults",
      "patch",
      "Set or clear the default deploy target and server",
      DeployDefaultsBody,
      "`server` requires `defaultServerId`; for `local`, `cloud` or null a sent server id is ignored and stored null. An explicit per-deploy choice always wins over these defaults.",
    ),
    async (c) => {
      const { defaultDeployTarget, defaultServerId } = c.req.valid("json");
      if (defaultDeployTarget === "server" && !defaultServerId) {
        throw badRequest("defaultServerId", "defaultServerId is required when defaultDeployTarget is 'server'");
      }
      return save(c, { defaultDeployTarget, defaultServerId: defaultDeployTarget === "server" ? defaultServerId : null });
    },
  )
  .openapi(
    write(
      "/settings/clone-credentials",
      "patch",
      "Set, replace or clear the saved git clone token",
      CloneCredentialsBody,
      "The token is encrypted at rest and never returned; the response carries only hasToken, setAt and asDefault.",
    ),
    async (c) => {
      const { token, asDefault } = c.req.valid("json");
      return save(c, await cloneTokenPatch(c.get("keyring"), ownerOf(c), token, asDefault ?? false, c.get("clock")()));
    },
  )
  .openapi(
    write(
      "/settings/clone-strategy-preference",
      "patch",
      "Save the first-time clone strategy choice",
      ClonePreferenceBody,
      "Anything other than `prompt` stops the first-time-deploy nudge.",
    ),
    async (c) => save(c, { cloneStrategyPreference: c.req.valid("json").preference }),
  )
  .openapi(
    write(
      "/settings/forward-git",
      "patch",
      "Enable or disable forwarding the local git identity to build servers",
      ForwardGitBody,
      "When on, a server-side clone tunnels the local git identity over SSH for the clone only; nothing is stored on the server. Replaces the former per-deploy `forwardGitCredentials` flag.",
    ),
    async (c) => save(c, { forwardGitToServer: c.req.valid("json").enabled }),
  );
