/**
 * The OpenAPI document as third-party tools read it: every `pattern` compiles as
 * a JSON Schema (ECMA-262, Unicode) pattern and accepts the values the server
 * accepts, every schema compiles, every error response carries the problem
 * body, operationIds are unique, and bodies the server takes validate.
 */
import Ajv2020 from "ajv/dist/2020.js";
import { beforeAll, describe, expect, it } from "vitest";
import { silentLogger } from "../../shared/http/logger";
import { createApp } from "../../functions/app";
import { routeRulesRouter } from "../../functions/route-rules";

type Json = Record<string, any>;
let doc: Json;

beforeAll(async () => {
  // The self-hosted document: the cloud's routes plus the adapter's own (route rules).
  const app = createApp({ services: () => ({}) as never, logger: silentLogger, extraRouters: [routeRulesRouter] });
  doc = await (await app.request("http://127.0.0.1/api/openapi.json")).json();
});

/** Values the server accepts, per pattern in the document; a new pattern needs its samples here. */
const VALID_SAMPLES: Record<string, string[]> = {
  "^[^\\p{Cc}\\p{Cs}]*$": ["My project", "Ünïcødé ✓ 名前", "npm run build && npm start", ""],
  "^(?!\\.{1,2}$)[A-Za-z0-9._-]+$": ["octo-org", "repo.name", "a_b", "..."],
  "^[A-Za-z0-9][A-Za-z0-9._+-]*$": ["nextjs", "vite", "c++", "node.js"],
  "^[A-Za-z0-9][A-Za-z0-9._+*-]*$": ["22", "20.x", "3.12", "1.*"],
  "^[a-z0-9](?:[a-z0-9-]*[a-z0-9])?$": ["preview", "pr-12", "a"],
  "^[A-Za-z_][A-Za-z0-9_]*$": ["DATABASE_URL", "_x", "a1"],
  "^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,62}$": ["web", "api-1", "db.primary"],
  "^[0-9]{1,15}$": ["0", "42", "123456789012345"],
  "^\\/[\\x21-\\x7e]*$": ["/", "/api", "/static/*.js", "/admin/**"],
  "^[1-5](?:xx|[0-9]{2})$": ["2xx", "5xx", "404", "101"],
  "^[A-Z]{1,16}$": ["GET", "POST", "PROPFIND"],
  "^[\\x21-\\x7e]+$": ["3f2b8c1e-7d4a-4b8e-9c1a-2f6d5e4b3a21", "retry:42", "a"],
  "^[A-Za-z0-9][A-Za-z0-9._:=/-]{0,62}$": ["gpu", "region=eu", "arch/arm64", "node:22", "a"],
};

function collect(node: unknown, key: string, out: Array<{ path: string; value: any }>, path = "#"): typeof out {
  if (Array.isArray(node)) {
    for (const [i, child] of node.entries()) collect(child, key, out, `${path}/${i}`);
  } else if (node && typeof node === "object") {
    for (const [k, v] of Object.entries(node)) {
      if (k === key) out.push({ path: `${path}/${k}`, value: v });
      collect(v, key, out, `${path}/${k}`);
    }
  }
  return out;
}

function operations() {
  const ops: Array<{ method: string; path: string; op: Json }> = [];
  for (const [path, item] of Object.entries<Json>(doc.paths)) for (const [method, op] of Object.entries<Json>(item)) ops.push({ method, path, op });
  return ops;
}

/** Ajv over the document's components, strict about unknown keywords except OpenAPI's own. */
function ajvForDocument() {
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  ajv.addSchema({ $id: "doc", components: doc.components });
  return ajv;
}

const validator = (ajv: Ajv2020, name: string) => ajv.getSchema(`doc#/components/schemas/${name}`)!;

describe("OpenAPI document", () => {
  it("has patterns that compile as JSON Schema patterns and accept what the server accepts", () => {
    const patterns = collect(doc, "pattern", []).filter((p) => typeof p.value === "string");
    expect(patterns.length).toBeGreaterThan(10);
    const ajv = new Ajv2020({ strict: false });
    for (const { path, value } of patterns) {
      const samples = VALID_SAMPLES[value];
      if (!samples) throw new Error(`${path}: pattern ${value} has no samples in VALID_SAMPLES`);
      const validate = ajv.compile({ type: "string", pattern: value });
      for (const sample of samples) expect(validate(sample), `${path} ${value} should accept ${JSON.stringify(sample)}`).toBe(true);
    }
    // And refuse what the server refuses.
    const noControl = ajv.compile({ type: "string", pattern: "^[^\\p{Cc}\\p{Cs}]*$" });
    expect(noControl("line\nbreak")).toBe(false);
  });

  it("compiles every component schema", () => {
    const ajv = ajvForDocument();
    for (const name of Object.keys(doc.components.schemas)) expect(() => validator(ajv, name), name).not.toThrow();
  });

  it("describes an ensure body the server takes as one valid object", () => {
    const ajv = ajvForDocument();
    const ensure = doc.components.schemas.EnsureProject;
    expect(ensure.allOf).toBeUndefined();
    expect(ensure.type).toBe("object");
    const validate = validator(ajv, "EnsureProject");
    const body = {
      name: "shop",
      uploadSessionId: "fus_1",
      installCommand: "npm ci",
      services: [{ name: "web", build: { context: "." }, ports: ["3000"], environment: { PORT: "3000" } }],
    };
    expect(validate(body), JSON.stringify(validate.errors)).toBe(true);
    expect(validate({ name: "shop", nope: 1 })).toBe(false);
  });

  it("gives every error response a problem+json body and every operation a unique operationId", () => {
    const ids = new Set<string>();
    for (const { method, path, op } of operations()) {
      expect(op.operationId, `${method} ${path}`).toMatch(/^[a-z][A-Za-z0-9]+$/);
      expect(ids.has(op.operationId), `duplicate operationId ${op.operationId}`).toBe(false);
      ids.add(op.operationId);
      for (const [status, response] of Object.entries<Json>(op.responses)) {
        // The readiness probe's 503 is its own JSON (each check's state), read by load balancers, not a problem.
        if (Number(status) < 400 || (path === "/readyz" && status === "503")) continue;
        expect(response.content?.["application/problem+json"]?.schema, `${method} ${path} ${status}`).toBeDefined();
      }
    }
  });

  it("declares X-Organization-Id on every authenticated route that does not name the organization in its path (the runner protocol's token names its own)", () => {
    for (const { method, path, op } of operations()) {
      const refs = (op.parameters ?? []).map((p: Json) => p.$ref);
      const expected = !["public", "runner"].includes(op["x-permission"]) && !path.includes("{orgId}");
      expect(refs.includes("#/components/parameters/OrganizationId"), `${method} ${path}`).toBe(expected);
    }
    expect(doc.components.parameters.OrganizationId).toMatchObject({ name: "X-Organization-Id", in: "header" });
  });

  it("declares the statuses routes answer beyond the shared ones", () => {
    const responses = (path: string, method: string) => Object.keys(doc.paths[path][method].responses);
    expect(responses("/api/projects/{id}/routing/retry", "post")).toContain("409");
    expect(responses("/api/notifications/channels/{id}/test", "post")).toContain("429");
    expect(responses("/api/projects/folder/session", "post")).toContain("429");
    expect(doc.paths["/api/projects/folder/session"].post.responses["429"].headers["Retry-After"]).toBeDefined();
    // Git source: the host unreachable (502), no linked repository (409).
    expect(responses("/api/projects/{id}/git/link", "post")).toEqual(expect.arrayContaining(["400", "404", "502"]));
    expect(responses("/api/projects/{id}/branches", "get")).toEqual(expect.arrayContaining(["400", "404", "409", "502"]));
    expect(responses("/api/projects/{id}/branch", "post")).toEqual(expect.arrayContaining(["400", "404", "409", "502"]));
    expect(responses("/api/projects/{id}/commit-status", "get")).toEqual(expect.arrayContaining(["404", "409"]));
    expect(responses("/api/projects/{id}/auto-deploy", "post")).toEqual(expect.arrayContaining(["400", "404", "409"]));
    expect(responses("/api/projects/{id}/webhook-domain", "post")).toEqual(expect.arrayContaining(["400", "404"]));
    for (const [path, method] of [
      ["/api/projects/{id}/git", "get"],
      ["/api/projects/{id}/branches", "get"],
      ["/api/projects/{id}/commit-status", "get"],
    ]) {
      expect(doc.paths[path!][method!]["x-permission"], path).toBe("project:read");
    }
    for (const path of ["/api/projects/{id}/git/link", "/api/projects/{id}/branch", "/api/projects/{id}/auto-deploy", "/api/projects/{id}/webhook-domain"]) {
      expect(doc.paths[path].post["x-permission"], path).toBe("project:write");
    }
  });

  it("states the body limit of every operation that takes a JSON body, and its 413", () => {
    for (const { method, path, op } of operations()) {
      if (!op.requestBody?.content?.["application/json"]) continue;
      expect(op["x-body-limit"], `${method} ${path}`).toBeGreaterThan(0);
      expect(op.responses["413"], `${method} ${path}`).toBeDefined();
    }
  });
});
