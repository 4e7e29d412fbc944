/**
 * POST /api/projects/folder/session: opens a folder-upload session and returns
 * where to send the tarball. Presigned object storage on the cloud (and on a
 * self-hosted instance configured with S3_*); the relay on the self-hosted adapter.
 */
import type { z } from "@hono/zod-openapi";
import {
  ENSURED_TTL_MS,
  GZIP_TYPE,
  MAX_UPLOAD_BYTES,
  objectKeyFor,
  ORG_SESSION_CAPS,
  PRESIGN_TTL_SECONDS,
  SESSION_TTL_MS,
} from "../../../shared/storage/limits";
import type { UploadTarget } from "../../../shared/storage/types";
import type { AppContext } from "../../../shared/http/context";
import { ApiError, badRequest, tooManyRequests } from "../../../shared/http/errors";
import { tooManyRequestsResponse } from "../../../shared/http/problem-schema";
import { defineRoute, jsonResponse } from "../../../shared/http/route";
import { callerOf, createRouter } from "../../../shared/http/router";
import { newId } from "../../../shared/ids";
import { withOptionalJsonBody } from "../../../shared/http/route-body";
import { SessionHint, UploadTargetSchema } from "./schema";
import { insertSessionWithinCaps, type CapExceeded } from "./store";

const minutes = (ms: number) => ms / 60_000;
const GIB = 1024 * 1024 * 1024;

const route = withOptionalJsonBody(
  defineRoute({
    method: "post",
    path: "/projects/folder/session",
    tags: ["Folder upload"],
    summary: "Open a folder-upload session",
    description: [
      "Returns the upload target. Upload the gzipped tarball (raw bytes, at most " +
        `${MAX_UPLOAD_BYTES} bytes = 300 MiB) to \`absoluteUrl\` (or \`url\` resolved against the API base) with \`method\` and \`headers\`; ` +
        "send your bearer token only when `requiresAuth` is true, and only to the API's own origin.",
      `**Cloud** (and self-hosted with S3_* configured): a presigned PUT to object storage, \`requiresAuth: false\`, valid ${minutes(PRESIGN_TTL_SECONDS * 1000)} minutes; ` +
        "the key is chosen by the server under the organization's prefix; `Content-Type: application/gzip` and the size are signed. " +
        "The hint's `sizeBytes` is therefore required here (without it: 400 naming `sizeBytes`): an upload of any other size is refused by the storage.",
      "**Self-hosted**: the relay `POST /api/projects/folder/upload/{sessionId}`, `requiresAuth: true`, stored on the instance's disk; `sizeBytes` is optional " +
        "(the relay enforces the 300 MiB limit while streaming). Its `absoluteUrl` is built on PUBLIC_URL when the instance sets it, else on the origin this request came to.",
      `A session belongs to the caller's organization and expires ${minutes(SESSION_TTL_MS)} minutes after it is opened ` +
        `(an ensure that uses it keeps it ${minutes(ENSURED_TTL_MS)} more minutes for the deploy step); expired sessions and their uploads are removed.`,
      `**Caps per organization**, over its unexpired sessions: at most ${ORG_SESSION_CAPS.maxOpen} open sessions, and at most ${ORG_SESSION_CAPS.maxBytes / GIB} GiB ` +
        "of tarballs (each session counts its uploaded size, else its hinted `sizeBytes`, else nothing). A session past either cap is not opened: 429 with " +
        "`Retry-After` (seconds until the organization's soonest-expiring session expires).",
      "The body is optional on the relay.",
    ].join("\n\n"),
    permission: "project:write",
    responses: {
      201: jsonResponse(UploadTargetSchema, "The upload target"),
      429: tooManyRequestsResponse(
        "The organization's open sessions or their bytes are at the cap; nothing was opened",
        "Seconds until the soonest-expiring open session expires",
      ),
    },
  }),
  SessionHint,
  "Optional hint: the folder's name and the tarball's size (the size is required for presigned targets)",
);

function relayTarget(c: AppContext, sessionId: string, publicUrl: string | undefined): UploadTarget {
  const url = `/api/projects/folder/upload/${sessionId}`;
  // Without PUBLIC_URL the origin comes from the request (its Host header): clients check it is the API's own before sending a token.
  const base = (publicUrl ?? new URL(c.req.url).origin).replace(/\/+$/, "");
  return { url, absoluteUrl: base + url, method: "POST", headers: { "Content-Type": GZIP_TYPE }, requiresAuth: true };
}

/** The 429 of a session past the organization's caps. */
function capExceeded(refusal: CapExceeded) {
  const detail =
    refusal.exceeded === "sessions"
      ? `The organization already has ${ORG_SESSION_CAPS.maxOpen} open upload sessions; retry once one expires`
      : `The organization's open upload sessions would hold more than ${ORG_SESSION_CAPS.maxBytes / GIB} GiB; retry once one expires`;
  return tooManyRequests(detail, refusal.retryAfterSeconds);
}

export const sessionRouter = createRouter().openapi(route, async (c) => {
  const { orgId, userId } = callerOf(c);
  const hint: z.infer<typeof SessionHint> = c.req.valid("json") ?? {};
  const uploads = c.get("services").uploads;
  if (!uploads) throw new ApiError("internal", "Folder uploads are not configured on this instance");
  // A presigned URL without a signed length would take a PUT of any size.
  if (uploads.kind === "presigned" && hint.sizeBytes === undefined) {
    throw badRequest("sizeBytes", `sizeBytes is required: the tarball's exact size in bytes (at most ${MAX_UPLOAD_BYTES}) is signed into the upload URL`);
  }
  const now = c.get("clock")();
  const id = newId("ups");
  const objectKey = objectKeyFor(orgId, id);
  const expiresAt = new Date(now.getTime() + SESSION_TTL_MS);
  const inserted = await insertSessionWithinCaps(
    c.get("db"),
    { id, orgId, createdBy: userId, target: uploads.kind, objectKey, hintName: hint.name ?? null, hintSizeBytes: hint.sizeBytes ?? null, expiresAt },
    now,
    ORG_SESSION_CAPS,
  );
  if ("exceeded" in inserted) throw capExceeded(inserted);
  const target =
    uploads.kind === "presigned"
      ? await uploads.presign({ key: objectKey, sizeBytes: hint.sizeBytes!, now, expiresInSeconds: PRESIGN_TTL_SECONDS })
      : relayTarget(c, id, uploads.publicUrl);
  return c.json({ sessionId: id, ...target, expiresAt: expiresAt.toISOString(), maxBytes: MAX_UPLOAD_BYTES }, 201);
});
