/** Helpers the Identity suites share: calls to /api/me, /api/orgs, /api/tokens, members and invitations. */
import { expect } from "vitest";
import { type Tag, TAGS } from "../../shared/auth/permissions";
import { newId } from "../../shared/ids";
import { MemberSchema } from "../../functions/identity/members";
import { OrganizationSchema } from "../../functions/identity/schema";
import { TokenSchema } from "../../functions/identity/tokens";
import { pageOf } from "../../shared/http/pagination";
import { expectBody, expectProblem, expectStatus, type Harness } from "./harness";

/** The list routes' pages, built as the routes build them. */
export const MemberPage = pageOf(MemberSchema, "MemberPage");
export const TokenPage = pageOf(TokenSchema, "TokenPage");

export const ADMIN_TAGS: Tag[] = ["project:admin", "notifications:admin", "org:admin"];
export const MEMBER_TAGS = TAGS.filter((t) => !ADMIN_TAGS.includes(t));
export const VIEWER_TAGS = [
  "project:list",
  "project:read",
  "project:deployment:list",
  "settings:read",
  "settings:write",
  "notifications:read",
  "notifications:write",
  "token:manage",
];

export const sorted = <T>(values: readonly T[]) => [...values].sort();

/** Computed here, independently of the app's own helper. */
export async function sha256Hex(text: string): Promise<string> {
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text)));
  return [...digest].map((b) => b.toString(16).padStart(2, "0")).join("");
}

/** A problem without its per-request id, for byte-for-byte comparisons. */
export async function problemBody(res: Response, status: number) {
  const p = await expectProblem(res, status);
  const { requestId, ...rest } = p;
  expect(requestId).toMatch(/^req_/);
  return rest;
}

export function identityHelpers(h: Harness) {
  const me = async (token: string, org?: string) => expectStatus(await h.request("/api/me", { token, org }), 200);
  const createOrg = async (token: string, name: string) => expectBody(await h.request("/api/orgs", { token, json: { name } }), 201, OrganizationSchema);
  const createToken = (token: string, json: unknown, org?: string) => h.request("/api/tokens", { token, json, org });
  const members = (token: string, orgId: string, query = "") => h.request(`/api/orgs/${orgId}/members${query}`, { token });
  const setRole = (token: string, orgId: string, userId: string, role: unknown) =>
    h.request(`/api/orgs/${orgId}/members/${userId}`, { method: "PATCH", token, json: { role } });
  const removeMember = (token: string, orgId: string, userId: string) => h.request(`/api/orgs/${orgId}/members/${userId}`, { method: "DELETE", token });
  const invite = (token: string, orgId: string, email: string, role: string) => h.request(`/api/orgs/${orgId}/invitations`, { token, json: { email, role } });
  const accept = (json: unknown, token?: string) => h.request("/api/invitations/accept", { token, json });
  const freshEmail = () => `${newId("inv")}@example.test`;
  const allMembers = async (token: string, orgId: string) => (await expectBody(await members(token, orgId, "?limit=100"), 200, MemberPage)).items;
  return { me, createOrg, createToken, members, setRole, removeMember, invite, accept, freshEmail, allMembers };
}
