/**
 * POST /api/projects/folder/session: opens a folder-upload session and returns
 * where to send the tarball. Presigned object storage on the cloud (and on a
 * self-hosted instance configured with S3_*); the relay on the self-hosted adapter.
 */
import { ENSURED_TTL_MS, GZIP_TYPE, MAX_UPLOAD_BYTES, objectKeyFor, PRESIGN_TTL_SECONDS, SESSION_TTL_MS } from "../../../shared/storage/limits";
import type { UploadTarget } from "../../../shared/storage/types";
import type { AppContext } from "../../../shared/http/context";
import { ApiError } from "../../../shared/http/errors";
import { defineRoute, jsonResponse } from "../../../shared/http/route";
import { callerOf, createRouter } from "../../../shared/http/router";
import { newId } from "../../../shared/ids";
import { withOptionalJsonBody } from "./route-body";
import { SessionHint, UploadTargetSchema } from "./schema";
import { insertSession } from "./store";

const minutes = (ms: number) => ms / 60_000;

const route = withOptionalJsonBody(
  defineRoute({
    method: "post",
    path: "/projects/folder/session",
    tags: ["Folder upload"],
    summary: "Open a folder-upload session",
    description: [
      "Returns the upload target. Upload the gzipped tarball (raw bytes, at most " +
        `${MAX_UPLOAD_BYTES} bytes = 300 MiB) to \`absoluteUrl\` (or \`url\` resolved against the API base) with \`method\` and \`headers\`; ` +
        "send your bearer token only when `requiresAuth` is true.",
      `**Cloud** (and self-hosted with S3_* configured): a presigned PUT to object storage, \`requiresAuth: false\`, valid ${minutes(PRESIGN_TTL_SECONDS * 1000)} minutes; ` +
        "the key is chosen by the server under the organization's prefix; `Content-Type: application/gzip` is signed, and so is the size when the hint gives `sizeBytes`.",
      "**Self-hosted**: the relay `POST /api/projects/folder/upload/{sessionId}`, `requiresAuth: true`, stored on the instance's disk.",
      `A session belongs to the caller's organization and expires ${minutes(SESSION_TTL_MS)} minutes after it is opened ` +
        `(an ensure that uses it keeps it ${minutes(ENSURED_TTL_MS)} more minutes for the deploy step); expired sessions and their uploads are removed.`,
      "The body is optional.",
    ].join("\n\n"),
    permission: "project:write",
    responses: { 201: jsonResponse(UploadTargetSchema, "The upload target") },
  }),
  SessionHint,
  "Optional hint: the folder's name and the tarball's size",
);

function relayTarget(c: AppContext, sessionId: string, publicUrl: string | undefined): UploadTarget {
  const url = `/api/projects/folder/upload/${sessionId}`;
  const base = (publicUrl ?? new URL(c.req.url).origin).replace(/\/+$/, "");
  return { url, absoluteUrl: base + url, method: "POST", headers: { "Content-Type": GZIP_TYPE }, requiresAuth: true };
}

export const sessionRouter = createRouter().openapi(route, async (c) => {
  const { orgId, userId } = callerOf(c);
  const hint = c.req.valid("json");
  const uploads = c.get("uploads");
  if (!uploads) throw new ApiError("internal", "Folder uploads are not configured on this instance");
  const now = c.get("clock")();
  const id = newId("ups");
  const objectKey = objectKeyFor(orgId, id);
  const expiresAt = new Date(now.getTime() + SESSION_TTL_MS);
  await insertSession(c.get("db"), {
    id,
    orgId,
    createdBy: userId,
    target: uploads.kind,
    objectKey,
    hintName: hint.name ?? null,
    hintSizeBytes: hint.sizeBytes ?? null,
    expiresAt,
  });
  const target =
    uploads.kind === "presigned"
      ? await uploads.presign({ key: objectKey, sizeBytes: hint.sizeBytes, now, expiresInSeconds: PRESIGN_TTL_SECONDS })
      : relayTarget(c, id, uploads.publicUrl);
  return c.json({ sessionId: id, ...target, expiresAt: expiresAt.toISOString(), maxBytes: MAX_UPLOAD_BYTES }, 201);
});
