/**
 * Global setup shared by the node and worker test projects: a real git host
 * (git's own `git http-backend` behind a loopback server, see
 * test/support/git-server.ts). workerd reaches it on 127.0.0.1 too. Tests make
 * their own repositories through its control API (test/support/git-control.ts),
 * so files running at once never see each other's commits.
 */
import type { TestProject } from "vitest/node";
import { startGitServer } from "../support/git-server";

declare module "vitest" {
  export interface ProvidedContext {
    /** `http://127.0.0.1:<port>`: repositories at `/<owner>/<repo>.git`, v0-only at `/v0/...`; misbehaving hosts under `/down/`, `/slow/`, `/endless/`, `/moved/`, `/html/` (see git-server.ts). */
    gitServerUrl: string;
    /** The clone token the server's private repositories accept. */
    gitToken: string;
  }
}

export default async function setup(project: TestProject) {
  const server = await startGitServer();
  project.provide("gitServerUrl", server.url);
  project.provide("gitToken", server.token);
  return () => server.close();
}
