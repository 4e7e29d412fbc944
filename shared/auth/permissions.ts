/**
 * Permission tags and what each membership role grants. Effective permissions of a
 * request = the role's tags ∩ the token's scopes, computed on every request.
 */
export const TAGS = [
  "project:list",
  "project:read",
  "project:write",
  "project:admin",
  "project:deployment:list",
  "settings:read",
  "settings:write",
  "notifications:read",
  "notifications:write",
  "notifications:admin",
  /** Ours, not the spec's: manage members and invitations. */
  "org:admin",
] as const;

export type Tag = (typeof TAGS)[number];

export const ROLES = ["owner", "admin", "member", "viewer"] as const;
export type Role = (typeof ROLES)[number];

const ADMIN_ONLY: readonly Tag[] = ["project:admin", "notifications:admin", "org:admin"];

export const ROLE_TAGS: Record<Role, readonly Tag[]> = {
  owner: TAGS,
  admin: TAGS,
  member: TAGS.filter((t) => !ADMIN_ONLY.includes(t)),
  viewer: [
    "project:list",
    "project:read",
    "project:deployment:list",
    "settings:read",
    "settings:write",
    "notifications:read",
    "notifications:write",
  ],
};

export function isTag(value: string): value is Tag {
  return (TAGS as readonly string[]).includes(value);
}

/** Role tags narrowed by a token's scopes (null scopes = no narrowing). */
export function effectiveTags(role: Role, scopes: readonly string[] | null): Tag[] {
  const granted = ROLE_TAGS[role];
  return scopes ? granted.filter((t) => scopes.includes(t)) : [...granted];
}
