import { type IncomingHttpHeaders, request } from "node:http";

/**
 * A request over node:http rather than fetch: the caller sets the Host header (fetch does not let it), a header
 * sent twice shows twice (`raw`, Node's rawHeaders), and the whole body is read as text.
 */
export interface RawAnswer {
  status: number;
  statusMessage: string;
  headers: IncomingHttpHeaders;
  raw: string[];
  body: string;
}

/**
 * `host`: the Host header (undefined: Node's own, `via:port`); `via`: the address to connect to (default 127.0.0.1);
 * `agent: false`: a fresh connection, not the global agent's pool.
 */
export function rawGet(
  port: number,
  host: string | undefined,
  path: string,
  opts: { headers?: Record<string, string>; method?: string; via?: string; agent?: false } = {},
): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: opts.via ?? "127.0.0.1",
        port,
        path,
        method: opts.method ?? "GET",
        headers: { ...(host === undefined ? {} : { host }), ...opts.headers },
        ...(opts.agent === undefined ? {} : { agent: opts.agent }),
      },
      (res) => {
        let body = "";
        res.setEncoding("utf8");
        res.on("data", (c: string) => {
          body += c;
        });
        res.on("end", () => resolve({ status: res.statusCode!, statusMessage: res.statusMessage ?? "", headers: res.headers, raw: res.rawHeaders, body }));
      },
    );
    req.on("error", reject);
    req.end();
  });
}
