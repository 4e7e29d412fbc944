/**
 * METRICS_BIND's listener: a second HTTP server that serves GET /metrics and
 * nothing else (404), so the scrape can live on an address the API's clients do
 * not reach. Bound at start with the main port, before anything is created (a
 * taken address is refused early); 503 until the server has started.
 */
import { createServer, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { PortInUseError } from "../../self-hosted/http-server";
import type { Metrics } from "./metrics";

export interface MetricsListener {
  /** The bound port (METRICS_BIND's, or the one picked for port 0). */
  port: number;
  serve(metrics: Metrics): void;
  close(): Promise<void>;
}

function plain(res: ServerResponse, status: number, text: string, headers: Record<string, string> = {}) {
  res.writeHead(status, { "content-type": "text/plain; charset=utf-8", "cache-control": "no-store", ...headers }).end(`${text}\n`);
}

export async function bindMetricsListener(bind: { host: string; port: number }): Promise<MetricsListener> {
  let metrics: Metrics | undefined;
  const server = createServer((req, res) => {
    // Nothing here reads a body: whatever a client sends is discarded.
    req.resume();
    const path = (req.url ?? "").split("?")[0];
    if (path !== "/metrics") return plain(res, 404, "Not found: this listener serves /metrics only");
    if (req.method !== "GET" && req.method !== "HEAD") return plain(res, 405, "Method not allowed", { allow: "GET, HEAD" });
    if (!metrics) return plain(res, 503, "Starting", { "retry-after": "1" });
    if (!metrics.authorized(req.headers.authorization))
      return plain(res, 401, "Unauthorized: send Authorization: Bearer <METRICS_TOKEN>", { "www-authenticate": "Bearer" });
    metrics.render().then(
      ({ contentType, body }) => {
        res.writeHead(200, { "content-type": contentType, "cache-control": "no-store" });
        res.end(req.method === "HEAD" ? undefined : body);
      },
      () => plain(res, 500, "Metrics could not be rendered"),
    );
  });
  server.headersTimeout = 10_000;
  server.requestTimeout = 30_000;
  await new Promise<void>((resolve, reject) => {
    server.once("error", (e: NodeJS.ErrnoException) => {
      const where = `${bind.host}:${bind.port}`;
      if (e.code === "EADDRINUSE") reject(new PortInUseError(`METRICS_BIND ${where} is already in use; choose another port, or stop the process using it.`));
      else if (e.code === "EACCES") reject(new PortInUseError(`Not allowed to listen on METRICS_BIND ${where}; use a port above 1023.`));
      else if (e.code === "EADDRNOTAVAIL") reject(new PortInUseError(`Cannot listen on METRICS_BIND ${where}: no such address on this machine.`));
      else reject(e);
    });
    server.listen(bind.port, bind.host, () => resolve());
  });
  return {
    port: (server.address() as AddressInfo).port,
    serve(m) {
      metrics = m;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        // A scrape is short: nothing in flight is worth waiting for.
        server.closeAllConnections();
      }),
  };
}
