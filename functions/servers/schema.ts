/** Wire shapes of the build-server routes and of the runner protocol's heartbeat. */
import { z } from "@hono/zod-openapi";
import { DEPLOYMENT_STATUSES, type ServerFacts } from "../../shared/db/schema";

/** A server is `online` when its runner was heard from within this window. */
export const ONLINE_WINDOW_MS = 60_000;
export const MAX_LABELS = 20;
export const MAX_SERVERS_PER_ORG = 100;

export const SERVER_STATUSES = ["online", "draining", "offline"] as const;
export type ServerStatus = (typeof SERVER_STATUSES)[number];

export const STATUS_DOC =
  "`online`: its runner sent a heartbeat within the last 60 s; `draining`: online, and set to take no new work (PATCH `draining: true`); `offline`: not heard from for 60 s or more, or never (a draining server that stops reporting is `offline`)";

export const RUNNING_DOC =
  "What the server holds now (at most 100, oldest first). For now: the deployments whose runner id is this server's id, i.e. builds it has claimed (`building`, `deploying`) and the `ready` deployments it serves (`served_by`: the current one of an environment, and older ones whose builds it keeps for a rollback)";

const Name = z.string().trim().min(1).max(100).openapi({ description: "1-100 characters; need not be unique (the id names the server)" });

const Label = z
  .string()
  .regex(/^[A-Za-z0-9][A-Za-z0-9._:=/-]{0,62}$/, "a label is 1-63 letters, digits and . _ : = / -, starting with a letter or digit")
  .openapi({ example: "region=eu" });

export const Labels = z
  .array(Label)
  .max(MAX_LABELS)
  .openapi({
    description: `At most ${MAX_LABELS}; duplicates are kept once. Placement: a deploy that names no server goes to an online server carrying every label it asks for (POST /api/deployments \`labels\`)`,
  });

function isHttpUrl(value: string): boolean {
  try {
    const url = new URL(value);
    return (url.protocol === "http:" || url.protocol === "https:") && !url.username && !url.password;
  } catch {
    return false;
  }
}

const PublicUrl = z.string().max(2048).refine(isHttpUrl, "publicUrl must be an http or https URL without credentials").openapi({
  description:
    "Where the control plane reaches the server's edge (http or https, no credentials), e.g. `https://build-1.example.com`: requests for the apps the server runs are forwarded to its origin, signed with a key derived from the runner token at registration (`wsp runner` verifies them; an unsigned request is 403). Without it the server's apps answer 503. It passes the outbound guard as webhooks do: a loopback, private, link-local or cloud metadata address (or `localhost`) is refused with 400 unless the operator sets OUTBOUND_ALLOW_PRIVATE=true (link-local and metadata are refused even then); a name is resolved at every forward and a forward to a name that then leads to such an address is answered 502 (`server_refused`) with nothing sent",
});

export const CreateServerBody = z.strictObject({ name: Name, labels: Labels.optional(), publicUrl: PublicUrl.optional() });

export const PatchServerBody = z.strictObject({
  name: Name.optional(),
  labels: Labels.optional(),
  publicUrl: PublicUrl.nullable().optional().openapi({ description: "null clears it" }),
  draining: z.boolean().optional().openapi({ description: "true: take no new work (what it runs keeps running); false: take work again" }),
});

/** A runner's named facts: at most 32, names up to 64 characters, values short strings, numbers or booleans. */
const Facts = z
  .record(z.string().min(1).max(64), z.union([z.string().max(200), z.number(), z.boolean()]))
  .refine((facts) => Object.keys(facts).length <= 32, "at most 32 entries")
  .openapi({ example: { bubblewrap: true, cgroups: "v1" } });

export const HeartbeatBody = z.strictObject({
  version: z.string().trim().min(1).max(100).optional().openapi({ description: "The runner's version" }),
  capacity: z.int().min(0).max(1024).optional().openapi({ description: "How many jobs it runs at once (`--concurrency`)" }),
  sandbox: Facts.optional().openapi({ description: "What its sandbox supports (e.g. `bubblewrap`, `cgroups`)" }),
  limits: Facts.optional().openapi({ description: "The limits it enforces (e.g. `memoryMb`, `pids`)" }),
  labels: Labels.optional().openapi({ description: "The labels it was started with (`wsp runner --labels`): they replace the server's, as PATCH would" }),
});

const Reported = {
  version: z.string().nullable().openapi({ description: "As the runner last reported it; null before its first heartbeat" }),
  capacity: z.int().nullable().openapi({ description: "Jobs it runs at once, as reported" }),
  sandbox: z
    .record(z.string(), z.union([z.string(), z.number(), z.boolean()]))
    .nullable()
    .openapi({ description: "Sandbox support, as reported" }),
  limits: z
    .record(z.string(), z.union([z.string(), z.number(), z.boolean()]))
    .nullable()
    .openapi({ description: "Limits, as reported" }),
  lastSeenAt: z.string().nullable().openapi({ description: "Its runner's last heartbeat; null: never heard from" }),
};

const RunningSchema = z.object({ id: z.string(), projectId: z.string(), status: z.enum(DEPLOYMENT_STATUSES) }).openapi("ServerRunningDeployment");

export const ServerSchema = z
  .object({
    id: z.string(),
    name: z.string(),
    labels: z.array(z.string()),
    publicUrl: z.string().nullable(),
    status: z.enum(SERVER_STATUSES).openapi({ description: STATUS_DOC }),
    draining: z.boolean().openapi({ description: "Set by an admin: the server takes no new work" }),
    tokenPrefix: z.string().openapi({ description: "The runner token's first characters, to recognize it; the token itself is never shown again" }),
    ...Reported,
    running: z.array(RunningSchema).openapi({ description: RUNNING_DOC }),
    createdBy: z.string().nullable(),
    createdAt: z.string(),
    updatedAt: z.string(),
  })
  .openapi("Server");

export const CreatedServerSchema = ServerSchema.extend({
  token: z.string().openapi({ description: "The runner token (`wsr_…`): shown only in this response; stored hashed" }),
}).openapi("CreatedServer");

export const DeletedServerSchema = z
  .object({
    id: z.string(),
    requeued: z.array(z.string()).openapi({ description: "Deployments it was building, back to `queued` with no lease" }),
    stopped: z
      .array(z.string())
      .openapi({ description: "Ready deployments it served or kept, now `failed` (not current) with a reason naming the deleted server" }),
  })
  .openapi("DeletedServer");

export const HeartbeatAnswerSchema = z
  .object({
    serverId: z.string(),
    status: z.enum(SERVER_STATUSES),
    draining: z.boolean().openapi({ description: "true: take no new work" }),
  })
  .openapi("RunnerHeartbeat");

export type ServerView = z.infer<typeof ServerSchema>;
export type Running = z.infer<typeof RunningSchema>;
export type Facts = ServerFacts;

export function statusOf(row: { draining: boolean; lastSeenAt: Date | null }, now: Date): ServerStatus {
  const online = row.lastSeenAt !== null && now.getTime() - row.lastSeenAt.getTime() < ONLINE_WINDOW_MS;
  if (!online) return "offline";
  return row.draining ? "draining" : "online";
}
