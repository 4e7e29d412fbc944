/**
 * Request bodies `defineRoute` does not cover: it attaches the strict JSON-body
 * middleware to every declared body. The session's hint body is optional (no body
 * at all is fine), and the relay's body is raw gzip bytes. These helpers add the
 * body to a defined route's OpenAPI description with the right middleware.
 */
import { createRoute, type RouteConfig } from "@hono/zod-openapi";
import type { MiddlewareHandler } from "hono";
import type { AppEnv } from "./context";
import { formatBytes, MAX_JSON_BODY_BYTES, optionalJsonBody } from "./json-body";
import { problem } from "./problem-schema";

type Defined = RouteConfig & { middleware: MiddlewareHandler<AppEnv>[] };

export function withOptionalJsonBody<R extends Defined, S>(route: R, schema: S, description: string) {
  return createRoute({
    ...route,
    middleware: [...route.middleware, optionalJsonBody(MAX_JSON_BODY_BYTES)],
    "x-body-limit": MAX_JSON_BODY_BYTES,
    request: { ...route.request, body: { required: false, description, content: { "application/json": { schema } } } },
    responses: { ...route.responses, 413: problem(`The body is larger than ${formatBytes(MAX_JSON_BODY_BYTES)}`) },
  });
}

/** Documents a raw (non-JSON) body; the handler reads the stream itself. */
export function withRawBody<R extends Defined>(route: R, mediaType: string, description: string) {
  return createRoute({
    ...route,
    request: { ...route.request, body: { required: true, description, content: { [mediaType]: { schema: { type: "string", format: "binary" } } } } },
  });
}
