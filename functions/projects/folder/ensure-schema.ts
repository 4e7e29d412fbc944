/** Wire shapes of POST /api/projects/ensure: the create body plus the folder-upload fields, and the ensured project. */
import { z } from "@hono/zod-openapi";
import { LIMITS } from "./compose";
import { ServiceInput, ServiceSchema } from "./schema";
import { Command, CREATE_PROJECT_FIELDS, ProjectSchema, RelativePath } from "../schema";

const Id = z.string().min(1).max(100);

// One flat object (not an extension of CreateProject): an `allOf` of two closed objects would accept no body at all.
export const EnsureBody = z
  .strictObject({
    ...CREATE_PROJECT_FIELDS,
    projectId: Id.optional().openapi({ description: "Update this project in place instead of creating one; another organization's id is 404" }),
    uploadSessionId: Id.optional().openapi({
      description:
        "The scanned folder-upload session: restores masked compose values, binds the upload to the project for the deploy step, and makes `gitProvider` default to `upload`",
    }),
    services: z.array(ServiceInput).max(LIMITS.services).optional().openapi({
      description:
        "The project's whole service set (a compose folder): services left out are removed. Omitted: the project's services are unchanged and the deploy step uses the ones parsed for the upload session.",
    }),
    installCommand: Command.optional().openapi({ description: "Ensure only: the scan's install command (a project option)" }),
    startCommand: Command.optional().openapi({ description: "Ensure only: the scan's start command (a project option)" }),
    outputDirectory: RelativePath.optional().openapi({ description: "Ensure only: the scan's output directory (a project option)" }),
  })
  .superRefine((body, ctx) => {
    const names = new Set<string>();
    for (const [i, s] of (body.services ?? []).entries()) {
      if (names.has(s.name)) ctx.addIssue({ code: "custom", path: ["services", i, "name"], message: `service ${s.name} is listed twice` });
      names.add(s.name);
    }
    for (const [i, s] of (body.services ?? []).entries()) {
      const missing = (s.dependsOn ?? []).findIndex((d) => !names.has(d));
      if (missing !== -1) ctx.addIssue({ code: "custom", path: ["services", i, "dependsOn", missing], message: `names no service of this set` });
    }
  })
  .openapi("EnsureProject");

export const EnsuredProjectSchema = ProjectSchema.extend({
  services: z.array(ServiceSchema).openapi({ description: "The project's service set after the ensure (values masked)" }),
  uploadSessionId: z.string().nullable().openapi({ description: "The upload session bound to the project by this ensure" }),
}).openapi("EnsuredProject");
