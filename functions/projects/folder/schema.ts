/** Wire shapes of the folder-upload flow: session hint, upload target, scan result, compose services. */
import { z } from "@hono/zod-openapi";
import { pathId } from "../../../shared/http/params";
import { MAX_UPLOAD_BYTES } from "../../../shared/storage/limits";
import { noControl } from "../schema";
import { ENV_KEY, LIMITS, SERVICE_NAME } from "./compose";
import { STACKS } from "./detect";

export const SessionIdParam = z.object({ sessionId: pathId("sessionId", "Upload session id (`ups_…`)") });

export const SessionHint = z
  .strictObject({
    name: z
      .string()
      .trim()
      .min(1)
      .max(255)
      .regex(noControl, "must not contain control characters")
      .optional()
      .openapi({ description: "The folder's name, for your own reference (kept with the session)" }),
    sizeBytes: z
      .number()
      .int()
      .min(1)
      .max(MAX_UPLOAD_BYTES)
      .optional()
      .openapi({
        description: `The tarball's exact size in bytes (at most ${MAX_UPLOAD_BYTES}). Required when the target is presigned (the cloud, or S3_* configured): it is signed, and an upload of any other size is refused by the storage. Counts toward the organization's bytes cap until the upload lands.`,
      }),
  })
  .openapi("FolderSessionHint");

export const UploadTargetSchema = z
  .object({
    sessionId: z.string().openapi({ description: "Pass it to the scan and to ensure (`uploadSessionId`)" }),
    url: z.string().openapi({ description: "The target relative to the API base (the relay), or the same absolute URL as `absoluteUrl` (presigned)" }),
    absoluteUrl: z.string().openapi({
      description:
        "Full URL to upload to. The relay's is built on the instance's PUBLIC_URL, else on the origin the session request reached: send the token only when its origin is the API's own",
    }),
    method: z.enum(["PUT", "POST"]),
    headers: z.record(z.string(), z.string()).openapi({ description: "Send these with the upload; they include `Content-Type: application/gzip`" }),
    requiresAuth: z
      .boolean()
      .openapi({ description: "true: the API's own relay, send your bearer token too. false: an external target; do not send the token" }),
    expiresAt: z.string().openapi({ description: "The session (and a presigned URL) is unusable after this time" }),
    maxBytes: z.number().int().openapi({ description: "Largest tarball accepted" }),
  })
  .openapi("UploadTarget");

const ServiceName = z.string().regex(SERVICE_NAME, "may contain only letters, digits, '.', '_' and '-' (at most 63 characters)");
const Text = (max: number) => z.string().min(1).max(max).regex(noControl, "must not contain control characters");
const ServiceCommand = z
  .string()
  .min(1)
  .max(LIMITS.commandLength)
  .refine((s) => !s.includes("\u0000"), "must not contain NUL");

const Environment = z
  .record(z.string().regex(ENV_KEY, "must be a variable name without '=', spaces or control characters"), z.string().max(LIMITS.valueLength))
  .refine((env) => Object.keys(env).length <= LIMITS.variables, `at most ${LIMITS.variables} variables`);

const Build = z.strictObject({ context: Text(1024), dockerfile: Text(1024).nullable().optional() });

/** A service as ensure takes it (the scan's output, possibly edited). */
export const ServiceInput = z
  .strictObject({
    name: ServiceName,
    image: Text(512).nullable().optional(),
    build: Build.nullable().optional(),
    command: ServiceCommand.nullable().optional(),
    ports: z.array(Text(100)).max(LIMITS.ports).optional(),
    dependsOn: z.array(ServiceName).max(LIMITS.services).optional(),
    environment: Environment.optional().openapi({
      description:
        "Values read back masked (a run of `•`). Sent back masked with `uploadSessionId`, a value is restored from the one the scan captured; without it, a masked value is dropped. Values sent in the clear are stored as sent.",
    }),
  })
  .openapi("ServiceInput");

export const ServiceSchema = z
  .object({
    name: z.string(),
    image: z.string().nullable(),
    build: z.object({ context: z.string(), dockerfile: z.string().nullable() }).nullable(),
    command: z.string().nullable(),
    ports: z.array(z.string()),
    dependsOn: z.array(z.string()),
    environment: z.record(z.string(), z.string()).openapi({ description: "Every value masked (`••••••••`); values are never returned" }),
  })
  .openapi("Service");

export type ServiceView = z.infer<typeof ServiceSchema>;

export const ScanResultSchema = z
  .object({
    sessionId: z.string(),
    stack: z.enum(STACKS).openapi({ description: "`compose` and `docker` win over the language ecosystems" }),
    framework: z.string().openapi({ description: "A framework id for the create body (`auto` when nothing was recognized)" }),
    packageManager: z.string().nullable(),
    installCommand: z.string().nullable(),
    buildCommand: z.string().nullable(),
    startCommand: z.string().nullable(),
    outputDirectory: z.string().nullable(),
    dockerfile: z.string().nullable().openapi({ description: "Path of the Dockerfile inside the folder" }),
    composeFile: z.string().nullable(),
    services: z
      .array(ServiceSchema)
      .optional()
      .openapi({ description: "Present for a folder with a compose file; pass it unchanged to ensure with `uploadSessionId`" }),
    rootDirectory: z.string().nullable().openapi({ description: "The single top-level folder the archive was made of (its contents were scanned), else null" }),
    files: z.number().int(),
    unpackedBytes: z.number().int(),
    sizeBytes: z.number().int().openapi({ description: "The tarball's size" }),
  })
  .openapi("FolderScan");

export type ScanResult = z.infer<typeof ScanResultSchema>;
