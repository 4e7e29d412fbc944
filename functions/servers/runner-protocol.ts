/**
 * The runner protocol: what a build server's runner (`wsp runner`) calls with
 * its runner token, and nothing else does (permission `runner`: a user's token
 * or session is 403 here, and a runner token is 403 everywhere else): the
 * heartbeat here, the claim and the job routes in ./runner-jobs.ts (mounted beside it).
 */
import { defineRoute, jsonRequest, jsonResponse } from "../../shared/http/route";
import { createRouter } from "../../shared/http/router";
import { TOO_MANY_HEARTBEATS, takeHeartbeat } from "./limits";
import { HeartbeatAnswerSchema, HeartbeatBody, statusOf } from "./schema";
import { recordHeartbeat } from "./store";
import { ApiError } from "../../shared/http/errors";
import { runnerOf } from "./runner-jobs";

const TAGS = ["Runner protocol"];

const heartbeat = defineRoute({
  method: "post",
  path: "/runner/heartbeat",
  tags: TAGS,
  summary: "Report that the runner is up, and what it supports",
  description:
    "Runner token (`wsr_…`) only; any other credential is 403. Records the time (the server is `online` for 60 s after it) and the fields sent (omitted ones keep their last value). The answer says whether the server is draining (take no new work). Send one every 15-30 s.",
  permission: "runner",
  bodyLimit: 16 * 1024,
  request: { body: jsonRequest(HeartbeatBody) },
  responses: { 200: jsonResponse(HeartbeatAnswerSchema, "Recorded"), 429: TOO_MANY_HEARTBEATS },
});

export const runnerProtocolRouter = createRouter().openapi(heartbeat, async (c) => {
  const { serverId } = runnerOf(c);
  const now = c.get("clock")();
  await takeHeartbeat(c, serverId, now);
  const row = await recordHeartbeat(c.get("db"), serverId, c.req.valid("json"), now);
  // Deleted between the token check and the write: the token is revoked.
  if (!row) throw new ApiError("unauthorized", "Invalid, expired or revoked token");
  return c.json({ serverId, status: statusOf(row, now), draining: row.draining }, 200);
});
