/**
 * Every request-path form of the table in docs/edge.md (Edge, Paths): what the edge
 * forwards, or that it refuses the path (no form to match: 400), and whether a
 * rule on `/admin` covers it. Kept as one table so the documentation and the code
 * cannot drift apart form by form.
 */
import { describe, expect, it } from "vitest";
import { pathMatches } from "../../functions/route-rules/path-match";
import { requestPath } from "../../functions/self-hosted/edge/request-path";

const REFUSED = "400";
/** [target, the forwarded path or REFUSED, whether a rule on /admin covers it]. */
const FORMS: Array<[string, string, boolean]> = [
  // Already read as the app reads them.
  ["/admin", "/admin", true],
  ["http://h.example/admin", "/admin", true],
  ["*", "/", false],
  ["/admin?x=1", "/admin", true],
  ["/admin#x", "/admin", true],
  ["//admin", "/admin", true],
  ["///admin//panel", "/admin/panel", true],
  ["/admin/", "/admin/", true],
  ["/./admin", "/admin", true],
  ["/a/../admin", "/admin", true],
  ["/../../admin", "/admin", true],
  ["/%2e%2e/admin", "/admin", true],
  ["/x/%2E%2E/admin/", "/admin/", true],
  ["/.%2e/admin", "/admin", true],
  ["/%61dmin", "/admin", true],
  ["/%2561dmin", "/%2561dmin", false],
  ["/admin%2Fx", "/admin%2Fx", true],
  ["/admin%2fx", "/admin%2Fx", true],
  ["/x%2F..%2Fadmin", "/x%2F..%2Fadmin", true],
  ["/admin%2F.", "/admin%2F.", true],
  ["/admin;jsessionid=1", "/admin;jsessionid=1", true],
  ["/public/..;/admin", "/public/..;/admin", true],
  ["/a%20b", "/a%20b", false],
  ["/a.b/c", "/a.b/c", false],
  ["/ADMIN", "/ADMIN", false],
  ["/adminx", "/adminx", false],
  ["/x/admin", "/x/admin", false],
  // Backslashes are slashes (WHATWG URL, IIS), and the app gets the slashes.
  ["/admin\\x", "/admin/x", true],
  ["\\admin", "/admin", true],
  ["/x\\..\\admin", "/admin", true],
  ["http:\\\\h.example\\admin", "/admin", true],
  // Read differently by different servers: refused.
  ["/admin%5Cx", REFUSED, true],
  ["/admin%5cx", REFUSED, true],
  ["/x%5C..%5Cadmin", REFUSED, true],
  ["/admin%3Bx=1", REFUSED, true],
  ["/admin%3b", REFUSED, true],
  ["/admin%00", REFUSED, true],
  ["/admin%00.html", REFUSED, true],
  ["/admin%0A", REFUSED, true],
  ["/admin%0d", REFUSED, true],
  ["/admin%09", REFUSED, true],
  ["/admin%1F", REFUSED, true],
  ["/admin%7F", REFUSED, true],
  ["/admin\u0000", REFUSED, true],
  ["/admin\u0001x", REFUSED, true],
  ["/admin\u007f", REFUSED, true],
  ["/admin.", REFUSED, true],
  ["/admin..", REFUSED, true],
  ["/admin%2e", REFUSED, true],
  ["/admin%2E%2E", REFUSED, true],
  ["/admin%20", REFUSED, true],
  ["/admin. %20", REFUSED, true],
  ["/admin./x", REFUSED, true],
  ["/admin%20/x", REFUSED, true],
  ["/admin.;x=1", REFUSED, true],
  ["/admin%20;x=1", REFUSED, true],
  ["/...", REFUSED, false],
  ["/log.", REFUSED, false],
];

describe("request path forms (the table in docs/edge.md)", () => {
  it.each(FORMS)("%j → %s", (target, expected, covered) => {
    const parsed = requestPath(target)!;
    if (expected === REFUSED) {
      expect(parsed.match, "refused: no form for the rules, which answer 400").toEqual([]);
      return;
    }
    expect(parsed.path).toBe(expected);
    expect(parsed.forward.startsWith(expected)).toBe(true);
    expect(
      parsed.match.some((p) => pathMatches("/admin", p)),
      `a rule on /admin ${covered ? "covers" : "does not cover"} it`,
    ).toBe(covered);
  });

  it("forwards the normalized path with the original query, backslashes in the query kept", () => {
    expect(requestPath("/a\\b?x=\\y%00")).toEqual({ path: "/a/b", forward: "/a/b?x=\\y%00", match: ["/a/b"] });
  });

  it("stays linear on the longest hostile targets", () => {
    const started = performance.now();
    for (let i = 0; i < 100; i++) {
      requestPath(`/${"a.\\".repeat(2700)}`);
      requestPath(`/${"%2e%20/".repeat(1150)}`);
      requestPath(`/${"x;".repeat(4000)}`);
    }
    expect(performance.now() - started).toBeLessThan(1000);
  });
});
