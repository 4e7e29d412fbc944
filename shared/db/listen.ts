/**
 * LISTEN on one notification channel (Node adapter only). On Postgres a
 * dedicated connection listens and reconnects with backoff, telling the caller
 * when it is down (`onActive(false)`: notifications may be missed, so caches
 * must stop trusting themselves) and up again (`onActive(true)`: reload what
 * may have changed meanwhile). PGlite delivers the notifications of its own
 * single connection, and is always active.
 */
import type { PGlite } from "@electric-sql/pglite";
import pg from "pg";

export interface Stoppable {
  stop(): Promise<void>;
}

export interface ChannelHandlers {
  onMessage(payload: string): void;
  onActive?(active: boolean): void;
}

/** Channel names are our own constants; checked anyway because LISTEN takes no bind parameter. */
const CHANNEL = /^[a-z_]{1,63}$/;

export async function listenPgliteChannel(client: PGlite, channel: string, handlers: ChannelHandlers): Promise<Stoppable> {
  if (!CHANNEL.test(channel)) throw new Error(`bad channel name ${channel}`);
  const unlisten = await client.listen(channel, (payload) => handlers.onMessage(payload));
  handlers.onActive?.(true);
  return { stop: () => unlisten() };
}

export async function listenPostgresChannel(url: string, channel: string, handlers: ChannelHandlers): Promise<Stoppable> {
  if (!CHANNEL.test(channel)) throw new Error(`bad channel name ${channel}`);
  let stopped = false;
  let client: pg.Client | undefined;
  let retry: ReturnType<typeof setTimeout> | undefined;
  let delay = 250;

  const connect = async (): Promise<void> => {
    handlers.onActive?.(false);
    const next = new pg.Client({ connectionString: url });
    next.on("notification", (msg) => handlers.onMessage(msg.payload ?? ""));
    next.on("error", () => {});
    next.on("end", () => {
      handlers.onActive?.(false);
      reconnect();
    });
    try {
      await next.connect();
      await next.query(`LISTEN ${channel}`);
    } catch (e) {
      await next.end().catch(() => {});
      throw e;
    }
    client = next;
    delay = 250;
    handlers.onActive?.(true);
  };

  const reconnect = () => {
    if (stopped) return;
    retry = setTimeout(() => connect().catch(reconnect), delay);
    delay = Math.min(delay * 2, 10_000);
  };

  await connect();
  return {
    stop: async () => {
      stopped = true;
      if (retry) clearTimeout(retry);
      await client?.end().catch(() => {});
    },
  };
}
