/**
 * The transfer bundle: everything a project's configuration is, secret values in
 * the clear, as POST /api/projects/{id}/export answers it and as the transfer
 * routes (functions/cloud/) apply it to the other side through its public API.
 */
import { z } from "@hono/zod-openapi";
import { ServiceInput } from "./folder/schema";
import { OptionsSchema, ResourcesSchema } from "./schema";

export const ExportedEnvVar = z.object({ key: z.string(), value: z.string(), isSecret: z.boolean() }).openapi("ExportedEnvVar");

export const ExportedEnvironment = z
  .object({
    name: z.string(),
    kind: z.enum(["production", "preview"]),
    branch: z.string().nullable(),
    env: z.array(ExportedEnvVar).openapi({ description: "Every variable, secret values in the clear" }),
  })
  .openapi("ExportedEnvironment");

export const ExportedSource = z
  .object({
    kind: z.enum(["git", "upload", "local", "none"]).openapi({ description: "Where deployments take the source from" }),
    artifact: z
      .object({
        url: z.string().openapi({ description: "A presigned GET URL of the latest uploaded tarball (send no token to it)" }),
        sizeBytes: z.number().int(),
        expiresAt: z.string(),
      })
      .nullable()
      .openapi({ description: "The latest upload's tarball (kind `upload`, object storage only); null otherwise" }),
  })
  .openapi("ExportedSource");

export const ProjectExportSchema = z
  .object({
    id: z.string(),
    name: z.string(),
    framework: z.string(),
    disabled: z.boolean(),
    git: z
      .object({
        provider: z.string(),
        owner: z.string(),
        repo: z.string(),
        branch: z.string().nullable(),
        autoDeploy: z.boolean(),
      })
      .nullable(),
    options: OptionsSchema,
    resources: ResourcesSchema,
    environments: z.array(ExportedEnvironment).openapi({ description: "Production first, then the previews, each with its env vars" }),
    domains: z.array(z.object({ hostname: z.string(), primary: z.boolean() })).openapi({ description: "Connected domains, the primary last" }),
    services: z.array(ServiceInput).openapi({ description: "The compose service set, values in the clear" }),
    cloneToken: z.string().nullable().openapi({ description: "The per-project git clone credential in the clear" }),
    source: ExportedSource,
  })
  .openapi("ProjectExport");

export type ProjectExport = z.infer<typeof ProjectExportSchema>;
