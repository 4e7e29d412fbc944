/**
 * The git source on the self-hosted server as an operator runs it: GIT_* settings
 * checked at start-up, PUBLIC_URL as the default webhook base, and git traffic
 * through the outbound guard (OUTBOUND_ALLOW_PRIVATE).
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, inject, it } from "vitest";
import { loadNodeConfig } from "../../functions/self-hosted/config";
import { startSelfHosted } from "../../functions/self-hosted/start";
import { gitServerControl } from "../support/git-control";

const dir = mkdtempSync(join(tmpdir(), "ws-git-sh-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("git settings", () => {
  it("a malformed GIT_* setting stops start-up with a message naming it", () => {
    expect(() => loadNodeConfig({ GIT_GITEA_URL: "ftp://git.example.com" })).toThrow(/Invalid configuration GIT_GITEA_URL must be an http\(s\) URL/);
    expect(() => loadNodeConfig({ GIT_GITLAB_URL: "https://user:secret@gitlab.example.com" })).toThrow(/GIT_GITLAB_URL must not carry credentials/);
    expect(() => loadNodeConfig({ GIT_GITHUB_URL: "https://github.example.com/?x=1" })).toThrow(/GIT_GITHUB_URL/);
    expect(loadNodeConfig({ GIT_GITLAB_URL: "https://git.example.com/gitlab/" }).gitHosts).toEqual({
      github: "https://github.com",
      gitlab: "https://git.example.com/gitlab",
      bitbucket: "https://bitbucket.org",
      gitea: null,
    });
  });
});

describe("git source on the self-hosted server", () => {
  it("builds webhook URLs on PUBLIC_URL, and refuses the loopback host unless OUTBOUND_ALLOW_PRIVATE", async () => {
    const gitUrl = inject("gitServerUrl");
    const repo = await gitServerControl(gitUrl).createRepo();
    const env = { PORT: "0", LOG_LEVEL: "silent", DATA_DIR: dir, GIT_GITEA_URL: gitUrl, PUBLIC_URL: "https://ci.example.org/workspace/" } as const;
    const call = (base: string, token: string) => async (path: string, json?: unknown) => {
      const res = await fetch(`${base}/api${path}`, {
        method: json ? "POST" : "GET",
        headers: { authorization: `Bearer ${token}`, ...(json ? { "content-type": "application/json" } : {}) },
        body: json ? JSON.stringify(json) : undefined,
      });
      return { status: res.status, body: await res.json() };
    };

    let server = await startSelfHosted(loadNodeConfig({ ...env, OUTBOUND_ALLOW_PRIVATE: "true" }), () => {});
    let projectId: string;
    try {
      const api = call(server.url, readFileSync(join(dir, "owner-token"), "utf8").trim());
      const project = await api("/projects", { name: "sh git" });
      projectId = project.body.id;
      expect((await api(`/projects/${projectId}/git/link`, { provider: "gitea", owner: repo.owner, repo: repo.repo })).body).toMatchObject({ branch: "trunk" });
      const on = await api(`/projects/${projectId}/auto-deploy`, { enabled: true });
      expect(on.body.webhookUrl).toMatch(/^https:\/\/ci\.example\.org\/workspace\/api\/git\/hooks\/gph_[0-9a-z]{26}$/);
    } finally {
      await server.close();
    }

    server = await startSelfHosted(loadNodeConfig({ ...env, OUTBOUND_ALLOW_PRIVATE: "false" }), () => {});
    try {
      const api = call(server.url, readFileSync(join(dir, "owner-token"), "utf8").trim());
      const refused = await api(`/projects/${projectId}/git/link`, { provider: "gitea", owner: repo.owner, repo: repo.repo });
      expect(refused.status).toBe(502);
      expect(refused.body.detail).toMatch(/OUTBOUND_ALLOW_PRIVATE/);
      const status = await api(`/projects/${projectId}/commit-status`);
      expect(status).toMatchObject({ status: 200, body: { status: "not_deployed", remoteCommit: null } });
      expect(status.body.reason).toMatch(/OUTBOUND_ALLOW_PRIVATE/);
    } finally {
      await server.close();
    }
  });
});
