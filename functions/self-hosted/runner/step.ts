/** What the build's steps share: how a step is run, and how a job ends early. */

/** A failed deployment: `build` (source, install, build: build.failed) or `deploy` (start, health: deploy.failed). */
export class JobFailure extends Error {
  constructor(
    readonly kind: "build" | "deploy",
    message: string,
    /** Where it failed (the events' data.stage): the build, the start and first health check, or the smoke window after it. */
    readonly stage: "build" | "start" | "smoke" = kind === "build" ? "build" : "start",
  ) {
    super(message);
  }
}

/** The job was canceled or taken away (its renew found it no longer ours), or the server is stopping. */
export class JobAborted extends Error {}

/** Runs one build step (a shell command in the sandbox); a non-zero exit, the timeout, a limit or an abort throws. */
export type Step = (label: string, command: string, cwd: string, env: Record<string, string>, opts?: { shown?: string; secret?: string }) => Promise<void>;

/** A shell word: the string in single quotes. */
export const quote = (s: string) => `'${s.replaceAll("'", `'\\''`)}'`;
