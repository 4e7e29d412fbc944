/**
 * POST /api/projects/folder/scan/:sessionId: reads the uploaded tarball as a
 * stream (never extracted, never buffered whole) and detects its build
 * configuration and compose services. Compose environment values are captured
 * encrypted on the session and read back masked.
 */
import { ApiError, badRequest } from "../../../shared/http/errors";
import { findUnsafeText, UNSAFE_TEXT_DETAIL } from "../../../shared/http/safe-text";
import { defineRoute, jsonResponse } from "../../../shared/http/route";
import { callerOf, createRouter } from "../../../shared/http/router";
import { MAX_UPLOAD_BYTES, SCAN_LIMITS } from "../../../shared/storage/limits";
import type { Gunzip } from "../../../shared/storage/gunzip";
import type { UploadStorage } from "../../../shared/storage/types";
import { ComposeError, LIMITS as COMPOSE_LIMITS, parseCompose, type CapturedValues } from "./compose";
import { COMPOSE_OVERRIDES, composeFileOf, detect, MANIFEST_NAMES } from "./detect";
import { ScanResultSchema, SessionIdParam, type ScanResult } from "./schema";
import { encryptCaptured, serviceView } from "./services";
import { findSession, saveScan } from "./store";
import { ArchiveError, readArchive, type Archive } from "./tar-reader";

const mib = (n: number) => `${Math.round(n / 1024 / 1024)} MiB`;

const route = defineRoute({
  method: "post",
  path: "/projects/folder/scan/{sessionId}",
  tags: ["Folder upload"],
  summary: "Detect the uploaded folder's build configuration",
  description: [
    "Reads the session's tarball without extracting it: stack, framework, package manager, install/build/start commands, output directory, Dockerfile, " +
      "and for a folder with a compose file (`compose.yaml`, `compose.yml`, `docker-compose.yaml`, `docker-compose.yml`, with its `.override` file merged) the `services`. " +
      "Recognized: Node (Next.js, Nuxt, Remix, SvelteKit, Astro, Gatsby, Angular, Create React App, Vite, NestJS, Express, Fastify, Hono, Koa), static sites, " +
      "Python (Django, FastAPI, Flask), Go (Gin, Echo, Fiber, chi), Ruby (Rails, Sinatra, Rack), PHP (Laravel, Symfony), Rust (Axum, Actix Web, Rocket, Warp), Dockerfile, compose.",
    "When the archive holds a single top-level folder, its contents are scanned (`rootDirectory`).",
    "Compose environment values are returned masked (`••••••••`); the real values are kept, encrypted, for this session's ensure.",
    `Refused with 400, and nothing is recorded: nothing uploaded yet; an upload over ${mib(MAX_UPLOAD_BYTES)}; data that is not gzip or not a tar; a truncated archive; ` +
      `absolute paths or \`..\`; a path with a NUL character or an unpaired surrogate; hard or symbolic links, devices, FIFOs; more than ${SCAN_LIMITS.maxEntries} entries; ` +
      `a file over ${mib(SCAN_LIMITS.maxFileBytes)}; an extended header (PAX record set, GNU long name) over ${SCAN_LIMITS.maxMetaBytes / 1024} KiB; ` +
      `more than ${mib(SCAN_LIMITS.maxTotalBytes)} unpacked (headers, extended headers and padding included); more than ${SCAN_LIMITS.maxRatio}× expansion (a gzip bomb); ` +
      `a manifest over ${mib(SCAN_LIMITS.maxManifestBytes)}; a compose file over ${COMPOSE_LIMITS.fileBytes / 1024} KiB; an invalid compose file.`,
    "Another organization's, an expired or an unknown session: 404.",
  ].join("\n\n"),
  permission: "project:write",
  request: { params: SessionIdParam },
  responses: { 200: jsonResponse(ScanResultSchema, "What was detected") },
});

async function readUpload(uploads: UploadStorage, key: string, gunzip: Gunzip | undefined): Promise<{ archive: Archive; size: number }> {
  const upload = await uploads.open(key);
  if (!upload) throw badRequest(undefined, "Nothing has been uploaded for this session yet; upload the tarball to the session's target first");
  if (upload.size > MAX_UPLOAD_BYTES) {
    await upload.body.cancel().catch(() => {});
    throw badRequest(undefined, `The upload is ${mib(upload.size)}; the limit is ${mib(MAX_UPLOAD_BYTES)}`);
  }
  try {
    return { archive: await readArchive(upload.body, { limits: SCAN_LIMITS, manifestNames: MANIFEST_NAMES, gunzip }), size: upload.size };
  } catch (e) {
    if (e instanceof ArchiveError) throw badRequest(undefined, e.message);
    throw e;
  }
}

function composeServices(archive: Archive): { file: string; services: ReturnType<typeof parseCompose>["services"]; captured: CapturedValues } | null {
  const file = composeFileOf(archive);
  if (!file) return null;
  const overrideName = COMPOSE_OVERRIDES[file]!;
  const override = archive.manifests.get(overrideName);
  try {
    const parsed = parseCompose({ file, text: archive.manifests.get(file)! }, override === undefined ? undefined : { file: overrideName, text: override });
    return { file, ...parsed };
  } catch (e) {
    if (e instanceof ComposeError) throw badRequest(undefined, `The compose file is not usable: ${e.message}`);
    throw e;
  }
}

export const scanRouter = createRouter().openapi(route, async (c) => {
  const { orgId } = callerOf(c);
  const { sessionId } = c.req.valid("param");
  const uploads = c.get("services").uploads;
  if (!uploads) throw new ApiError("internal", "Folder uploads are not configured on this instance");
  const session = await findSession(c.get("db"), orgId, sessionId, c.get("clock")());

  const { archive, size } = await readUpload(uploads, session.objectKey, c.get("services").gunzip);
  const compose = composeServices(archive);
  const detected = detect(archive);
  const result: ScanResult = {
    sessionId,
    ...detected,
    composeFile: compose?.file ?? null,
    ...(compose ? { services: compose.services.map(({ name, envKeys, ...spec }) => serviceView(name, spec, envKeys)) } : {}),
    rootDirectory: archive.root ? archive.root.replace(/\/$/, "") : null,
    files: archive.files,
    unpackedBytes: archive.unpackedBytes,
    sizeBytes: size,
  };
  // Stored for the deploy step without the masks: services as parsed (keys only), their values encrypted beside.
  const { services: _masked, ...stored } = result;
  const record = { ...stored, ...(compose ? { services: compose.services } : {}) };
  // The detectors refuse such text already; this keeps anything they missed from reaching Postgres as a 500.
  const unsafe = findUnsafeText(record);
  if (unsafe) throw badRequest(undefined, `The scan result's ${unsafe} ${UNSAFE_TEXT_DETAIL}`);
  await saveScan(c.get("db"), session, {
    result: record,
    servicesCiphertext: compose ? await encryptCaptured(c.get("keyring"), orgId, sessionId, compose.captured) : null,
    size,
    now: c.get("clock")(),
  });
  return c.json(result, 200);
});
