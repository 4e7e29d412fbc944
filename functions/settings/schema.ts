/** Wire shapes of the Settings routes (the spec's "Workspace settings"). */
import { z } from "@hono/zod-openapi";

export const BUILD_MODES = ["auto", "server", "local"] as const;
export const DEPLOY_TARGETS = ["local", "server", "cloud"] as const;
export const CLONE_STRATEGIES = ["prompt", "local", "remote-with-token"] as const;

export const BuildMode = z.enum(BUILD_MODES);
/** A literal list (not `.nullable()`) so an error's `allowed` names null too. */
export const DeployTarget = z
  .literal([...DEPLOY_TARGETS, null])
  // The generator renders only the first literal of a list; state the enum in full.
  .openapi({ type: ["string", "null"], enum: [...DEPLOY_TARGETS, null] });
export const CloneStrategy = z.enum(CLONE_STRATEGIES);
export const ServerId = z.string().trim().min(1).max(200);

export const SettingsSchema = z
  .object({
    buildMode: BuildMode,
    defaultDeployTarget: z.enum(DEPLOY_TARGETS).nullable(),
    defaultServerId: z.string().nullable().openapi({ description: "Stored null unless the target is `server`" }),
    cloneToken: z
      .object({ hasToken: z.boolean(), setAt: z.string().nullable(), asDefault: z.boolean() })
      .openapi({ description: "Read-only state; the token itself is encrypted at rest and never returned" }),
    cloneStrategyPreference: CloneStrategy,
    forwardGitToServer: z.boolean(),
  })
  .openapi("WorkspaceSettings");

export type Settings = z.infer<typeof SettingsSchema>;

export const BuildModeBody = z.strictObject({ buildMode: BuildMode });
export const DeployDefaultsBody = z.strictObject({
  defaultDeployTarget: DeployTarget,
  defaultServerId: ServerId.nullable().optional(),
});
export const CloneCredentialsBody = z.strictObject({
  token: z.string().min(1).max(4096).nullable().openapi({ description: "The git clone token; null clears it" }),
  asDefault: z.boolean().optional().openapi({ description: "Use it as the default for clones (default false)" }),
});
export const ClonePreferenceBody = z.strictObject({ preference: CloneStrategy });
export const ForwardGitBody = z.strictObject({ enabled: z.boolean() });
