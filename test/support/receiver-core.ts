/**
 * Runtime-neutral parts of the test receivers: what a receiver records, the
 * scripted answers it gives, a Standard Webhooks verifier written from the
 * spec (not from our signing code), and a fetch-handler receiver for workerd.
 */

export interface Hit {
  /** The URL the service sent to (before any test routing). */
  url: string;
  method: string;
  headers: Record<string, string>;
  body: string;
  at: number;
}

export interface Reply {
  status: number;
  headers?: Record<string, string>;
  body?: string;
  /** Answer this late (for timeouts and "slow destination" tests). */
  delayMs?: number;
}

export class Recorder {
  readonly hits: Hit[] = [];
  private readonly script: Reply[];
  constructor(
    script: Reply[] = [],
    private readonly fallback: Reply = { status: 200, body: "ok" },
  ) {
    this.script = [...script];
  }

  /** Records a hit and returns the next scripted answer (then the fallback). */
  take(hit: Omit<Hit, "at">): Reply {
    this.hits.push({ ...hit, at: Date.now() });
    return this.script.shift() ?? this.fallback;
  }

  json<T = any>(i = this.hits.length - 1): T {
    return JSON.parse(this.hits[i]!.body) as T;
  }

  /** How many times each webhook-id arrived. */
  countsById(): Map<string, number> {
    const counts = new Map<string, number>();
    for (const h of this.hits) {
      const id = h.headers["webhook-id"] ?? "";
      counts.set(id, (counts.get(id) ?? 0) + 1);
    }
    return counts;
  }
}

function b64decode(text: string): Uint8Array<ArrayBuffer> {
  const bin = atob(text);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

/** Verifies a Standard Webhooks request as a receiver would (https://www.standardwebhooks.com). */
export async function verifyStandardWebhook(secret: string, headers: Record<string, string>, body: string, toleranceSeconds = 300): Promise<boolean> {
  const id = headers["webhook-id"];
  const timestamp = headers["webhook-timestamp"];
  const signatures = headers["webhook-signature"];
  if (!id || !timestamp || !signatures || !/^\d+$/.test(timestamp)) return false;
  if (Math.abs(Date.now() / 1000 - Number(timestamp)) > toleranceSeconds) return false;
  if (!secret.startsWith("whsec_")) return false;
  const key = await crypto.subtle.importKey("raw", b64decode(secret.slice("whsec_".length)), { name: "HMAC", hash: "SHA-256" }, false, ["verify"]);
  const signed = new TextEncoder().encode(`${id}.${timestamp}.${body}`);
  for (const part of signatures.split(" ")) {
    const [version, sig] = part.split(",");
    if (version === "v1" && sig && (await crypto.subtle.verify("HMAC", key, b64decode(sig), signed))) return true;
  }
  return false;
}

export function headersOf(h: Headers): Record<string, string> {
  const out: Record<string, string> = {};
  h.forEach((value, key) => {
    out[key.toLowerCase()] = value;
  });
  return out;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** A receiver as a fetch handler (workerd cannot listen on a socket). Honours the request's abort signal. */
export function fetchReceiver(recorder: Recorder) {
  return async (url: string, init: RequestInit): Promise<Response> => {
    const request = new Request(url, init);
    const reply = recorder.take({ url, method: request.method, headers: headersOf(request.headers), body: await request.text() });
    if (reply.delayMs) {
      await Promise.race([
        sleep(reply.delayMs),
        new Promise((_, reject) => init.signal?.addEventListener("abort", () => reject(new DOMException("aborted", "TimeoutError")))),
      ]);
    }
    return new Response(reply.body ?? null, { status: reply.status, headers: reply.headers });
  };
}

/** Provider URLs the tests configure; each is unique per receiver. */
export function providerUrls(tag: string) {
  return {
    slack: `https://hooks.slack.com/services/T0TEST${tag}/B0TEST${tag}/slacksecret${tag}`,
    discord: `https://discord.com/api/webhooks/1234567${tag.replace(/\D/g, "") || "0"}/discordsecret${tag}`,
    teamsWorkflow: `https://prod-42.westeurope.logic.azure.com:443/workflows/wf${tag}/triggers/manual/paths/invoke?api-version=2016-06-01&sp=%2Ftriggers%2Fmanual%2Frun&sv=1.0&sig=teamssig${tag}`,
    teamsConnector: `https://contoso.webhook.office.com/webhookb2/conn${tag}@tenant/IncomingWebhook/hook${tag}/owner${tag}`,
  };
}
