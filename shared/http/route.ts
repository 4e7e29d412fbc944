/**
 * `defineRoute`: an OpenAPI route that must declare its access. The guard and the
 * strict-JSON middleware are attached here, the permission is published in the
 * OpenAPI document as `x-permission`, and the shared error responses are added.
 */
import { createRoute, type RouteConfig } from "@hono/zod-openapi";
import type { Access } from "./guard";
import { guard } from "./guard";
import { formatBytes, jsonBody, MAX_JSON_BODY_BYTES } from "./json-body";
import { safeQuery } from "./safe-text";
import { ERROR_RESPONSES, problem } from "./problem-schema";

type Config = Omit<RouteConfig, "middleware"> & {
  permission: Access;
  /** Largest accepted JSON body in bytes (default MAX_JSON_BODY_BYTES, 1 MiB); larger: 413. */
  bodyLimit?: number;
};

export function defineRoute<const C extends Config>(config: C) {
  const { permission, bodyLimit = MAX_JSON_BODY_BYTES, ...route } = config;
  const middleware = [guard(permission), safeQuery, ...(route.request?.body ? [jsonBody(bodyLimit)] : [])];
  return createRoute({
    ...route,
    middleware,
    "x-permission": permission,
    ...(route.request?.body ? { "x-body-limit": bodyLimit } : {}),
    security: permission === "public" ? [] : [{ bearerAuth: [] }],
    responses: {
      ...ERROR_RESPONSES,
      ...(route.request?.body ? { 413: problem(`The body is larger than ${formatBytes(bodyLimit)}`) } : {}),
      ...route.responses,
    },
  } as Omit<C, "permission" | "bodyLimit"> & { middleware: typeof middleware; responses: C["responses"] & typeof ERROR_RESPONSES });
}

/** A JSON request body that is required (so non-JSON bodies are refused, not skipped). */
export function jsonRequest<S>(schema: S, description?: string) {
  return { required: true, ...(description ? { description } : {}), content: { "application/json": { schema } } } as const;
}

/** A JSON success response. */
export function jsonResponse<S>(schema: S, description: string) {
  return { description, content: { "application/json": { schema } } } as const;
}
