/**
 * POST /api/projects/folder/upload/:sessionId (self-hosted only: mounted by the
 * Node adapter through createApp's `extraRouters`; on the cloud it does not exist
 * and answers the ordinary unknown-route 404).
 *
 * Raw gzip bytes, streamed to disk in constant memory. The 300 MiB limit holds
 * with or without Content-Length: a larger declared length is refused before a
 * byte is read, and a body that grows past the limit is cut off; either way no
 * partial file is kept and an earlier upload of the session stays as it was.
 */
import { z } from "@hono/zod-openapi";
import { ApiError, badRequest } from "../../../shared/http/errors";
import { defineRoute, jsonResponse } from "../../../shared/http/route";
import { callerOf, createRouter } from "../../../shared/http/router";
import { GZIP_TYPE, MAX_UPLOAD_BYTES } from "../../../shared/storage/limits";
import { UploadTooLargeError, type RelayStorage } from "../../../shared/storage/types";
import { withRawBody } from "../../../shared/http/route-body";
import { SessionIdParam } from "../../projects/folder/schema";
import { findSession, markUploaded, sessionNotFound } from "../../projects/folder/store";

const Uploaded = z.object({ sessionId: z.string(), sizeBytes: z.number().int(), uploadedAt: z.string() }).openapi("FolderUpload");

const TOO_LARGE = `The tarball is larger than the ${MAX_UPLOAD_BYTES}-byte (300 MiB) limit`;

const route = withRawBody(
  defineRoute({
    method: "post",
    path: "/projects/folder/upload/{sessionId}",
    tags: ["Folder upload"],
    summary: "Upload the gzipped tarball through the relay (self-hosted)",
    description: [
      `The raw tarball as the body, \`Content-Type: ${GZIP_TYPE}\` (another type: 415), at most ${MAX_UPLOAD_BYTES} bytes (300 MiB; more: 413, with or without Content-Length). ` +
        "Streamed to the instance's disk (DATA_DIR/uploads); nothing of a refused or interrupted upload is kept.",
      "Uploading again replaces the session's tarball (and forgets its scan). Another organization's, an expired or an unknown session: 404. " +
        "Only on self-hosted instances storing uploads on disk; elsewhere (the cloud, or S3_* configured) this route does not exist: use the session's presigned target.",
    ].join("\n\n"),
    permission: "project:write",
    request: { params: SessionIdParam },
    responses: {
      200: jsonResponse(Uploaded, "The tarball is stored"),
      413: { description: "More than 300 MiB (declared or sent); nothing was kept" },
      415: { description: "Content-Type is not application/gzip" },
    },
  }),
  GZIP_TYPE,
  "The gzipped tarball, raw bytes",
);

export function relayRouter(storage: RelayStorage) {
  return createRouter().openapi(route, async (c) => {
    const { orgId } = callerOf(c);
    const { sessionId } = c.req.valid("param");
    const type = (c.req.header("content-type") ?? "").split(";")[0]!.trim().toLowerCase();
    if (type !== GZIP_TYPE) throw new ApiError("unsupported_media_type", `Send the tarball as raw bytes with Content-Type: ${GZIP_TYPE}`);
    const session = await findSession(c.get("db"), orgId, sessionId, c.get("clock")());
    if (session.target !== "relay") throw sessionNotFound();

    const declared = c.req.header("content-length");
    if (declared !== undefined) {
      if (!/^\d+$/.test(declared.trim())) throw badRequest(undefined, "Content-Length is not a number");
      if (Number(declared) > MAX_UPLOAD_BYTES) throw new ApiError("payload_too_large", TOO_LARGE);
    }
    const body = c.req.raw.body;
    if (!body) throw badRequest(undefined, "The upload is empty; send the gzipped tarball as the body");

    let size: number;
    try {
      ({ size } = await storage.receive(session.objectKey, body, MAX_UPLOAD_BYTES));
    } catch (e) {
      if (e instanceof UploadTooLargeError) throw new ApiError("payload_too_large", TOO_LARGE);
      throw badRequest(undefined, "The upload was interrupted before it completed; nothing was kept");
    }
    if (size === 0 || !(await markUploaded(c.get("db"), session, size, c.get("clock")()))) {
      await storage.remove(session.objectKey);
      if (size === 0) throw badRequest(undefined, "The upload is empty; send the gzipped tarball as the body");
      throw sessionNotFound();
    }
    return c.json({ sessionId, sizeBytes: size, uploadedAt: c.get("clock")().toISOString() }, 200);
  });
}
