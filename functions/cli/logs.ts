/**
 * `logs <project>`: the project's runtime logs (GET /api/projects/:id/logs, newest
 * last), every line labelled with its environment and deployment, and with --follow
 * the live stream after them (GET …/logs/stream, resumed with Last-Event-ID: no line
 * missed or shown twice) until Ctrl-C; `--env <name>` narrows both to one environment
 * (`?environment=`, filtered by the API). With `--deployment <id>`: that deployment's
 * build log, and with --follow until the build ends (the exit code tells how).
 */
import { apiBase, CliError, call, checkToken, type Client, resolveProject } from "./api";
import { follow, type LogLine, type StreamEnd } from "./sse";

export interface LogsOptions extends Client {
  project: string;
  deploymentId?: string;
  /** Runtime logs of this environment only (its name); all of the project's without it. */
  environment?: string;
  followLogs?: boolean;
  limit?: number;
  /** Log lines (stdout in the command). */
  out: (text: string) => void;
  /** How a line is printed (--json: one object a line); default the labelled text. */
  format?: (l: LogLine) => string;
  /** Messages (stderr in the command). */
  log: (text: string) => void;
  signal?: AbortSignal;
  follow?: { retryMs?: number; idleMs?: number };
}

interface Page {
  items: LogLine[];
  nextCursor: string | null;
}

/** Characters of a deployment id's random end kept in a label: enough to tell a project's deployments apart at a glance. */
const SHORT_ID_CHARS = 4;

/**
 * Where a runtime line comes from, `[production dpl_…a1b2]`: its environment and the end of
 * its deployment id. Printed on every runtime line, not only once a second source shows up:
 * a followed stream can be joined by a preview or a new deployment at any moment, and lines
 * that all carry it can be filtered with grep.
 */
export function sourceLabel(l: LogLine): string {
  const id = l.deploymentId;
  // The prefix says what it is; the id's end is random (its start is a timestamp, alike for deployments made together).
  const short = id === null ? "-" : `${id.slice(0, id.indexOf("_") + 1)}…${id.slice(-SHORT_ID_CHARS)}`;
  return l.environment ? `[${l.environment} ${short}]` : `[${short}]`;
}

export const formatRuntimeLine = (l: LogLine) => `${l.timestamp} ${sourceLabel(l)} ${l.stream === "stderr" ? "[stderr] " : ""}${l.message}\n`;
/** A build log is one deployment's, named on the command line: its lines need no label. */
export const formatBuildLine = (l: LogLine) => `${l.message}\n`;

/** Prints the lines; resolves with how a followed build ended (null otherwise). */
export async function logs(opts: LogsOptions): Promise<StreamEnd | null> {
  const buildLine = opts.format ?? formatBuildLine;
  const runtimeLine = opts.format ?? formatRuntimeLine;
  await checkToken(opts);
  const project = opts.project;
  const { id } = await resolveProject(opts, project);
  const base = apiBase(opts.api);
  if (opts.deploymentId) {
    const dpl = encodeURIComponent(opts.deploymentId);
    const { body: d } = await call<{ projectId: string }>(opts, "GET", `/api/deployments/${dpl}`);
    if (d.projectId !== id) throw new CliError(`Deployment ${opts.deploymentId} is not one of project ${project}'s`);
    if (opts.followLogs) {
      const end = await follow({
        url: `${base}/api/deployments/${dpl}/logs/stream`,
        token: () => opts.token,
        onLine: (l) => opts.out(buildLine(l)),
        note: opts.log,
        signal: opts.signal,
        ...opts.follow,
      });
      return end ?? null;
    }
    let cursor: string | null = null;
    let pages = 0;
    do {
      const query: string = `/api/deployments/${dpl}/logs?limit=1000${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`;
      const { body }: { body: Page } = await call<Page>(opts, "GET", query);
      for (const l of body.items) opts.out(buildLine(l));
      cursor = body.nextCursor;
    } while (cursor && ++pages < 1000);
    return null;
  }
  // The same narrowing on the page and the stream, so the followed lines are the page's environment's too.
  const narrowed: Record<string, string> = opts.environment === undefined ? {} : { environment: opts.environment };
  const pageQuery = new URLSearchParams({ limit: String(opts.limit ?? 100), ...narrowed });
  const streamQuery = String(new URLSearchParams(narrowed));
  const { body } = await call<Page>(opts, "GET", `/api/projects/${id}/logs?${pageQuery}`);
  for (const l of body.items) opts.out(runtimeLine(l));
  if (opts.followLogs) {
    const last = body.items.at(-1)?.id;
    await follow({
      url: `${base}/api/projects/${id}/logs/stream${streamQuery ? `?${streamQuery}` : ""}`,
      // Without a line shown yet, the stream starts with the lines written from now on.
      lastEventId: last,
      token: () => opts.token,
      onLine: (l) => opts.out(runtimeLine(l)),
      note: opts.log,
      signal: opts.signal,
      ...opts.follow,
    });
  }
  return null;
}
