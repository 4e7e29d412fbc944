/**
 * Route-rule path matching (prefixes on segment boundaries, `*` within a
 * segment, `**` across, no blow-up on hostile input) and the edge's request
 * path normalization that rules are matched against.
 */
import { describe, expect, it } from "vitest";
import { pathMatches } from "../../functions/route-rules/path-match";
import { MAX_TARGET, requestPath } from "../../functions/self-hosted/edge/request-path";

const yes = (pattern: string, ...paths: string[]) => {
  for (const p of paths) expect(pathMatches(pattern, p), `${pattern} ~ ${p}`).toBe(true);
};
const no = (pattern: string, ...paths: string[]) => {
  for (const p of paths) expect(pathMatches(pattern, p), `${pattern} !~ ${p}`).toBe(false);
};

describe("route-rule path matching", () => {
  it("a plain path is a prefix on segment boundaries; / and null match everything", () => {
    yes("/api", "/api", "/api/", "/api/x", "/api/x/y");
    no("/api", "/apix", "/ap", "/", "/v1/api");
    yes("/api/", "/api", "/api/", "/api/x");
    no("/api/", "/apix");
    yes("/", "/", "/anything", "/a/b/c");
    expect(pathMatches(null, "/whatever")).toBe(true);
  });

  it("* matches within one segment, possibly nothing", () => {
    yes("/static/*.js", "/static/app.js", "/static/.js");
    no("/static/*.js", "/static/a/b.js", "/static/app.css", "/static/app.js/x");
    yes("/u/*/profile", "/u/42/profile");
    no("/u/*/profile", "/u/4/2/profile", "/u/profile");
    yes("/*a*b", "/ab", "/xaxb", "/aab");
    no("/*a*b", "/a/b", "/ba");
  });

  it("** matches across segments", () => {
    yes("/admin/**", "/admin/x", "/admin/x/y/z", "/admin/");
    no("/admin/**", "/administrator", "/adm");
    yes("/**/*.js", "/a.js", "/x/a.js", "/x/y/z/a.js");
    no("/**/*.js", "/x/a.css");
    yes("/a/**/b", "/a/b", "/a/x/b", "/a/x/y/b");
    no("/a/**/b", "/a/x/bc", "/ab");
  });

  it("a trailing /** also matches the bare prefix (a rule on /admin/** covers /admin)", () => {
    yes("/admin/**", "/admin");
    yes("/**", "/", "/x", "/x/y");
  });

  it("keeps the ** backtrack point after a later * (the old greedy matcher's bug)", () => {
    yes("/**/x/*.js", "/a/x/b/x/c.js", "/x/c.js", "/q/x/c.js");
    no("/**/x/*.js", "/a/x/b/c.js");
    yes("/**/api/*/edit", "/v1/api/x/api/7/edit");
    yes("/**a*/z", "/b/aa/a/z");
  });

  it("finishes fast on adversarial input", () => {
    const path = `/${"a/".repeat(5_000)}`;
    const started = performance.now();
    expect(pathMatches("/**/**/**/*a*b", path)).toBe(false);
    expect(pathMatches("/**/**/**/*a*b", `${path}aab`)).toBe(true);
    expect(pathMatches(`/${"*a".repeat(60)}b`, `/${"a".repeat(10_000)}`)).toBe(false);
    expect(pathMatches(`/${"**a".repeat(60)}b`, `/${"a".repeat(10_000)}`)).toBe(false);
    expect(performance.now() - started).toBeLessThan(500);
  });
});

describe("the edge's request path normalization", () => {
  const path = (target: string) => requestPath(target)?.path;

  it("reads absolute-form as its path, cuts the query and fragment, keeps the query for the app", () => {
    expect(requestPath("http://h.example/admin?x=1")).toEqual({ path: "/admin", forward: "/admin?x=1", match: ["/admin"] });
    expect(path("https://h.example")).toBe("/");
    expect(path("*")).toBe("/");
    expect(requestPath("/a?b=/../c#frag")).toMatchObject({ path: "/a", forward: "/a?b=/../c" });
  });

  it("decodes escaped unreserved characters only, upper-cases other escapes and keeps %2F", () => {
    expect(path("/%61dmin")).toBe("/admin");
    expect(path("/%7e%2D%5f%2e%30")).toBe("/~-_.0");
    expect(path("/a%20b%3f")).toBe("/a%20b%3F");
    expect(path("/a%2fb")).toBe("/a%2Fb");
    expect(path("/bad%zz%4")).toBe("/bad%zz%4");
    expect(requestPath("/admin%2Fx")?.match).toEqual(["/admin%2Fx", "/admin/x"]);
    expect(requestPath("/admin")?.match).toEqual(["/admin"]);
  });

  it("also gives the forms without ; parameters for matching (servlet containers cut them), forwarding the path unchanged", () => {
    expect(requestPath("/admin;jsessionid=1?x")).toEqual({
      path: "/admin;jsessionid=1",
      forward: "/admin;jsessionid=1?x",
      match: ["/admin;jsessionid=1", "/admin"],
    });
    expect(requestPath("/public/..;/admin")?.match).toEqual(["/public/..;/admin", "/admin"]);
    expect(requestPath("/a%2F..;%2Fadmin")?.match).toContain("/admin");
  });

  it("collapses slashes and resolves dot segments without going above the root", () => {
    expect(path("//admin")).toBe("/admin");
    expect(path("/./admin")).toBe("/admin");
    expect(path("/a/../admin")).toBe("/admin");
    expect(path("/../../admin")).toBe("/admin");
    expect(path("/%2e%2E/admin")).toBe("/admin");
    expect(path("/a/b/..")).toBe("/a/");
    expect(path("/a/b/.")).toBe("/a/b/");
    expect(path("/a//b///")).toBe("/a/b/");
    expect(path("/...")).toBe("/...");
    expect(path("/")).toBe("/");
    expect(path("")).toBe("/");
  });

  it("refuses targets over the cap and stays linear below it", () => {
    expect(requestPath(`/${"a".repeat(MAX_TARGET)}`)).toBeNull();
    const started = performance.now();
    for (let i = 0; i < 100; i++) requestPath(`/${"./../%2e%2E//%61".repeat(Math.floor(MAX_TARGET / 18))}`);
    expect(performance.now() - started).toBeLessThan(1000);
  });
});
