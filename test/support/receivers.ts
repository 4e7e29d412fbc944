/**
 * Real receivers on loopback for the Node tests: an HTTP server (node:http) that
 * records every request and answers from a script, and an SMTP server
 * (smtp-server) that records every message. Only the internet is mocked.
 */
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { SMTPServer } from "smtp-server";
import { Recorder, type Reply } from "./receiver-core";

export interface HttpReceiver {
  /** `http://127.0.0.1:<port>` */
  origin: string;
  recorder: Recorder;
  close(): Promise<void>;
}

/** Requests routed here for another host carry it as the first path segment: `/<host>/<path>`. */
export const ROUTED_PREFIX = "/__routed/";

function originalUrl(req: IncomingMessage, origin: string): string {
  const path = req.url ?? "/";
  if (!path.startsWith(ROUTED_PREFIX)) return origin + path;
  const rest = path.slice(ROUTED_PREFIX.length);
  const slash = rest.indexOf("/");
  return `https://${decodeURIComponent(rest.slice(0, slash))}${rest.slice(slash)}`;
}

export async function startHttpReceiver(script: Reply[] = [], fallback?: Reply): Promise<HttpReceiver> {
  const recorder = new Recorder(script, fallback);
  let origin = "";
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const headers: Record<string, string> = {};
      for (const [k, v] of Object.entries(req.headers)) if (typeof v === "string") headers[k] = v;
      const reply = recorder.take({ url: originalUrl(req, origin), method: req.method ?? "", headers, body: Buffer.concat(chunks).toString("utf8") });
      const answer = () => {
        if (res.destroyed) return;
        res.writeHead(reply.status, reply.headers);
        res.end(reply.body ?? "");
      };
      if (reply.delayMs) setTimeout(answer, reply.delayMs);
      else answer();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    origin,
    recorder,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

export interface ReceivedEmail {
  from: string;
  to: string[];
  subject: string;
  /** The message with quoted-printable soft breaks and escapes decoded. */
  text: string;
  raw: string;
}

export interface SmtpReceiver {
  url: string;
  messages: ReceivedEmail[];
  close(): Promise<void>;
}

function decodeQuotedPrintable(text: string): string {
  return text.replace(/=\r?\n/g, "").replace(/=([0-9A-F]{2})/g, (_, hex: string) => String.fromCharCode(parseInt(hex, 16)));
}

function parseMessage(raw: string, from: string, to: string[]): ReceivedEmail {
  const headerEnd = raw.indexOf("\r\n\r\n");
  const headers = raw.slice(0, headerEnd).replace(/\r\n[ \t]+/g, " ");
  const subject = /^Subject: (.*)$/im.exec(headers)?.[1] ?? "";
  return { from, to, subject, text: decodeQuotedPrintable(raw.slice(headerEnd + 4)), raw };
}

/**
 * An SMTP server on loopback. Recipients starting with `reject-` get a permanent
 * 550, `busy-` a transient 451 (to test the retry policy).
 */
export async function startSmtpReceiver(): Promise<SmtpReceiver> {
  const messages: ReceivedEmail[] = [];
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ["STARTTLS", "AUTH"],
    logger: false,
    onRcptTo(address, _session, callback) {
      if (address.address.startsWith("reject-")) return callback(Object.assign(new Error("mailbox unavailable"), { responseCode: 550 }));
      if (address.address.startsWith("busy-")) return callback(Object.assign(new Error("try again later"), { responseCode: 451 }));
      callback();
    },
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on("data", (c: Buffer) => chunks.push(c));
      stream.on("end", () => {
        const from = session.envelope.mailFrom ? session.envelope.mailFrom.address : "";
        messages.push(
          parseMessage(
            Buffer.concat(chunks).toString("utf8"),
            from,
            session.envelope.rcptTo.map((r) => r.address),
          ),
        );
        callback();
      });
    },
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()));
  const port = (server.server.address() as AddressInfo).port;
  return {
    url: `smtp://127.0.0.1:${port}`,
    messages,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
