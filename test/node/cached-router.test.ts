/**
 * The app's router (shared/http/cached-router.ts): the trie's answers, kept per method and path. Each path
 * keeps its own parameters, static routes still win over a parameter beside them, the kept answers are bounded
 * and long paths are never kept.
 */
import { Hono } from "hono";
import type { H, RouterRoute } from "hono/types";
import { describe, expect, it } from "vitest";
import { CachedTrieRouter } from "../../shared/http/cached-router";

function app() {
  const router = new CachedTrieRouter<[H, RouterRoute]>();
  const a = new Hono({ router });
  a.use("*", async (c, next) => {
    await next();
    c.header("x-seen", "1");
  });
  a.get("/projects/home", (c) => c.text("home"));
  a.get("/projects/:id", (c) => c.text(`project ${c.req.param("id")}`));
  a.get("/projects/:id/env/:key", (c) => c.json(c.req.param()));
  a.post("/projects/:id", (c) => c.text(`post ${c.req.param("id")}`));
  return { a, router };
}

const text = async (a: Hono, path: string, method = "GET") => {
  const res = await a.request(path, { method });
  return [res.status, await res.text(), res.headers.get("x-seen")];
};

describe("the cached trie router", () => {
  it("answers each path with its own parameters, the second time from the cache as the first", async () => {
    const { a } = app();
    for (let round = 0; round < 2; round++) {
      expect(await text(a, "/projects/p1")).toEqual([200, "project p1", "1"]);
      expect(await text(a, "/projects/p2")).toEqual([200, "project p2", "1"]);
      expect(await text(a, "/projects/home")).toEqual([200, "home", "1"]);
      expect(await text(a, "/projects/p1", "POST")).toEqual([200, "post p1", "1"]);
      expect(await text(a, "/projects/p%2F1/env/K%20Y")).toEqual([200, JSON.stringify({ id: "p/1", key: "K Y" }), "1"]);
      expect(await text(a, "/nothing")).toEqual([404, "404 Not Found", "1"]);
    }
  });

  it("keeps at most 2,000 answers and never a path over 256 characters, and still answers every one", async () => {
    const { a, router } = app();
    for (let i = 0; i < 2_500; i++) {
      expect((await text(a, `/projects/p${i}`))[1]).toBe(`project p${i}`);
      expect(router.cachedPaths).toBeLessThanOrEqual(2_000);
    }
    const before = router.cachedPaths;
    const long = "x".repeat(300);
    expect((await text(a, `/projects/${long}`))[1]).toBe(`project ${long}`);
    expect(router.cachedPaths).toBe(before);
  });

  it("forgets its answers when a route is added", async () => {
    const { a } = app();
    expect(await text(a, "/late")).toEqual([404, "404 Not Found", "1"]);
    a.get("/late", (c) => c.text("late"));
    expect(await text(a, "/late")).toEqual([200, "late", "1"]);
  });
});
