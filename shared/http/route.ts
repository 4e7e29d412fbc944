/**
 * `defineRoute`: an OpenAPI route that must declare its access. The guard and the
 * strict-JSON middleware are attached here, the permission is published in the
 * OpenAPI document as `x-permission`, and the shared error responses are added,
 * so every route's contract comes from one place:
 * - `operationId` is derived from the method and the literal path (stable while the path is);
 * - routes that act on the active organization document the `X-Organization-Id` header;
 * - an error status a route declares with a description only gets the problem+json body.
 */
import { createRoute, type RouteConfig } from "@hono/zod-openapi";
import type { Access } from "./guard";
import { guard } from "./guard";
import { formatBytes, jsonBody, MAX_JSON_BODY_BYTES } from "./json-body";
import { IDEMPOTENCY_DESCRIPTION, IDEMPOTENCY_HEADER, idempotency } from "./idempotency";
import { ERROR_RESPONSES, problem } from "./problem-schema";

type Config = Omit<RouteConfig, "middleware"> & {
  permission: Access;
  /** Largest accepted JSON body in bytes (default MAX_JSON_BODY_BYTES, 1 MiB); larger: 413. */
  bodyLimit?: number;
  /** A self-hosted-only per-project route (route rules, transfers): never forwarded to the cloud for a cloud project. */
  selfHostedOnly?: true;
  /** A creating POST a script may retry with `Idempotency-Key` (shared/http/idempotency.ts). */
  idempotent?: true;
};

/** The `X-Organization-Id` header parameter, registered once by createApp. */
export const ORGANIZATION_HEADER_REF = "#/components/parameters/OrganizationId";

/** The `Idempotency-Key` header parameter and its answers, the same on every idempotent route. */
const IDEMPOTENCY_PARAMETER = {
  name: IDEMPOTENCY_HEADER,
  in: "header",
  required: false,
  description: IDEMPOTENCY_DESCRIPTION,
  schema: { type: "string", minLength: 1, maxLength: 255, pattern: "^[\\x21-\\x7e]+$" },
} as const;
const IDEMPOTENCY_409 = "a request with the same `Idempotency-Key` is still running (retry shortly)";

/** The 409 and 422 of an idempotent route; a 409 the route declares itself keeps its description, extended. */
function idempotencyResponses(responses: RouteConfig["responses"]): RouteConfig["responses"] {
  const own = responses[409] as { description?: string } | undefined;
  return {
    409: problem(own?.description ? `${own.description}; or ${IDEMPOTENCY_409}` : `Conflict: ${IDEMPOTENCY_409}`),
    422: problem("The `Idempotency-Key` was used with another request in the last 24 hours"),
  };
}

const capitalize = (s: string) => s.charAt(0).toUpperCase() + s.slice(1);

/** `patch /projects/{id}/env` → `patchProjectsByIdEnv`. */
export function operationIdOf(method: string, path: string): string {
  const words = path
    .split("/")
    .filter(Boolean)
    .map((segment) => {
      const param = /^\{(\w+)\}$/.exec(segment);
      const name = param ? `by-${param[1]}` : segment;
      return name.split(/[-_.]/).filter(Boolean).map(capitalize).join("");
    });
  return method.toLowerCase() + words.join("");
}

/** Error responses declared with a description only get the problem+json body. */
function withProblemBodies(responses: RouteConfig["responses"]): RouteConfig["responses"] {
  const out: RouteConfig["responses"] = {};
  for (const [status, response] of Object.entries(responses)) {
    const bare = Number(status) >= 400 && response && !("content" in response) && !("$ref" in response);
    out[status] = bare ? problem((response as { description: string }).description) : response;
  }
  return out;
}

export function defineRoute<const C extends Config>(config: C) {
  const { permission, bodyLimit = MAX_JSON_BODY_BYTES, selfHostedOnly, idempotent, ...route } = config;
  const hasBody = Boolean(route.request?.body);
  // Per-project routes of a project living in the linked cloud are forwarded there (after the permission check here).
  const forward = route.path.startsWith("/projects/{id}") && !selfHostedOnly ? { bodyLimit } : undefined;
  const middleware = [
    guard(permission, forward), // also refuses unsafe query text (shared/http/safe-text.ts)
    ...(hasBody ? [jsonBody(bodyLimit)] : []),
    ...(idempotent ? [idempotency(`${route.method.toUpperCase()} /api${route.path}`)] : []),
  ];
  // Every authenticated route acts on the active organization, except those naming it in the path.
  const orgHeader = permission !== "public" && permission !== "runner" && !route.path.includes("{orgId}");
  const parameters = [...(orgHeader ? [{ $ref: ORGANIZATION_HEADER_REF }] : []), ...(idempotent ? [IDEMPOTENCY_PARAMETER] : [])];
  return createRoute({
    operationId: operationIdOf(route.method, route.path),
    ...route,
    middleware,
    "x-permission": permission,
    ...(selfHostedOnly ? { "x-self-hosted-only": true } : {}),
    ...(hasBody ? { "x-body-limit": bodyLimit } : {}),
    ...(parameters.length > 0 ? { parameters } : {}),
    security: permission === "public" ? [] : [{ bearerAuth: [] }],
    responses: withProblemBodies({
      ...ERROR_RESPONSES,
      ...(hasBody ? { 413: problem(`The body is larger than ${formatBytes(bodyLimit)}`) } : {}),
      ...route.responses,
      ...(idempotent ? idempotencyResponses(route.responses) : {}),
    }),
  } as unknown as Omit<C, "permission" | "bodyLimit" | "selfHostedOnly" | "idempotent"> & {
    middleware: typeof middleware;
    responses: C["responses"] & typeof ERROR_RESPONSES;
  });
}

/** A JSON request body that is required (so non-JSON bodies are refused, not skipped). */
export function jsonRequest<S>(schema: S, description?: string) {
  return { required: true, ...(description ? { description } : {}), content: { "application/json": { schema } } } as const;
}

/** A JSON success response. */
export function jsonResponse<S>(schema: S, description: string) {
  return { description, content: { "application/json": { schema } } } as const;
}
