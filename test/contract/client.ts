/**
 * A client written the way an API user writes one: types generated from the
 * live OpenAPI document by openapi-typescript, calls made with openapi-fetch,
 * compiled under --strict with no casts (test/node/openapi-client.test.ts).
 */
import createClient from "openapi-fetch";
import type { paths } from "./.generated/api";

export interface ClientRun {
  projectId: string;
  envKeys: string[];
  maskedSecret: string;
  channelKind: string;
  signingSecretShown: boolean;
  uploadTargetRequiresAuth: boolean;
  sentBytes: number;
  uploadedBytes: number;
}

/** A tiny gzip stream (an empty tarball's worth): the relay stores any gzip body. */
const GZIP_BYTES = new Uint8Array([0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00]);

export async function runTypedClient(baseUrl: string, token: string, fetchImpl: (request: Request) => Promise<Response>): Promise<ClientRun> {
  const client = createClient<paths>({ baseUrl, fetch: fetchImpl, headers: { Authorization: `Bearer ${token}` } });

  const created = await client.POST("/api/projects", { body: { name: "typed client", framework: "nextjs" } });
  if (!created.data) throw new Error(`create project: ${created.response.status} ${created.error?.detail}`);
  const projectId: string = created.data.id;

  const merged = await client.PATCH("/api/projects/{id}/env", {
    params: { path: { id: projectId } },
    body: {
      upserts: [
        { key: "API_URL", value: "https://api.example.test" },
        { key: "API_KEY", value: "s3cret", isSecret: true },
      ],
    },
  });
  if (!merged.data) throw new Error(`merge env: ${merged.response.status} ${merged.error?.detail}`);

  const listed = await client.GET("/api/projects/{id}/env", { params: { path: { id: projectId }, query: { limit: 10 } } });
  if (!listed.data) throw new Error(`list env: ${listed.response.status}`);
  const secret = listed.data.items.find((item) => item.key === "API_KEY");

  const channel = await client.POST("/api/notifications/channels", {
    body: { kind: "webhook", label: "deploy hook", config: { url: "https://hooks.example.test/deploys" } },
  });
  if (!channel.data) throw new Error(`create channel: ${channel.response.status} ${channel.error?.detail}`);

  const session = await client.POST("/api/projects/folder/session", { body: { name: "site", sizeBytes: GZIP_BYTES.length } });
  if (!session.data) throw new Error(`folder session: ${session.response.status} ${session.error?.detail}`);
  const sessionId = session.data.url.split("/").pop() ?? "";
  // The relay takes raw bytes: the body goes out as it is, not as JSON.
  const uploaded = await client.POST("/api/projects/folder/upload/{sessionId}", {
    params: { path: { sessionId } },
    body: new Blob([GZIP_BYTES], { type: "application/gzip" }),
    bodySerializer: (body) => body,
    headers: { "Content-Type": "application/gzip" },
  });
  if (!uploaded.data) throw new Error(`upload: ${uploaded.response.status} ${uploaded.error?.detail}`);

  return {
    projectId,
    envKeys: listed.data.items.map((item) => item.key),
    maskedSecret: secret?.value ?? "",
    channelKind: channel.data.kind,
    signingSecretShown: typeof channel.data.signingSecret === "string",
    uploadTargetRequiresAuth: session.data.requiresAuth,
    sentBytes: GZIP_BYTES.length,
    uploadedBytes: uploaded.data.sizeBytes,
  };
}
