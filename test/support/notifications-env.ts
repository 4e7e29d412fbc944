/**
 * What the notification delivery suite needs from a runtime, beyond the
 * harness: a test "internet" of receivers, the mailbox, and the runtime's own
 * delivery path (Node: the engine; Worker: the cron handler).
 */
import { sql } from "drizzle-orm";
import type { Db } from "../../shared/db/types";
import type { DeliveryPolicy } from "../../functions/notifications/delivery/engine";
import { useHarness, type Harness } from "./harness";
import type { Recorder, Reply } from "./receiver-core";
import { runtimeFactory } from "./runtime";

/** Fast retries for tests: 50 ms, 200 ms, 800 ms, at most 4 attempts. */
export const TEST_POLICY: Partial<DeliveryPolicy> = { baseDelayMs: 50, maxDelayMs: 2_000, maxAttempts: 4, leaseMs: 30_000 };
export const TEST_TIMEOUT_MS = 2_000;

export interface TestReceiver {
  recorder: Recorder;
  /** A generic webhook URL that reaches this receiver. */
  webhookUrl: string;
  /** Provider URLs (on the providers' real hosts) routed to this receiver. */
  slackUrl: string;
  discordUrl: string;
  teamsWorkflowUrl: string;
  teamsConnectorUrl: string;
}

export interface TestEmail {
  to: string[];
  subject: string;
  text: string;
}

export interface NotificationsEnv {
  /** "smtp" (Node, a real SMTP server on loopback) or "email-api" (Worker, the HTTP e-mail API). */
  mailTransport: "smtp" | "email-api";
  receiver(script?: Reply[], fallback?: Reply): Promise<TestReceiver>;
  emails(): TestEmail[];
  /** Runs the runtime's delivery path once. */
  deliver(): Promise<void>;
  /** Delivers until no send of the organization is pending (waiting for retries). */
  settle(orgId: string, timeoutMs?: number): Promise<void>;
}

export async function pendingSends(db: Db, orgId: string): Promise<number> {
  const res = await db.execute(sql`select count(*)::int as n from notification_outbox where org_id = ${orgId} and status in ('pending', 'sending')`);
  return ((res as unknown as { rows?: { n: number }[] }).rows ?? (res as unknown as { n: number }[]))[0]!.n;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export async function settleWith(deliver: () => Promise<void>, db: () => Db, orgId: string, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    await deliver();
    const n = await pendingSends(db(), orgId);
    if (n === 0) return;
    if (Date.now() > deadline) throw new Error(`${n} sends of ${orgId} still pending after ${timeoutMs} ms`);
    await sleep(30);
  }
}

/**
 * The delivery suite's harness and environment on the project's runtime (Node: loopback
 * receivers, SMTP, the engine; Worker: an in-isolate internet, the cron handler), each
 * runtime's module loaded only when it opens. `env` is filled in once the harness is ready.
 */
export function useNotificationsEnv(): { h: Harness; env: NotificationsEnv } {
  const env = {} as NotificationsEnv;
  const h = useHarness(
    runtimeFactory(async (runtime) => {
      const opened =
        runtime === "worker"
          ? await (await import("./notifications-env-worker")).openWorkerNotificationsEnv()
          : await (await import("./notifications-env-node")).openNodeNotificationsEnv(runtime);
      Object.assign(env, opened.env);
      return opened.harness;
    }),
  );
  return { h, env };
}
