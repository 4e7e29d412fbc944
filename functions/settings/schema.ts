/** The settings object every Settings route answers (the spec's "Workspace settings"); request bodies live in settings.ts. */
import { z } from "@hono/zod-openapi";

const BUILD_MODES = ["auto", "server", "local"] as const;
export const DEPLOY_TARGETS = ["local", "server", "cloud"] as const;
const CLONE_STRATEGIES = ["prompt", "local", "remote-with-token"] as const;

export const BuildMode = z.enum(BUILD_MODES);
export const CloneStrategy = z.enum(CLONE_STRATEGIES);

export const SettingsSchema = z
  .object({
    buildMode: BuildMode,
    defaultDeployTarget: z.enum(DEPLOY_TARGETS).nullable(),
    defaultServerId: z.string().nullable().openapi({
      description:
        "A build server of the organization when set (checked when written); stored null unless the target is `server`. If that server is deleted later, it names nothing: a deploy relying on it stays `queued` with a reason until another server is chosen",
    }),
    cloneToken: z
      .object({ hasToken: z.boolean(), setAt: z.string().nullable(), asDefault: z.boolean() })
      .openapi({ description: "Read-only state; the token itself is encrypted at rest and never returned" }),
    cloneStrategyPreference: CloneStrategy,
    forwardGitToServer: z.boolean(),
  })
  .openapi("WorkspaceSettings");

export type Settings = z.infer<typeof SettingsSchema>;
