/**
 * A clone token as HTTP basic auth, the way each provider documents it for git
 * over HTTPS. Only ever sent as an `Authorization` header: never put into a URL
 * (a URL ends up in responses, logs and error messages).
 *
 * - GitHub: `x-access-token:<token>`, the form documented for GitHub App
 *   installation tokens; personal access tokens (classic and fine-grained)
 *   are accepted with any username, so this one form covers both.
 * - GitLab: `oauth2:<token>`, documented for OAuth tokens; personal, project
 *   and group access tokens are accepted with any username too.
 * - Bitbucket Cloud: `x-token-auth:<token>`, the literal username documented
 *   for repository, project and workspace access tokens.
 * - Gitea/Forgejo: the token as the username and `x-oauth-basic` as the
 *   password; Gitea treats the username as the token when the password is
 *   empty or `x-oauth-basic` (the same form GitHub has long accepted).
 */
import type { GitProvider } from "./hosts";

export interface GitCredentials {
  username: string;
  password: string;
}

export function tokenCredentials(provider: GitProvider, token: string): GitCredentials {
  switch (provider) {
    case "github":
      return { username: "x-access-token", password: token };
    case "gitlab":
      return { username: "oauth2", password: token };
    case "bitbucket":
      return { username: "x-token-auth", password: token };
    case "gitea":
      return { username: token, password: "x-oauth-basic" };
  }
}

function base64Utf8(text: string): string {
  const bytes = new TextEncoder().encode(text);
  let binary = "";
  for (const b of bytes) binary += String.fromCharCode(b);
  return btoa(binary);
}

export function basicAuthorization(credentials: GitCredentials): string {
  return `Basic ${base64Utf8(`${credentials.username}:${credentials.password}`)}`;
}
