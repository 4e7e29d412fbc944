/**
 * Outbound transports on Node, against real loopback receivers: the
 * private-address guard (after DNS resolution, IPv4-mapped IPv6 included),
 * redirects, timeouts, and both e-mail transports (SMTP, the HTTP e-mail API).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadNodeConfig } from "../../functions/self-hosted/config";
import { classifyAddress, refusalFor, refusalForHost } from "../../shared/outbound/address-guard";
import { createEmailApiMailer } from "../../shared/outbound/email-api";
import { createFetchOutbound } from "../../shared/outbound/fetch";
import { createNodeOutbound } from "../../shared/outbound/node";
import { createSmtpMailer } from "../../shared/outbound/smtp";
import type { Outbound } from "../../shared/outbound/types";
import { startHttpReceiver, startSmtpReceiver, type HttpReceiver, type SmtpReceiver } from "../support/receivers";

const request = (url: string) => ({ url, headers: { "content-type": "application/json" }, body: '{"hello":"world"}' });

describe("address classification", () => {
  const refused: Array<[string, RegExp]> = [
    ["127.0.0.1", /loopback/],
    ["127.255.0.9", /loopback/],
    ["::1", /loopback/],
    ["[::1]", /loopback/],
    ["10.1.2.3", /private/],
    ["172.16.0.1", /private/],
    ["172.31.255.255", /private/],
    ["192.168.1.10", /private/],
    ["100.64.0.1", /CGNAT/],
    ["100.127.255.255", /CGNAT/],
    ["169.254.1.1", /link-local/],
    ["169.254.169.254", /metadata/],
    ["169.254.170.2", /metadata/],
    ["169.254.170.23", /metadata/],
    ["100.100.100.200", /metadata/],
    ["192.0.0.192", /metadata/],
    ["168.63.129.16", /metadata/],
    ["fd00:ec2::23", /metadata/],
    ["fd20:ce::254", /metadata/],
    ["0.0.0.0", /reserved/],
    ["224.0.0.1", /multicast/],
    ["255.255.255.255", /reserved/],
    ["fc00::1", /ULA/],
    ["fd12:3456::1", /ULA/],
    ["fd00:ec2::254", /metadata/],
    ["fe80::1", /link-local/],
    ["fe80::1%eth0", /link-local/],
    ["ff02::1", /multicast/],
    ["::", /reserved/],
    ["::ffff:127.0.0.1", /IPv4-mapped a loopback/],
    ["::ffff:7f00:1", /IPv4-mapped a loopback/],
    ["[::ffff:10.0.0.1]", /IPv4-mapped a private/],
    ["::ffff:a9fe:a9fe", /IPv4-mapped a cloud metadata/],
    ["0:0:0:0:0:ffff:c0a8:0101", /IPv4-mapped a private/],
    ["64:ff9b::10.0.0.1", /NAT64 a private/],
    ["2002:7f00:1::1", /6to4 a loopback/],
    ["::127.0.0.1", /IPv4-compatible/],
    ["2001:db8::1", /reserved/],
  ];
  for (const [ip, reason] of refused) {
    it(`refuses ${ip}`, () => {
      expect(classifyAddress(ip)?.reason).toMatch(reason);
    });
  }

  it("allows public addresses", () => {
    for (const ip of ["8.8.8.8", "1.1.1.1", "93.184.216.34", "172.32.0.1", "100.128.0.1", "2606:4700:4700::1111", "::ffff:8.8.8.8", "64:ff9b::808:808"]) {
      expect(classifyAddress(ip), ip).toBeNull();
    }
  });

  it("is not fooled by malformed input", () => {
    for (const text of ["", "localhost", "1.2.3", "1.2.3.256", "::ffff:999.0.0.1", "1:2:3:4:5:6:7:8:9", "gggg::1", "1::2::3"]) {
      expect(classifyAddress(text), text).toBeNull();
    }
  });

  it("metadata stays refused when private networks are allowed", () => {
    expect(refusalFor("10.0.0.1", true)).toBeNull();
    expect(refusalFor("127.0.0.1", true)).toBeNull();
    expect(refusalFor("169.254.169.254", true)?.always).toBe(true);
    expect(refusalFor("fd00:ec2::254", true)?.always).toBe(true);
    expect(refusalFor("::ffff:169.254.169.254", true)?.always).toBe(true);
  });

  // Allowed private networks still never reach link-local or metadata, in any IPv6 spelling of them.
  const ALWAYS_REFUSED: Array<[string, RegExp]> = [
    // The whole link-local range, not a short list.
    ["169.254.0.1", /^a link-local/],
    ["169.254.42.7", /^a link-local/],
    ["169.254.255.255", /^a link-local/],
    ["fe80::1", /^a link-local/],
    ["febf:ffff::1", /^a link-local/],
    ["fe80::1%eth0", /^a link-local/],
    // Known metadata endpoints: AWS/GCP/Azure IMDS, ECS, EKS Pod Identity, Alibaba, Oracle, Azure WireServer.
    ["169.254.169.254", /^a cloud metadata/],
    ["169.254.170.2", /^a cloud metadata/],
    ["169.254.170.23", /^a cloud metadata/],
    ["100.100.100.200", /^a cloud metadata/],
    ["192.0.0.192", /^a cloud metadata/],
    ["168.63.129.16", /^a cloud metadata/],
    ["fd00:ec2::254", /^a cloud metadata/],
    ["fd00:ec2:0:0:0:0:0:254", /^a cloud metadata/],
    ["fd00:ec2::23", /^a cloud metadata/],
    ["fd20:ce::254", /^a cloud metadata/],
    // Embedded in IPv6: IPv4-mapped, NAT64 (well-known and local-use), 6to4, IPv4-compatible.
    ["::ffff:169.254.169.254", /^IPv4-mapped a cloud metadata/],
    ["::ffff:a9fe:aa17", /^IPv4-mapped a cloud metadata/],
    ["::ffff:169.254.3.4", /^IPv4-mapped a link-local/],
    ["::ffff:100.100.100.200", /^IPv4-mapped a cloud metadata/],
    ["::ffff:c000:c0", /^IPv4-mapped a cloud metadata/],
    ["64:ff9b::169.254.169.254", /^NAT64 a cloud metadata/],
    ["64:ff9b::a9fe:1", /^NAT64 a link-local/],
    ["64:ff9b:1::a9fe:a9fe", /^NAT64 a cloud metadata/],
    ["2002:a9fe:a9fe::1", /^6to4 a cloud metadata/],
    ["2002:a9fe:102::", /^6to4 a link-local/],
    ["2002:6464:64c8::1", /^6to4 a cloud metadata/],
    ["::169.254.169.254", /^IPv4-compatible a cloud metadata/],
  ];
  for (const [ip, reason] of ALWAYS_REFUSED) {
    it(`refuses ${ip} even when private networks are allowed`, () => {
      const refusal = refusalFor(ip, true);
      expect(refusal?.always, ip).toBe(true);
      expect(refusal?.reason, ip).toMatch(reason);
    });
  }

  it("names metadata servers are refused whatever the setting; localhost only when private networks are refused", () => {
    for (const host of ["metadata.google.internal", "METADATA.google.internal.", "metadata.goog"]) {
      expect(refusalForHost(host, true), host).toMatchObject({ always: true, reason: "a cloud metadata server name" });
    }
    expect(refusalForHost("[fe80::1]", true)?.always).toBe(true);
    expect(refusalForHost("localhost", true)).toBeNull();
    expect(refusalForHost("localhost", false)?.always).toBe(false);
    expect(refusalForHost("metadata.example.com", true)).toBeNull();
  });
});

describe("outbound HTTP on Node", () => {
  let receiver: HttpReceiver;
  let port: string;
  beforeAll(async () => {
    receiver = await startHttpReceiver([], { status: 200, body: "x".repeat(1 << 20) });
    port = new URL(receiver.origin).port;
  });
  afterAll(() => receiver.close());

  describe("with private networks refused (the default)", () => {
    const outbound = createNodeOutbound();

    it("refuses loopback in every spelling, before connecting", async () => {
      const before = receiver.recorder.hits.length;
      for (const host of [
        "127.0.0.1",
        "localhost",
        "[::1]",
        "[::ffff:127.0.0.1]",
        "[::ffff:7f00:1]",
        "0x7f.1",
        "2130706433",
        "127.1",
        "[0:0:0:0:0:ffff:7f00:1]",
      ]) {
        const result = await outbound.send(request(`http://${host}:${port}/hook`));
        expect(result.ok, host).toBe(false);
        if (!result.ok) {
          expect(result.retryable, host).toBe(false);
          expect(result.error, host).toMatch(/loopback address; sends to private networks are refused unless OUTBOUND_ALLOW_PRIVATE=true$/);
        }
      }
      expect(receiver.recorder.hits.length).toBe(before);
    });

    it("refuses metadata, private and link-local literals", async () => {
      for (const [url, reason] of [
        ["http://169.254.169.254/latest/meta-data/", /cloud metadata/],
        ["http://[fd00:ec2::254]/", /cloud metadata/],
        ["http://10.0.0.8/hook", /private/],
        ["https://192.168.0.1/hook", /private/],
        ["http://100.64.1.1/", /CGNAT/],
        ["http://[fe80::1]/", /link-local/],
        ["http://[fd00::1]/", /ULA/],
      ] as const) {
        const result = await outbound.send(request(url));
        expect(result.ok, url).toBe(false);
        if (!result.ok) expect(result.error, url).toMatch(reason);
      }
    });

    it("checks every address a name resolves to", async () => {
      const resolving = (map: Record<string, Array<{ address: string; family: number }>>) => createNodeOutbound({ resolve: async (host) => map[host] ?? [] });
      const dns = resolving({
        "private.example": [{ address: "10.0.0.5", family: 4 }],
        "mixed.example": [
          { address: "93.184.216.34", family: 4 },
          { address: "127.0.0.1", family: 4 },
        ],
        "mapped.example": [{ address: "::ffff:192.168.1.1", family: 6 }],
        "meta.example": [{ address: "169.254.169.254", family: 4 }],
      });
      for (const [host, reason] of [
        ["private.example", /private/],
        ["mixed.example", /loopback/],
        ["mapped.example", /IPv4-mapped a private/],
        ["meta.example", /metadata/],
      ] as const) {
        const result = await dns.send(request(`https://${host}/hook`));
        expect(result.ok, host).toBe(false);
        if (!result.ok) {
          expect(result.error, host).toMatch(reason);
          expect(result.retryable).toBe(false);
        }
      }
      // Allowed private networks still refuse metadata and link-local behind a name, with the words saying so.
      for (const address of [
        { address: "169.254.169.254", family: 4 },
        { address: "169.254.170.23", family: 4 },
        { address: "169.254.99.1", family: 4 },
        { address: "::ffff:169.254.170.2", family: 6 },
        { address: "fd00:ec2::254", family: 6 },
        { address: "fe80::abcd", family: 6 },
      ]) {
        const allowed = createNodeOutbound({ allowPrivate: true, resolve: async () => [address] });
        const meta = await allowed.send(request("http://instance-data.example/latest/"));
        expect(meta.ok, address.address).toBe(false);
        if (!meta.ok)
          expect(meta.error, address.address).toMatch(/(link-local|cloud metadata) address; link-local and cloud metadata addresses are always refused$/);
      }
      // The GCP name is refused before any lookup, whatever it resolves to.
      let looked = 0;
      const named = createNodeOutbound({
        allowPrivate: true,
        resolve: async () => {
          looked++;
          return [{ address: "93.184.216.34", family: 4 }];
        },
      });
      const gcp = await named.send(request("http://metadata.google.internal/computeMetadata/v1/"));
      expect(gcp).toMatchObject({
        ok: false,
        retryable: false,
        error: "The destination is a cloud metadata server name; link-local and cloud metadata addresses are always refused",
      });
      expect(looked).toBe(0);
    });

    it("connects to the address it checked (a name resolving to loopback is refused, the same name allowed when private is allowed)", async () => {
      const resolve = async () => [{ address: "127.0.0.1", family: 4 }];
      const strict = await createNodeOutbound({ resolve }).send(request(`http://receiver.example:${port}/named`));
      expect(strict.ok).toBe(false);
      const before = receiver.recorder.hits.length;
      const loose = await createNodeOutbound({ resolve, allowPrivate: true }).send(request(`http://receiver.example:${port}/named`));
      expect(loose).toEqual({ ok: true, status: 200 });
      expect(receiver.recorder.hits.length).toBe(before + 1);
      expect(receiver.recorder.hits.at(-1)!.headers.host).toBe(`receiver.example:${port}`);
    });

    it("refuses other schemes", async () => {
      for (const url of ["ftp://example.com/", "file:///etc/passwd", "not a url"]) {
        const result = await outbound.send(request(url));
        expect(result.ok, url).toBe(false);
      }
    });
  });

  for (const [name, make] of [
    ["node:http transport", (o: { timeoutMs?: number }) => createNodeOutbound({ allowPrivate: true, ...o })],
    ["fetch transport (the Worker's)", (o: { timeoutMs?: number }) => createFetchOutbound({ allowPrivate: true, ...o })],
  ] as Array<[string, (o: { timeoutMs?: number }) => Outbound]>) {
    describe(`${name}, private networks allowed`, () => {
      it("posts the body and headers, and never reads the response body", async () => {
        const r = await startHttpReceiver([], { status: 201, body: "y".repeat(5 << 20) });
        try {
          const result = await make({}).send({ url: `${r.origin}/in`, headers: { "content-type": "application/json", "x-test": "1" }, body: '{"a":1}' });
          expect(result).toEqual({ ok: true, status: 201 });
          expect(r.recorder.hits[0]).toMatchObject({ method: "POST", body: '{"a":1}', headers: expect.objectContaining({ "x-test": "1" }) });
        } finally {
          await r.close();
        }
      });

      it("never follows a redirect", async () => {
        const target = await startHttpReceiver();
        const r = await startHttpReceiver([{ status: 307, headers: { location: `${target.origin}/elsewhere` } }]);
        try {
          const result = await make({}).send(request(`${r.origin}/hook`));
          expect(result).toMatchObject({ ok: false, status: 307, retryable: false });
          expect(target.recorder.hits).toHaveLength(0);
        } finally {
          await r.close();
          await target.close();
        }
      });

      it("times out", async () => {
        const r = await startHttpReceiver([{ status: 200, delayMs: 2_000 }]);
        try {
          const started = Date.now();
          const result = await make({ timeoutMs: 300 }).send(request(`${r.origin}/slow`));
          expect(Date.now() - started).toBeLessThan(1_500);
          expect(result).toMatchObject({ ok: false, retryable: true, error: "The destination did not answer within 300 ms" });
        } finally {
          await r.close();
        }
      });

      it("classifies statuses and Retry-After", async () => {
        const date = new Date(Date.now() + 30_000).toUTCString();
        const r = await startHttpReceiver([
          { status: 429, headers: { "retry-after": "7" } },
          { status: 503, headers: { "retry-after": date } },
          { status: 400, body: "bad request details" },
          { status: 408 },
        ]);
        try {
          const o = make({});
          expect(await o.send(request(r.origin))).toMatchObject({ ok: false, status: 429, retryable: true, retryAfterSeconds: 7 });
          const r503 = await o.send(request(r.origin));
          expect(r503).toMatchObject({ ok: false, status: 503, retryable: true });
          if (!r503.ok) expect(r503.retryAfterSeconds).toBeGreaterThanOrEqual(28);
          const r400 = await o.send(request(r.origin));
          expect(r400).toEqual({ ok: false, status: 400, retryable: false, error: "The destination answered HTTP 400" });
          expect(await o.send(request(r.origin))).toMatchObject({ ok: false, status: 408, retryable: true });
        } finally {
          await r.close();
        }
      });

      it("still refuses link-local and metadata destinations, saying they are always refused", async () => {
        const before = receiver.recorder.hits.length;
        for (const url of [
          "http://169.254.169.254/latest/meta-data/",
          "http://169.254.170.23/v1/credentials",
          "http://169.254.7.7/",
          "http://[fe80::1]/",
          "http://[fd00:ec2::23]/",
          "http://[::ffff:169.254.169.254]/",
          "http://[64:ff9b::a9fe:a9fe]/",
          "http://[2002:a9fe:a9fe::]/",
          "http://100.100.100.200/latest/meta-data/",
          "http://192.0.0.192/opc/v2/instance/",
          "http://metadata.google.internal/computeMetadata/v1/",
          "http://metadata.google.internal./computeMetadata/v1/",
        ]) {
          const result = await make({}).send(request(url));
          expect(result.ok, url).toBe(false);
          if (!result.ok) {
            expect(result.retryable, url).toBe(false);
            expect(result.error, url).toMatch(/; link-local and cloud metadata addresses are always refused$/);
            expect(result.error, url).not.toMatch(/private networks/);
          }
        }
        expect(receiver.recorder.hits.length).toBe(before);
      });

      it("reports a refused connection as a retryable network error", async () => {
        const r = await startHttpReceiver();
        const origin = r.origin;
        await r.close();
        const result = await make({}).send(request(`${origin}/gone`));
        expect(result).toMatchObject({ ok: false, retryable: true });
        if (!result.ok) expect(result.error).toMatch(/^Could not connect to the destination/);
      });
    });
  }

  it("the fetch transport refuses private literals and localhost when not allowed", async () => {
    const strict = createFetchOutbound();
    for (const url of [`${receiver.origin}/x`, `http://localhost:${port}/x`, `http://[::ffff:7f00:1]:${port}/x`, "http://169.254.169.254/"]) {
      const result = await strict.send(request(url));
      expect(result.ok, url).toBe(false);
      if (!result.ok)
        expect(result.error, url).toMatch(
          url.includes("169.254") ? /always refused$/ : /sends to private networks are refused unless OUTBOUND_ALLOW_PRIVATE=true$/,
        );
    }
  });
});

describe("e-mail transports", () => {
  let smtp: SmtpReceiver;
  beforeAll(async () => {
    smtp = await startSmtpReceiver();
  });
  afterAll(() => smtp.close());
  const message = (to: string) => ({ to, subject: "Deploy failed", text: "The deploy of web failed.", html: "<p>The deploy of web failed.</p>" });

  it("SMTP delivers, and tells permanent from transient refusals by code", async () => {
    const mailer = createSmtpMailer({ url: smtp.url, from: "Workspace <n@workspace.test>", timeoutMs: 2_000 });
    try {
      expect(await mailer.send(message("ok@example.test"))).toEqual({ ok: true, status: 250 });
      const got = smtp.messages.find((m) => m.to.includes("ok@example.test"))!;
      expect(got.from).toBe("n@workspace.test");
      expect(got.subject).toBe("Deploy failed");
      expect(got.text).toContain("The deploy of web failed.");
      expect(await mailer.send(message("reject-me@example.test"))).toEqual({
        ok: false,
        status: 550,
        retryable: false,
        error: "The mail server refused the message (SMTP 550)",
      });
      expect(await mailer.send(message("busy-me@example.test"))).toMatchObject({ ok: false, status: 451, retryable: true });
    } finally {
      mailer.close();
    }
  });

  it("SMTP to a closed port is a retryable error", async () => {
    const closed = await startSmtpReceiver();
    const url = closed.url;
    await closed.close();
    const mailer = createSmtpMailer({ url, from: "n@workspace.test", timeoutMs: 1_000 });
    try {
      const result = await mailer.send(message("a@example.test"));
      expect(result).toMatchObject({ ok: false, retryable: true });
      if (!result.ok) expect(result.error).toMatch(/^Could not reach the mail server/);
    } finally {
      mailer.close();
    }
  });

  it("the HTTP e-mail API (the Worker's) posts Resend's format with the key", async () => {
    const api = await startHttpReceiver([{ status: 200, body: '{"id":"e1"}' }, { status: 422, body: '{"message":"invalid from"}' }, { status: 500 }]);
    try {
      const mailer = createEmailApiMailer({ apiKey: "re_live_key", url: `${api.origin}/emails`, from: "Workspace <n@workspace.test>" });
      expect(await mailer.send(message("ops@example.test"))).toEqual({ ok: true, status: 200 });
      const hit = api.recorder.hits[0]!;
      expect(hit.headers.authorization).toBe("Bearer re_live_key");
      expect(hit.headers["content-type"]).toBe("application/json");
      expect(JSON.parse(hit.body)).toEqual({
        from: "Workspace <n@workspace.test>",
        to: ["ops@example.test"],
        subject: "Deploy failed",
        text: "The deploy of web failed.",
        html: "<p>The deploy of web failed.</p>",
      });
      expect(await mailer.send(message("ops@example.test"))).toEqual({ ok: false, status: 422, retryable: false, error: "The e-mail API answered HTTP 422" });
      expect(await mailer.send(message("ops@example.test"))).toMatchObject({ ok: false, status: 500, retryable: true });
    } finally {
      await api.close();
    }
  });
});

describe("configuration", () => {
  it("parses the notification variables", () => {
    const c = loadNodeConfig({ SMTP_URL: "smtp://mail.internal:2525", OUTBOUND_ALLOW_PRIVATE: "true", EMAIL_FROM: "Ops <ops@example.com>" });
    expect(c).toMatchObject({ smtpUrl: "smtp://mail.internal:2525", outboundAllowPrivate: true, emailFrom: "Ops <ops@example.com>" });
    expect(loadNodeConfig({}).outboundAllowPrivate).toBe(false);
    expect(() => loadNodeConfig({ SMTP_URL: "http://mail" })).toThrow(/SMTP_URL/);
    expect(() => loadNodeConfig({ OUTBOUND_ALLOW_PRIVATE: "yes" })).toThrow(/OUTBOUND_ALLOW_PRIVATE/);
  });
});
