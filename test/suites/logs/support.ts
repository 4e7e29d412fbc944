/** What the logs suites share: seeding lines through the store, opening streams on any runtime, an SSE reader. */
import { afterEach } from "vitest";
import { appendRequestLines, pendingRequestLine } from "../../../functions/logs/request-batches";
import { appendLogLines, type LogKind, type LogStream, type NewLogLine } from "../../../functions/logs/store";
import { LogLineSchema, type LogLine } from "../../../functions/logs/schema";
import type { Harness, Member, RequestOptions } from "../../support/harness";

export interface SseMessage {
  id?: string;
  event: string;
  data: string;
}

/** Reads an event stream as it arrives: events, comments (heartbeats), and whether the server closed it. */
export class SseReader {
  events: SseMessage[] = [];
  comments: string[] = [];
  closed = false;
  private waiters = new Set<() => void>();
  private reader: ReadableStreamDefaultReader<Uint8Array>;

  constructor(readonly res: Response) {
    if (!res.body) throw new Error("no body");
    this.reader = res.body.getReader();
    void this.pump();
  }

  private async pump() {
    const decoder = new TextDecoder();
    let buffer = "";
    try {
      for (;;) {
        const { value, done } = await this.reader.read();
        if (done) break;
        buffer += decoder.decode(value, { stream: true });
        let end = buffer.indexOf("\n\n");
        while (end >= 0) {
          this.parse(buffer.slice(0, end));
          buffer = buffer.slice(end + 2);
          end = buffer.indexOf("\n\n");
        }
        this.wake();
      }
    } catch {
      // canceled by close()
    }
    this.closed = true;
    this.wake();
  }

  private parse(block: string) {
    const message: SseMessage = { event: "message", data: "" };
    let isEvent = false;
    for (const line of block.split("\n")) {
      if (line.startsWith(":")) this.comments.push(line);
      else {
        isEvent = true;
        const colon = line.indexOf(":");
        const field = line.slice(0, colon);
        const value = line.slice(colon + 1).replace(/^ /, "");
        if (field === "id") message.id = value;
        else if (field === "event") message.event = value;
        else if (field === "data") message.data = message.data ? `${message.data}\n${value}` : value;
      }
    }
    if (isEvent) this.events.push(message);
  }

  private wake() {
    for (const w of this.waiters) w();
  }

  /** The `log` events' lines, in order. */
  get lines(): LogLine[] {
    return this.events.filter((e) => e.event === "log").map((e) => LogLineSchema.parse(JSON.parse(e.data)));
  }

  get lastId(): string | undefined {
    return this.events.filter((e) => e.id !== undefined).at(-1)?.id;
  }

  /** Waits until `check` holds (checked at every chunk), or fails after `ms`. */
  async until(check: (r: SseReader) => boolean, ms = 10_000, what = "condition"): Promise<void> {
    const deadline = Date.now() + ms;
    while (!check(this)) {
      if (this.closed) throw new Error(`stream closed before ${what}; events: ${JSON.stringify(this.events.slice(-3))}`);
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`timed out waiting for ${what}; ${this.events.length} events`);
      await new Promise<void>((resolve) => {
        const done = () => {
          clearTimeout(timer);
          this.waiters.delete(done);
          resolve();
        };
        const timer = setTimeout(done, Math.min(left, 200));
        this.waiters.add(done);
      });
    }
  }

  /** The client disconnects. */
  async close() {
    await this.reader.cancel().catch(() => {});
  }
}

/** Opens streams on the harness's runtime (the Worker harness buffers ordinary responses) and closes them after each test. */
export function useStreams(h: Harness) {
  const open: SseReader[] = [];
  afterEach(async () => {
    for (const r of open.splice(0)) await r.close();
  });
  const stream = async (t: Member | { token: string; orgId?: string }, path: string, init: RequestOptions = {}) => {
    const streaming = (h as Harness & { requestStream?: Harness["request"] }).requestStream ?? h.request;
    const res = await streaming(path, { token: t.token, org: t.orgId, ...init });
    if (res.status !== 200) throw new Error(`stream ${path}: ${res.status} ${await res.text()}`);
    if (!res.headers.get("content-type")?.startsWith("text/event-stream")) throw new Error(`not an event stream: ${res.headers.get("content-type")}`);
    const reader = new SseReader(res);
    open.push(reader);
    return reader;
  };
  return { stream };
}

/** Appends lines through the store, like the runner's writer does. */
export function lineSeeder(h: Harness) {
  return async (
    target: { orgId: string; projectId: string; deploymentId: string | null },
    messages: string[],
    opts: { kind?: LogKind; stream?: LogStream; at?: Date | ((i: number) => Date) } = {},
  ) => {
    const lines: NewLogLine[] = messages.map((message, i) => ({
      ...target,
      kind: opts.kind ?? "runtime",
      stream: opts.stream ?? "stdout",
      at: typeof opts.at === "function" ? opts.at(i) : (opts.at ?? new Date()),
      message,
    }));
    await appendLogLines(h.db, lines);
  };
}

export interface SeededRequest {
  method?: string;
  path: string;
  status: number;
  at?: Date;
  /** Defaults: no deployment, host app.example, 120 bytes, 3 ms. */
  deploymentId?: string | null;
  host?: string;
  bytes?: number;
  durationMs?: number;
}

/**
 * Appends request lines as the edge's writer does (functions/logs/request-batches.ts): all in one batch
 * row, or with `eachAlone` one batch per line (as the Worker's edge writes them), so reads cross batches.
 */
export function requestSeeder(h: Harness) {
  return async (target: { orgId: string; projectId: string }, requests: SeededRequest[], opts: { eachAlone?: boolean } = {}) => {
    const lines = requests.map((r) =>
      pendingRequestLine(target.projectId, target.orgId, {
        at: (r.at ?? new Date()).getTime(),
        deploymentId: r.deploymentId ?? null,
        method: r.method ?? "GET",
        host: r.host ?? "app.example",
        path: r.path,
        status: r.status,
        durationMs: r.durationMs ?? 3,
        bytes: r.bytes ?? 120,
        clientAddress: "203.0.113.9",
        environment: "production",
        rule: r.status === 429 ? "rr_test" : null,
      }),
    );
    if (!opts.eachAlone) await appendRequestLines(h.db, lines);
    else for (const line of lines) await appendRequestLines(h.db, [line]);
  };
}
