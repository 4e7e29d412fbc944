/**
 * `logs <project>`: the project's runtime logs (GET /api/projects/:id/logs, newest
 * last), and with --follow the live stream after them (GET …/logs/stream, resumed
 * with Last-Event-ID: no line missed or shown twice) until Ctrl-C. With
 * `--deployment <id>`: that deployment's build log, and with --follow until the
 * build ends (the exit code tells how).
 */
import { apiBase, CliError, call, checkToken, type Client, resolveProject } from "./api";
import { follow, type LogLine, type StreamEnd } from "./sse";

export interface LogsOptions extends Client {
  project: string;
  deploymentId?: string;
  followLogs?: boolean;
  limit?: number;
  /** Log lines (stdout in the command). */
  out: (text: string) => void;
  /** Messages (stderr in the command). */
  log: (text: string) => void;
  signal?: AbortSignal;
  follow?: { retryMs?: number; idleMs?: number };
}

interface Page {
  items: LogLine[];
  nextCursor: string | null;
}

export const formatRuntimeLine = (l: LogLine) => `${l.timestamp} ${l.stream === "stderr" ? "[stderr] " : ""}${l.message}\n`;
export const formatBuildLine = (l: LogLine) => `${l.message}\n`;

/** Prints the lines; resolves with how a followed build ended (null otherwise). */
export async function logs(opts: LogsOptions): Promise<StreamEnd | null> {
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
        onLine: (l) => opts.out(formatBuildLine(l)),
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
      for (const l of body.items) opts.out(formatBuildLine(l));
      cursor = body.nextCursor;
    } while (cursor && ++pages < 1000);
    return null;
  }
  const { body } = await call<Page>(opts, "GET", `/api/projects/${id}/logs?limit=${opts.limit ?? 100}`);
  for (const l of body.items) opts.out(formatRuntimeLine(l));
  if (opts.followLogs) {
    const last = body.items.at(-1)?.id;
    await follow({
      url: `${base}/api/projects/${id}/logs/stream`,
      // Without a line shown yet, the stream starts with the lines written from now on.
      lastEventId: last,
      token: () => opts.token,
      onLine: (l) => opts.out(formatRuntimeLine(l)),
      note: opts.log,
      signal: opts.signal,
      ...opts.follow,
    });
  }
  return null;
}
