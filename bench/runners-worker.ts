/**
 * The Worker half of `npm run bench:runners` (issue 22, item 9): the same measures as the
 * self-hosted half, against the Worker in workerd (test/support/cloud-worker.ts: Miniflare,
 * the Neon driver through its WebSocket proxy to a fresh Postgres database, presigned uploads
 * on a local s3rver started as the test run starts it).
 *
 * 1. Claim latency: BENCH_RUNNERS idle runners long-polling the Worker's claim route, each a
 *    registered server; BENCH_CLAIMS redeploys of an uploaded project, queued → claimed,
 *    p50/p99 (target p99 ≤ 1 s). The Worker has no in-process wake-up: a waiting claim looks
 *    at the database every CLAIM_POLL_MS.
 * 2. Forwarding: a real `wsp runner --edge-port` builds and serves the fixture app; sequential
 *    GETs through the Worker (Host: the app's free route, signed and forwarded to the server's
 *    edge), to the server's edge directly (signed here with the server's edge key, as the
 *    Worker signs), and to the app directly.
 *
 * Not measured: the Worker's CPU per idle runner. workerd runs under Miniflare here, not on
 * Cloudflare's metering; the self-hosted half's CPU figure is the same route code on Node.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { eq } from "drizzle-orm";
import { deriveEdgeKey, signForward } from "../shared/net/edge-forward";
import { deployments } from "../shared/db/schema";
import s3Setup from "../test/setup/s3";
import { startCloudWorker } from "../test/support/cloud-worker";
import { appFolder, freePort, killRunners, liveRunners, queueFolderDeploy, startWspRunner, until } from "../test/support/wsp-runner";
import { ADMIN_URL, httpGet, report } from "./common";
import { call, claimLatencies, idleRunner, latencyRounds, median, ms, pct } from "./runner-measures";

export async function workerHalf(opts: { runners: number; claims: number; requests: number }): Promise<void> {
  const dirs: string[] = [];
  const s3: Record<string, string> = {};
  // The test run's S3 setup, its provided values collected here.
  const stopS3 = await s3Setup({ provide: (key: string, value: string) => (s3[key] = value) } as never);
  const cloud = await startCloudWorker({
    pgServerUrl: ADMIN_URL,
    databasePrefix: "bench_runners_worker",
    s3: { endpoint: s3.s3Endpoint!, bucket: s3.s3Bucket!, accessKeyId: s3.s3AccessKeyId!, secretAccessKey: s3.s3SecretAccessKey! },
  });
  try {
    const base = cloud.url;
    const owner = await cloud.seedTenant();
    const token = owner.token;
    console.log(`bench (Worker): ${opts.runners} idle runners, ${opts.claims} claims, ${opts.requests} GETs per round; Worker ${base}`);

    // 1. Claim latency.
    const servers: Array<{ id: string; token: string }> = [];
    for (let i = 0; i < opts.runners; i++) servers.push(await call(base, token, "/api/servers", { json: { name: `idle-${i}` } }));
    const runners = servers.map((s) => idleRunner(base, s.token));
    const appDir = appFolder();
    dirs.push(appDir);
    const firstId = await queueFolderDeploy(base, token, appDir);
    const { projectId } = await call<{ projectId: string }>(base, token, `/api/deployments/${firstId}`);
    const latencies = await claimLatencies(base, token, projectId, firstId, runners, opts.claims);
    for (const r of runners) r.stop();
    console.log(
      `claim latency on the Worker (queued → a runner holds the job), ${opts.claims} claims: p50 ${ms(median(latencies))}, p99 ${ms(pct(latencies, 0.99))}, max ${ms(Math.max(...latencies))}`,
    );
    report({
      measure: `claim latency p99 (queued → claimed, ${opts.runners} idle runners, Worker)`,
      figure: ms(pct(latencies, 0.99)),
      floor: null,
      ratio: null,
      target: "≤ 1 s",
      met: pct(latencies, 0.99) <= 1000,
    });

    // 2. Forwarding through the Worker to a real runner's edge.
    const edgePort = await freePort();
    const host = await call<{ id: string; token: string }>(base, token, "/api/servers", { json: { name: "edge", publicUrl: `http://127.0.0.1:${edgePort}` } });
    const workDir = mkdtempSync(join(tmpdir(), "bench-runners-worker-work-"));
    dirs.push(workDir);
    const runner = startWspRunner({ api: base, token: host.token, workDir, args: ["--edge-port", String(edgePort)] });
    const next = await call<{ id: string }>(base, token, "/api/deployments", { json: { projectId, serverId: host.id } });
    const row = await until(
      "the app deployed on the edge server",
      async () => {
        const [d] = await cloud.db.select().from(deployments).where(eq(deployments.id, next.id));
        if (d && ["failed", "canceled"].includes(d.status)) throw new Error(`the deploy ${d.status}: ${d.failureReason}\n${runner.out().slice(-2000)}`);
        return d?.status === "ready" && d.port !== null && d;
      },
      180_000,
    );
    const project = await call<{ routes: { free: { hostname: string } } }>(base, token, `/api/projects/${projectId}`);
    const hostname = project.routes.free.hostname;
    const { body: appBody } = await httpGet(`http://127.0.0.1:${row.port}/`);
    const edgeKey = await deriveEdgeKey(host.token);
    const signed = () =>
      signForward(edgeKey, { method: "GET", target: "/", host: hostname, clientAddress: "127.0.0.1", proto: "http", deploymentId: next.id }, new Date());
    const r = await latencyRounds(
      {
        worker: { url: `${base}/`, host: hostname },
        edge: { url: `http://127.0.0.1:${edgePort}/`, host: hostname, headers: signed },
        app: { url: `http://127.0.0.1:${row.port}/` },
      },
      opts.requests,
      appBody,
    );
    const [w, e, a] = [r.worker!, r.edge!, r.app!];
    console.log(
      `forwarding on the Worker, ${opts.requests} sequential GETs, median of 3 rounds: Worker → server edge → app p50 ${ms(w.p50)} p99 ${ms(w.p99)}; the server's edge directly p50 ${ms(e.p50)} p99 ${ms(e.p99)}; the app directly p50 ${ms(a.p50)} p99 ${ms(a.p99)}; the Worker adds p50 +${ms(w.p50 - e.p50)}`,
    );
    report({
      measure: "forwarding: Worker → server's edge → app, p50 (sequential GETs)",
      figure: ms(w.p50),
      floor: `${ms(e.p50)} (the server's edge directly; the app directly ${ms(a.p50)})`,
      ratio: w.p50 / e.p50,
      target: "reported (no target: the hops a forwarded request takes)",
      met: true,
    });
  } finally {
    // A runner still up is stopped as an operator stops it (its apps with it); one that hangs, killed.
    for (const child of [...liveRunners]) {
      child.kill("SIGTERM");
      await new Promise((resolve) => (child.exitCode !== null ? resolve(null) : child.once("close", resolve)));
    }
    killRunners();
    await cloud.stop();
    await stopS3();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  }
}
