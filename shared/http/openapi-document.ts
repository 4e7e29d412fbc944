/**
 * GET /api/openapi.json: the OpenAPI 3.1 document, generated once per app from
 * the routes' zod schemas and served with the caller's origin as the server.
 */
import type { OpenAPIHono } from "@hono/zod-openapi";
import type { AppEnv } from "./context";
import { ORGANIZATION_HEADER_REF } from "./route";

type Info = { title: string; version: string; description: string };
type Json = Record<string, unknown>;

/**
 * The generator writes a regex's flags into `pattern` (`^…$/u`). JSON Schema
 * patterns are ECMA-262 with Unicode semantics, which is what the `u` flag
 * means: drop it. Other flags have no JSON Schema form and are not used.
 */
function fixPatterns(node: unknown): void {
  if (Array.isArray(node)) {
    for (const child of node) fixPatterns(child);
    return;
  }
  if (node === null || typeof node !== "object") return;
  for (const [key, value] of Object.entries(node as Json)) {
    if (key === "pattern" && typeof value === "string") (node as Json)[key] = value.replace(/(?<!\\)\/[uv]$/, "");
    else fixPatterns(value);
  }
}

export function serveOpenApiDocument(app: OpenAPIHono<AppEnv>, path: string, info: Info): void {
  const name = ORGANIZATION_HEADER_REF.split("/").pop()!;
  app.openAPIRegistry.registerComponent("parameters", name, {
    name: "X-Organization-Id",
    in: "header",
    required: false,
    description: "The organization to act in (`org_…`); omitted: the caller's default organization. Not a member: 403.",
    schema: { type: "string" },
  });
  let document: Json | undefined;
  app.get(path, (c) => {
    if (!document) {
      document = app.getOpenAPI31Document({ openapi: "3.1.0", info }) as unknown as Json;
      fixPatterns(document);
    }
    return c.json({ ...document, servers: [{ url: new URL(c.req.url).origin }] });
  });
}
